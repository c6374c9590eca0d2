// Task kind: CACHE_APPEND (RoPE + cache append), for the token at position pos:
//  - fd_task_cache_append (the graph's CACHE_APPEND): c_kv = RMSNorm(latent) with kv_a_layernorm
//    and k_pe rotated, written to row pos of the compressed MLA cache (bf16);
//  - fd_task_rope_cache (the standalone launcher's form, which M1 checks): that, plus every head's
//    q_pe rotated into q_pe_out.
// RoPE pairs adjacent elements (2i, 2i+1) as HF's DeepseekV2 apply_rotary_emb does (a complex
// product in fp32, result stored as the output's type); cos/sin are fp32 tables
// [max_pos, kRope/2] that already include YaRN's attention scaling (HF multiplies freqs_cis by it).
// kv_a: [kLatent + kRope] (kv_a_proj_with_mqa output); q: [kHeads * kQHead] (q_proj output).
#include "common.h"

template <class Act>
__device__ void fd_task_cache_append(const Act* kv_a, const fd_bf16* kv_norm_weight, float eps,
                                     const float* cos_table, const float* sin_table, int pos, fd_bf16* ckv_cache,
                                     fd_bf16* kpe_cache) {
  constexpr int kPairs = kRope / 2;
  for (int i = threadIdx.x; i < kPairs; i += blockDim.x)
    fd_rope_pair(kv_a + kLatent + 2 * i, kpe_cache + static_cast<size_t>(pos) * kRope + 2 * i,
                 cos_table[static_cast<size_t>(pos) * kPairs + i], sin_table[static_cast<size_t>(pos) * kPairs + i]);
  fd_rmsnorm(kv_a, kv_norm_weight, eps, kLatent, ckv_cache + static_cast<size_t>(pos) * kLatent);
}

template <class Act>
__device__ void fd_task_rope_cache(const Act* q, const Act* kv_a, const fd_bf16* kv_norm_weight, float eps,
                                   const float* cos_table, const float* sin_table, int pos, Act* q_pe_out,
                                   fd_bf16* ckv_cache, fd_bf16* kpe_cache) {
  fd_rope_q_heads(q, 0, kHeads, cos_table, sin_table, pos, q_pe_out);
  fd_task_cache_append(kv_a, kv_norm_weight, eps, cos_table, sin_table, pos, ckv_cache, kpe_cache);
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_rope_cache(const Act* q, const Act* kv_a, const fd_bf16* kv_norm_weight, float eps,
                                     const float* cos_table, const float* sin_table, int pos, Act* q_pe_out,
                                     fd_bf16* ckv_cache, fd_bf16* kpe_cache) {
  fd_task_rope_cache(q, kv_a, kv_norm_weight, eps, cos_table, sin_table, pos, q_pe_out, ckv_cache, kpe_cache);
}

template <class Act>
static int fd_launch_rope_cache_as(const void* q, const void* kv_a, const void* kv_norm_weight, float eps,
                                   const float* cos_table, const float* sin_table, int pos, void* q_pe_out,
                                   void* ckv_cache, void* kpe_cache, void* stream) {
  fd_kernel_rope_cache<Act><<<1, kTaskThreads, 0, static_cast<fd_stream_t>(stream)>>>(
      static_cast<const Act*>(q), static_cast<const Act*>(kv_a), static_cast<const fd_bf16*>(kv_norm_weight), eps,
      cos_table, sin_table, pos, static_cast<Act*>(q_pe_out), static_cast<fd_bf16*>(ckv_cache),
      static_cast<fd_bf16*>(kpe_cache));
  return static_cast<int>(fd_get_last_error());
}

FD_EXPORT int fd_launch_rope_cache(const void* q, const void* kv_a, const void* kv_norm_weight, float eps,
                                   const float* cos_table, const float* sin_table, int pos, void* q_pe_out,
                                   void* ckv_cache, void* kpe_cache, int f32, void* stream) {
  if (pos < 0) return -1;
  return f32 ? fd_launch_rope_cache_as<float>(q, kv_a, kv_norm_weight, eps, cos_table, sin_table, pos, q_pe_out,
                                              ckv_cache, kpe_cache, stream)
             : fd_launch_rope_cache_as<fd_bf16>(q, kv_a, kv_norm_weight, eps, cos_table, sin_table, pos, q_pe_out,
                                                ckv_cache, kpe_cache, stream);
}
#endif

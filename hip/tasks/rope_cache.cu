// Task kind: RoPE + cache append. For the token at position *pos: c_kv = RMSNorm(latent) with
// kv_a_layernorm (bf16 as HF), k_pe and every head's q_pe rotated with RoPE, and (c_kv, k_pe)
// written to row *pos of the compressed MLA cache.
// RoPE pairs adjacent elements (2i, 2i+1) as HF's DeepseekV2 apply_rotary_emb does (a complex
// product in fp32, result rounded to bf16); cos/sin are fp32 tables [max_pos, kRope/2] that
// already include YaRN's attention scaling (HF multiplies freqs_cis by it).
#include "common.h"

__device__ __forceinline__ void fd_rotate_pair(const fd_bf16* in, fd_bf16* out, float cos_i, float sin_i) {
  const float a = fd_bf16_to_float(in[0]), b = fd_bf16_to_float(in[1]);
  out[0] = fd_float_to_bf16(a * cos_i - b * sin_i);
  out[1] = fd_float_to_bf16(a * sin_i + b * cos_i);
}

// q: [kHeads * kQHead] (q_proj output, q_pe = the last kRope of each head); kv_a: [kLatent + kRope].
__device__ void fd_task_rope_cache(const fd_bf16* q, const fd_bf16* kv_a, const fd_bf16* kv_norm_weight, float eps,
                                   const float* cos_table, const float* sin_table, const int* pos, fd_bf16* q_pe_out,
                                   fd_bf16* ckv_cache, fd_bf16* kpe_cache) {
  constexpr int kPairs = kRope / 2;
  const int p = *pos;
  const float* cos_p = cos_table + static_cast<size_t>(p) * kPairs;
  const float* sin_p = sin_table + static_cast<size_t>(p) * kPairs;
  for (int item = threadIdx.x; item < (kHeads + 1) * kPairs; item += blockDim.x) {
    const int head = item / kPairs, i = item % kPairs;
    if (head < kHeads)
      fd_rotate_pair(q + head * kQHead + kNope + 2 * i, q_pe_out + head * kRope + 2 * i, cos_p[i], sin_p[i]);
    else
      fd_rotate_pair(kv_a + kLatent + 2 * i, kpe_cache + static_cast<size_t>(p) * kRope + 2 * i, cos_p[i], sin_p[i]);
  }
  fd_rmsnorm_bf16(kv_a, kv_norm_weight, eps, kLatent, ckv_cache + static_cast<size_t>(p) * kLatent);
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_rope_cache(const fd_bf16* q, const fd_bf16* kv_a, const fd_bf16* kv_norm_weight, float eps,
                                     const float* cos_table, const float* sin_table, const int* pos,
                                     fd_bf16* q_pe_out, fd_bf16* ckv_cache, fd_bf16* kpe_cache) {
  fd_task_rope_cache(q, kv_a, kv_norm_weight, eps, cos_table, sin_table, pos, q_pe_out, ckv_cache, kpe_cache);
}

FD_EXPORT int fd_launch_rope_cache(const void* q, const void* kv_a, const void* kv_norm_weight, float eps,
                                   const float* cos_table, const float* sin_table, const int* pos, void* q_pe_out,
                                   void* ckv_cache, void* kpe_cache, void* stream) {
  fd_kernel_rope_cache<<<1, kTaskThreads, 0, static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(q), static_cast<const fd_bf16*>(kv_a), static_cast<const fd_bf16*>(kv_norm_weight),
      eps, cos_table, sin_table, pos, static_cast<fd_bf16*>(q_pe_out), static_cast<fd_bf16*>(ckv_cache),
      static_cast<fd_bf16*>(kpe_cache));
  return static_cast<int>(fd_get_last_error());
}
#endif

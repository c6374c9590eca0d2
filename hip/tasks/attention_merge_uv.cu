// Task kind: ATTN_MERGE_UV (attention merge, then W_UV). Combines n_chunks flash-decoding partials (m, l, unnormalised o)
// of heads [head_begin, head_end) into out[(h - head_begin) * kLatent + c] =
// sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c, fp32. Chunks with l = 0 (no valid position)
// contribute nothing. m/l of chunk c, head h are at part_m/part_l[(c * kHeads + h) * ml_stride]
// (stride 1: separate arrays; 2: the task graph's interleaved (m, l) pairs).
// fd_task_attention_merge_uv is the graph's ATTN_MERGE_UV: the merged out_lat stays in shared
// memory and W_UV turns it into the tile's heads of attn_out (W_UV read once per layer).
#include "common.h"

constexpr int kMaxChunks = FD_MAX_MERGE_CHUNKS;
// The weighted sum splits the chunks over kMergeSlices groups of threads (one float4 of columns
// per thread), so every thread's loads are independent and all in flight at once; the groups'
// sums meet in shared memory in a fixed order.
constexpr int kLatVec4 = kLatent / 4;
constexpr int kMergeMaxSlices = 4;

__host__ __device__ constexpr int fd_attention_merge_smem_bytes(int heads_in_tile) {
  return (kMaxChunks + kMergeMaxSlices * kLatent + heads_in_tile * kLatent) * 4;
}

__device__ void fd_task_attention_merge(const float* part_m, const float* part_l, int ml_stride, const float* part_o,
                                        int n_chunks, int head_begin, int head_end, float* out, void* smem) {
  float* weight_s = static_cast<float*>(smem);  // [n_chunks]: e^(m_c - M)
  float4* slice_s = reinterpret_cast<float4*>(weight_s + kMaxChunks);  // [slices][kLatVec4]
  const int slices = min(kMergeMaxSlices, static_cast<int>(blockDim.x) / kLatVec4);
  const int cv = threadIdx.x % kLatVec4, slice = threadIdx.x / kLatVec4;
  for (int h = head_begin; h < head_end; ++h) {
    float m = -INFINITY;
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) m = fmaxf(m, part_m[(c * kHeads + h) * ml_stride]);
    m = fd_block_max(m);
    float l = 0.f, last = -1.f;
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
      const float l_c = part_l[(c * kHeads + h) * ml_stride];
      const float w = l_c > 0.f ? __expf(part_m[(c * kHeads + h) * ml_stride] - m) : 0.f;
      weight_s[c] = w;
      l += w * l_c;
      if (l_c > 0.f) last = static_cast<float>(c);
    }
    const float inv_l = 1.f / fd_block_sum(l);  // fd_block_sum's barrier also publishes weight_s
    // Chunks hold consecutive positions, so the filled ones come first: a cache allocated past the
    // context (a generation's rows still to come) costs no partial loads.
    const int n_filled = static_cast<int>(fd_block_max(last)) + 1;
    if (slice < slices) {
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      const float4* o = reinterpret_cast<const float4*>(part_o) + static_cast<size_t>(h) * kLatVec4 + cv;
#pragma unroll 16
      for (int c = slice; c < n_filled; c += slices) {
        // Loaded whatever the weight (a select, not a branch, so the loads stay independent); an
        // empty chunk (w = 0) contributes nothing, whatever its o holds.
        const float4 v = o[static_cast<size_t>(c) * kHeads * kLatVec4];
        const float w = weight_s[c];
        const bool live = w != 0.f;
        acc.x = fmaf(w, live ? v.x : 0.f, acc.x);
        acc.y = fmaf(w, live ? v.y : 0.f, acc.y);
        acc.z = fmaf(w, live ? v.z : 0.f, acc.z);
        acc.w = fmaf(w, live ? v.w : 0.f, acc.w);
      }
      slice_s[slice * kLatVec4 + cv] = acc;
    }
    __syncthreads();
    for (int col = threadIdx.x; col < kLatent; col += blockDim.x) {
      float sum = 0.f;
      for (int k = 0; k < slices; ++k) sum += reinterpret_cast<const float*>(slice_s)[k * kLatent + col];
      out[(h - head_begin) * kLatent + col] = sum * inv_l;
    }
    __syncthreads();  // weight_s and slice_s are rewritten for the next head; out is complete
  }
}

template <class Act, class WL = fd_global_weights>
__device__ void fd_task_attention_merge_uv(const float* part_m, const float* part_l, int ml_stride,
                                           const float* part_o, int n_chunks, const fd_bf16* kv_b, int head_begin,
                                           int head_end, Act* attn_out, void* smem) {
  float* lat_s = static_cast<float*>(smem) + kMaxChunks + kMergeMaxSlices * kLatent;  // out_lat of the tile's heads
  fd_task_attention_merge(part_m, part_l, ml_stride, part_o, n_chunks, head_begin, head_end, lat_s, smem);
  fd_wuv_rows<Act, WL>(lat_s, head_begin, kv_b, head_begin * kVHead, head_end * kVHead, attn_out);
}

#ifndef FD_NO_STANDALONE
// The graph's ATTN_MERGE_UV with interleaved (m, l) pairs, one block per group of heads_per_tile.
template <class Act>
__global__ void fd_kernel_attention_merge_uv(const float* part_ml, const float* part_o, int n_chunks,
                                             const fd_bf16* kv_b, int heads_per_tile, Act* attn_out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int h0, h1;
  fd_block_range(kHeads, heads_per_tile, &h0, &h1);
  fd_task_attention_merge_uv(part_ml, part_ml + 1, 2, part_o, n_chunks, kv_b, h0, h1, attn_out, fd_smem);
}

FD_EXPORT int fd_launch_attention_merge_uv(const float* part_ml, const float* part_o, int n_chunks, const void* kv_b,
                                           int heads_per_tile, void* attn_out, int f32, void* stream) {
  const int smem = fd_attention_merge_smem_bytes(heads_per_tile);
  if (n_chunks <= 0 || n_chunks > kMaxChunks || heads_per_tile <= 0 || smem > 48 * 1024) return -1;
  const int blocks = (kHeads + heads_per_tile - 1) / heads_per_tile;
  const fd_bf16* w = static_cast<const fd_bf16*>(kv_b);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_attention_merge_uv<<<blocks, kTaskThreads, smem, s>>>(part_ml, part_o, n_chunks, w, heads_per_tile,
                                                                    static_cast<float*>(attn_out));
  else
    fd_kernel_attention_merge_uv<<<blocks, kTaskThreads, smem, s>>>(part_ml, part_o, n_chunks, w, heads_per_tile,
                                                                    static_cast<fd_bf16*>(attn_out));
  return static_cast<int>(fd_get_last_error());
}
#endif

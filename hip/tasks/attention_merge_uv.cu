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
  return (2 * kMaxChunks + kMergeMaxSlices * kLatent + heads_in_tile * kLatent) * 4;
}

// The block's largest m and largest filled chunk index in one reduction (one pair of barriers).
__device__ __forceinline__ float2 fd_block_max_pair(float2 v) {
  __shared__ float2 partial[kMaxWarpsPerBlock];
  v.x = fd_warp_max(v.x);
  v.y = fd_warp_max(v.y);
  __syncthreads();  // partial[] may still be read by a previous call
  if (fd_lane() == 0) partial[fd_warp()] = v;
  __syncthreads();
  float2 best = partial[0];
  for (int w = 1; w < fd_num_warps(); ++w) best = make_float2(fmaxf(best.x, partial[w].x), fmaxf(best.y, partial[w].y));
  return best;
}

__device__ void fd_task_attention_merge(const float* part_m, const float* part_l, int ml_stride, const float* part_o,
                                        int n_chunks, int head_begin, int head_end, float* out, void* smem) {
  float* weight_s = static_cast<float*>(smem);  // [n_chunks]: m_c, then e^(m_c - M)
  float* l_s = weight_s + kMaxChunks;            // [n_chunks]: l_c
  float4* slice_s = reinterpret_cast<float4*>(l_s + kMaxChunks);  // [slices][kLatVec4]
  const int slices = min(kMergeMaxSlices, static_cast<int>(blockDim.x) / kLatVec4);
  const int cv = threadIdx.x % kLatVec4, slice = threadIdx.x / kLatVec4;
  for (int h = head_begin; h < head_end; ++h) {
    // Each chunk's (m, l) is read once, both loads in flight; a thread keeps its own chunks' in shared
    // memory for the second pass (no other thread reads them before the sum's barrier).
    float m = -INFINITY, last = -1.f;
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
      const float m_c = part_m[(c * kHeads + h) * ml_stride], l_c = part_l[(c * kHeads + h) * ml_stride];
      weight_s[c] = m_c;
      l_s[c] = l_c;
      m = fmaxf(m, m_c);
      if (l_c > 0.f) last = static_cast<float>(c);
    }
    const float2 reduced = fd_block_max_pair(make_float2(m, last));
    m = reduced.x;
    // Chunks hold consecutive positions, so the filled ones come first: a cache allocated past the
    // context (a generation's rows still to come) costs no partial loads.
    const int n_filled = static_cast<int>(reduced.y) + 1;
    float l = 0.f;
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
      const float l_c = l_s[c];
      const float w = l_c > 0.f ? __expf(weight_s[c] - m) : 0.f;
      weight_s[c] = w;
      l += w * l_c;
    }
    const float inv_l = 1.f / fd_block_sum(l);  // fd_block_sum's barrier also publishes weight_s
    if (slice < slices) {
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      const float4* o = reinterpret_cast<const float4*>(part_o) + static_cast<size_t>(h) * kLatVec4 + cv;
      // kBatch chunks' loads in flight, predicated (a run-time trip count would wait for each);
      // an empty chunk (w = 0) contributes nothing, whatever its o holds.
      constexpr int kBatch = 16;
      for (int c0 = slice; c0 < n_filled; c0 += kBatch * slices) {
        float4 v[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int c = c0 + k * slices;
          v[k] = c < n_filled ? o[static_cast<size_t>(c) * kHeads * kLatVec4] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int c = c0 + k * slices;
          if (c < n_filled) {
            const float w = weight_s[c];
            const bool live = w != 0.f;
            acc.x = fmaf(w, live ? v[k].x : 0.f, acc.x);
            acc.y = fmaf(w, live ? v[k].y : 0.f, acc.y);
            acc.z = fmaf(w, live ? v[k].z : 0.f, acc.z);
            acc.w = fmaf(w, live ? v[k].w : 0.f, acc.w);
          }
        }
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

// v_parts > 1 (one head per task): only rows [part * kVHead / v_parts, ...) of the head's W_UV, so
// that the head's W_UV is spread over v_parts tasks (each merges the same partials).
template <class Act, class WL = fd_global_weights>
__device__ void fd_task_attention_merge_uv(const float* part_m, const float* part_l, int ml_stride,
                                           const float* part_o, int n_chunks, const fd_bf16* kv_b, int head_begin,
                                           int head_end, Act* attn_out, void* smem, int part = 0, int v_parts = 1) {
  float* lat_s = static_cast<float*>(smem) + 2 * kMaxChunks + kMergeMaxSlices * kLatent;  // out_lat of the tile's heads
  fd_task_attention_merge(part_m, part_l, ml_stride, part_o, n_chunks, head_begin, head_end, lat_s, smem);
  const int part_rows = kVHead / v_parts, row_begin = head_begin * kVHead + part * part_rows;
  fd_wuv_rows<Act, WL>(lat_s, head_begin, kv_b, row_begin,
                       v_parts == 1 ? head_end * kVHead : row_begin + part_rows, attn_out);
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

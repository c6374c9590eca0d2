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

// How many slices of n_vec threads the weighted sum of 4 * n_vec columns uses.
__device__ __forceinline__ int fd_merge_slices(int n_vec) {
  return min(kMergeMaxSlices * kLatVec4 / n_vec, static_cast<int>(blockDim.x) / n_vec);
}

// acc += w * x; an empty chunk (w = 0) adds nothing, whatever its partial holds (NaN included).
__device__ __forceinline__ void fd_merge_add(float4& acc, float w, float4 x) {
  const bool live = w != 0.f;
  acc.x = fmaf(w, live ? x.x : 0.f, acc.x);
  acc.y = fmaf(w, live ? x.y : 0.f, acc.y);
  acc.z = fmaf(w, live ? x.z : 0.f, acc.z);
  acc.w = fmaf(w, live ? x.w : 0.f, acc.w);
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

// Head h's chunk weights: weight_s[c] = e^(m_c - M) (0 for an empty chunk), and returns (1 / sum_c
// weight_s[c] l_c, the number of chunks up to the last filled one). Ends with a barrier.
__device__ __forceinline__ float2 fd_merge_weights(const float* part_m, const float* part_l, int ml_stride, int n_chunks,
                                                   int h, float* weight_s, float* l_s) {
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
  float l = 0.f;
  for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
    const float l_c = l_s[c];
    const float w = l_c > 0.f ? __expf(weight_s[c] - m) : 0.f;
    weight_s[c] = w;
    l += w * l_c;
  }
  // Chunks hold consecutive positions, so the filled ones come first: a cache allocated past the
  // context (a generation's rows still to come) costs no partial loads.
  return make_float2(1.f / fd_block_sum(l), reduced.y + 1.f);  // fd_block_sum's barrier also publishes weight_s
}

// sum_c weight_s[c] o_c over columns [col0, col0 + 4 * n_vec) of head h's partials, chunks [0, n_filled),
// by the block's slices of n_vec threads (a float4 of columns each): each slice's sum into slice_s.
__device__ __forceinline__ void fd_merge_partials(const float* part_o, int h, int col0, int n_vec, int n_filled,
                                                  const float* weight_s, float4* slice_s) {
  const int slices = fd_merge_slices(n_vec);
  const int cv = threadIdx.x % n_vec, slice = threadIdx.x / n_vec;
  if (slice >= slices) return;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const float4* o = reinterpret_cast<const float4*>(part_o + static_cast<size_t>(h) * kLatent + col0) + cv;
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
      if (c < n_filled) fd_merge_add(acc, weight_s[c], v[k]);
    }
  }
  slice_s[slice * n_vec + cv] = acc;
}

// out[col] = inv_l * (the slices' sums of column col, in slice order), for 4 * n_vec columns. Ends
// with a barrier.
__device__ __forceinline__ void fd_merge_slices_sum(const float4* slice_s, int n_vec, float inv_l, float* out) {
  __syncthreads();
  const int slices = fd_merge_slices(n_vec);
  for (int col = threadIdx.x; col < 4 * n_vec; col += blockDim.x) {
    float sum = 0.f;
    for (int k = 0; k < slices; ++k) sum += reinterpret_cast<const float*>(slice_s)[k * 4 * n_vec + col];
    out[col] = sum * inv_l;
  }
  __syncthreads();
}

__device__ void fd_task_attention_merge(const float* part_m, const float* part_l, int ml_stride, const float* part_o,
                                        int n_chunks, int head_begin, int head_end, float* out, void* smem) {
  float* weight_s = static_cast<float*>(smem);  // [n_chunks]: m_c, then e^(m_c - M)
  float* l_s = weight_s + kMaxChunks;            // [n_chunks]: l_c
  float4* slice_s = reinterpret_cast<float4*>(l_s + kMaxChunks);  // [slices][kLatVec4]
  for (int h = head_begin; h < head_end; ++h) {
    const float2 w = fd_merge_weights(part_m, part_l, ml_stride, n_chunks, h, weight_s, l_s);
    fd_merge_partials(part_o, h, 0, kLatVec4, static_cast<int>(w.y), weight_s, slice_s);
    fd_merge_slices_sum(slice_s, kLatVec4, w.x, out + (h - head_begin) * kLatent);  // its barrier: weight_s and
    // slice_s may be rewritten for the next head
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

// Caps a weight policy's pieces in flight at one a row (kUnroll 1).
template <class WL>
struct fd_one_piece {
  static constexpr int kUnroll = 1;
  static __device__ __forceinline__ fd_vec16 load(const void* p) { return WL::load(p); }
};

// Head h's chunk weights by ONE warp (no block reductions): weight_s[c] = e^(m_c - M) (0 for an empty
// chunk), and weight_s[kMaxChunks] = 1 / sum_c weight_s[c] l_c, weight_s[kMaxChunks + 1] = the number
// of chunks up to the last filled one. The caller's barrier publishes them.
__device__ __forceinline__ void fd_merge_weights_warp(const float* part_m, const float* part_l, int ml_stride,
                                                      int n_chunks, int h, float* weight_s) {
  float m = -INFINITY, last = -1.f;
  for (int c = fd_lane(); c < n_chunks; c += kWarpSize) {
    const float m_c = part_m[(c * kHeads + h) * ml_stride], l_c = part_l[(c * kHeads + h) * ml_stride];
    weight_s[c] = m_c;
    m = fmaxf(m, m_c);
    if (l_c > 0.f) last = static_cast<float>(c);
  }
  m = fd_warp_max(m);
  last = fd_warp_max(last);
  float l = 0.f;
  for (int c = fd_lane(); c < n_chunks; c += kWarpSize) {  // the lane's own chunks: no barrier needed
    const float l_c = part_l[(c * kHeads + h) * ml_stride];  // an L1 hit: this lane just read it
    const float w = l_c > 0.f ? __expf(weight_s[c] - m) : 0.f;
    weight_s[c] = w;
    l += w * l_c;
  }
  l = fd_warp_sum(l);
  if (fd_lane() == 0) {
    weight_s[kMaxChunks] = 1.f / l;
    weight_s[kMaxChunks + 1] = last + 1.f;
  }
}

// The graph's ATTN_MERGE_COLS: head h's merge over latent columns block `part` of lat_parts only, then
// those columns of its W_UV (block h * lat_parts + part of w_uv_parts, each kVHead rows of kLatent /
// lat_parts, contiguous; fleet_decode.graph.derived.w_uv_parts): attn_parts[(part * kHeads + h) * kVHead
// + d] = sum_c W_UV[h][d][c] out_lat[c] over the block's c, one of the lat_parts vectors whose sum is
// the head's attn_out (o_proj adds them).
// Latency, not bytes, sets its pace: the partials' first loads go out before the (m, l) loads come
// back, and one warp finds the weights (one barrier, where the block-wide reductions took four).
template <class Act, class WL = fd_global_weights>
__device__ void fd_task_attention_merge_cols(const float* part_m, const float* part_l, int ml_stride,
                                             const float* part_o, int n_chunks, const fd_bf16* w_uv_parts, int h,
                                             int part, int lat_parts, Act* attn_parts, void* smem) {
  float* weight_s = static_cast<float*>(smem);  // [kMaxChunks + 2]
  float4* slice_s = reinterpret_cast<float4*>(weight_s + 2 * kMaxChunks);
  float* lat_s = reinterpret_cast<float*>(slice_s + kMergeMaxSlices * kLatVec4);
  const int cols = kLatent / lat_parts, n_vec = cols / 4;
  const int slices = fd_merge_slices(n_vec);
  const int cv = threadIdx.x % n_vec, slice = threadIdx.x / n_vec;
  const float4* o = reinterpret_cast<const float4*>(part_o + static_cast<size_t>(h) * kLatent + part * cols) + cv;
  // Chunks slice, slice + slices, ... (kPreload of them) loaded before the weights are known: a chunk
  // past the last filled one weighs 0 and its values are not used.
  constexpr int kPreload = 8;
  float4 v[kPreload];
#pragma unroll
  for (int k = 0; k < kPreload; ++k) {
    const int c = slice + k * slices;
    v[k] = slice < slices && c < n_chunks ? o[static_cast<size_t>(c) * kHeads * kLatVec4]
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if (fd_warp() == 0) fd_merge_weights_warp(part_m, part_l, ml_stride, n_chunks, h, weight_s);
  __syncthreads();
  const float inv_l = weight_s[kMaxChunks];
  const int n_filled = static_cast<int>(weight_s[kMaxChunks + 1]);
  if (slice < slices) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kPreload; ++k)
      if (slice + k * slices < n_filled) fd_merge_add(acc, weight_s[slice + k * slices], v[k]);
    for (int c = slice + kPreload * slices; c < n_filled; c += slices)  // long caches (> kPreload * slices chunks)
      fd_merge_add(acc, weight_s[c], o[static_cast<size_t>(c) * kHeads * kLatVec4]);
    slice_s[slice * n_vec + cv] = acc;
  }
  fd_merge_slices_sum(slice_s, n_vec, inv_l, lat_s);
  // A block's row is at most one 16-byte piece a lane (cols <= 256): one piece per row in flight.
  const fd_bf16* w_block = w_uv_parts + static_cast<size_t>(h * lat_parts + part) * kVHead * cols;
  Act* out = attn_parts + static_cast<size_t>(part * kHeads + h) * kVHead;
  fd_gemv_rows<fd_one_piece<WL>, kWuvRowsPerPass>(w_block, cols, lat_s, 0, kVHead, [&](int r, float dot) {
    if (fd_lane() == 0) out[r] = fd_store_as<Act>(dot);
  });
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

// The graph's ATTN_MERGE_COLS, one block per (head, column block): attn_parts[(part * kHeads + h) * kVHead ...].
template <class Act>
__global__ void fd_kernel_attention_merge_cols(const float* part_ml, const float* part_o, int n_chunks,
                                               const fd_bf16* w_uv_parts, int lat_parts, Act* attn_parts) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  const int h = blockIdx.x / lat_parts, part = blockIdx.x % lat_parts;
  fd_task_attention_merge_cols(part_ml, part_ml + 1, 2, part_o, n_chunks, w_uv_parts, h, part, lat_parts, attn_parts,
                               fd_smem);
}

FD_EXPORT int fd_launch_attention_merge_cols(const float* part_ml, const float* part_o, int n_chunks,
                                             const void* w_uv_parts, int lat_parts, void* attn_parts, int f32,
                                             void* stream) {
  const int smem = fd_attention_merge_smem_bytes(1);
  if (n_chunks <= 0 || n_chunks > kMaxChunks || lat_parts < 2 || kLatent % (8 * lat_parts) || smem > 48 * 1024)
    return -1;
  const fd_bf16* w = static_cast<const fd_bf16*>(w_uv_parts);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_attention_merge_cols<<<kHeads * lat_parts, kTaskThreads, smem, s>>>(part_ml, part_o, n_chunks, w,
                                                                                 lat_parts, static_cast<float*>(attn_parts));
  else
    fd_kernel_attention_merge_cols<<<kHeads * lat_parts, kTaskThreads, smem, s>>>(part_ml, part_o, n_chunks, w,
                                                                                 lat_parts, static_cast<fd_bf16*>(attn_parts));
  return static_cast<int>(fd_get_last_error());
}
#endif

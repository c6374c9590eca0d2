// Task kind: ROPE_Q_ABSORB (q absorption). q_lat[h] = W_UK[h]^T q_nope[h] over latent column blocks: W_UK[h] is rows h*256 .. h*256+127 of kv_b_proj.weight
// ([kHeads*256, kLatent] bf16), so the product runs down the rows. fp32 accumulation and fp32
// output (the absorbed form has no HF counterpart to round like; keeping q_lat in fp32 costs
// 32 KB per layer and removes one rounding from the scores).
// fd_task_rope_q_absorb is the graph's ROPE_Q_ABSORB: (head, column block) units from W_UK in the
// graph's own layout (w_uk_parts), plus each head's q_pe rotated at position pos.
// Each thread owns 8 columns (one 16-byte piece of a row) and a slice of the 128 rows; the
// slices are summed through shared memory.
#include "common.h"

__host__ __device__ constexpr int fd_q_absorb_smem_bytes(int threads) { return (threads * kVecElems + kNope) * 4; }

// One column block of one head: out[c] = sum_d q_nope[d] * w[d * row_stride + c] for c < n_cols,
// w pointing at the block's first column of row 0 (kNope rows).
template <class Act, class WL = fd_global_weights>
__device__ void fd_absorb_block(const Act* q_nope, const fd_bf16* w, int row_stride, int n_cols, float* out,
                                void* smem) {
  float* partial = static_cast<float*>(smem);  // [slices][n_col_vec][8]
  float* q_s = partial + blockDim.x * kVecElems;  // [kNope]: the head's q_nope, read by every column
  // One load per thread, before the rows: read inside the row loop, each q value would be a round
  // trip of its own (just written by the q_proj tiles, it is not in L1).
  fd_block_to_float<1>(q_s, q_nope, kNope);
  __syncthreads();
  const int n_col_vec = n_cols / kVecElems;
  const int slices = blockDim.x / n_col_vec;
  const int cv = threadIdx.x % n_col_vec, slice = threadIdx.x / n_col_vec;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (slice < slices) {
    const fd_bf16* w_cv = w + cv * kVecElems;
#pragma unroll 16
    for (int d = slice; d < kNope; d += slices) {
      float wv[8];
      fd_unpack8(WL::load(w_cv + static_cast<size_t>(d) * row_stride), wv);
      const float qd = q_s[d];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = fmaf(qd, wv[j], acc[j]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) partial[(slice * n_col_vec + cv) * kVecElems + j] = acc[j];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < n_cols; c += blockDim.x) {
    float sum = 0.f;
    for (int s = 0; s < slices; ++s) sum += partial[s * n_col_vec * kVecElems + c];
    out[c] = sum;
  }
  __syncthreads();
}

// The graph's ROPE_Q_ABSORB: units [unit_begin, unit_end) of (head, column block), u = h * parts + p,
// from w_uk_parts (fleet_decode.graph.derived: [kHeads * parts * kNope, kLatent / parts], block u's
// kNope rows contiguous, so a unit streams one 32 KB range at parts = 4). The unit with p = 0 also
// writes the head's q_pe, rotated at position pos.
template <class Act, class WL = fd_global_weights>
__device__ void fd_task_rope_q_absorb(const Act* q, const fd_bf16* w_uk_parts, int parts, const float* cos_table,
                                      const float* sin_table, int pos, int unit_begin, int unit_end, float* q_lat,
                                      Act* q_pe_out, void* smem) {
  const int cols = kLatent / parts;
  for (int u = unit_begin; u < unit_end; ++u) {
    const int h = u / parts, p = u % parts;
    if (p == 0) fd_rope_q_heads(q, h, h + 1, cos_table, sin_table, pos, q_pe_out);
    fd_absorb_block<Act, WL>(q + h * kQHead, w_uk_parts + static_cast<size_t>(u) * kNope * cols, cols, cols,
                    q_lat + h * kLatent + p * cols, smem);
  }
}

#ifndef FD_NO_STANDALONE
// The graph's ROPE_Q_ABSORB, one block per tile of units_per_tile (head, column block) units.
template <class Act>
__global__ void fd_kernel_rope_q_absorb(const Act* q, const fd_bf16* w_uk_parts, int parts, const float* cos_table,
                                        const float* sin_table, int pos, int units_per_tile, float* q_lat,
                                        Act* q_pe_out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int u0, u1;
  fd_block_range(kHeads * parts, units_per_tile, &u0, &u1);
  fd_task_rope_q_absorb(q, w_uk_parts, parts, cos_table, sin_table, pos, u0, u1, q_lat, q_pe_out, fd_smem);
}

FD_EXPORT int fd_launch_rope_q_absorb(const void* q, const void* w_uk_parts, int parts, const float* cos_table,
                                      const float* sin_table, int pos, int units_per_tile, float* q_lat,
                                      void* q_pe_out, int f32, void* stream) {
  if (units_per_tile <= 0 || pos < 0 || parts <= 0 || kLatent % parts || (kLatent / parts) % kVecElems ||
      kLatent / parts / kVecElems > kTaskThreads)
    return -1;
  const int blocks = (kHeads * parts + units_per_tile - 1) / units_per_tile;
  const fd_bf16* w = static_cast<const fd_bf16*>(w_uk_parts);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_rope_q_absorb<<<blocks, kTaskThreads, fd_q_absorb_smem_bytes(kTaskThreads), s>>>(
        static_cast<const float*>(q), w, parts, cos_table, sin_table, pos, units_per_tile, q_lat,
        static_cast<float*>(q_pe_out));
  else
    fd_kernel_rope_q_absorb<<<blocks, kTaskThreads, fd_q_absorb_smem_bytes(kTaskThreads), s>>>(
        static_cast<const fd_bf16*>(q), w, parts, cos_table, sin_table, pos, units_per_tile, q_lat,
        static_cast<fd_bf16*>(q_pe_out));
  return static_cast<int>(fd_get_last_error());
}
#endif

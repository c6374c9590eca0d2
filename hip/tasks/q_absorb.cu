// Task kind: q absorption. q_lat[h] = W_UK[h]^T q_nope[h] for heads [head_begin, head_end) and
// latent columns [col_begin, col_end): W_UK[h] is rows h*256 .. h*256+127 of kv_b_proj.weight
// ([kHeads*256, kLatent] bf16), so the product runs down the rows. fp32 accumulation and fp32
// output (the absorbed form has no HF counterpart to round like; keeping q_lat in fp32 costs
// 32 KB per layer and removes one rounding from the scores).
// fd_task_rope_q_absorb is the graph's ROPE_Q_ABSORB: all columns of the tile's heads, plus
// those heads' q_pe rotated at position pos.
// Each thread owns 8 columns (one 16-byte piece of a row) and a slice of the 128 rows; the
// slices are summed through shared memory.
#include "common.h"

__host__ __device__ constexpr int fd_q_absorb_smem_bytes(int threads) { return threads * kVecElems * 4; }

template <class Act>
__device__ void fd_task_q_absorb(const Act* q, const fd_bf16* kv_b, int head_begin, int head_end, int col_begin,
                                 int col_end, float* q_lat, void* smem) {
  float* partial = static_cast<float*>(smem);  // [slices][n_col_vec][8]
  const int n_col_vec = (col_end - col_begin) / kVecElems;
  const int slices = blockDim.x / n_col_vec;
  const int cv = threadIdx.x % n_col_vec, slice = threadIdx.x / n_col_vec;
  for (int h = head_begin; h < head_end; ++h) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (slice < slices) {
      const fd_bf16* w_uk = kv_b + static_cast<size_t>(h) * kKvbHead * kLatent + col_begin + cv * kVecElems;
      const Act* q_nope = q + h * kQHead;
#pragma unroll 16
      for (int d = slice; d < kNope; d += slices) {
        float w[8];
        fd_unpack8(fd_load_stream16(w_uk + static_cast<size_t>(d) * kLatent), w);
        const float qd = fd_to_float(q_nope[d]);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = fmaf(qd, w[j], acc[j]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) partial[(slice * n_col_vec + cv) * kVecElems + j] = acc[j];
    }
    __syncthreads();
    for (int c = threadIdx.x; c < n_col_vec * kVecElems; c += blockDim.x) {
      float sum = 0.f;
      for (int s = 0; s < slices; ++s) sum += partial[s * n_col_vec * kVecElems + c];
      q_lat[h * kLatent + col_begin + c] = sum;
    }
    __syncthreads();
  }
}

template <class Act>
__device__ void fd_task_rope_q_absorb(const Act* q, const fd_bf16* kv_b, const float* cos_table,
                                      const float* sin_table, int pos, int head_begin, int head_end, float* q_lat,
                                      Act* q_pe_out, void* smem) {
  fd_rope_q_heads(q, head_begin, head_end, cos_table, sin_table, pos, q_pe_out);
  // All 512 columns in one pass (a thread: 8 columns, every slices-th of the 128 rows, 16 loads in
  // flight): one round of loads and one reduction per head instead of four of each.
  fd_task_q_absorb(q, kv_b, head_begin, head_end, 0, kLatent, q_lat, smem);
}

#ifndef FD_NO_STANDALONE
// One block per (head, column chunk).
template <class Act>
__global__ void fd_kernel_q_absorb(const Act* q, const fd_bf16* kv_b, int cols_per_tile, float* q_lat) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  const int chunks = kLatent / cols_per_tile;
  const int h = blockIdx.x / chunks, c0 = (blockIdx.x % chunks) * cols_per_tile;
  fd_task_q_absorb(q, kv_b, h, h + 1, c0, c0 + cols_per_tile, q_lat, fd_smem);
}

FD_EXPORT int fd_launch_q_absorb(const void* q, const void* kv_b, int cols_per_tile, float* q_lat, int f32,
                                 void* stream) {
  if (cols_per_tile <= 0 || kLatent % cols_per_tile || cols_per_tile % kVecElems ||
      cols_per_tile / kVecElems > kTaskThreads)
    return -1;
  const int blocks = kHeads * (kLatent / cols_per_tile);
  const fd_bf16* w = static_cast<const fd_bf16*>(kv_b);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_q_absorb<<<blocks, kTaskThreads, fd_q_absorb_smem_bytes(kTaskThreads), s>>>(
        static_cast<const float*>(q), w, cols_per_tile, q_lat);
  else
    fd_kernel_q_absorb<<<blocks, kTaskThreads, fd_q_absorb_smem_bytes(kTaskThreads), s>>>(
        static_cast<const fd_bf16*>(q), w, cols_per_tile, q_lat);
  return static_cast<int>(fd_get_last_error());
}

// The graph's ROPE_Q_ABSORB, one block per head group of heads_per_tile heads.
template <class Act>
__global__ void fd_kernel_rope_q_absorb(const Act* q, const fd_bf16* kv_b, const float* cos_table,
                                        const float* sin_table, int pos, int heads_per_tile, float* q_lat,
                                        Act* q_pe_out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int h0, h1;
  fd_block_range(kHeads, heads_per_tile, &h0, &h1);
  fd_task_rope_q_absorb(q, kv_b, cos_table, sin_table, pos, h0, h1, q_lat, q_pe_out, fd_smem);
}

FD_EXPORT int fd_launch_rope_q_absorb(const void* q, const void* kv_b, const float* cos_table, const float* sin_table,
                                      int pos, int heads_per_tile, float* q_lat, void* q_pe_out, int f32,
                                      void* stream) {
  if (heads_per_tile <= 0 || pos < 0) return -1;
  const int blocks = (kHeads + heads_per_tile - 1) / heads_per_tile;
  const fd_bf16* w = static_cast<const fd_bf16*>(kv_b);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_rope_q_absorb<<<blocks, kTaskThreads, fd_q_absorb_smem_bytes(kTaskThreads), s>>>(
        static_cast<const float*>(q), w, cos_table, sin_table, pos, heads_per_tile, q_lat,
        static_cast<float*>(q_pe_out));
  else
    fd_kernel_rope_q_absorb<<<blocks, kTaskThreads, fd_q_absorb_smem_bytes(kTaskThreads), s>>>(
        static_cast<const fd_bf16*>(q), w, cos_table, sin_table, pos, heads_per_tile, q_lat,
        static_cast<fd_bf16*>(q_pe_out));
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kind: lm_head tile, first level of the argmax. logits[r] = lm_head[r] . RMSNorm(x) (final
// norm, recomputed per block; x stored as Act) for rows [row_begin, row_end), stored as fp32
// holding the bf16-rounded value whatever Act is (HF's bf16 logits, upcast for greedy search: the
// rounding keeps greedy ties as HF sees them); then the tile's best (value, row) with ties to the
// lower row, written to part_value[tile] / part_index[tile] for the argmax reduce.
#include "common.h"

template <class Act>
__host__ __device__ constexpr int fd_lm_head_smem_bytes(int hidden) { return hidden * sizeof(Act); }

template <class Act>
__device__ void fd_task_lm_head(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* W, int hidden,
                                int row_begin, int row_end, float* logits, int tile, float* part_value,
                                int* part_index, void* smem) {
  Act* xs = static_cast<Act*>(smem);
  fd_rmsnorm(x, norm_weight, eps, hidden, xs);
  fd_argmax_pair best = {-INFINITY, row_end};
  fd_gemv_rows(W, hidden, xs, row_begin, row_end, [&](int r, float dot) {
    const float y = fd_round_bf16(dot);
    if (fd_lane() == 0) logits[r] = y;
    if (fd_argmax_better(y, r, best.value, best.index)) best = {y, r};
  });
  best = fd_block_argmax(best);
  if (threadIdx.x == 0) {
    part_value[tile] = best.value;
    part_index[tile] = best.index;
  }
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_lm_head(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* W, int hidden,
                                  int vocab, int rows_per_tile, float* logits, float* part_value, int* part_index) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(vocab, rows_per_tile, &r0, &r1);
  fd_task_lm_head(x, norm_weight, eps, W, hidden, r0, r1, logits, blockIdx.x, part_value, part_index, fd_smem);
}

// Writes one partial per tile: ceil(vocab / rows_per_tile) entries of part_value / part_index.
FD_EXPORT int fd_launch_lm_head(const void* x, const void* norm_weight, float eps, const void* W, int hidden, int vocab,
                                int rows_per_tile, float* logits, float* part_value, int* part_index, int f32,
                                void* stream) {
  if (hidden % kVecElems || rows_per_tile <= 0) return -1;
  const int tiles = (vocab + rows_per_tile - 1) / rows_per_tile;
  const fd_bf16* nw = static_cast<const fd_bf16*>(norm_weight);
  const fd_bf16* w = static_cast<const fd_bf16*>(W);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_lm_head<<<tiles, kTaskThreads, fd_lm_head_smem_bytes<float>(hidden), s>>>(
        static_cast<const float*>(x), nw, eps, w, hidden, vocab, rows_per_tile, logits, part_value, part_index);
  else
    fd_kernel_lm_head<<<tiles, kTaskThreads, fd_lm_head_smem_bytes<fd_bf16>(hidden), s>>>(
        static_cast<const fd_bf16*>(x), nw, eps, w, hidden, vocab, rows_per_tile, logits, part_value, part_index);
  return static_cast<int>(fd_get_last_error());
}
#endif

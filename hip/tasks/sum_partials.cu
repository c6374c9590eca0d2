// Task kind: SUM_PARTIALS. into[r] += partials[0][r] + partials[1][r] + ... + partials[n-1][r]
// for r in [row_begin, row_end): the split-K expert tiles' partial rows (GATE_UP_DOWN,
// EXPERT_GATE_UP_DOWN) added into the residual sum h_out. Each thread sums a fixed subset of the
// rows of one column and the subsets are added in a fixed order, so the result does not depend on
// which tile finished first: bit-identical from run to run.
#include "common.h"

__host__ __device__ constexpr int fd_sum_partials_smem_bytes(int threads) { return threads * 4; }

__device__ void fd_task_sum_partials(const float* partials, int n_rows, int row_length, int row_begin, int row_end,
                                     float* into, void* smem) {
  float* sums = static_cast<float*>(smem);
  for (int c0 = row_begin; c0 < row_end; c0 += blockDim.x) {
    const int cols = min(static_cast<int>(blockDim.x), row_end - c0);
    const int groups = blockDim.x / cols;  // threads per column, each summing every groups-th row
    const int col = threadIdx.x % cols, group = threadIdx.x / cols;
    if (group < groups) {
      float s = 0.f;
      const float* p = partials + c0 + col;
      // Unrolled so that the loads of a thread's rows (L2 round trips) are in flight together.
#pragma unroll 4
      for (int k = group; k < n_rows; k += groups) s += p[static_cast<size_t>(k) * row_length];
      sums[group * cols + col] = s;
    }
    __syncthreads();
    if (threadIdx.x < cols) {
      float s = 0.f;
      for (int g = 0; g < groups; ++g) s += sums[g * cols + threadIdx.x];
      into[c0 + threadIdx.x] += s;
    }
    __syncthreads();
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_sum_partials(const float* partials, int n_rows, int row_length, int rows_per_tile,
                                       float* into) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(row_length, rows_per_tile, &r0, &r1);
  fd_task_sum_partials(partials, n_rows, row_length, r0, r1, into, fd_smem);
}

FD_EXPORT int fd_launch_sum_partials(const float* partials, int n_rows, int row_length, int rows_per_tile, float* into,
                                     void* stream) {
  if (n_rows <= 0 || row_length <= 0 || rows_per_tile <= 0) return -1;
  fd_kernel_sum_partials<<<(row_length + rows_per_tile - 1) / rows_per_tile, kTaskThreads,
                           fd_sum_partials_smem_bytes(kTaskThreads), static_cast<fd_stream_t>(stream)>>>(
      partials, n_rows, row_length, rows_per_tile, into);
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kind: SUM_FIXED_POINT. into[r] += acc[r] * 2^-FD_FIXED_POINT_BITS, then acc[r] = 0, for r in
// [row_begin, row_end): the split-K slices' sum, which every slice added into the int64 row `acc` in
// fixed point (GATE_UP_DOWN, EXPERT_GATE_UP_DOWN with fixed_point set), added into the residual sum
// h_out. Integer adds commute, so the row holds the same bits whatever order the slices finished in;
// the one rounding is to fp32 here. The zero is the start of the next step's sum: its slices add only
// after this task's signal has reached them through the step's chain.
#include "common.h"

__device__ void fd_task_sum_fixed_point(long long* acc, int row_begin, int row_end, float* into) {
  constexpr double kUnit = 1.0 / static_cast<double>(1ull << FD_FIXED_POINT_BITS);
  for (int r = row_begin + threadIdx.x; r < row_end; r += blockDim.x) {
    const long long q = acc[r];
    acc[r] = 0;
    into[r] += static_cast<float>(static_cast<double>(q) * kUnit);
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_sum_fixed_point(long long* acc, int row_length, int rows_per_tile, float* into) {
  int r0, r1;
  fd_block_range(row_length, rows_per_tile, &r0, &r1);
  fd_task_sum_fixed_point(acc, r0, r1, into);
}

FD_EXPORT int fd_launch_sum_fixed_point(long long* acc, int row_length, int rows_per_tile, float* into, void* stream) {
  if (row_length <= 0 || rows_per_tile <= 0) return -1;
  fd_kernel_sum_fixed_point<<<(row_length + rows_per_tile - 1) / rows_per_tile, kTaskThreads, 0,
                              static_cast<fd_stream_t>(stream)>>>(acc, row_length, rows_per_tile, into);
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kind: SUM_FIXED_POINT. into[r] += acc[r] * 2^-FD_FIXED_POINT_BITS, then acc[r] = 0, for r in
// [row_begin, row_end): the split-K slices' sum, which every slice added into the int64 row `acc` in
// fixed point (GATE_UP_DOWN, EXPERT_GATE_UP_DOWN with fixed_point set), added into the residual sum
// h_out. Integer adds commute, so the row holds the same bits whatever order the slices finished in;
// the one rounding is to fp32 here. The zero is the start of the next step's sum: its slices add only
// after this task's signal has reached them through the step's chain.
#include "common.h"

__device__ __forceinline__ float fd_from_fixed_point(long long q) {
  return static_cast<float>(static_cast<double>(q) * (1.0 / static_cast<double>(1ull << FD_FIXED_POINT_BITS)));
}

// Rows by 4 (row_begin and row_end multiples of 4: the runtime checks), 16-byte loads: a whole layer's
// 2,048 rows (the sum in one tile, run as a tail by the last slice) in two passes of a 256-thread block.
// Two groups a thread in flight at once made the megakernel spill (sm_90a, 84 spill stores).
__device__ void fd_task_sum_fixed_point(long long* acc, int row_begin, int row_end, float* into) {
  const int n4 = (row_end - row_begin) / 4;
  longlong2* q2 = reinterpret_cast<longlong2*>(acc + row_begin);
  float4* h4 = reinterpret_cast<float4*>(into + row_begin);
  for (int g = threadIdx.x; g < n4; g += blockDim.x) {
    const longlong2 lo = q2[2 * g], hi = q2[2 * g + 1];
    const float4 h = h4[g];
    q2[2 * g] = q2[2 * g + 1] = make_longlong2(0, 0);
    h4[g] = make_float4(h.x + fd_from_fixed_point(lo.x), h.y + fd_from_fixed_point(lo.y),
                        h.z + fd_from_fixed_point(hi.x), h.w + fd_from_fixed_point(hi.y));
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_sum_fixed_point(long long* acc, int row_length, int rows_per_tile, float* into) {
  int r0, r1;
  fd_block_range(row_length, rows_per_tile, &r0, &r1);
  fd_task_sum_fixed_point(acc, r0, r1, into);
}

FD_EXPORT int fd_launch_sum_fixed_point(long long* acc, int row_length, int rows_per_tile, float* into, void* stream) {
  if (row_length <= 0 || rows_per_tile <= 0 || row_length % 4 || rows_per_tile % 4) return -1;
  fd_kernel_sum_fixed_point<<<(row_length + rows_per_tile - 1) / rows_per_tile, kTaskThreads, 0,
                              static_cast<fd_stream_t>(stream)>>>(acc, row_length, rows_per_tile, into);
  return static_cast<int>(fd_get_last_error());
}
#endif

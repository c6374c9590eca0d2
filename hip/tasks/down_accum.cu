// Task kinds: DOWN_ACCUM and EXPERT_DOWN_ACCUM. One slot's down rows [row_begin, row_end) added
// into h_out: h_out[r] += w * down[e][r] . act (e = expert_idx[slot] and w = expert_weight[slot]
// for a routed slot; the plain matrix and w = 1 without expert_idx: the dense MLP and the shared
// experts). So a slot's down tiles start as soon as its own gate/up is done. The runtime hands each
// of several adders into one row range its own zeroed row (`h_out` here) and sums those rows in a
// fixed order; the standalone launcher adds with fp32 atomics.
#include "common.h"

template <class Act>
__device__ void fd_task_down_accum(const fd_bf16* down_w, long long expert_stride, const int* expert_idx,
                                   const float* expert_weight, int slot, const Act* act, int inter, int row_begin,
                                   int row_end, float* h_out, void* smem) {
  Act* act_s = static_cast<Act*>(smem);
  fd_stage(act, inter, act_s);
  const fd_bf16* down = down_w + (expert_idx != nullptr ? expert_idx[slot] * expert_stride : 0);
  const float w = expert_weight != nullptr ? expert_weight[slot] : 1.f;
  // Four rows per warp pass: a down row (1,408 or 2,816 wide) is short, and with two rows a lane
  // has too few loads in flight to stream at the SM's share of the bandwidth (the gate/up tiles
  // keep four rows of 2,048 in flight). Sweep 43: 2.427 ms against 2.472 with two (sweep 29, on the
  // kernels of part 6, had measured it slower: 2.664 against 2.568).
  constexpr int kDownRowsPerPass = 4;
  fd_gemv_rows<fd_global_weights, kDownRowsPerPass>(down, inter, act_s, row_begin, row_end, [&](int r, float dot) {
    if (fd_lane() == 0) fd_atomic_add_f32(h_out + r, w * dot);
  });
}

#ifndef FD_NO_STANDALONE
// blockIdx.y = slot; act is [n_slots, inter].
template <class Act>
__global__ void fd_kernel_down_accum(const fd_bf16* down_w, long long expert_stride, const int* expert_idx,
                                     const float* expert_weight, const Act* act, int inter, int hidden,
                                     int rows_per_tile, float* h_out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(hidden, rows_per_tile, &r0, &r1);
  fd_task_down_accum(down_w, expert_stride, expert_idx, expert_weight, blockIdx.y,
                     act + static_cast<size_t>(blockIdx.y) * inter, inter, r0, r1, h_out, fd_smem);
}

FD_EXPORT int fd_launch_down_accum(const void* down_w, long long expert_stride, const int* expert_idx,
                                   const float* expert_weight, int n_slots, const void* act, int inter, int hidden,
                                   int rows_per_tile, float* h_out, int f32, void* stream) {
  const int smem = inter * (f32 ? 4 : 2);
  if (inter % kVecElems || rows_per_tile <= 0 || n_slots <= 0 || smem > 48 * 1024) return -1;
  const dim3 grid((hidden + rows_per_tile - 1) / rows_per_tile, n_slots);
  const fd_bf16* w = static_cast<const fd_bf16*>(down_w);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_down_accum<<<grid, kTaskThreads, smem, s>>>(w, expert_stride, expert_idx, expert_weight,
                                                          static_cast<const float*>(act), inter, hidden, rows_per_tile,
                                                          h_out);
  else
    fd_kernel_down_accum<<<grid, kTaskThreads, smem, s>>>(w, expert_stride, expert_idx, expert_weight,
                                                          static_cast<const fd_bf16*>(act), inter, hidden,
                                                          rows_per_tile, h_out);
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kind: expert down tile + weighted accumulate + residual, deterministic (no atomics): the
// tile owns rows [row_begin, row_end) of the hidden vector and sums every contribution itself,
// in a fixed order:
//   routed[r] = sum_s topk_weight[s] * bf16(down[e_s][r] . act[s])   (s = 0..n_slots-1, fp32)
//   out[r]    = bf16(residual[r] + bf16(bf16(routed[r]) + bf16(shared_down[r] . shared_act)))
// down_w is HF's experts.down_proj [E, hidden, inter]; e_s = expert_idx[s]. shared_down is the
// shared experts' down_proj [hidden, shared_inter] (or the dense layer-0 MLP's, with
// n_slots = 0). HF accumulates the routed experts in bf16 one expert at a time
// (index_add_); we accumulate in fp32 and round once.
#include "common.h"

__host__ __device__ constexpr int fd_expert_down_smem_bytes(int n_slots, int inter, int shared_inter) {
  return (n_slots * inter + shared_inter) * 2;
}

__device__ void fd_task_expert_down(const fd_bf16* down_w, const int* expert_idx, const float* topk_weight,
                                    int n_slots, const fd_bf16* act, int inter, const fd_bf16* shared_down,
                                    const fd_bf16* shared_act, int shared_inter, const fd_bf16* residual, int hidden,
                                    int row_begin, int row_end, fd_bf16* out, void* smem) {
  fd_bf16* act_s = static_cast<fd_bf16*>(smem);  // [n_slots * inter] then [shared_inter]
  fd_bf16* shared_act_s = act_s + n_slots * inter;
  for (int v = threadIdx.x; v < n_slots * inter / kVecElems; v += blockDim.x)
    fd_store16(act_s + v * kVecElems, fd_load16(act + v * kVecElems));
  for (int v = threadIdx.x; v < shared_inter / kVecElems; v += blockDim.x)
    fd_store16(shared_act_s + v * kVecElems, fd_load16(shared_act + v * kVecElems));
  __syncthreads();
  for (int r = row_begin + fd_warp(); r < row_end; r += fd_num_warps()) {
    float routed = 0.f;
    // Two experts per pass: twice the loads in flight on a 1408-wide row.
    for (int s = 0; s < n_slots; s += 2) {
      const int s2 = min(s + 1, n_slots - 1);
      const fd_bf16* rows[2] = {down_w + (static_cast<size_t>(expert_idx[s]) * hidden + r) * inter,
                                down_w + (static_cast<size_t>(expert_idx[s2]) * hidden + r) * inter};
      const fd_bf16* xs[2] = {act_s + s * inter, act_s + s2 * inter};
      float dots[2];
      fd_warp_rows_dot<2>(rows, xs, inter, dots);
      routed += topk_weight[s] * fd_round_bf16(dots[0]);
      if (s2 != s) routed += topk_weight[s2] * fd_round_bf16(dots[1]);
    }
    float shared = 0.f;
    if (shared_inter > 0) {
      const fd_bf16* rows[1] = {shared_down + static_cast<size_t>(r) * shared_inter};
      const fd_bf16* xs[1] = {shared_act_s};
      float dots[1];
      fd_warp_rows_dot<1>(rows, xs, shared_inter, dots);
      shared = fd_round_bf16(dots[0]);
    }
    if (fd_lane() == 0) {
      const float mlp = n_slots > 0 ? fd_round_bf16(fd_round_bf16(routed) + shared) : shared;
      out[r] = fd_float_to_bf16(fd_bf16_to_float(residual[r]) + mlp);
    }
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_expert_down(const fd_bf16* down_w, const int* expert_idx, const float* topk_weight,
                                      int n_slots, const fd_bf16* act, int inter, const fd_bf16* shared_down,
                                      const fd_bf16* shared_act, int shared_inter, const fd_bf16* residual,
                                      int hidden, int rows_per_tile, fd_bf16* out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(hidden, rows_per_tile, &r0, &r1);
  fd_task_expert_down(down_w, expert_idx, topk_weight, n_slots, act, inter, shared_down, shared_act, shared_inter,
                      residual, hidden, r0, r1, out, fd_smem);
}

FD_EXPORT int fd_launch_expert_down(const void* down_w, const int* expert_idx, const float* topk_weight, int n_slots,
                                    const void* act, int inter, const void* shared_down, const void* shared_act,
                                    int shared_inter, const void* residual, int hidden, int rows_per_tile, void* out,
                                    void* stream) {
  const int smem = fd_expert_down_smem_bytes(n_slots, inter, shared_inter);
  if (inter % kVecElems || shared_inter % kVecElems || rows_per_tile <= 0 || smem > 48 * 1024) return -1;
  fd_kernel_expert_down<<<(hidden + rows_per_tile - 1) / rows_per_tile, kTaskThreads, smem,
                          static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(down_w), expert_idx, topk_weight, n_slots, static_cast<const fd_bf16*>(act), inter,
      static_cast<const fd_bf16*>(shared_down), static_cast<const fd_bf16*>(shared_act), shared_inter,
      static_cast<const fd_bf16*>(residual), hidden, rows_per_tile, static_cast<fd_bf16*>(out));
  return static_cast<int>(fd_get_last_error());
}
#endif

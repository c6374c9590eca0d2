// Task kind: expert down tile + weighted accumulate, in two forms.
//
// fd_task_expert_down (deterministic, no atomics): the tile owns rows [row_begin, row_end) of the
// hidden vector and sums every contribution itself, in slot order (ascending expert index when
// the router wrote the slots, as HF's expert loop adds them):
//   routed[r] = sum_s topk_weight[s] * down[e_s][r] . act[s]            (s = 0..n_slots-1)
//   out[r]    = residual[r] + (routed[r] + shared_down[r] . shared_act)
// with every stored value rounded as Act (bf16: each expert's down output, the routed sum, the
// MLP output and the residual sum rounded, as HF; HF adds the experts in bf16 one at a time, we
// add them in fp32 and round once). down_w is HF's experts.down_proj [E, hidden, inter];
// e_s = expert_idx[s]; shared_down is the shared experts' down_proj [hidden, shared_inter] (or the
// dense layer-0 MLP's, with n_slots = 0). Needs every slot's gate/up done before it starts.
//
// fd_task_down_accum (the task graph's DOWN_ACCUM and EXPERT_DOWN_ACCUM): one slot's rows added
// into the fp32 sum h_out with atomics, h_out[r] += w * down[e][r] . act (w = expert_weight[slot],
// or 1 without expert_idx), so a slot's down tiles start as soon as its own gate/up is done; the
// order of the additions, and the sum's last bits, vary from run to run.
#include "common.h"

template <class Act>
__host__ __device__ constexpr int fd_expert_down_smem_bytes(int n_slots, int inter, int shared_inter) {
  return (n_slots * inter + shared_inter) * sizeof(Act);
}

template <class Act>
__device__ void fd_task_expert_down(const fd_bf16* down_w, const int* expert_idx, const float* topk_weight,
                                    int n_slots, const Act* act, int inter, const fd_bf16* shared_down,
                                    const Act* shared_act, int shared_inter, const Act* residual, int hidden,
                                    int row_begin, int row_end, Act* out, void* smem) {
  Act* act_s = static_cast<Act*>(smem);  // [n_slots * inter] then [shared_inter]
  Act* shared_act_s = act_s + n_slots * inter;
  fd_stage(act, n_slots * inter, act_s);
  fd_stage(shared_act, shared_inter, shared_act_s);
  for (int r = row_begin + fd_warp(); r < row_end; r += fd_num_warps()) {
    float routed = 0.f;
    // Two experts per pass: twice the loads in flight on a 1408-wide row.
    for (int s = 0; s < n_slots; s += 2) {
      const int s2 = min(s + 1, n_slots - 1);
      const fd_bf16* rows[2] = {down_w + (static_cast<size_t>(expert_idx[s]) * hidden + r) * inter,
                                down_w + (static_cast<size_t>(expert_idx[s2]) * hidden + r) * inter};
      const Act* xs[2] = {act_s + s * inter, act_s + s2 * inter};
      float dots[2];
      fd_warp_rows_dot<2>(rows, xs, inter, dots);
      routed += topk_weight[s] * fd_as_stored<Act>(dots[0]);
      if (s2 != s) routed += topk_weight[s2] * fd_as_stored<Act>(dots[1]);
    }
    float shared = 0.f;
    if (shared_inter > 0) {
      const fd_bf16* rows[1] = {shared_down + static_cast<size_t>(r) * shared_inter};
      const Act* xs[1] = {shared_act_s};
      float dots[1];
      fd_warp_rows_dot<1>(rows, xs, shared_inter, dots);
      shared = fd_as_stored<Act>(dots[0]);
    }
    if (fd_lane() == 0) {
      const float mlp = n_slots > 0 ? fd_as_stored<Act>(fd_as_stored<Act>(routed) + shared) : shared;
      out[r] = fd_store_as<Act>(fd_to_float(residual[r]) + mlp);
    }
  }
}

template <class Act>
__device__ void fd_task_down_accum(const fd_bf16* down_w, long long expert_stride, const int* expert_idx,
                                   const float* expert_weight, int slot, const Act* act, int inter, int row_begin,
                                   int row_end, float* h_out, void* smem) {
  Act* act_s = static_cast<Act*>(smem);
  fd_stage(act, inter, act_s);
  const fd_bf16* down = down_w + (expert_idx != nullptr ? expert_idx[slot] * expert_stride : 0);
  const float w = expert_weight != nullptr ? expert_weight[slot] : 1.f;
  fd_gemv_rows(down, inter, act_s, row_begin, row_end, [&](int r, float dot) {
    if (fd_lane() == 0) fd_atomic_add_f32(h_out + r, w * dot);
  });
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_expert_down(const fd_bf16* down_w, const int* expert_idx, const float* topk_weight,
                                      int n_slots, const Act* act, int inter, const fd_bf16* shared_down,
                                      const Act* shared_act, int shared_inter, const Act* residual, int hidden,
                                      int rows_per_tile, Act* out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(hidden, rows_per_tile, &r0, &r1);
  fd_task_expert_down(down_w, expert_idx, topk_weight, n_slots, act, inter, shared_down, shared_act, shared_inter,
                      residual, hidden, r0, r1, out, fd_smem);
}

template <class Act>
static int fd_launch_expert_down_as(const void* down_w, const int* expert_idx, const float* topk_weight, int n_slots,
                                    const void* act, int inter, const void* shared_down, const void* shared_act,
                                    int shared_inter, const void* residual, int hidden, int rows_per_tile, void* out,
                                    void* stream) {
  const int smem = fd_expert_down_smem_bytes<Act>(n_slots, inter, shared_inter);
  if (smem > 48 * 1024) return -1;
  fd_kernel_expert_down<Act><<<(hidden + rows_per_tile - 1) / rows_per_tile, kTaskThreads, smem,
                               static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(down_w), expert_idx, topk_weight, n_slots, static_cast<const Act*>(act), inter,
      static_cast<const fd_bf16*>(shared_down), static_cast<const Act*>(shared_act), shared_inter,
      static_cast<const Act*>(residual), hidden, rows_per_tile, static_cast<Act*>(out));
  return static_cast<int>(fd_get_last_error());
}

FD_EXPORT int fd_launch_expert_down(const void* down_w, const int* expert_idx, const float* topk_weight, int n_slots,
                                    const void* act, int inter, const void* shared_down, const void* shared_act,
                                    int shared_inter, const void* residual, int hidden, int rows_per_tile, void* out,
                                    int f32, void* stream) {
  if (inter % kVecElems || shared_inter % kVecElems || rows_per_tile <= 0) return -1;
  return f32 ? fd_launch_expert_down_as<float>(down_w, expert_idx, topk_weight, n_slots, act, inter, shared_down,
                                               shared_act, shared_inter, residual, hidden, rows_per_tile, out, stream)
             : fd_launch_expert_down_as<fd_bf16>(down_w, expert_idx, topk_weight, n_slots, act, inter, shared_down,
                                                 shared_act, shared_inter, residual, hidden, rows_per_tile, out,
                                                 stream);
}

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

// Task kind: expert gate/up tile. act[r] = SiLU(gate[r] . x_norm) * (up[r] . x_norm) for rows
// [row_begin, row_end) of one expert's intermediate vector, x_norm = RMSNorm(x) with
// post_attention_layernorm (recomputed per block). The expert is read at run time:
// e = expert_idx[slot] (the router's output), gate rows at gate_w + e*expert_stride, up rows at
// up_w + e*expert_stride. HF's gate_up_proj [E, 2I, hidden]: gate_w = base, up_w = base + I*hidden,
// expert_stride = 2I*hidden. The shared experts and the dense layer-0 MLP are the same task
// with expert_idx == nullptr (their separate gate_proj/up_proj weights, stride unused).
// Stored as Act. bf16 rounds as HF does: gate and up rounded (nn.Linear output), SiLU(gate)
// rounded, the product rounded; fp32 keeps every value as computed.
// This is also the task graph's GATE_UP (expert_idx == nullptr) and EXPERT_GATE_UP.
#include "common.h"

template <class Act>
__host__ __device__ constexpr int fd_expert_gate_up_smem_bytes(int hidden) { return hidden * sizeof(Act); }

template <class Act>
__device__ void fd_task_expert_gate_up(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                       const fd_bf16* up_w, long long expert_stride, const int* expert_idx, int slot,
                                       int hidden, int row_begin, int row_end, Act* act, void* smem) {
  Act* xs = static_cast<Act*>(smem);
  const long long offset = expert_idx != nullptr ? expert_idx[slot] * expert_stride : 0;
  fd_rmsnorm(x, norm_weight, eps, hidden, xs);
  fd_gate_up_rows(xs, gate_w + offset, up_w + offset, hidden, row_begin, row_end, act);
}

#ifndef FD_NO_STANDALONE
// blockIdx.y = slot; each slot's act vector is inter elements long.
template <class Act>
__global__ void fd_kernel_expert_gate_up(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                         const fd_bf16* up_w, long long expert_stride, const int* expert_idx,
                                         int hidden, int inter, int rows_per_tile, Act* act) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(inter, rows_per_tile, &r0, &r1);
  fd_task_expert_gate_up(x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx, blockIdx.y, hidden, r0, r1,
                         act + static_cast<size_t>(blockIdx.y) * inter, fd_smem);
}

template <class Act>
static int fd_launch_expert_gate_up_as(const void* x, const void* norm_weight, float eps, const void* gate_w,
                                       const void* up_w, long long expert_stride, const int* expert_idx, int n_slots,
                                       int hidden, int inter, int rows_per_tile, void* act, void* stream) {
  const dim3 grid((inter + rows_per_tile - 1) / rows_per_tile, n_slots);
  fd_kernel_expert_gate_up<Act><<<grid, kTaskThreads, fd_expert_gate_up_smem_bytes<Act>(hidden),
                                  static_cast<fd_stream_t>(stream)>>>(
      static_cast<const Act*>(x), static_cast<const fd_bf16*>(norm_weight), eps, static_cast<const fd_bf16*>(gate_w),
      static_cast<const fd_bf16*>(up_w), expert_stride, expert_idx, hidden, inter, rows_per_tile,
      static_cast<Act*>(act));
  return static_cast<int>(fd_get_last_error());
}

FD_EXPORT int fd_launch_expert_gate_up(const void* x, const void* norm_weight, float eps, const void* gate_w,
                                       const void* up_w, long long expert_stride, const int* expert_idx, int n_slots,
                                       int hidden, int inter, int rows_per_tile, void* act, int f32, void* stream) {
  if (hidden % kVecElems || rows_per_tile <= 0 || n_slots <= 0) return -1;
  return f32 ? fd_launch_expert_gate_up_as<float>(x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx,
                                                  n_slots, hidden, inter, rows_per_tile, act, stream)
             : fd_launch_expert_gate_up_as<fd_bf16>(x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx,
                                                    n_slots, hidden, inter, rows_per_tile, act, stream);
}
#endif

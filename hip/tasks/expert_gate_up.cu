// Task kind: expert gate/up tile. act[r] = SiLU(gate[r] . x_norm) * (up[r] . x_norm) for rows
// [row_begin, row_end) of one expert's intermediate vector, x_norm = RMSNorm(x) with
// post_attention_layernorm (recomputed per block). The expert is read at run time:
// e = expert_idx[slot] (the router's output), gate rows at gate_w + e*expert_stride, up rows at
// up_w + e*expert_stride. HF's gate_up_proj [E, 2I, hidden]: gate_w = base, up_w = base + I*hidden,
// expert_stride = 2I*hidden. The shared experts and the dense layer-0 MLP are the same task
// with expert_idx == nullptr (their separate gate_proj/up_proj weights, stride unused).
// Rounding as HF in bf16: gate and up rounded to bf16 (nn.Linear output), SiLU(gate) rounded,
// the product rounded.
#include "common.h"

__host__ __device__ constexpr int fd_expert_gate_up_smem_bytes(int hidden) { return hidden * 2; }

__device__ void fd_task_expert_gate_up(const fd_bf16* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                       const fd_bf16* up_w, long long expert_stride, const int* expert_idx, int slot,
                                       int hidden, int row_begin, int row_end, fd_bf16* act, void* smem) {
  fd_bf16* xs = static_cast<fd_bf16*>(smem);
  const long long offset = expert_idx != nullptr ? expert_idx[slot] * expert_stride : 0;
  fd_rmsnorm_bf16(x, norm_weight, eps, hidden, xs);
  constexpr int kRowsPerPass = 2;  // gate and up rows of 2 intermediate rows: 4 rows in flight
  for (int r = row_begin + kRowsPerPass * fd_warp(); r < row_end; r += kRowsPerPass * fd_num_warps()) {
    const fd_bf16* rows[2 * kRowsPerPass];
    const fd_bf16* xv[2 * kRowsPerPass];
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k) {
      const size_t row = static_cast<size_t>(min(r + k, row_end - 1)) * hidden;
      rows[2 * k] = gate_w + offset + row;
      rows[2 * k + 1] = up_w + offset + row;
      xv[2 * k] = xv[2 * k + 1] = xs;
    }
    float dots[2 * kRowsPerPass];
    fd_warp_rows_dot<2 * kRowsPerPass>(rows, xv, hidden, dots);
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k)
      if (fd_lane() == 0 && r + k < row_end) {
        const float g = fd_round_bf16(dots[2 * k]), u = fd_round_bf16(dots[2 * k + 1]);
        act[r + k] = fd_float_to_bf16(fd_round_bf16(fd_silu(g)) * u);
      }
  }
}

#ifndef FD_NO_STANDALONE
// blockIdx.y = slot; each slot's act vector is inter elements long.
__global__ void fd_kernel_expert_gate_up(const fd_bf16* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                         const fd_bf16* up_w, long long expert_stride, const int* expert_idx,
                                         int hidden, int inter, int rows_per_tile, fd_bf16* act) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(inter, rows_per_tile, &r0, &r1);
  fd_task_expert_gate_up(x, norm_weight, eps, gate_w, up_w, expert_stride, expert_idx, blockIdx.y, hidden, r0, r1,
                         act + static_cast<size_t>(blockIdx.y) * inter, fd_smem);
}

FD_EXPORT int fd_launch_expert_gate_up(const void* x, const void* norm_weight, float eps, const void* gate_w,
                                       const void* up_w, long long expert_stride, const int* expert_idx, int n_slots,
                                       int hidden, int inter, int rows_per_tile, void* act, void* stream) {
  if (hidden % kVecElems || rows_per_tile <= 0 || n_slots <= 0) return -1;
  const dim3 grid((inter + rows_per_tile - 1) / rows_per_tile, n_slots);
  fd_kernel_expert_gate_up<<<grid, kTaskThreads, fd_expert_gate_up_smem_bytes(hidden),
                             static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(x), static_cast<const fd_bf16*>(norm_weight), eps,
      static_cast<const fd_bf16*>(gate_w), static_cast<const fd_bf16*>(up_w), expert_stride, expert_idx, hidden, inter,
      rows_per_tile, static_cast<fd_bf16*>(act));
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kinds: GATE_UP_DOWN and EXPERT_GATE_UP_DOWN, one slice of an MLP's intermediate rows from its
// input to its output (split-K over the intermediate dimension):
//   act[r]     = SiLU(gate[r] . x_norm) * (up[r] . x_norm)            r in [row_begin, row_end)
//   partial[o] = weight * sum_r down[o][r] * act[r]                    o in [0, hidden)
// x_norm = RMSNorm(x) with post_attention_layernorm. The slice's act never leaves shared memory,
// so one task streams gate, up AND down rows and no stage waits for a whole expert's gate/up
// before its down rows start: the tasks of all slots and slices form ONE balanced stage. The
// partial rows are summed by SUM_PARTIALS in a fixed order (deterministic).
// Routed (EXPERT_GATE_UP_DOWN): the caller resolves e = expert_idx[slot] into the pointers
// (gate = gate_up + e*2I*hidden, up = gate + I*hidden, down = down_proj + e*hidden*I) and
// weight = route_w[slot]. Shared experts (GATE_UP_DOWN): their own matrices, weight 1.
// act is stored as Act (bf16: rounded as HF rounds its gate/up output); the partial is fp32.
#include "common.h"

// Down-row loads in flight per lane: 16 x 16 bytes on 32-wide warps (64 KB per 256-thread block),
// half that per lane on 64-wide ones (as kStreamUnroll: the same bytes per warp-row pass).
constexpr int kDownUnroll = 512 / kWarpSize > 0 ? 512 / kWarpSize : 1;
// The most 16-byte pieces a slice's down row segment may have (256 rows): the narrowest warp.
constexpr int kMaxDownPieces = 32;

template <class Act>
__host__ __device__ constexpr int fd_gate_up_down_smem_bytes(int hidden, int rows) {
  return (hidden + rows) * static_cast<int>(sizeof(Act));
}

// A slice's down row segment (rows x 2 bytes) is read as 16-byte pieces by consecutive lanes and
// summed with shuffles: the number of pieces must be a power of two no wider than the warp.
__host__ __device__ constexpr bool fd_gate_up_down_rows_ok(int rows, int warp_size) {
  const int pieces = rows / kVecElems;
  return rows > 0 && rows % kVecElems == 0 && pieces <= warp_size && pieces <= kMaxDownPieces &&
         (pieces & (pieces - 1)) == 0;
}

template <class Act, class WL = fd_global_weights>
__device__ __forceinline__ void fd_down_batch(const fd_bf16* down, int stride, int hidden, int base, int rows_per_load,
                                              int sub, int piece, fd_vec16 (&w)[kDownUnroll]) {
#pragma unroll
  for (int u = 0; u < kDownUnroll; ++u) {
    const int row = base + u * rows_per_load + sub;
    w[u] = row < hidden ? WL::load(down + static_cast<size_t>(row) * stride + piece * kVecElems) : fd_vec16{0, 0, 0, 0};
  }
}

template <class Act>
__device__ void fd_task_gate_up_down(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                     const fd_bf16* up_w, const fd_bf16* down_w, int down_stride, float weight,
                                     int hidden, int row_begin, int row_end, float* partial, void* smem) {
  Act* act_s = static_cast<Act*>(smem) + hidden;  // after the task's x_norm
  const int pieces = (row_end - row_begin) / kVecElems;  // lanes per down row
  const int rows_per_load = kWarpSize / pieces;
  const int piece = fd_lane() % pieces, sub = fd_lane() / pieces;
  const int warp_rows = rows_per_load * kDownUnroll;
  const fd_bf16* down = down_w + row_begin;
  Act* xs = static_cast<Act*>(smem);
  fd_rmsnorm(x, norm_weight, eps, hidden, xs);
  fd_gate_up_rows(xs, gate_w, up_w, hidden, row_begin, row_end, act_s - row_begin);
  // The first down rows do not depend on act: in flight while the block meets at the barrier
  // (issued after the gate/up rows, whose registers are free by then).
  fd_vec16 w[kDownUnroll];
  int base = fd_warp() * warp_rows;
  fd_down_batch<Act>(down, down_stride, hidden, base, rows_per_load, sub, piece, w);
  __syncthreads();
  float a[8];
  fd_load_x8(act_s, piece, a);
  for (; base < hidden; base += fd_num_warps() * warp_rows) {
#pragma unroll
    for (int u = 0; u < kDownUnroll; ++u) {
      float dot = fd_dot8(w[u], a);
      // A fixed trip count, so the loop over u unrolls and w[] stays in registers.
#pragma unroll
      for (int m = 1; m < kMaxDownPieces; m <<= 1)
        if (m < pieces) dot += fd_shfl_xor(dot, m);
      const int row = base + u * rows_per_load + sub;
      if (piece == 0 && row < hidden) partial[row] = weight * dot;
    }
    const int next = base + fd_num_warps() * warp_rows;
    if (next < hidden) fd_down_batch<Act>(down, down_stride, hidden, next, rows_per_load, sub, piece, w);
  }
}

#ifndef FD_NO_STANDALONE
// blockIdx.x = slice, blockIdx.y = slot; partial row (slot * slices + slice) of [n_slots * slices, hidden].
// expert_idx == nullptr: one MLP (gate_w, up_w, down_w its matrices), weight 1.
template <class Act>
__global__ void __launch_bounds__(kTaskThreads) fd_kernel_gate_up_down(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                       const fd_bf16* up_w, const fd_bf16* down_w, const int* expert_idx,
                                       const float* expert_weight, int hidden, int inter, int rows_per_tile,
                                       float* partials) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(inter, rows_per_tile, &r0, &r1);
  const int slot = blockIdx.y;
  const long long e = expert_idx != nullptr ? expert_idx[slot] : 0;
  const size_t gate_up_stride = 2ull * inter * hidden, down_stride = static_cast<size_t>(hidden) * inter;
  fd_task_gate_up_down(x, norm_weight, eps, gate_w + e * gate_up_stride, up_w + e * gate_up_stride,
                       down_w + e * down_stride, inter, expert_weight != nullptr ? expert_weight[slot] : 1.f, hidden,
                       r0, r1, partials + (static_cast<size_t>(slot) * gridDim.x + blockIdx.x) * hidden, fd_smem);
}

// rows_per_tile: every slice must suit the down pass (fd_gate_up_down_rows_ok), the last one too.
FD_EXPORT int fd_launch_gate_up_down(const void* x, const void* norm_weight, float eps, const void* gate_w,
                                     const void* up_w, const void* down_w, const int* expert_idx,
                                     const float* expert_weight, int n_slots, int hidden, int inter, int rows_per_tile,
                                     float* partials, int f32, void* stream) {
  const int last = inter - (inter - 1) / rows_per_tile * rows_per_tile;
  if (hidden % kVecElems || n_slots <= 0 || rows_per_tile <= 0 || !fd_gate_up_down_rows_ok(rows_per_tile, kWarpSize) ||
      !fd_gate_up_down_rows_ok(last, kWarpSize))
    return -1;
  const dim3 grid((inter + rows_per_tile - 1) / rows_per_tile, n_slots);
  auto s = static_cast<fd_stream_t>(stream);
  const auto* g = static_cast<const fd_bf16*>(gate_w);
  const auto* u = static_cast<const fd_bf16*>(up_w);
  const auto* d = static_cast<const fd_bf16*>(down_w);
  const auto* nw = static_cast<const fd_bf16*>(norm_weight);
  if (f32)
    fd_kernel_gate_up_down<float><<<grid, kTaskThreads, fd_gate_up_down_smem_bytes<float>(hidden, rows_per_tile), s>>>(
        static_cast<const float*>(x), nw, eps, g, u, d, expert_idx, expert_weight, hidden, inter, rows_per_tile,
        partials);
  else
    fd_kernel_gate_up_down<fd_bf16>
        <<<grid, kTaskThreads, fd_gate_up_down_smem_bytes<fd_bf16>(hidden, rows_per_tile), s>>>(
            static_cast<const fd_bf16*>(x), nw, eps, g, u, d, expert_idx, expert_weight, hidden, inter, rows_per_tile,
            partials);
  return static_cast<int>(fd_get_last_error());
}
#endif

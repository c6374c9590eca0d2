// Task kinds: GATE_UP_DOWN and EXPERT_GATE_UP_DOWN, one slice of an MLP's intermediate rows from its
// input to its output (split-K over the intermediate dimension):
//   act[r]     = SiLU(gate[r] . x_norm) * (up[r] . x_norm)            r in [row_begin, row_end)
//   partial[o] = weight * sum_r down_t[r][o] * act[r]                  o in [0, hidden)
// x_norm = RMSNorm(x) with post_attention_layernorm; down_t is the down matrix transposed (the graph
// derives it on the host), so the slice's band of down columns is rows [row_begin, row_end) of
// down_t: contiguous, streamed whole. The act never leaves shared memory, so one task streams gate,
// up AND down rows and no down tile waits for a whole expert's gate/up: the tasks of every slot and
// slice form ONE balanced stage. SUM_PARTIALS adds the partial rows in a fixed order; or, in the
// fixed-point form, every slice adds its partial into the layer's one int64 row (SUM_FIXED_POINT).
// Routed (EXPERT_GATE_UP_DOWN): the caller resolves e = expert_idx[slot] into the pointers
// (gate = gate_up + e*2I*hidden, up = gate + I*hidden, down_t = down_t + e*I*hidden) and
// weight = route_w[slot]. Shared experts (GATE_UP_DOWN): their own matrices, weight 1.
// act is stored as Act (bf16: rounded as HF rounds its gate/up output); the partial is fp32.
#include "common.h"

// Down rows in flight per thread on the global-memory path (16 bytes each): 8 on 32-wide warps,
// 32 KB per 256-thread block; half that on 64-wide ones (as kStreamUnroll). More made the
// megakernel spill on sm_90a; where it can, the runtime stages the slice's down rows instead.
constexpr int kDownUnroll = 256 / kWarpSize > 0 ? 256 / kWarpSize : 1;

// Where a slice's partial goes: its own fp32 row, or (fixed_point) added into the layer's int64 accumulator
// row in units of 2^-FD_FIXED_POINT_BITS: x * 2^32 is exact in fp32, rounded to the nearest integer, and
// integer adds give the same bits in any order, so slices may finish in any order (or be handed out at run
// time) and the sum stays deterministic.
__device__ __forceinline__ long long fd_to_fixed_point(float x) {
  return __float2ll_rn(x * static_cast<float>(1ull << FD_FIXED_POINT_BITS));
}

struct fd_slice_out {
  void* row;
  bool fixed_point;
  __device__ __forceinline__ void put(int v, const float x[kVecElems]) const {
    if (!fixed_point) return fd_store_x8(static_cast<float*>(row), v, x);
    unsigned long long* acc = static_cast<unsigned long long*>(row) + v * kVecElems;
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) fd_red_add_u64(acc + j, static_cast<unsigned long long>(fd_to_fixed_point(x[j])));
  }
};

// A pool's piece (EXPERT_POOL, local_sum): its fixed-point partial summed into the taker's own int64 row in
// shared memory (each thread its own columns, as the down pass hands them out: exact adds, no atomics), which
// fd_pool_flush adds into the layer's accumulator once the pool is empty. first: the taker's first piece,
// whose partial starts the row. local == nullptr: as fd_slice_out.
struct fd_pool_out {
  fd_slice_out out;
  long long* local;
  bool first;
  __device__ __forceinline__ void put(int v, const float x[kVecElems]) const {
    if (local == nullptr) return out.put(v, x);
    long long* l = local + v * kVecElems;
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) l[j] = (first ? 0 : l[j]) + fd_to_fixed_point(x[j]);
  }
};

// The taker's row into the accumulator: each thread its own columns (those its puts wrote), so no barrier.
__device__ __forceinline__ void fd_pool_flush(const long long* local, void* acc, int hidden) {
  for (int v = threadIdx.x; v < hidden / kVecElems; v += blockDim.x)
#pragma unroll
    for (int j = 0; j < kVecElems; ++j)
      fd_red_add_u64(static_cast<unsigned long long*>(acc) + v * kVecElems + j,
                     static_cast<unsigned long long>(local[v * kVecElems + j]));
}

// x_norm, act, then (through the stage) the fp32 sums between chunks.
template <class Act>
__host__ __device__ constexpr int fd_gate_up_down_smem_bytes(int hidden, int rows) {
  return (hidden + rows) * static_cast<int>(sizeof(Act)) + 16 + hidden * 4;
}

// The standalone pool kernel's own int64 row (fd_pool_out's local) after that, 8-byte aligned.
template <class Act>
__host__ __device__ constexpr int fd_expert_pool_local_at(int hidden, int rows) {
  return (fd_gate_up_down_smem_bytes<Act>(hidden, rows) + 7) / 8 * 8;
}

// kDownUnroll rows from row r of down_t at 8 columns (16 bytes) from column 8v; rows past `rows`
// read as zero.
__device__ __forceinline__ void fd_down_rows(const fd_bf16* down_t, int hidden, int rows, int r, int v,
                                             fd_vec16 (&w)[kDownUnroll]) {
  const fd_bf16* p = down_t + static_cast<size_t>(r) * hidden + v * kVecElems;
#pragma unroll
  for (int u = 0; u < kDownUnroll; ++u, p += hidden) w[u] = r + u < rows ? fd_load_stream16(p) : fd_vec16{0, 0, 0, 0};
}

// The down pass through the stage: the slice's down_t rows in chunks of stage_rows, the first copied by the
// runtime while the gate/up rows streamed, each next one by bulk copy once the block has read the one before
// (stage.issue(src, rows) by one thread; stage.wait() by every thread). No register holds a row in flight,
// and a whole chunk (128 KB) is in flight at once. The sums lie in shared memory between chunks (each
// thread its own columns), so every column adds the rows in order, as the global-memory path does.
template <class Act, class Stage, class Out>
__device__ __forceinline__ void fd_down_through_stage(const fd_bf16* down, const Act* act_s, int rows, int hidden,
                                                      float weight, Stage& stage, float* sums_s, const Out& out) {
  const int n_vec = hidden / kVecElems;
  for (int c0 = 0; c0 < rows; c0 += stage.rows) {
    const int n = min(stage.rows, rows - c0);
    stage.wait();
    for (int v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float acc[kVecElems] = {};
      if (c0 > 0) fd_load_x8(sums_s, v, acc);
#pragma unroll 8
      for (int r = 0; r < n; ++r) {
        float f[kVecElems];
        fd_unpack8(fd_load_shared16(stage.base + static_cast<size_t>(r) * hidden + v * kVecElems), f);
        const float a = fd_to_float(act_s[c0 + r]);
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) acc[j] = fmaf(f[j], a, acc[j]);
      }
      if (c0 + n < rows) {
        fd_store_x8(sums_s, v, acc);
      } else {
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) acc[j] *= weight;
        out.put(v, acc);
      }
    }
    if (c0 + n < rows) {
      __syncthreads();  // every thread is done with the chunk: the next one may overwrite it
      if (threadIdx.x == 0) stage.issue(down + static_cast<size_t>(c0 + n) * hidden, min(stage.rows, rows - c0 - n));
    }
  }
}

// stage.rows > 0: the runtime is copying the slice's first stage.rows down_t rows into stage.base (the rest
// follow through it, fd_down_through_stage); 0: the down rows stream from global memory. normed: x_norm is
// already in smem (a pool's later pieces: the same x, and nothing since wrote the first hidden Acts).
template <class Act, class Stage, class Out>
__device__ void fd_task_gate_up_down(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w,
                                     const fd_bf16* up_w, const fd_bf16* down_t, Stage& stage, float weight,
                                     int hidden, int row_begin, int row_end, const Out& out, void* smem,
                                     bool normed = false) {
  Act* xs = static_cast<Act*>(smem);
  Act* act_s = xs + hidden;
  const int rows = row_end - row_begin, n_vec = hidden / kVecElems;
  if (!normed) fd_rmsnorm(x, norm_weight, eps, hidden, xs);
  fd_gate_up_rows(xs, gate_w, up_w, hidden, row_begin, row_end, act_s - row_begin);
  const fd_bf16* down = down_t + static_cast<size_t>(row_begin) * hidden;
  if (stage.rows > 0) {
    __syncthreads();
    // the sums between chunks after act, 16-byte aligned
    float* sums_s = reinterpret_cast<float*>(act_s + ((rows * static_cast<int>(sizeof(Act)) + 15) / 16) * 16 / sizeof(Act));
    return fd_down_through_stage(down, act_s, rows, hidden, weight, stage, sums_s, out);
  }
  // The first down rows do not depend on act: in flight while the block meets at the barrier
  // (issued after the gate/up rows, whose registers are free by then).
  fd_vec16 w[kDownUnroll];
  int v = threadIdx.x;
  if (v < n_vec) fd_down_rows(down, hidden, rows, 0, v, w);
  __syncthreads();
  for (bool first = true; v < n_vec; v += blockDim.x, first = false) {
    float acc[kVecElems] = {};
    for (int r = 0; r < rows; r += kDownUnroll) {
      if (!first || r > 0) fd_down_rows(down, hidden, rows, r, v, w);
#pragma unroll
      for (int u = 0; u < kDownUnroll; ++u) {
        float f[kVecElems];
        fd_unpack8(w[u], f);  // rows past the slice are zeros: they add nothing
        const float a = r + u < rows ? fd_to_float(act_s[r + u]) : 0.f;
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) acc[j] = fmaf(f[j], a, acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) acc[j] *= weight;
    out.put(v, acc);
  }
}

// EXPERT_POOL: every routed slot's rows in pieces of piece_rows, handed out at run time. A taker takes the
// pool's next count until it passes the step's pieces (the counter is never reset: step s's counts start at
// base = s * (pieces + takers), each taker's last take finding none left). The take is the block's: one
// thread fetch-adds, the barrier before it frees the last piece's shared memory and stage. Returns the
// piece, or a value >= n_pieces when none is left.
__device__ __forceinline__ int fd_pool_take(int* pool, int base) {
  __shared__ int piece;  // one a block: thread 0's take, read by every thread after the barrier
  __syncthreads();
  if (threadIdx.x == 0) piece = fd_atomic_add_relaxed(pool, 1) - base;
  __syncthreads();
  return piece;
}

// No stage: the down rows stream from global memory (the standalone launcher, and AMD).
struct fd_no_down_stage {
  static constexpr int rows = 0;
  const fd_bf16* base = nullptr;
  __device__ void wait() {}
  __device__ void issue(const fd_bf16*, int) {}
};

#ifndef FD_NO_STANDALONE
// blockIdx.x = slice, blockIdx.y = slot; partial row (slot * slices + slice) of [n_slots * slices, hidden],
// or (fixed_point) every slice added into one int64 row of [hidden].
// expert_idx == nullptr: one MLP (gate_w, up_w, down_t its matrices), weight 1.
template <class Act>
__global__ void __launch_bounds__(kTaskThreads) fd_kernel_gate_up_down(
    const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_w, const fd_bf16* up_w,
    const fd_bf16* down_t, const int* expert_idx, const float* expert_weight, int hidden, int inter,
    int rows_per_tile, void* partials, bool fixed_point) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(inter, rows_per_tile, &r0, &r1);
  const int slot = blockIdx.y;
  const long long e = expert_idx != nullptr ? expert_idx[slot] : 0;
  const size_t gate_up_stride = 2ull * inter * hidden, down_stride = static_cast<size_t>(inter) * hidden;
  fd_no_down_stage no_stage;
  fd_task_gate_up_down(x, norm_weight, eps, gate_w + e * gate_up_stride, up_w + e * gate_up_stride,
                       down_t + e * down_stride, no_stage, expert_weight != nullptr ? expert_weight[slot] : 1.f, hidden, r0, r1,
                       fd_slice_out{fixed_point ? partials
                                                : static_cast<float*>(partials) +
                                                      (static_cast<size_t>(slot) * gridDim.x + blockIdx.x) * hidden,
                                    fixed_point},
                       fd_smem);
}

// EXPERT_POOL alone: each block a taker of one pool (step 0), each piece of slot k added in fixed point into
// acc (int64 [hidden]); pool must be zeroed.
template <class Act>
__global__ void __launch_bounds__(kTaskThreads) fd_kernel_expert_pool(
    const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* gate_up, const fd_bf16* down_t,
    const int* expert_idx, const float* expert_weight, int n_slots, int hidden, int inter, int piece_rows,
    int* pool, long long* acc, bool local_sum) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  const int per_slot = (inter + piece_rows - 1) / piece_rows, n_pieces = n_slots * per_slot;
  // the taker's own row after the task's shared memory (fd_launch_expert_pool sizes it)
  long long* local = local_sum ? reinterpret_cast<long long*>(fd_smem + fd_expert_pool_local_at<Act>(hidden, piece_rows))
                               : nullptr;
  fd_no_down_stage no_stage;
  for (bool first = true;; first = false) {
    const int p = fd_pool_take(pool, 0);
    if (p >= n_pieces) {
      if (local != nullptr && !first) fd_pool_flush(local, acc, hidden);
      return;
    }
    const int slot = p / per_slot, r0 = p % per_slot * piece_rows;
    const long long e = expert_idx[slot];
    const fd_bf16* gate = gate_up + e * 2ll * inter * hidden;
    fd_task_gate_up_down(x, norm_weight, eps, gate, gate + static_cast<size_t>(inter) * hidden,
                         down_t + e * inter * hidden, no_stage, expert_weight[slot], hidden, r0,
                         min(r0 + piece_rows, inter), fd_pool_out{fd_slice_out{acc, true}, local, first}, fd_smem,
                         !first);
  }
}

FD_EXPORT int fd_launch_expert_pool(const void* x, const void* norm_weight, float eps, const void* gate_up,
                                    const void* down_t, const int* expert_idx, const float* expert_weight, int n_slots,
                                    int hidden, int inter, int piece_rows, int n_takers, int* pool, long long* acc,
                                    int local_sum, int f32, void* stream) {
  if (hidden % kVecElems || n_slots <= 0 || piece_rows <= 0 || n_takers <= 0) return -1;
  auto s = static_cast<fd_stream_t>(stream);
  const auto* gu = static_cast<const fd_bf16*>(gate_up);
  const auto* d = static_cast<const fd_bf16*>(down_t);
  const auto* nw = static_cast<const fd_bf16*>(norm_weight);
  const int local = local_sum ? hidden * static_cast<int>(sizeof(long long)) : 0;
  if (f32)
    fd_kernel_expert_pool<float>
        <<<n_takers, kTaskThreads, fd_expert_pool_local_at<float>(hidden, piece_rows) + local, s>>>(
            static_cast<const float*>(x), nw, eps, gu, d, expert_idx, expert_weight, n_slots, hidden, inter,
            piece_rows, pool, acc, local_sum != 0);
  else
    fd_kernel_expert_pool<fd_bf16>
        <<<n_takers, kTaskThreads, fd_expert_pool_local_at<fd_bf16>(hidden, piece_rows) + local, s>>>(
            static_cast<const fd_bf16*>(x), nw, eps, gu, d, expert_idx, expert_weight, n_slots, hidden, inter,
            piece_rows, pool, acc, local_sum != 0);
  return static_cast<int>(fd_get_last_error());
}

FD_EXPORT int fd_launch_gate_up_down(const void* x, const void* norm_weight, float eps, const void* gate_w,
                                     const void* up_w, const void* down_t, const int* expert_idx,
                                     const float* expert_weight, int n_slots, int hidden, int inter, int rows_per_tile,
                                     void* partials, int f32, int fixed_point, void* stream) {
  if (hidden % kVecElems || n_slots <= 0 || rows_per_tile <= 0) return -1;
  const dim3 grid((inter + rows_per_tile - 1) / rows_per_tile, n_slots);
  auto s = static_cast<fd_stream_t>(stream);
  const auto* g = static_cast<const fd_bf16*>(gate_w);
  const auto* u = static_cast<const fd_bf16*>(up_w);
  const auto* d = static_cast<const fd_bf16*>(down_t);
  const auto* nw = static_cast<const fd_bf16*>(norm_weight);
  if (f32)
    fd_kernel_gate_up_down<float><<<grid, kTaskThreads, fd_gate_up_down_smem_bytes<float>(hidden, rows_per_tile), s>>>(
        static_cast<const float*>(x), nw, eps, g, u, d, expert_idx, expert_weight, hidden, inter, rows_per_tile,
        partials, fixed_point != 0);
  else
    fd_kernel_gate_up_down<fd_bf16>
        <<<grid, kTaskThreads, fd_gate_up_down_smem_bytes<fd_bf16>(hidden, rows_per_tile), s>>>(
            static_cast<const fd_bf16*>(x), nw, eps, g, u, d, expert_idx, expert_weight, hidden, inter, rows_per_tile,
            partials, fixed_point != 0);
  return static_cast<int>(fd_get_last_error());
}
#endif

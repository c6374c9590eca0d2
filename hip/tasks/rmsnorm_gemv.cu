// Task kinds: RMSNORM_GEMV and O_PROJ_RESIDUAL (the same function). RMSNorm + GEMV tile. Rows [row_begin, row_end) of W (bf16, [rows, n_in]) times
// RMSNorm(x) (recomputed by every block: 2048 elements cost less than a round trip through
// memory), fp32 accumulation, stored as Act (bf16: HF's nn.Linear output, rounded; fp32: kept).
// With residual != nullptr the tile adds it (HF's `residual + hidden_states`); with
// norm_weight == nullptr x is used as is; with out2 != nullptr the result is also written there
// (the graph's O_PROJ_RESIDUAL writes h_attn and starts the sum in h_out); with out_s != nullptr
// row r is also kept at out_s[r - row_begin] (shared memory, for the block's own later use); with
// x_parts > 1 (and no norm) x is x_parts vectors of n_in, added in order. Used for
// q_proj|kv_a_proj (input_layernorm), o_proj (+ residual) and the dense MLP.
#pragma once  // also included by o_proj_router.cu
#include "common.h"

template <class Act>
__host__ __device__ constexpr int fd_rmsnorm_gemv_smem_bytes(int n_in) { return n_in * sizeof(Act); }

template <class Act, class WL = fd_global_weights>
__device__ void fd_task_rmsnorm_gemv(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* W, int n_in,
                                     int row_begin, int row_end, const Act* residual, Act* out, Act* out2,
                                     void* smem, Act* out_s = nullptr, int x_parts = 1) {
  Act* xs = static_cast<Act*>(smem);
  if (norm_weight == nullptr && x_parts > 1)
    fd_stage_sum(x, n_in, x_parts, xs);
  else
    fd_rmsnorm(x, norm_weight, eps, n_in, xs);
  fd_gemv_rows<WL>(W, n_in, xs, row_begin, row_end, [&](int r, float dot) {
    if (fd_lane() != 0) return;
    float y = fd_as_stored<Act>(dot);
    if (residual != nullptr) y += fd_to_float(residual[r]);
    out[r] = fd_store_as<Act>(y);
    if (out2 != nullptr) out2[r] = out[r];
    if (out_s != nullptr) out_s[r - row_begin] = out[r];
  });
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_rmsnorm_gemv(const Act* x, const fd_bf16* norm_weight, float eps, const fd_bf16* W, int n_in,
                                       int n_rows, int rows_per_tile, const Act* residual, Act* out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(n_rows, rows_per_tile, &r0, &r1);
  fd_task_rmsnorm_gemv(x, norm_weight, eps, W, n_in, r0, r1, residual, out, static_cast<Act*>(nullptr), fd_smem);
}

template <class Act>
static int fd_launch_rmsnorm_gemv_as(const void* x, const void* norm_weight, float eps, const void* W, int n_in,
                                     int n_rows, int rows_per_tile, const void* residual, void* out, void* stream) {
  const int tiles = (n_rows + rows_per_tile - 1) / rows_per_tile;
  fd_kernel_rmsnorm_gemv<Act><<<tiles, kTaskThreads, fd_rmsnorm_gemv_smem_bytes<Act>(n_in),
                                static_cast<fd_stream_t>(stream)>>>(
      static_cast<const Act*>(x), static_cast<const fd_bf16*>(norm_weight), eps, static_cast<const fd_bf16*>(W), n_in,
      n_rows, rows_per_tile, static_cast<const Act*>(residual), static_cast<Act*>(out));
  return static_cast<int>(fd_get_last_error());
}

FD_EXPORT int fd_launch_rmsnorm_gemv(const void* x, const void* norm_weight, float eps, const void* W, int n_in,
                                     int n_rows, int rows_per_tile, const void* residual, void* out, int f32,
                                     void* stream) {
  if (n_in % kVecElems || rows_per_tile <= 0 || n_in * 4 > 48 * 1024) return -1;
  return f32 ? fd_launch_rmsnorm_gemv_as<float>(x, norm_weight, eps, W, n_in, n_rows, rows_per_tile, residual, out,
                                                stream)
             : fd_launch_rmsnorm_gemv_as<fd_bf16>(x, norm_weight, eps, W, n_in, n_rows, rows_per_tile, residual, out,
                                                  stream);
}
#endif

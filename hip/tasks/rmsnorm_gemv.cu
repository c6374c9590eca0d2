// Task kind: RMSNorm + GEMV tile. Rows [row_begin, row_end) of W (bf16, [rows, n_in]) times
// RMSNorm(x) (recomputed by every block: 2048 elements cost less than a round trip through
// memory), fp32 accumulation, bf16 output as HF's nn.Linear in bf16. With residual != nullptr the
// tile adds it (HF's `residual + hidden_states` in bf16); with norm_weight == nullptr x is used
// as is. Used for q_proj|kv_a_proj (input_layernorm), o_proj (+ residual) and the dense MLP.
#include "common.h"

__host__ __device__ constexpr int fd_rmsnorm_gemv_smem_bytes(int n_in) { return n_in * 2; }

__device__ void fd_task_rmsnorm_gemv(const fd_bf16* x, const fd_bf16* norm_weight, float eps, const fd_bf16* W,
                                     int n_in, int row_begin, int row_end, const fd_bf16* residual, fd_bf16* out,
                                     void* smem) {
  fd_bf16* xs = static_cast<fd_bf16*>(smem);
  fd_rmsnorm_bf16(x, norm_weight, eps, n_in, xs);
  fd_gemv_rows(W, n_in, xs, row_begin, row_end, [&](int r, float dot) {
    if (fd_lane() != 0) return;
    float y = fd_round_bf16(dot);
    if (residual != nullptr) y += fd_bf16_to_float(residual[r]);
    out[r] = fd_float_to_bf16(y);
  });
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_rmsnorm_gemv(const fd_bf16* x, const fd_bf16* norm_weight, float eps, const fd_bf16* W,
                                       int n_in, int n_rows, int rows_per_tile, const fd_bf16* residual,
                                       fd_bf16* out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(n_rows, rows_per_tile, &r0, &r1);
  fd_task_rmsnorm_gemv(x, norm_weight, eps, W, n_in, r0, r1, residual, out, fd_smem);
}

FD_EXPORT int fd_launch_rmsnorm_gemv(const void* x, const void* norm_weight, float eps, const void* W, int n_in,
                                     int n_rows, int rows_per_tile, const void* residual, void* out, void* stream) {
  if (n_in % kVecElems || rows_per_tile <= 0) return -1;
  const int tiles = (n_rows + rows_per_tile - 1) / rows_per_tile;
  fd_kernel_rmsnorm_gemv<<<tiles, kTaskThreads, fd_rmsnorm_gemv_smem_bytes(n_in), static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(x), static_cast<const fd_bf16*>(norm_weight), eps, static_cast<const fd_bf16*>(W),
      n_in, n_rows, rows_per_tile, static_cast<const fd_bf16*>(residual), static_cast<fd_bf16*>(out));
  return static_cast<int>(fd_get_last_error());
}
#endif

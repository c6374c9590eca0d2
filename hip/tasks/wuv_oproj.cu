// Task kind: W_UV + o_proj + residual, in two steps because they need different tilings:
//  1. W_UV tile: attn_out[h*128 + d] = W_UV[h][d] . out_lat[h] for rows [row_begin, row_end) of
//     the 2048-vector (fd_wuv_rows in common.h); W_UV[h] is rows h*256+128 .. h*256+255 of
//     kv_b_proj.weight. Stored as Act (bf16: HF's attention output, attn_weights @ value_states).
//  2. o_proj tile + residual: fd_task_rmsnorm_gemv without a norm weight, with the residual.
// Fusing step 1 into every o_proj tile would re-read all of W_UV (2 MB) per tile. The task graph
// fuses it into the merge instead (fd_task_attention_merge_uv); this kind is the form for a
// graph whose merge hands over out_lat. Standalone: two launches.
#include "common.h"

__host__ __device__ constexpr int fd_wuv_smem_bytes(int heads_in_tile) { return heads_in_tile * kLatent * 4; }

template <class Act>
__device__ void fd_task_wuv(const float* out_lat, const fd_bf16* kv_b, int row_begin, int row_end, Act* attn_out,
                            void* smem) {
  float* lat_s = static_cast<float*>(smem);  // out_lat of the heads this tile touches
  const int head_first = row_begin / kVHead, head_last = (row_end - 1) / kVHead;
  const float4* src = reinterpret_cast<const float4*>(out_lat + head_first * kLatent);
  for (int i = threadIdx.x; i < (head_last - head_first + 1) * kLatent / 4; i += blockDim.x)
    reinterpret_cast<float4*>(lat_s)[i] = src[i];
  __syncthreads();
  fd_wuv_rows(lat_s, head_first, kv_b, row_begin, row_end, attn_out);
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_wuv(const float* out_lat, const fd_bf16* kv_b, int rows_per_tile, Act* attn_out) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(kHeads * kVHead, rows_per_tile, &r0, &r1);
  fd_task_wuv(out_lat, kv_b, r0, r1, attn_out, fd_smem);
}

FD_EXPORT int fd_launch_rmsnorm_gemv(const void* x, const void* norm_weight, float eps, const void* W, int n_in,
                                     int n_rows, int rows_per_tile, const void* residual, void* out, int f32,
                                     void* stream);

// attn_out ([2048], Act) is written and kept so the check can test both steps.
FD_EXPORT int fd_launch_wuv_oproj(const float* out_lat, const void* kv_b, int wuv_rows_per_tile, const void* o_proj,
                                  int oproj_rows_per_tile, const void* residual, void* attn_out, void* out, int f32,
                                  void* stream) {
  if (wuv_rows_per_tile <= 0 || wuv_rows_per_tile % kWuvRowsPerPass || kVHead % wuv_rows_per_tile) return -1;
  const int blocks = kHeads * kVHead / wuv_rows_per_tile;
  const fd_bf16* w = static_cast<const fd_bf16*>(kv_b);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_wuv<<<blocks, kTaskThreads, fd_wuv_smem_bytes(1), s>>>(out_lat, w, wuv_rows_per_tile,
                                                                     static_cast<float*>(attn_out));
  else
    fd_kernel_wuv<<<blocks, kTaskThreads, fd_wuv_smem_bytes(1), s>>>(out_lat, w, wuv_rows_per_tile,
                                                                     static_cast<fd_bf16*>(attn_out));
  const int err = static_cast<int>(fd_get_last_error());
  if (err) return err;
  return fd_launch_rmsnorm_gemv(attn_out, nullptr, 0.f, o_proj, kHeads * kVHead, kHeads * kVHead, oproj_rows_per_tile,
                                residual, out, f32, stream);
}
#endif

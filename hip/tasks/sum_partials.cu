// Task kind: SUM_PARTIALS. into[r] += partials[0][r] + partials[1][r] + ... + partials[n-1][r]
// for r in [row_begin, row_end): the split-K expert tiles' partial rows (GATE_UP_DOWN,
// EXPERT_GATE_UP_DOWN) added into the residual sum h_out. Each thread sums a fixed subset of the
// rows of one column and the subsets are added in a fixed order, so the result does not depend on
// which tile finished first: bit-identical from run to run.
#include "common.h"

__host__ __device__ constexpr int fd_sum_partials_smem_bytes(int threads) { return threads * 16; }

__device__ __forceinline__ float4 fd_add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// Columns as float4 (row_begin and row_end multiples of 4, rows 16-byte aligned): with 16 columns
// a tile, 64 threads share a column group and each has its few rows' loads in flight at once.
// Where a column group is a power of two narrower than a warp, each warp adds its lanes' sums by
// shuffles and the block adds one sum a warp (a serial pass over every thread's sum cost more than
// the loads); the row's old value is read before the partials, off the path.
__device__ void fd_task_sum_partials(const float* partials, int n_rows, int row_length, int row_begin, int row_end,
                                     float* into, void* smem) {
  float4* sums = static_cast<float4*>(smem);
  const int n4 = (row_end - row_begin) / 4;
  for (int c0 = 0; c0 < n4; c0 += blockDim.x) {
    const int cols = min(static_cast<int>(blockDim.x), n4 - c0);
    const bool by_shuffles = cols < kWarpSize && (cols & (cols - 1)) == 0;
    const int groups = blockDim.x / cols;  // threads per column group, each summing every groups-th row
    const int col = threadIdx.x % cols, group = threadIdx.x / cols;
    float4* out = reinterpret_cast<float4*>(into + row_begin) + c0 + threadIdx.x;
    const float4 before = threadIdx.x < cols ? *out : make_float4(0.f, 0.f, 0.f, 0.f);
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    if (group < groups) {
      // kBatch rows' loads issued before any is added: a loop of run-time length would wait for each
      const float* p = partials + row_begin + 4 * (c0 + col);
      constexpr int kBatch = 8;
      for (int k0 = group; k0 < n_rows; k0 += kBatch * groups) {
        float4 v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int k = k0 + j * groups;
          v[j] = k < n_rows ? *reinterpret_cast<const float4*>(p + static_cast<size_t>(k) * row_length)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) s = fd_add4(s, v[j]);
      }
    }
    int n_sums = groups;
    if (by_shuffles) {
      for (int m = cols; m < kWarpSize; m <<= 1)
        s = fd_add4(s, make_float4(fd_shfl_xor(s.x, m), fd_shfl_xor(s.y, m), fd_shfl_xor(s.z, m), fd_shfl_xor(s.w, m)));
      if (fd_lane() < cols) sums[fd_warp() * cols + col] = s;
      n_sums = fd_num_warps();
    } else if (group < groups) {
      sums[group * cols + col] = s;
    }
    __syncthreads();
    if (threadIdx.x < cols) {
      float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int g = 0; g < n_sums; ++g) t = fd_add4(t, sums[g * cols + threadIdx.x]);
      *out = fd_add4(before, t);
    }
    __syncthreads();
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_sum_partials(const float* partials, int n_rows, int row_length, int rows_per_tile,
                                       float* into) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(row_length, rows_per_tile, &r0, &r1);
  fd_task_sum_partials(partials, n_rows, row_length, r0, r1, into, fd_smem);
}

FD_EXPORT int fd_launch_sum_partials(const float* partials, int n_rows, int row_length, int rows_per_tile, float* into,
                                     void* stream) {
  if (n_rows <= 0 || row_length <= 0 || rows_per_tile <= 0 || row_length % 4 || rows_per_tile % 4) return -1;
  fd_kernel_sum_partials<<<(row_length + rows_per_tile - 1) / rows_per_tile, kTaskThreads,
                           fd_sum_partials_smem_bytes(kTaskThreads), static_cast<fd_stream_t>(stream)>>>(
      partials, n_rows, row_length, rows_per_tile, into);
  return static_cast<int>(fd_get_last_error());
}
#endif

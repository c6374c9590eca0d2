// Task kinds: O_PROJ_ROUTER and ROUTE_PARTS_TOPK: the router's dot products computed by the o_proj
// tiles, so that no router stage stands between o_proj and the top-k.
// The router's logit e is W_router[e] . RMSNorm(h_attn) = inv_rms * sum_r W_router[e][r] * norm[r] * h_attn[r]
// with inv_rms = rsqrt(sum_r h_attn[r]^2 / hidden + eps): both sums split over the rows, so each
// o_proj tile, which has its rows of h_attn in hand, adds its rows' terms into its own row of
// router_parts: [its n_experts dot products, its sum of squares] (fp32, the router's fp32 weights).
// ROUTE_PARTS_TOPK adds the tiles' rows in a fixed order, scales by inv_rms and picks the top k as
// ROUTE_TOPK does (router_topk.cu).
#include "common.h"
// The task functions this file builds on (their files are included once: #pragma once). Compiled
// alone (the library's object of this file): without their launchers, and with internal linkage, as
// their own objects define them too.
#ifndef FD_NO_STANDALONE
#define FD_NO_STANDALONE
namespace {
#include "rmsnorm_gemv.cu"
#include "router_topk.cu"
}  // namespace
#undef FD_NO_STANDALONE
#else
#include "rmsnorm_gemv.cu"
#include "router_topk.cu"
#endif

// Threads per expert in both sums: each takes every kRouterSplit-th row (or part), then they meet by
// shuffles in a fixed order.
constexpr int kRouterSplit = 4;

// The tile's rows [row_begin, row_end) of h_attn (h_s, shared memory) into part_row.
__device__ void fd_router_partials(const float* h_s, const fd_bf16* norm, const float* w_router, int hidden,
                                   int n_experts, int row_begin, int row_end, float* part_row) {
  const int q = threadIdx.x % kRouterSplit, per_round = static_cast<int>(blockDim.x) / kRouterSplit;
  for (int e0 = 0; e0 < n_experts; e0 += per_round) {  // every lane takes part in every round's shuffles
    const int e = e0 + static_cast<int>(threadIdx.x) / kRouterSplit;
    float acc = 0.f;
    if (e < n_experts) {
      const float* w = w_router + static_cast<size_t>(e) * hidden;
      for (int r = row_begin + q; r < row_end; r += kRouterSplit)
        acc = fmaf(w[r], fd_to_float(norm[r]) * h_s[r - row_begin], acc);
    }
    acc += fd_shfl_xor(acc, 1);
    acc += fd_shfl_xor(acc, 2);
    if (q == 0 && e < n_experts) part_row[e] = acc;
  }
  if (fd_warp() == 0) {
    float ss = 0.f;
    for (int r = row_begin + fd_lane(); r < row_end; r += kWarpSize) ss = fmaf(h_s[r - row_begin], h_s[r - row_begin], ss);
    ss = fd_warp_sum(ss);
    if (fd_lane() == 0) part_row[n_experts] = ss;
  }
}

// O_PROJ_RESIDUAL's rows [row_begin, row_end) (fd_task_rmsnorm_gemv without a norm), then the tile's
// row of router_parts. The router's columns of the tile are 64-byte pieces of its rows: on their way
// into L1 while the GEMV runs.
template <class Act, class WL = fd_global_weights>
__device__ void fd_task_o_proj_router(const Act* attn_out, const fd_bf16* W_o, int n_in, int row_begin, int row_end,
                                      const Act* residual, Act* h_attn, Act* h_out, const fd_bf16* norm,
                                      const float* w_router, int n_experts, int hidden, float* part_row, void* smem) {
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x)
    fd_prefetch_l1(w_router + static_cast<size_t>(e) * hidden + row_begin);
  if (threadIdx.x == 0) fd_prefetch_l1(norm + row_begin);
  // shared memory: x (the GEMV's), the tile's rows as stored, and (bf16 activations) as fp32
  const int rows = row_end - row_begin;
  unsigned char* after_x = static_cast<unsigned char*>(smem) + n_in * sizeof(Act);
  Act* rows_s = reinterpret_cast<Act*>(after_x);
  fd_task_rmsnorm_gemv<Act, WL>(attn_out, static_cast<const fd_bf16*>(nullptr), 0.f, W_o, n_in, row_begin, row_end,
                                residual, h_attn, h_out, smem, rows_s);
  __syncthreads();
  float* h_s = reinterpret_cast<float*>(rows_s);
  if constexpr (sizeof(Act) != sizeof(float)) {
    h_s = reinterpret_cast<float*>(after_x + (rows * sizeof(Act) + 15) / 16 * 16);
    for (int i = threadIdx.x; i < rows; i += blockDim.x) h_s[i] = fd_to_float(rows_s[i]);
    __syncthreads();
  }
  fd_router_partials(h_s, norm, w_router, hidden, n_experts, row_begin, row_end, part_row);
}

// The n_parts rows of router_parts (n_experts + 1 each) added in a fixed order, then the top k as
// ROUTE_TOPK. scratch: 3 * n_experts + 1 words of shared memory.
__device__ void fd_task_route_parts_topk(const float* parts, int n_parts, int n_experts, int hidden, float eps, int top_k,
                                         float routed_scaling, float* probs_out, int* topk_idx, float* topk_weight,
                                         float* scratch) {
  float* logits_s = scratch;  // [n_experts]; the top-k's scratch lies over it
  float* ss_s = scratch + 3 * n_experts;
  const int row = n_experts + 1, q = threadIdx.x % kRouterSplit, per_round = static_cast<int>(blockDim.x) / kRouterSplit;
  constexpr int kBatch = 8;  // parts' loads in flight per thread
  for (int e0 = 0; e0 < n_experts; e0 += per_round) {
    const int e = e0 + static_cast<int>(threadIdx.x) / kRouterSplit;
    float acc = 0.f;
    for (int p0 = q; p0 < n_parts; p0 += kBatch * kRouterSplit) {
      float v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int p = p0 + k * kRouterSplit;
        v[k] = e < n_experts && p < n_parts ? parts[static_cast<size_t>(p) * row + e] : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) acc += v[k];
    }
    acc += fd_shfl_xor(acc, 1);
    acc += fd_shfl_xor(acc, 2);
    if (q == 0 && e < n_experts) logits_s[e] = acc;
  }
  if (fd_warp() == 0) {
    float ss = 0.f;
    for (int p0 = fd_lane(); p0 < n_parts; p0 += kBatch * kWarpSize) {
      float v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int p = p0 + k * kWarpSize;
        v[k] = p < n_parts ? parts[static_cast<size_t>(p) * row + n_experts] : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) ss += v[k];
    }
    ss = fd_warp_sum(ss);
    if (fd_lane() == 0) *ss_s = ss;
  }
  __syncthreads();
  const float inv_rms = rsqrtf(*ss_s / static_cast<float>(hidden) + eps);
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) logits_s[e] *= inv_rms;
  __syncthreads();
  fd_task_route_topk(logits_s, n_experts, top_k, routed_scaling, probs_out, topk_idx, topk_weight, scratch);
}

#ifndef FD_NO_STANDALONE
// The task graph's O_PROJ_ROUTER tiles (one block per tile, row b of parts), then its ROUTE_PARTS_TOPK
// (one block): two launches, as the megakernel runs them as two stages.
template <class Act>
__global__ void fd_kernel_o_proj_router(const Act* attn_out, const fd_bf16* W_o, int n_in, int n_rows, int rows_per_tile,
                                        const Act* residual, Act* h_attn, const fd_bf16* norm, const float* w_router,
                                        int n_experts, float* parts) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int r0, r1;
  fd_block_range(n_rows, rows_per_tile, &r0, &r1);
  fd_task_o_proj_router(attn_out, W_o, n_in, r0, r1, residual, h_attn, static_cast<Act*>(nullptr), norm, w_router,
                        n_experts, n_rows, parts + static_cast<size_t>(blockIdx.x) * (n_experts + 1), fd_smem);
}

__global__ void fd_kernel_route_parts_topk(const float* parts, int n_parts, int n_experts, int hidden, float eps,
                                           int top_k, float routed_scaling, float* probs_out, int* topk_idx,
                                           float* topk_weight) {
  __shared__ float scratch[3 * kMaxExperts + 1];
  fd_task_route_parts_topk(parts, n_parts, n_experts, hidden, eps, top_k, routed_scaling, probs_out, topk_idx,
                           topk_weight, scratch);
}

FD_EXPORT int fd_launch_o_proj_router(const void* attn_out, const void* W_o, int n_in, int n_rows, int rows_per_tile,
                                      const void* residual, void* h_attn, const void* norm, const float* w_router,
                                      int n_experts, float eps, int top_k, float routed_scaling, float* parts,
                                      float* probs_out, int* topk_idx, float* topk_weight, int f32, void* stream) {
  if (n_experts > kMaxExperts || top_k > kMaxTopK || top_k > n_experts || n_in % kVecElems || rows_per_tile <= 0 ||
      (n_in + rows_per_tile) * 4 > 48 * 1024)
    return -1;
  auto s = static_cast<fd_stream_t>(stream);
  const int tiles = (n_rows + rows_per_tile - 1) / rows_per_tile;
  const int smem = (n_in + rows_per_tile) * (f32 ? 4 : 2) + 16 + rows_per_tile * 4;
  const fd_bf16* wo = static_cast<const fd_bf16*>(W_o);
  const fd_bf16* nw = static_cast<const fd_bf16*>(norm);
  if (f32)
    fd_kernel_o_proj_router<<<tiles, kTaskThreads, smem, s>>>(
        static_cast<const float*>(attn_out), wo, n_in, n_rows, rows_per_tile, static_cast<const float*>(residual),
        static_cast<float*>(h_attn), nw, w_router, n_experts, parts);
  else
    fd_kernel_o_proj_router<<<tiles, kTaskThreads, smem, s>>>(
        static_cast<const fd_bf16*>(attn_out), wo, n_in, n_rows, rows_per_tile, static_cast<const fd_bf16*>(residual),
        static_cast<fd_bf16*>(h_attn), nw, w_router, n_experts, parts);
  fd_kernel_route_parts_topk<<<1, kTaskThreads, 0, s>>>(parts, tiles, n_experts, n_rows, eps, top_k, routed_scaling,
                                                         probs_out, topk_idx, topk_weight);
  return static_cast<int>(fd_get_last_error());
}
#endif

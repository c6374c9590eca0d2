// Task kinds: ROUTER and ROUTE_TOPK. x_norm = RMSNorm(x) with post_attention_layernorm (stored as Act,
// as fd_rmsnorm), logits[e] = W_router[e] . x_norm in fp32 (HF keeps the router weight in fp32
// and casts the input up), softmax in fp32, greedy top-k (the k largest, ties to the lower expert
// index; HF's torch.topk(sorted=False) picks the same set), written in ascending expert order
// (the order HF's expert loop adds them in, and the task graph's ROUTER), weights =
// probability * routed_scaling_factor, no renormalisation (norm_topk_prob is false).
// The task graph cuts it in two kinds: ROUTER (logits of a tile of experts, fd_task_router_logits)
// and ROUTE_TOPK (softmax and top-k, fd_task_route_topk). The expert tiles read idx/weights at run
// time.
#pragma once  // also included by o_proj_router.cu
#include "common.h"

constexpr int kMaxExperts = 256;
constexpr int kMaxTopK = 16;

template <class Act>
__host__ __device__ constexpr int fd_router_smem_bytes(int hidden) { return hidden * sizeof(Act) + 3 * kMaxExperts * 4; }

// The task graph's ROUTER: logits[e] = W_router[e] . RMSNorm(x) for experts [e_begin, e_end).
template <class Act, class WL = fd_global_weights>
__device__ void fd_task_router_logits(const Act* x, const fd_bf16* norm_weight, float eps, const float* w_router,
                                      int hidden, int e_begin, int e_end, float* logits, void* smem) {
  Act* xs = static_cast<Act*>(smem);
  fd_rmsnorm(x, norm_weight, eps, hidden, xs);
  // fp32 weights: 4 per 16-byte load, so a lane streams twice the loads of a bf16 row.
  const int n_vec4 = hidden / 4;
  for (int e = e_begin + fd_warp(); e < e_end; e += fd_num_warps()) {
    const float* row = w_router + static_cast<size_t>(e) * hidden;
    float acc = 0.f;
    for (int base = fd_lane(); base < n_vec4; base += 2 * kStreamUnroll * kWarpSize) {
      fd_vec16 w[2 * kStreamUnroll];
#pragma unroll
      for (int u = 0; u < 2 * kStreamUnroll; ++u) {
        const int v = base + u * kWarpSize;
        w[u] = v < n_vec4 ? WL::load(row + 4 * v) : fd_vec16{0, 0, 0, 0};
      }
#pragma unroll
      for (int u = 0; u < 2 * kStreamUnroll; ++u) {
        const int v = base + u * kWarpSize;
        if (v < n_vec4) {
          const Act* x4 = xs + 4 * v;
          acc = fmaf(__uint_as_float(w[u].x), fd_to_float(x4[0]), acc);
          acc = fmaf(__uint_as_float(w[u].y), fd_to_float(x4[1]), acc);
          acc = fmaf(__uint_as_float(w[u].z), fd_to_float(x4[2]), acc);
          acc = fmaf(__uint_as_float(w[u].w), fd_to_float(x4[3]), acc);
        }
      }
    }
    acc = fd_warp_sum(acc);
    if (fd_lane() == 0) logits[e] = acc;
  }
}

// The task graph's ROUTE_TOPK, by warp 0 alone (no block barrier, no shared memory): softmax over
// the n_experts logits (shared or global memory; each lane holds its experts' values in registers),
// then top_k rounds of a warp-wide max over keys (probability bits, then the lower index: the
// probabilities are >= 0, so their bits order as their values), the winner's lane clearing its key.
// The chosen experts take their slots in ascending expert order from ballots. Part 12's one-warp
// form lost to the block's rank count because each lane compared its experts with all 64 in a
// chain of shared-memory reads; a round here is log2(warp) register shuffles. scratch is unused.
__device__ __forceinline__ unsigned long long fd_shfl_xor_u64(unsigned long long v, int lane_mask) {
  const unsigned lo = static_cast<unsigned>(fd_shfl_xor(static_cast<int>(v & 0xffffffffull), lane_mask));
  const unsigned hi = static_cast<unsigned>(fd_shfl_xor(static_cast<int>(v >> 32), lane_mask));
  return static_cast<unsigned long long>(hi) << 32 | lo;
}

__device__ void fd_task_route_topk(const float* logits, int n_experts, int top_k, float routed_scaling,
                                   float* probs_out, int* topk_idx, float* topk_weight, float* /*scratch*/) {
  if (fd_warp() != 0) return;
  constexpr int kPerLane = (kMaxExperts + kWarpSize - 1) / kWarpSize;
  const int lane = fd_lane();
  float p[kPerLane];
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = j * kWarpSize + lane;
    p[j] = e < n_experts ? logits[e] : -INFINITY;
    m = fmaxf(m, p[j]);
  }
  m = fd_warp_max(m);
  float l = 0.f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = j * kWarpSize + lane;
    p[j] = e < n_experts ? expf(p[j] - m) : 0.f;
    l += p[j];  // in the lane's expert order, as the block form summed
  }
  const float inv_l = 1.f / fd_warp_sum(l);
  unsigned long long key[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = j * kWarpSize + lane;
    p[j] *= inv_l;
    key[j] = e < n_experts ? static_cast<unsigned long long>(__float_as_uint(p[j])) << 32 | (0xffffffffu - e) : 0ull;
    if (probs_out != nullptr && e < n_experts) probs_out[e] = p[j];
  }
  unsigned chosen = 0;  // bit j: this lane's expert j * kWarpSize + lane is among the top k
  for (int k = 0; k < top_k; ++k) {
    unsigned long long best = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) best = key[j] > best ? key[j] : best;
#pragma unroll
    for (int s = kWarpSize / 2; s > 0; s >>= 1) {
      const unsigned long long other = fd_shfl_xor_u64(best, s);
      best = other > best ? other : best;
    }
    const int e = static_cast<int>(0xffffffffu - static_cast<unsigned>(best & 0xffffffffull));
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (j * kWarpSize + lane == e) {
        key[j] = 0;
        chosen |= 1u << j;
      }
  }
  int below = 0;  // chosen experts with a lower index than this lane's expert j
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const unsigned long long mask = fd_warp_ballot((chosen >> j) & 1u);
    if ((chosen >> j) & 1u) {
      const int slot = below + __popcll(mask & ((1ull << lane) - 1ull));
      topk_idx[slot] = j * kWarpSize + lane;
      topk_weight[slot] = p[j] * routed_scaling;
    }
    below += __popcll(mask);
  }
}

#ifndef FD_NO_STANDALONE
// The task graph's ROUTER tiles (one block per tile of rows_per_tile experts) then its ROUTE_TOPK
// (one block): two launches per call, as the megakernel runs them as two stages.
template <class Act>
__global__ void fd_kernel_router_logits(const Act* x, const fd_bf16* norm_weight, float eps, const float* w_router,
                                        int n_experts, int hidden, int rows_per_tile, float* logits) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  int e0, e1;
  fd_block_range(n_experts, rows_per_tile, &e0, &e1);
  fd_task_router_logits(x, norm_weight, eps, w_router, hidden, e0, e1, logits, fd_smem);
}

__global__ void fd_kernel_route_topk(const float* logits, int n_experts, int top_k, float routed_scaling,
                                     float* probs_out, int* topk_idx, float* topk_weight) {
  __shared__ float scratch[3 * kMaxExperts];
  fd_task_route_topk(logits, n_experts, top_k, routed_scaling, probs_out, topk_idx, topk_weight, scratch);
}

FD_EXPORT int fd_launch_router_tiles(const void* x, const void* norm_weight, float eps, const float* w_router,
                                     int n_experts, int hidden, int rows_per_tile, int top_k, float routed_scaling,
                                     float* logits, float* probs_out, int* topk_idx, float* topk_weight, int f32,
                                     void* stream) {
  if (n_experts > kMaxExperts || top_k > kMaxTopK || top_k > n_experts || hidden % kVecElems || rows_per_tile <= 0)
    return -1;
  const fd_bf16* nw = static_cast<const fd_bf16*>(norm_weight);
  auto s = static_cast<fd_stream_t>(stream);
  const int tiles = (n_experts + rows_per_tile - 1) / rows_per_tile;
  if (f32)
    fd_kernel_router_logits<<<tiles, kTaskThreads, fd_router_smem_bytes<float>(hidden), s>>>(
        static_cast<const float*>(x), nw, eps, w_router, n_experts, hidden, rows_per_tile, logits);
  else
    fd_kernel_router_logits<<<tiles, kTaskThreads, fd_router_smem_bytes<fd_bf16>(hidden), s>>>(
        static_cast<const fd_bf16*>(x), nw, eps, w_router, n_experts, hidden, rows_per_tile, logits);
  fd_kernel_route_topk<<<1, kTaskThreads, 0, s>>>(logits, n_experts, top_k, routed_scaling, probs_out, topk_idx,
                                                   topk_weight);
  return static_cast<int>(fd_get_last_error());
}
#endif

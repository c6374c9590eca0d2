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

// The task graph's ROUTE_TOPK: softmax over the n_experts logits in warp 0, then greedy top-k by
// the whole block. logits may be shared or global memory; scratch is shared memory of
// 3 * n_experts words (its first n_experts may be logits itself: a lane rewrites only its own
// experts). The top k by rank, not by k rounds of arg-max: an expert's rank is the number of
// experts ahead of it (larger probability, or equal and lower index), its slot the number of chosen
// experts below it; both are counted by all threads, kRankPiece comparisons each, and summed with
// shared-memory atomics (integers: the same sums in any order).
constexpr int kRankPiece = 16;

__device__ void fd_task_route_topk(const float* logits, int n_experts, int top_k, float routed_scaling,
                                   float* probs_out, int* topk_idx, float* topk_weight, float* scratch) {
  float* prob_s = scratch;
  int* rank_s = reinterpret_cast<int*>(scratch + n_experts);
  int* slot_s = rank_s + n_experts;
  for (int e = threadIdx.x; e < 2 * n_experts; e += blockDim.x) rank_s[e] = 0;  // rank_s and slot_s
  if (fd_warp() == 0) {
    // logits (global memory in the megakernel, written by the ROUTER tiles) are read once: each
    // further pass is over the lane's own entries of prob_s.
    float m = -INFINITY;
    for (int e = fd_lane(); e < n_experts; e += kWarpSize) {
      const float x = logits[e];
      prob_s[e] = x;
      m = fmaxf(m, x);
    }
    m = fd_warp_max(m);
    float l = 0.f;
    for (int e = fd_lane(); e < n_experts; e += kWarpSize) {
      const float x = expf(prob_s[e] - m);
      prob_s[e] = x;
      l += x;
    }
    const float inv_l = 1.f / fd_warp_sum(l);
    for (int e = fd_lane(); e < n_experts; e += kWarpSize) {
      const float p = prob_s[e] * inv_l;
      prob_s[e] = p;
      if (probs_out != nullptr) probs_out[e] = p;
    }
  }
  __syncthreads();
  const int pieces = (n_experts + kRankPiece - 1) / kRankPiece;
  for (int w = threadIdx.x; w < n_experts * pieces; w += blockDim.x) {
    const int e = w % n_experts, o0 = (w / n_experts) * kRankPiece, o1 = min(o0 + kRankPiece, n_experts);
    const float p = prob_s[e];
    int ahead = 0;
    for (int o = o0; o < o1; ++o) {
      const float q = prob_s[o];
      ahead += q > p || (q == p && o < e);
    }
    if (ahead) fd_atomic_add_shared(rank_s + e, ahead);
  }
  __syncthreads();
  for (int w = threadIdx.x; w < n_experts * pieces; w += blockDim.x) {
    const int e = w % n_experts, o0 = (w / n_experts) * kRankPiece, o1 = min(o0 + kRankPiece, e);
    if (rank_s[e] >= top_k) continue;
    int below = 0;
    for (int o = o0; o < o1; ++o) below += rank_s[o] < top_k;
    if (below) fd_atomic_add_shared(slot_s + e, below);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) {
    if (rank_s[e] >= top_k) continue;
    topk_idx[slot_s[e]] = e;
    topk_weight[slot_s[e]] = prob_s[e] * routed_scaling;
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

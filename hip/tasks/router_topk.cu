// Task kind: router + top-k. x_norm = RMSNorm(x) with post_attention_layernorm (stored as Act,
// as fd_rmsnorm), logits[e] = W_router[e] . x_norm in fp32 (HF keeps the router weight in fp32
// and casts the input up), softmax in fp32, greedy top-k (the k largest, ties to the lower expert
// index; HF's torch.topk(sorted=False) picks the same set), written in ascending expert order
// (the order HF's expert loop adds them in, and the task graph's ROUTER), weights =
// probability * routed_scaling_factor, no renormalisation (norm_topk_prob is false).
// One block; the expert tiles read idx/weights at run time.
#include "common.h"

constexpr int kMaxExperts = 256;
constexpr int kMaxTopK = 16;

template <class Act>
__host__ __device__ constexpr int fd_router_smem_bytes(int hidden) { return hidden * sizeof(Act) + kMaxExperts * 4; }

template <class Act>
__device__ void fd_task_router_topk(const Act* x, const fd_bf16* norm_weight, float eps, const float* w_router,
                                    int n_experts, int hidden, int top_k, float routed_scaling, float* probs_out,
                                    int* topk_idx, float* topk_weight, void* smem) {
  Act* xs = static_cast<Act*>(smem);
  float* prob_s = reinterpret_cast<float*>(xs + hidden);
  fd_rmsnorm(x, norm_weight, eps, hidden, xs);
  // fp32 weights: 4 per 16-byte load, so a lane streams twice the loads of a bf16 row.
  const int n_vec4 = hidden / 4;
  for (int e = fd_warp(); e < n_experts; e += fd_num_warps()) {
    const float* row = w_router + static_cast<size_t>(e) * hidden;
    float acc = 0.f;
    for (int base = fd_lane(); base < n_vec4; base += 2 * kStreamUnroll * kWarpSize) {
      fd_vec16 w[2 * kStreamUnroll];
#pragma unroll
      for (int u = 0; u < 2 * kStreamUnroll; ++u) {
        const int v = base + u * kWarpSize;
        w[u] = v < n_vec4 ? fd_load_stream16(row + 4 * v) : fd_vec16{0, 0, 0, 0};
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
    if (fd_lane() == 0) prob_s[e] = acc;
  }
  __syncthreads();
  if (fd_warp() != 0) return;
  // Softmax and top-k in warp 0; each lane holds experts lane, lane + kWarpSize, ...
  float m = -INFINITY;
  for (int e = fd_lane(); e < n_experts; e += kWarpSize) m = fmaxf(m, prob_s[e]);
  m = fd_warp_max(m);
  float l = 0.f;
  for (int e = fd_lane(); e < n_experts; e += kWarpSize) l += expf(prob_s[e] - m);
  const float inv_l = 1.f / fd_warp_sum(l);
  fd_sync_warp();
  for (int e = fd_lane(); e < n_experts; e += kWarpSize) {
    prob_s[e] = expf(prob_s[e] - m) * inv_l;
    if (probs_out != nullptr) probs_out[e] = prob_s[e];
  }
  fd_sync_warp();
  for (int k = 0; k < top_k; ++k) {
    fd_argmax_pair best = {-INFINITY, n_experts};
    for (int e = fd_lane(); e < n_experts; e += kWarpSize)
      if (fd_argmax_better(prob_s[e], e, best.value, best.index)) best = {prob_s[e], e};
    best = fd_warp_argmax(best);
    if (fd_lane() == 0) {
      // Insertion into ascending expert order among the k already chosen.
      int at = k;
      for (; at > 0 && topk_idx[at - 1] > best.index; --at) {
        topk_idx[at] = topk_idx[at - 1];
        topk_weight[at] = topk_weight[at - 1];
      }
      topk_idx[at] = best.index;
      topk_weight[at] = best.value * routed_scaling;
      prob_s[best.index] = -INFINITY;  // taken: below every probability
    }
    fd_sync_warp();
  }
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_router_topk(const Act* x, const fd_bf16* norm_weight, float eps, const float* w_router,
                                      int n_experts, int hidden, int top_k, float routed_scaling, float* probs_out,
                                      int* topk_idx, float* topk_weight) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  fd_task_router_topk(x, norm_weight, eps, w_router, n_experts, hidden, top_k, routed_scaling, probs_out, topk_idx,
                      topk_weight, fd_smem);
}

FD_EXPORT int fd_launch_router_topk(const void* x, const void* norm_weight, float eps, const float* w_router,
                                    int n_experts, int hidden, int top_k, float routed_scaling, float* probs_out,
                                    int* topk_idx, float* topk_weight, int threads, int f32, void* stream) {
  if (n_experts > kMaxExperts || top_k > kMaxTopK || top_k > n_experts || hidden % kVecElems ||
      threads % kWarpSize || threads > kMaxBlockThreads)
    return -1;
  const fd_bf16* nw = static_cast<const fd_bf16*>(norm_weight);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_router_topk<<<1, threads, fd_router_smem_bytes<float>(hidden), s>>>(
        static_cast<const float*>(x), nw, eps, w_router, n_experts, hidden, top_k, routed_scaling, probs_out,
        topk_idx, topk_weight);
  else
    fd_kernel_router_topk<<<1, threads, fd_router_smem_bytes<fd_bf16>(hidden), s>>>(
        static_cast<const fd_bf16*>(x), nw, eps, w_router, n_experts, hidden, top_k, routed_scaling, probs_out,
        topk_idx, topk_weight);
  return static_cast<int>(fd_get_last_error());
}
#endif

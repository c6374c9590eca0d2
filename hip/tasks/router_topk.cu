// Task kind: router + top-k. x_norm = RMSNorm(x) with post_attention_layernorm (bf16, as HF),
// logits[e] = W_router[e] . x_norm in fp32 (HF keeps the router weight in fp32 and casts the
// input up), softmax in fp32, greedy top-k (largest first, ties to the lower expert index; HF's
// torch.topk(sorted=False) returns the same set), weights = probability * routed_scaling_factor,
// no renormalisation (norm_topk_prob is false). One block; the expert tiles read idx/weights.
#include "common.h"

constexpr int kMaxExperts = 256;
constexpr int kMaxTopK = 16;

__host__ __device__ constexpr int fd_router_smem_bytes(int hidden) { return hidden * 2 + kMaxExperts * 4; }

__device__ void fd_task_router_topk(const fd_bf16* x, const fd_bf16* norm_weight, float eps, const float* w_router,
                                    int n_experts, int hidden, int top_k, float routed_scaling, float* probs_out,
                                    int* topk_idx, float* topk_weight, void* smem) {
  fd_bf16* xs = static_cast<fd_bf16*>(smem);
  float* prob_s = reinterpret_cast<float*>(xs + hidden);
  fd_rmsnorm_bf16(x, norm_weight, eps, hidden, xs);
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
          const uint32_t xa = *reinterpret_cast<const uint32_t*>(xs + 4 * v);
          const uint32_t xb = *reinterpret_cast<const uint32_t*>(xs + 4 * v + 2);
          acc = fmaf(__uint_as_float(w[u].x), fd_bf16_lo(xa), acc);
          acc = fmaf(__uint_as_float(w[u].y), fd_bf16_hi(xa), acc);
          acc = fmaf(__uint_as_float(w[u].z), fd_bf16_lo(xb), acc);
          acc = fmaf(__uint_as_float(w[u].w), fd_bf16_hi(xb), acc);
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
      topk_idx[k] = best.index;
      topk_weight[k] = best.value * routed_scaling;
      prob_s[best.index] = -INFINITY;  // taken: below every probability
    }
    fd_sync_warp();
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_router_topk(const fd_bf16* x, const fd_bf16* norm_weight, float eps, const float* w_router,
                                      int n_experts, int hidden, int top_k, float routed_scaling, float* probs_out,
                                      int* topk_idx, float* topk_weight) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  fd_task_router_topk(x, norm_weight, eps, w_router, n_experts, hidden, top_k, routed_scaling, probs_out, topk_idx,
                      topk_weight, fd_smem);
}

FD_EXPORT int fd_launch_router_topk(const void* x, const void* norm_weight, float eps, const float* w_router,
                                    int n_experts, int hidden, int top_k, float routed_scaling, float* probs_out,
                                    int* topk_idx, float* topk_weight, int threads, void* stream) {
  if (n_experts > kMaxExperts || top_k > kMaxTopK || top_k > n_experts || hidden % kVecElems ||
      threads % kWarpSize || threads > kMaxBlockThreads)
    return -1;
  fd_kernel_router_topk<<<1, threads, fd_router_smem_bytes(hidden), static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(x), static_cast<const fd_bf16*>(norm_weight), eps, w_router, n_experts, hidden,
      top_k, routed_scaling, probs_out, topk_idx, topk_weight);
  return static_cast<int>(fd_get_last_error());
}
#endif

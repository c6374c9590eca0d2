// Task kind: argmax reduce, second level. The best of n (value, index) candidates, ties to the
// lower index (torch.argmax's first occurrence), written to *token when token != nullptr and to
// tokens[step] when tokens != nullptr (the decoded sequence: the task graph's ARGMAX writes
// tokens[s + 1], which the next step's embed reads).
// With index == nullptr the candidates are raw values and their index is their position, so the
// same task also reduces a whole logits vector.
#include "common.h"
#include "sampling.h"

__device__ void fd_task_argmax(const float* value, const int* index, int n, int* token, int* tokens, int step) {
  fd_argmax_pair best = {-INFINITY, 0x7fffffff};
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int idx = index != nullptr ? index[i] : i;
    if (fd_argmax_better(value[i], idx, best.value, best.index)) best = {value[i], idx};
  }
  best = fd_block_argmax(best);
  if (threadIdx.x == 0) {
    if (token != nullptr) *token = best.index;
    if (tokens != nullptr) tokens[step] = best.index;
  }
}

// Task kind ARGMAX with a sampling mode: the token at `position` (the position it will take) drawn
// from this step's row of logits as hip/tasks/sampling.h describes, written to tokens[index]. With
// temperature 0 it is fd_task_argmax over the lm_head tiles' maxima (part_max / part_idx,
// n_tiles of them), or over the row itself when part_max is null.
__device__ void fd_task_sample(const float* logits_row, int vocab, const float* part_max, const int* part_idx,
                               int n_tiles, fd_sampling params, int position, int* tokens, int index) {
  if (params.temperature == 0.f) {
    if (part_max != nullptr) fd_task_argmax(part_max, part_idx, n_tiles, nullptr, tokens, index);
    else fd_task_argmax(logits_row, nullptr, vocab, nullptr, tokens, index);
    return;
  }
  float local_max = -INFINITY;
  if (part_max != nullptr) {
    for (int i = threadIdx.x; i < n_tiles; i += blockDim.x) local_max = fmaxf(local_max, part_max[i]);
  } else {
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) local_max = fmaxf(local_max, logits_row[i]);
  }
  const float max_x = fd_block_max(local_max);
  const float temperature = params.temperature;
  const int top = fd_order_key(max_x) + 1;  // no logit has this key or more
  int threshold = kLowestKey;
  if (params.top_k > 0)  // fewer than k logits strictly larger: at least k at or above the threshold
    threshold = fd_largest_key(logits_row, vocab, threshold, top, static_cast<float>(params.top_k),
                               [](float) { return 1.f; });
  if (params.top_p < 1.f) {  // the mass strictly above below p: at least p of it at or above the threshold
    const float target = params.top_p * fd_mass_from(logits_row, vocab, threshold, max_x, temperature);
    threshold = fd_largest_key(logits_row, vocab, threshold, top, target,
                               [&](float x) { return expf((x - max_x) / temperature); });
  }
  fd_argmax_pair best = {-INFINITY, 0x7fffffff};
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = logits_row[i];
    if (fd_order_key(x) < threshold) continue;
    const float score = x / temperature + -logf(-logf(fd_philox_uniform(params, position, i)));
    if (fd_argmax_better(score, i, best.value, best.index)) best = {score, i};
  }
  best = fd_block_argmax(best);
  if (threadIdx.x == 0) tokens[index] = best.index;
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_argmax(const float* value, const int* index, int n, int* token, int* tokens, int step) {
  fd_task_argmax(value, index, n, token, tokens, step);
}

FD_EXPORT int fd_launch_argmax(const float* value, const int* index, int n, int* token, int* tokens, int step,
                               void* stream) {
  if (n <= 0 || step < 0) return -1;
  fd_kernel_argmax<<<1, kTaskThreads, 0, static_cast<fd_stream_t>(stream)>>>(value, index, n, token, tokens, step);
  return static_cast<int>(fd_get_last_error());
}

__global__ void fd_kernel_sample(const float* logits, int vocab, fd_sampling params, int position, int* tokens,
                                 int index) {
  fd_task_sample(logits, vocab, nullptr, nullptr, 0, params, position, tokens, index);
}

// One token drawn from one row of logits by one block of `threads` threads (0: kTaskThreads), for
// comparing the device's draw with fleet_decode.sampling's. top_k 0 / top_p >= 1: off.
FD_EXPORT int fd_launch_sample(const float* logits, int vocab, float temperature, int top_k, float top_p,
                               unsigned long long seed, int position, int* tokens, int index, int threads,
                               void* stream) {
  threads = threads > 0 ? threads : kTaskThreads;
  if (vocab <= 0 || index < 0 || !(temperature >= 0.f) || top_k < 0 || !(top_p > 0.f) || threads % kWarpSize != 0 ||
      threads > kMaxBlockThreads)
    return -1;
  const fd_sampling params = {temperature, top_k, top_p, static_cast<unsigned int>(seed & 0xffffffffull),
                              static_cast<unsigned int>(seed >> 32)};
  fd_kernel_sample<<<1, threads, 0, static_cast<fd_stream_t>(stream)>>>(logits, vocab, params, position, tokens,
                                                                         index);
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kind: argmax reduce, second level. The best of n (value, index) candidates, ties to the
// lower index (torch.argmax's first occurrence), written to *token when token != nullptr and to
// tokens[step] when tokens != nullptr (the decoded sequence: the task graph's ARGMAX writes
// tokens[s + 1], which the next step's embed reads).
// With index == nullptr the candidates are raw values and their index is their position, so the
// same task also reduces a whole logits vector.
#include "common.h"

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
#endif

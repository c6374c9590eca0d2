// Task kind: embed. Copies the embedding row of the token held in device memory (written by the
// previous step's argmax) into the residual stream, bf16 as HF's embed_tokens output.
#include "common.h"

__device__ void fd_task_embed(const fd_bf16* table, const int* token, int hidden, fd_bf16* out) {
  const fd_bf16* row = table + static_cast<size_t>(*token) * hidden;
  for (int v = threadIdx.x; v < hidden / kVecElems; v += blockDim.x)
    fd_store16(out + v * kVecElems, fd_load_stream16(row + v * kVecElems));
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_embed(const fd_bf16* table, const int* token, int hidden, fd_bf16* out) {
  fd_task_embed(table, token, hidden, out);
}

FD_EXPORT int fd_launch_embed(const void* table, const int* token, int hidden, void* out, void* stream) {
  if (hidden % kVecElems) return -1;
  fd_kernel_embed<<<1, kTaskThreads, 0, static_cast<fd_stream_t>(stream)>>>(
      static_cast<const fd_bf16*>(table), token, hidden, static_cast<fd_bf16*>(out));
  return static_cast<int>(fd_get_last_error());
}
#endif

// Task kind: embed. Columns [col_begin, col_end) of the embedding row of the token held in
// device memory (the task graph's tokens[s], written by the previous step's argmax) into the
// residual stream, as Act (bf16: HF's embed_tokens output; fp32: the graph's F32 buffer).
#include "common.h"

template <class Act>
__device__ void fd_task_embed(const fd_bf16* table, const int* token, int hidden, int col_begin, int col_end,
                              Act* out) {
  const fd_bf16* row = table + static_cast<size_t>(*token) * hidden;
  for (int v = col_begin / kVecElems + threadIdx.x; v < col_end / kVecElems; v += blockDim.x) {
    float f[8];
    fd_unpack8(fd_load_stream16(row + v * kVecElems), f);
    fd_store_x8(out, v, f);
  }
}

#ifndef FD_NO_STANDALONE
template <class Act>
__global__ void fd_kernel_embed(const fd_bf16* table, const int* token, int hidden, Act* out) {
  fd_task_embed(table, token, hidden, 0, hidden, out);
}

FD_EXPORT int fd_launch_embed(const void* table, const int* token, int hidden, void* out, int f32, void* stream) {
  if (hidden % kVecElems) return -1;
  const fd_bf16* t = static_cast<const fd_bf16*>(table);
  if (f32)
    fd_kernel_embed<<<1, kTaskThreads, 0, static_cast<fd_stream_t>(stream)>>>(t, token, hidden, static_cast<float*>(out));
  else
    fd_kernel_embed<<<1, kTaskThreads, 0, static_cast<fd_stream_t>(stream)>>>(t, token, hidden,
                                                                              static_cast<fd_bf16*>(out));
  return static_cast<int>(fd_get_last_error());
}
#endif

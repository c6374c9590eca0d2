// Task kind: attention merge. Combines n_chunks flash-decoding partials (m, l, unnormalised o)
// of heads [head_begin, head_end) into out_lat[h] = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c,
// fp32. Chunks with l = 0 (no valid position) contribute nothing.
#include "common.h"

constexpr int kMaxChunks = 1024;

__host__ __device__ constexpr int fd_attention_merge_smem_bytes() { return kMaxChunks * 4; }

__device__ void fd_task_attention_merge(const float* part_m, const float* part_l, const float* part_o, int n_chunks,
                                        int head_begin, int head_end, float* out_lat, void* smem) {
  float* weight_s = static_cast<float*>(smem);  // [n_chunks]: e^(m_c - M) / L
  for (int h = head_begin; h < head_end; ++h) {
    float m = -INFINITY;
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) m = fmaxf(m, part_m[c * kHeads + h]);
    m = fd_block_max(m);
    float l = 0.f;
    for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
      const float w = part_l[c * kHeads + h] > 0.f ? __expf(part_m[c * kHeads + h] - m) : 0.f;
      weight_s[c] = w;
      l += w * part_l[c * kHeads + h];
    }
    const float inv_l = 1.f / fd_block_sum(l);  // fd_block_sum's barrier also publishes weight_s
    for (int col = threadIdx.x; col < kLatent; col += blockDim.x) {
      float acc = 0.f;
      for (int c = 0; c < n_chunks; ++c)
        if (weight_s[c] != 0.f)
          acc = fmaf(weight_s[c], part_o[(static_cast<size_t>(c) * kHeads + h) * kLatent + col], acc);
      out_lat[h * kLatent + col] = acc * inv_l;
    }
    __syncthreads();  // weight_s is rewritten for the next head
  }
}

#ifndef FD_NO_STANDALONE
__global__ void fd_kernel_attention_merge(const float* part_m, const float* part_l, const float* part_o, int n_chunks,
                                          float* out_lat) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  fd_task_attention_merge(part_m, part_l, part_o, n_chunks, blockIdx.x, blockIdx.x + 1, out_lat, fd_smem);
}

FD_EXPORT int fd_launch_attention_merge(const float* part_m, const float* part_l, const float* part_o, int n_chunks,
                                        float* out_lat, void* stream) {
  if (n_chunks <= 0 || n_chunks > kMaxChunks) return -1;
  fd_kernel_attention_merge<<<kHeads, kTaskThreads, fd_attention_merge_smem_bytes(),
                              static_cast<fd_stream_t>(stream)>>>(part_m, part_l, part_o, n_chunks, out_lat);
  return static_cast<int>(fd_get_last_error());
}
#endif

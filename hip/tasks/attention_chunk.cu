// Task kind: MLA attention chunk (flash-decoding, absorbed form). For cache positions
// [t_begin, min(t_end, n_pos)) and all kHeads heads:
//   score[h][t] = scale * (q_lat[h] . c_kv[t] + q_pe[h] . k_pe[t])
// then the chunk's max m[h], sum l[h] = sum_t exp(score - m) and unnormalised
// o[h] = sum_t exp(score - m) c_kv[t] (kLatent wide), all fp32. The latent cache row is shared
// by all heads (MQA-like), so each position's 1152 bytes are read once per chunk.
// A chunk with no valid position writes m = -inf, l = 0, o = 0, which the merge ignores.
// m[h] and l[h] are written at part_m[h * ml_stride], part_l[h * ml_stride]: separate arrays
// (stride 1) or the task graph's interleaved (m, l) pairs (part_l = part_m + 1, stride 2).
// HF (eager) rounds scores and probabilities to bf16; we keep fp32 throughout.
#include "common.h"

constexpr int kMaxChunk = FD_MAX_ATTN_CHUNK;  // positions per chunk: the score buffer's size

__host__ __device__ constexpr int fd_attention_chunk_smem_bytes() {
  return (kHeads * kLatent + kHeads * kRope + kHeads * kMaxChunk) * 4;
}

// kH heads from head_first (q_lat, q_pe, part_m, part_l and part_o index all kHeads heads).
template <int kH, class Act>
__device__ void fd_attention_chunk_heads(const float* q_lat, const Act* q_pe, const fd_bf16* ckv_cache,
                                         const fd_bf16* kpe_cache, int n_pos, int t_begin, int t_end, float scale,
                                         float* part_m, float* part_l, int ml_stride, float* part_o, int head_first,
                                         void* smem) {
  q_lat += head_first * kLatent;
  q_pe += head_first * kRope;
  part_m += head_first * ml_stride;
  part_l += head_first * ml_stride;
  part_o += head_first * kLatent;
  float* q_lat_s = static_cast<float*>(smem);      // [kH][kLatent]
  float* q_pe_s = q_lat_s + kH * kLatent;          // [kH][kRope]
  float* prob_s = q_pe_s + kH * kRope;             // [kH][kMaxChunk]
  const int t1 = min(t_end, n_pos);
  const int len = max(0, t1 - t_begin);
  // q (kH x 2 KB, just written by other workers: an L2 round trip) with all of a thread's loads in flight.
  fd_block_copy<4>(reinterpret_cast<float4*>(q_lat_s), reinterpret_cast<const float4*>(q_lat), kH * kLatent / 4);
  fd_block_to_float<4>(q_pe_s, q_pe, kH * kRope);
  __syncthreads();

  // Scores: a warp takes kScorePositions positions at a time; lanes split each position's 576
  // latent+rope elements in 16-byte pieces, all issued before the first is used (the rows come
  // from HBM, so the loads in flight, not the FMAs, set the pace); each q piece read from shared
  // memory serves every position of the pass.
  constexpr int kLatVec = kLatent / kVecElems, kRopeVec = kRope / kVecElems;
  constexpr int kRowVec = kLatVec + kRopeVec;
  constexpr int kVecPerLane = (kRowVec + kWarpSize - 1) / kWarpSize;
  // Positions per warp pass: fewer heads leave registers for more positions' loads in flight.
  constexpr int kScorePositions = kH >= 16 ? 2 : 4;
  for (int t = kScorePositions * fd_warp(); t < len; t += kScorePositions * fd_num_warps()) {
    fd_vec16 kv[kScorePositions][kVecPerLane];
#pragma unroll
    for (int p = 0; p < kScorePositions; ++p) {
      // Past the end of the chunk: reload its last row (its score is not stored).
      const size_t row = static_cast<size_t>(t_begin + min(t + p, len - 1));
#pragma unroll
      for (int i = 0; i < kVecPerLane; ++i) {
        const int v = fd_lane() + i * kWarpSize;
        kv[p][i] = v >= kRowVec   ? fd_vec16{0, 0, 0, 0}
                   : v < kLatVec ? fd_load16(ckv_cache + row * kLatent + v * kVecElems)
                                 : fd_load16(kpe_cache + row * kRope + (v - kLatVec) * kVecElems);
      }
    }
    float acc[kScorePositions][kH];
#pragma unroll
    for (int p = 0; p < kScorePositions; ++p)
#pragma unroll
      for (int h = 0; h < kH; ++h) acc[p][h] = 0.f;
#pragma unroll
    for (int i = 0; i < kVecPerLane; ++i) {
      const int v = fd_lane() + i * kWarpSize;
      if (v >= kRowVec) continue;
      const bool rope = v >= kLatVec;
      const float* qs = rope ? q_pe_s + (v - kLatVec) * kVecElems : q_lat_s + v * kVecElems;
      const int q_stride = rope ? kRope : kLatent;
      float k8[kScorePositions][8];
#pragma unroll
      for (int p = 0; p < kScorePositions; ++p) fd_unpack8(kv[p][i], k8[p]);
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        float q8[8];
        fd_load_x8(qs + h * q_stride, 0, q8);
#pragma unroll
        for (int p = 0; p < kScorePositions; ++p)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[p][h] = fmaf(q8[j], k8[p][j], acc[p][h]);
      }
    }
#pragma unroll
    for (int p = 0; p < kScorePositions; ++p)
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        const float s = fd_warp_sum(acc[p][h]);
        if (fd_lane() == 0 && t + p < len) prob_s[h * kMaxChunk + t + p] = s * scale;
      }
  }
  __syncthreads();

  // Softmax statistics: one warp per head.
  for (int h = fd_warp(); h < kH; h += fd_num_warps()) {
    float m = -INFINITY;
    for (int t = fd_lane(); t < len; t += kWarpSize) m = fmaxf(m, prob_s[h * kMaxChunk + t]);
    m = fd_warp_max(m);
    float l = 0.f;
    for (int t = fd_lane(); t < len; t += kWarpSize) {
      const float p = __expf(prob_s[h * kMaxChunk + t] - m);
      prob_s[h * kMaxChunk + t] = p;
      l += p;
    }
    l = fd_warp_sum(l);
    if (fd_lane() == 0) { part_m[h * ml_stride] = m; part_l[h * ml_stride] = l; }
  }
  __syncthreads();

  // Weighted sum of latent rows: a thread owns 8 columns and kH / 4 heads at a time (with 4 groups of
  // 64 threads, every thread has heads).
  constexpr int kHeadsPerPass = kH >= 4 ? kH / 4 : 1;
  const int cv = threadIdx.x % kLatVec, group = threadIdx.x / kLatVec, groups = blockDim.x / kLatVec;
  for (int h0 = group * kHeadsPerPass; group < groups && h0 < kH; h0 += groups * kHeadsPerPass) {
    float acc[kHeadsPerPass][8] = {};
    constexpr int kRowBatch = 4;  // rows in flight (a run-time trip count would wait for each)
    for (int t0 = 0; t0 < len; t0 += kRowBatch) {
      fd_vec16 rows[kRowBatch];
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b)
        rows[b] = t0 + b < len ? fd_load16(ckv_cache + static_cast<size_t>(t_begin + t0 + b) * kLatent + cv * kVecElems)
                               : fd_vec16{0, 0, 0, 0};
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        if (t0 + b < len) {
          float kv[8];
          fd_unpack8(rows[b], kv);
#pragma unroll
          for (int k = 0; k < kHeadsPerPass; ++k) {
            const float p = prob_s[(h0 + k) * kMaxChunk + t0 + b];
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[k][j] = fmaf(p, kv[j], acc[k][j]);
          }
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kHeadsPerPass; ++k) {
      float4* o = reinterpret_cast<float4*>(part_o + (h0 + k) * kLatent + cv * kVecElems);
      o[0] = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
      o[1] = make_float4(acc[k][4], acc[k][5], acc[k][6], acc[k][7]);
    }
  }
}

// Heads [head_begin, head_end) of the chunk (the graph's head groups; all kHeads by default): a
// task of fewer heads loads only their q and writes only their partials.
template <class Act>
__device__ void fd_task_attention_chunk(const float* q_lat, const Act* q_pe, const fd_bf16* ckv_cache,
                                        const fd_bf16* kpe_cache, int n_pos, int t_begin, int t_end, float scale,
                                        float* part_m, float* part_l, int ml_stride, float* part_o, void* smem,
                                        int head_begin = 0, int head_end = kHeads) {
  const int n = head_end - head_begin;
#if FD_HIP
  // AMD: the megakernel is at its register limit already, and the half and quarter forms would put
  // its arrays in scratch (gfx942: 160 -> 624 bytes); a head group there runs a head at a time.
  constexpr bool kGroupForms = false;
#else
  constexpr bool kGroupForms = true;
#endif
  if (n == kHeads) {
    fd_attention_chunk_heads<kHeads>(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, t_begin, t_end, scale, part_m, part_l,
                                     ml_stride, part_o, head_begin, smem);
  } else if (kGroupForms && 2 * n == kHeads) {
    fd_attention_chunk_heads<kGroupForms ? kHeads / 2 : 1>(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, t_begin, t_end,
                                                           scale, part_m, part_l, ml_stride, part_o, head_begin, smem);
  } else if (kGroupForms && 4 * n == kHeads) {
    fd_attention_chunk_heads<kGroupForms ? kHeads / 4 : 1>(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, t_begin, t_end,
                                                           scale, part_m, part_l, ml_stride, part_o, head_begin, smem);
  } else {  // any other count, a head at a time
    for (int h = head_begin; h < head_end; ++h) {
      fd_attention_chunk_heads<1>(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, t_begin, t_end, scale, part_m, part_l,
                                  ml_stride, part_o, h, smem);
      __syncthreads();  // the next head rewrites the scratch
    }
  }
}

#ifndef FD_NO_STANDALONE
// One block per chunk of chunk_len positions and group of heads (head_groups per chunk); chunk c
// writes part_*[c].
template <class Act>
__global__ void fd_kernel_attention_chunk(const float* q_lat, const Act* q_pe, const fd_bf16* ckv_cache,
                                          const fd_bf16* kpe_cache, int n_pos, int chunk_len, int head_groups,
                                          float scale, float* part_m, float* part_l, float* part_o) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  const int c = blockIdx.x / head_groups, g = blockIdx.x % head_groups, heads = kHeads / head_groups;
  fd_task_attention_chunk(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, c * chunk_len, (c + 1) * chunk_len, scale,
                          part_m + c * kHeads, part_l + c * kHeads, 1,
                          part_o + static_cast<size_t>(c) * kHeads * kLatent, fd_smem, g * heads, (g + 1) * heads);
}

FD_EXPORT int fd_launch_attention_chunk(const float* q_lat, const void* q_pe, const void* ckv_cache,
                                        const void* kpe_cache, int n_pos, int n_chunks, int chunk_len, int head_groups,
                                        float scale, float* part_m, float* part_l, float* part_o, int f32,
                                        void* stream) {
  if (chunk_len <= 0 || chunk_len > kMaxChunk || kTaskThreads < kLatent / kVecElems || head_groups <= 0 ||
      kHeads % head_groups)
    return -1;
  const fd_bf16* ckv = static_cast<const fd_bf16*>(ckv_cache);
  const fd_bf16* kpe = static_cast<const fd_bf16*>(kpe_cache);
  auto s = static_cast<fd_stream_t>(stream);
  if (f32)
    fd_kernel_attention_chunk<<<n_chunks * head_groups, kTaskThreads, fd_attention_chunk_smem_bytes(), s>>>(
        q_lat, static_cast<const float*>(q_pe), ckv, kpe, n_pos, chunk_len, head_groups, scale, part_m, part_l, part_o);
  else
    fd_kernel_attention_chunk<<<n_chunks * head_groups, kTaskThreads, fd_attention_chunk_smem_bytes(), s>>>(
        q_lat, static_cast<const fd_bf16*>(q_pe), ckv, kpe, n_pos, chunk_len, head_groups, scale, part_m, part_l,
        part_o);
  return static_cast<int>(fd_get_last_error());
}
#endif

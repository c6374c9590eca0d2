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

// The tensor-core form's products: 16 rows (the task's heads, the rest zero) by 16 positions or latent
// columns; the scores in up to kMmaItems warp products, whose 16x16 partial sums wait in shared memory.
constexpr int kMmaRows = 16, kMmaItems = 8;
constexpr int kQkDim = kLatent + kRope;
constexpr int kQRow = kQkDim + 8, kPRow = FD_MAX_ATTN_CHUNK + 8;  // padded smem rows (bf16)

// The plain form's scratch: q_lat, q_pe and the scores in fp32. The tensor-core form's: q's two bf16 parts
// (reused for the probabilities after the scores), then the products' 16x16 fp32 partial sums.
constexpr int kPlainSmemBytes = (kHeads * kLatent + kHeads * kRope + kHeads * kMaxChunk) * 4;
constexpr int kMmaQBytes = 2 * kMmaRows * kQRow * 2;
constexpr int kMmaSmemBytes = kMmaQBytes + kMmaItems * 256 * 4;

__host__ __device__ constexpr int fd_attention_chunk_smem_bytes() {
  return kPlainSmemBytes > kMmaSmemBytes ? kPlainSmemBytes : kMmaSmemBytes;
}

// x as hi + lo, two bf16 values (16 bits of mantissa together: ~1e-5 relative): an fp32 operand of a
// bf16 product whose other operand is exact in bf16 (the cache rows) keeps fp32's accuracy within the
// gates at twice the products.
__device__ __forceinline__ void fd_split_bf16(float x, fd_bf16& hi, fd_bf16& lo) {
  hi = fd_float_to_bf16(x);
  lo = fd_float_to_bf16(x - fd_bf16_to_float(hi));
}

#if FD_HAS_MMA16
// Whether the chunk can take the tensor-core form: positions in whole tiles of 16 from t_begin (the last
// tile's rows then lie inside the chunk, so inside the cache), the operands aligned, n <= 16 heads.
__device__ __forceinline__ bool fd_attention_chunk_mma_fits(const fd_bf16* ckv_cache, const fd_bf16* kpe_cache,
                                                            const float* part_o, int t_begin, int t_end, int n) {
  return n <= kMmaRows && t_begin % 16 == 0 && (t_end - t_begin) % 16 == 0 && t_end - t_begin <= kMaxChunk &&
         (reinterpret_cast<uintptr_t>(ckv_cache) | reinterpret_cast<uintptr_t>(kpe_cache) |
          reinterpret_cast<uintptr_t>(part_o)) % fd_mma16::kAlign == 0;
}

// All n heads of the chunk on the tensor cores. Scores: [16 heads] x [576] . [576] x [16 positions] per
// tile, q's hi and lo parts against the same cache fragments, each tile's 36 k-steps cut into 4 blocks (1-2
// tiles) or 2 (3-4 tiles), one warp product each (kMmaItems at most), the partial sums added in a fixed order. The
// weighted sum: [16] x [16 * tiles positions] . [positions] x [16 latent columns] per warp product, the
// probabilities in hi and lo parts. No shuffle reduces anything; each warp keeps a batch of the cache's
// fragments in flight (the rows come from HBM, the loads set the pace).
template <class Act>
__device__ void fd_attention_chunk_mma(const float* q_lat, const Act* q_pe, const fd_bf16* ckv_cache,
                                       const fd_bf16* kpe_cache, int n_pos, int t_begin, int t_end, float scale,
                                       float* part_m, float* part_l, int ml_stride, float* part_o, int head_first,
                                       int n, void* smem) {
  static_assert(kHeads <= kMmaRows && kLatent % 16 == 0 && kRope % 16 == 0 && kMaxChunk % 16 == 0 &&
                    kMaxChunk / 16 <= 4 && kPRow * 2 * 2 * kMmaRows + kMmaRows * kMaxChunk * 4 <= kMmaQBytes,
                "the tensor-core chunk's layout");
  constexpr int kSteps = kQkDim / 16, kLatSteps = kLatent / 16, kColTiles = kLatent / 16;
  constexpr int kBatch = 9;  // k-steps whose cache fragments a warp loads before multiplying (divides 18 and 9)
  static_assert(kSteps % 4 == 0 && (kSteps / 4) % kBatch == 0 && kMaxChunk / 16 * 2 <= kMmaItems && 2 * 4 <= kMmaItems,
                "a warp's k-steps come in whole batches; the products fit their partial sums' slots");
  q_lat += head_first * kLatent;
  q_pe += head_first * kRope;
  part_m += head_first * ml_stride;
  part_l += head_first * ml_stride;
  part_o += head_first * kLatent;
  fd_bf16* q_hi = static_cast<fd_bf16*>(smem);                                   // [16][kQkDim]
  fd_bf16* q_lo = q_hi + kMmaRows * kQRow;                                      // [16][kQkDim]
  float* items = reinterpret_cast<float*>(q_lo + kMmaRows * kQRow);            // [kMmaItems][16][16]
  fd_bf16* p_hi = static_cast<fd_bf16*>(smem);                                   // after the scores: [16][kMaxChunk]
  fd_bf16* p_lo = p_hi + kMmaRows * kPRow;                                   // [16][kMaxChunk]
  float* prob = reinterpret_cast<float*>(p_lo + kMmaRows * kPRow);          // [16][kMaxChunk]
  const int len = max(0, min(t_end, n_pos) - t_begin);
  const int tiles = (len + 15) / 16;
  // q (n x 2.3 KB, just written by other workers: an L2 round trip), as two bf16 parts; rows past n zero.
  // q_lat in 16-byte pieces, all of a thread's in flight at once (8 for 16 heads on 256 threads), q_pe
  // alongside; then the splits.
  constexpr int kLatPieces = kLatent / 4, kQBatch = 8;
  for (int base = threadIdx.x; base < kMmaRows * kLatPieces; base += kQBatch * blockDim.x) {
    float4 v[kQBatch];
#pragma unroll
    for (int k = 0; k < kQBatch; ++k) {
      const int i = base + k * blockDim.x;
      v[k] = i < n * kLatPieces ? reinterpret_cast<const float4*>(q_lat)[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int k = 0; k < kQBatch; ++k) {
      const int i = base + k * blockDim.x, at = i / kLatPieces * kQRow + i % kLatPieces * 4;
      if (i >= kMmaRows * kLatPieces) continue;
      fd_split_bf16(v[k].x, q_hi[at], q_lo[at]);
      fd_split_bf16(v[k].y, q_hi[at + 1], q_lo[at + 1]);
      fd_split_bf16(v[k].z, q_hi[at + 2], q_lo[at + 2]);
      fd_split_bf16(v[k].w, q_hi[at + 3], q_lo[at + 3]);
    }
  }
  for (int base = threadIdx.x; base < kMmaRows * kRope; base += 4 * blockDim.x) {
    float x[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int i = base + k * blockDim.x;
      x[k] = i < n * kRope ? fd_to_float(q_pe[i]) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int i = base + k * blockDim.x, at = i / kRope * kQRow + kLatent + i % kRope;
      if (i < kMmaRows * kRope) fd_split_bf16(x[k], q_hi[at], q_lo[at]);
    }
  }
  __syncthreads();

  // A warp product per (tile, block of k-steps): both parts of q against the same cache fragments.
  const int splits = tiles <= 2 ? 4 : 2;  // 1-2 tiles: 4 blocks of 9 k-steps; 3-4 tiles: 2 of 18
  const int n_items = tiles * splits;
  for (int item = fd_warp(); item < n_items; item += fd_num_warps()) {
    const int tile = item / splits, split = item % splits;
    const size_t row0 = static_cast<size_t>(t_begin + 16 * tile);
    fd_mma16::acc_t acc;
    fd_mma16::zero(acc);
    for (int s0 = split * kSteps / splits; s0 < (split + 1) * kSteps / splits; s0 += kBatch) {
      fd_mma16::b_col_t b[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int s = s0 + k;
        if (s < kLatSteps)
          fd_mma16::load(b[k], ckv_cache + row0 * kLatent + 16 * s, kLatent);
        else
          fd_mma16::load(b[k], kpe_cache + row0 * kRope + 16 * (s - kLatSteps), kRope);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        fd_mma16::a_t a;
        fd_mma16::load(a, q_hi + 16 * (s0 + k), kQRow);
        fd_mma16::mma(acc, a, b[k]);
        fd_mma16::load(a, q_lo + 16 * (s0 + k), kQRow);
        fd_mma16::mma(acc, a, b[k]);
      }
    }
    fd_mma16::store(items + 256 * item, acc, 16);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n * kMaxChunk; i += blockDim.x) {
    const int h = i / kMaxChunk, t = i % kMaxChunk;
    if (t >= len) continue;
    float score = 0.f;
    for (int r = 0; r < splits; ++r) score += items[256 * (splits * (t / 16) + r) + 16 * h + t % 16];
    prob[h * kMaxChunk + t] = score * scale;
  }
  __syncthreads();

  // Softmax statistics: one warp per head.
  for (int h = fd_warp(); h < n; h += fd_num_warps()) {
    float m = -INFINITY;
    for (int t = fd_lane(); t < len; t += kWarpSize) m = fmaxf(m, prob[h * kMaxChunk + t]);
    m = fd_warp_max(m);
    float l = 0.f;
    for (int t = fd_lane(); t < len; t += kWarpSize) {
      const float p = __expf(prob[h * kMaxChunk + t] - m);
      prob[h * kMaxChunk + t] = p;
      l += p;
    }
    l = fd_warp_sum(l);
    if (fd_lane() == 0) { part_m[h * ml_stride] = m; part_l[h * ml_stride] = l; }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kMmaRows * kMaxChunk; i += blockDim.x) {
    const int h = i / kMaxChunk, t = i % kMaxChunk;
    fd_split_bf16(h < n && t < len ? prob[i] : 0.f, p_hi[h * kPRow + t], p_lo[h * kPRow + t]);
  }
  __syncthreads();

  // Weighted sum: a warp takes two column tiles at a time, all their row tiles' fragments in flight.
  constexpr int kCols = 2, kTiles = kMaxChunk / 16;
  const int warps = min(fd_num_warps(), kMmaItems);  // each stages its products in its own items slot
  float* o_tile = items + 256 * fd_warp();
  for (int c0 = kCols * fd_warp(); fd_warp() < warps && c0 < kColTiles; c0 += kCols * warps) {
    fd_mma16::b_row_t b[kCols][kTiles];
    // Every fragment loaded, past the chunk's tiles or columns again from its last one (inside the chunk,
    // an L1 hit): predicated loads kept the unused fragments live and the runtime loop spilled.
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile)
        fd_mma16::load(b[c][tile],
                       ckv_cache + static_cast<size_t>(t_begin + 16 * min(tile, max(tiles - 1, 0))) * kLatent +
                           16 * min(c0 + c, kColTiles - 1),
                       kLatent);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (c0 + c >= kColTiles) break;
      fd_mma16::acc_t acc;
      fd_mma16::zero(acc);
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        if (tile >= tiles) break;
        fd_mma16::a_t a;
        fd_mma16::load(a, p_hi + 16 * tile, kPRow);
        fd_mma16::mma(acc, a, b[c][tile]);
        fd_mma16::load(a, p_lo + 16 * tile, kPRow);
        fd_mma16::mma(acc, a, b[c][tile]);
      }
      fd_mma16::store(o_tile, acc, 16);
      fd_mma16::sync_warp();
      for (int i = fd_lane(); i < 4 * n; i += kWarpSize)  // the task's rows, in float4 pieces
        reinterpret_cast<float4*>(part_o + (i / 4) * kLatent + 16 * (c0 + c))[i % 4] =
            reinterpret_cast<const float4*>(o_tile + 16 * (i / 4))[i % 4];
      fd_mma16::sync_warp();
    }
  }
}
#endif

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
// task of fewer heads loads only their q and writes only their partials. kTensorCores picks the form
// (the runtime builds one megakernel entry per form, fd_megakernel<form>, and the host takes one per launch
// by the context's length): the plain cores' forms are faster for short contexts, the tensor cores' for long
// ones (docs/megakernel.md part 21). Where the pass has no tensor-core products (AMD, the host) both are plain.
template <bool kTensorCores, class Act>
__device__ void fd_task_attention_chunk(const float* q_lat, const Act* q_pe, const fd_bf16* ckv_cache,
                                        const fd_bf16* kpe_cache, int n_pos, int t_begin, int t_end, float scale,
                                        float* part_m, float* part_l, int ml_stride, float* part_o, void* smem,
                                        int head_begin = 0, int head_end = kHeads) {
  const int n = head_end - head_begin;
#if FD_HAS_MMA16
  if constexpr (kTensorCores) {
    // Every head count in one tensor-core product; a chunk that does not fit it (positions not in whole
    // tiles of 16) a head at a time, so that this entry carries no plain group form (they cost it spills).
    if (fd_attention_chunk_mma_fits(ckv_cache, kpe_cache, part_o, t_begin, t_end, n)) {
      fd_attention_chunk_mma(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, t_begin, t_end, scale, part_m, part_l,
                             ml_stride, part_o, head_begin, n, smem);
    } else {
      for (int h = head_begin; h < head_end; ++h) {
        fd_attention_chunk_heads<1>(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, t_begin, t_end, scale, part_m, part_l,
                                    ml_stride, part_o, h, smem);
        __syncthreads();  // the next head rewrites the scratch
      }
    }
    return;
  }
#endif
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
template <bool kTensorCores, class Act>
__global__ void fd_kernel_attention_chunk(const float* q_lat, const Act* q_pe, const fd_bf16* ckv_cache,
                                          const fd_bf16* kpe_cache, int n_pos, int chunk_len, int head_groups,
                                          float scale, float* part_m, float* part_l, float* part_o) {
  extern __shared__ __align__(128) unsigned char fd_smem[];  // the tensor-core form's operands: 32-byte aligned
  const int c = blockIdx.x / head_groups, g = blockIdx.x % head_groups, heads = kHeads / head_groups;
  fd_task_attention_chunk<kTensorCores>(q_lat, q_pe, ckv_cache, kpe_cache, n_pos, c * chunk_len, (c + 1) * chunk_len, scale,
                          part_m + c * kHeads, part_l + c * kHeads, 1,
                          part_o + static_cast<size_t>(c) * kHeads * kLatent, fd_smem, g * heads, (g + 1) * heads);
}

// tensor_cores: the form the megakernel's fd_megakernel<true> runs (plain where the build has none: AMD).
template <bool kTensorCores>
static int fd_launch_attention_chunk_form(const float* q_lat, const void* q_pe, const fd_bf16* ckv, const fd_bf16* kpe,
                                          int n_pos, int n_chunks, int chunk_len, int head_groups, float scale,
                                          float* part_m, float* part_l, float* part_o, int f32, fd_stream_t s) {
  if (f32)
    fd_kernel_attention_chunk<kTensorCores><<<n_chunks * head_groups, kTaskThreads, fd_attention_chunk_smem_bytes(), s>>>(
        q_lat, static_cast<const float*>(q_pe), ckv, kpe, n_pos, chunk_len, head_groups, scale, part_m, part_l, part_o);
  else
    fd_kernel_attention_chunk<kTensorCores><<<n_chunks * head_groups, kTaskThreads, fd_attention_chunk_smem_bytes(), s>>>(
        q_lat, static_cast<const fd_bf16*>(q_pe), ckv, kpe, n_pos, chunk_len, head_groups, scale, part_m, part_l,
        part_o);
  return static_cast<int>(fd_get_last_error());
}

FD_EXPORT int fd_launch_attention_chunk(const float* q_lat, const void* q_pe, const void* ckv_cache,
                                        const void* kpe_cache, int n_pos, int n_chunks, int chunk_len, int head_groups,
                                        float scale, float* part_m, float* part_l, float* part_o, int tensor_cores,
                                        int f32, void* stream) {
  if (chunk_len <= 0 || chunk_len > kMaxChunk || kTaskThreads < kLatent / kVecElems || head_groups <= 0 ||
      kHeads % head_groups)
    return -1;
  const fd_bf16* ckv = static_cast<const fd_bf16*>(ckv_cache);
  const fd_bf16* kpe = static_cast<const fd_bf16*>(kpe_cache);
  auto s = static_cast<fd_stream_t>(stream);
#if FD_CUDA
  if (tensor_cores)
    return fd_launch_attention_chunk_form<true>(q_lat, q_pe, ckv, kpe, n_pos, n_chunks, chunk_len, head_groups, scale,
                                                part_m, part_l, part_o, f32, s);
#else
  (void)tensor_cores;  // AMD has the plain form only; a second instance of it cost the shared helpers their inlining
#endif
  return fd_launch_attention_chunk_form<false>(q_lat, q_pe, ckv, kpe, n_pos, n_chunks, chunk_len, head_groups, scale,
                                               part_m, part_l, part_o, f32, s);
}
#endif

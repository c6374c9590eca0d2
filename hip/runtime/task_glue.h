// Glue between the graph's task kinds (docs/task-graph.md §3) and the task device functions of
// hip/tasks/. The graph keeps activations in fp32 buffers, while most task functions read and
// write bf16; so each kind here either wraps a task function (converting its fp32 inputs to bf16
// in shared memory first) or, where the task function's output is bf16, runs the same building
// blocks of common.h and stores fp32. Values are rounded to bf16 exactly where HF's DeepseekV2
// (and fleet_decode.model.Reference) rounds them, so a stored fp32 activation always holds a
// bf16 value, except the residual sum h.<l+1> (see fd_glue_down_accum).
//
// Every function is run by the whole block; smem is the block's dynamic shared memory
// (FD_RUNTIME_SMEM_BYTES, 16-byte aligned).
#pragma once
#include "../tasks/common.h"

// The runtime's shared-memory budget per block: the largest kind (attention chunk) needs ~43 KB.
constexpr int FD_RUNTIME_SMEM_BYTES = 64 * 1024;

__device__ __forceinline__ unsigned char* fd_smem_at(void* smem, int byte_offset) {
  return static_cast<unsigned char*>(smem) + byte_offset;
}

// n fp32 activations (n a multiple of 8) to bf16 in shared memory; they already hold bf16 values
// except the residual sum, which HF keeps in bf16 and is therefore rounded here.
__device__ __forceinline__ void fd_glue_to_bf16(const float* x, int n, fd_bf16* out) {
  for (int v = threadIdx.x; v < n / kVecElems; v += blockDim.x) {
    float f[8];
    fd_load_x8(x, v, f);
    fd_store16(out + v * kVecElems, fd_pack8(f));
  }
  __syncthreads();
}

// RMSNorm(x) with HF's bf16 roundings into xs (bf16, n elements); ends with a barrier.
__device__ __forceinline__ void fd_glue_norm_input(const float* x, const fd_bf16* norm_weight, float eps, int n,
                                                   fd_bf16* xs) {
  fd_glue_to_bf16(x, n, xs);
  fd_rmsnorm_bf16(xs, norm_weight, eps, n, xs);  // in place: each thread reads only what it writes
}

// RoPE of one adjacent pair, rounded to bf16 as HF's rotary output.
__device__ __forceinline__ void fd_glue_rope_pair(float a, float b, float c, float s, float* out0, float* out1) {
  *out0 = fd_round_bf16(a * c - b * s);
  *out1 = fd_round_bf16(a * s + b * c);
}

// EMBED: out[c] = embed[token][c] for c in [c0, c1).
__device__ void fd_glue_embed(const int* tokens, int step, const fd_bf16* embed, int hidden, int c0, int c1,
                              float* out) {
  const fd_bf16* row = embed + static_cast<size_t>(tokens[step]) * hidden;
  for (int c = c0 + threadIdx.x; c < c1; c += blockDim.x) out[c] = fd_bf16_to_float(row[c]);
}

// RMSNORM_GEMV: y[r] = bf16(matrix[r] . norm(x)) for r in [r0, r1).
__device__ void fd_glue_rmsnorm_gemv(const float* x, const fd_bf16* norm, const fd_bf16* matrix, float eps, int hidden,
                                     int r0, int r1, float* y, void* smem) {
  fd_bf16* xs = static_cast<fd_bf16*>(smem);
  fd_glue_norm_input(x, norm, eps, hidden, xs);
  fd_gemv_rows(matrix, hidden, xs, r0, r1, [&](int r, float dot) {
    if (fd_lane() == 0) y[r] = fd_round_bf16(dot);
  });
}

// ROPE_Q_ABSORB for heads [h0, h1): q_lat through fd_task_q_absorb (all latent columns), q_pe roped.
__device__ void fd_glue_rope_q_absorb(const float* q, const fd_bf16* kv_b, const float* cos_p, const float* sin_p,
                                      int h0, int h1, float* q_lat, float* q_pe, void* smem) {
  fd_bf16* qs = static_cast<fd_bf16*>(smem);  // all heads' q, bf16 [kHeads * kQHead]
  fd_glue_to_bf16(q, kHeads * kQHead, qs);
  fd_task_q_absorb(qs, kv_b, h0, h1, 0, kLatent, q_lat, fd_smem_at(smem, kHeads * kQHead * 2));
  constexpr int kPairs = kRope / 2;
  for (int item = threadIdx.x; item < (h1 - h0) * kPairs; item += blockDim.x) {
    const int h = h0 + item / kPairs, i = item % kPairs;
    const float* pe = q + h * kQHead + kNope + 2 * i;
    fd_glue_rope_pair(pe[0], pe[1], cos_p[i], sin_p[i], q_pe + h * kRope + 2 * i, q_pe + h * kRope + 2 * i + 1);
  }
}

// CACHE_APPEND: ckv[pos] = norm(kv_a[:R]), kpe[pos] = rope(kv_a[R:]).
__device__ void fd_glue_cache_append(const float* kv_a, const fd_bf16* kv_norm, const float* cos_p, const float* sin_p,
                                     float eps, int pos, fd_bf16* ckv, fd_bf16* kpe, void* smem) {
  fd_bf16* kv = static_cast<fd_bf16*>(smem);
  fd_glue_to_bf16(kv_a, kLatent + kRope, kv);
  constexpr int kPairs = kRope / 2;
  for (int i = threadIdx.x; i < kPairs; i += blockDim.x) {
    float a, b;
    fd_glue_rope_pair(kv_a[kLatent + 2 * i], kv_a[kLatent + 2 * i + 1], cos_p[i], sin_p[i], &a, &b);
    kpe[static_cast<size_t>(pos) * kRope + 2 * i] = fd_float_to_bf16(a);
    kpe[static_cast<size_t>(pos) * kRope + 2 * i + 1] = fd_float_to_bf16(b);
  }
  fd_rmsnorm_bf16(kv, kv_norm, eps, kLatent, ckv + static_cast<size_t>(pos) * kLatent);
}

// ATTN_CHUNK over positions [t0, min(t1, pos + 1)) through fd_task_attention_chunk; its separate
// m and l land interleaved in part_ml as the graph lays them out.
__device__ void fd_glue_attn_chunk(const float* q_lat, const float* q_pe, const fd_bf16* ckv, const fd_bf16* kpe,
                                   int pos, int t0, int t1, int chunk, float scale, float* part_o, float* part_ml,
                                   void* smem) {
  constexpr int kChunkSmem = fd_attention_chunk_smem_bytes();
  fd_bf16* q_pe_s = reinterpret_cast<fd_bf16*>(fd_smem_at(smem, kChunkSmem));  // [kHeads * kRope]
  float* m_s = reinterpret_cast<float*>(fd_smem_at(smem, kChunkSmem + kHeads * kRope * 2));
  float* l_s = m_s + kHeads;
  int* n_pos_s = reinterpret_cast<int*>(l_s + kHeads);
  if (threadIdx.x == 0) *n_pos_s = pos + 1;
  fd_glue_to_bf16(q_pe, kHeads * kRope, q_pe_s);  // ends with a barrier: n_pos_s is published too
  fd_task_attention_chunk(q_lat, q_pe_s, ckv, kpe, n_pos_s, t0, t1, scale, m_s, l_s,
                          part_o + static_cast<size_t>(chunk) * kHeads * kLatent, smem);
  __syncthreads();
  for (int h = threadIdx.x; h < kHeads; h += blockDim.x) {
    part_ml[(chunk * kHeads + h) * 2] = m_s[h];
    part_ml[(chunk * kHeads + h) * 2 + 1] = l_s[h];
  }
}

__host__ __device__ constexpr int fd_glue_merge_smem_bytes(int n_chunks) {
  return kHeads * kLatent * 4 + n_chunks * kHeads * 8 + fd_attention_merge_smem_bytes();
}

// ATTN_MERGE_UV for heads [h0, h1): fd_task_attention_merge into out_lat (shared), then W_UV:
// attn_out[h*Vh + v] = bf16(kv_b[h*(P+Vh) + P + v] . out_lat[h]).
__device__ void fd_glue_attn_merge_uv(const float* part_o, const float* part_ml, const fd_bf16* kv_b, int n_chunks,
                                      int h0, int h1, float* attn_out, void* smem) {
  float* lat_s = static_cast<float*>(smem);  // [kHeads][kLatent], rows h0..h1 used
  float* m_s = lat_s + kHeads * kLatent;     // [n_chunks][kHeads]
  float* l_s = m_s + n_chunks * kHeads;
  for (int i = threadIdx.x; i < n_chunks * kHeads; i += blockDim.x) {
    m_s[i] = part_ml[2 * i];
    l_s[i] = part_ml[2 * i + 1];
  }
  __syncthreads();
  fd_task_attention_merge(m_s, l_s, part_o, n_chunks, h0, h1, lat_s, l_s + n_chunks * kHeads);
  __syncthreads();
  constexpr int kRowsPerPass = 4;
  const int row_begin = h0 * kVHead, row_end = h1 * kVHead;
  for (int r = row_begin + kRowsPerPass * fd_warp(); r < row_end; r += kRowsPerPass * fd_num_warps()) {
    const fd_bf16* rows[kRowsPerPass];
    const float* xs[kRowsPerPass];
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k) {
      const int rk = min(r + k, row_end - 1), h = rk / kVHead, v = rk % kVHead;
      rows[k] = kv_b + (static_cast<size_t>(h) * kKvbHead + kNope + v) * kLatent;
      xs[k] = lat_s + h * kLatent;
    }
    float dots[kRowsPerPass];
    fd_warp_rows_dot<kRowsPerPass>(rows, xs, kLatent, dots);
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k)
      if (fd_lane() == 0 && r + k < row_end) attn_out[r + k] = fd_round_bf16(dots[k]);
  }
}

// O_PROJ_RESIDUAL: h_attn[r] = h_out[r] = bf16(bf16(residual[r]) + bf16(o_proj[r] . attn_out)).
__device__ void fd_glue_o_proj_residual(const float* attn_out, const float* residual, const fd_bf16* o_proj,
                                        int hidden, int r0, int r1, float* h_attn, float* h_out, void* smem) {
  fd_bf16* xs = static_cast<fd_bf16*>(smem);
  fd_glue_to_bf16(attn_out, kHeads * kVHead, xs);
  fd_gemv_rows(o_proj, kHeads * kVHead, xs, r0, r1, [&](int r, float dot) {
    if (fd_lane() != 0) return;
    const float y = fd_round_bf16(fd_round_bf16(residual[r]) + fd_round_bf16(dot));
    h_attn[r] = y;
    h_out[r] = y;
  });
  (void)hidden;
}

// ROUTER through fd_task_router_topk (largest first), then re-ordered ascending by expert index.
__device__ void fd_glue_router(const float* x, const fd_bf16* norm, const float* router, float eps, int hidden,
                               int n_experts, int top_k, float routed_scaling, int* route_idx, float* route_w,
                               void* smem) {
  const int task_smem = fd_router_smem_bytes(hidden);
  fd_bf16* x_s = reinterpret_cast<fd_bf16*>(fd_smem_at(smem, task_smem));
  int* idx_s = reinterpret_cast<int*>(x_s + hidden);
  float* w_s = reinterpret_cast<float*>(idx_s + kMaxTopK);
  fd_glue_to_bf16(x, hidden, x_s);
  fd_task_router_topk(x_s, norm, eps, router, n_experts, hidden, top_k, routed_scaling, nullptr, idx_s, w_s, smem);
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < top_k; ++k)  // insertion sort of top_k (<= kMaxTopK) pairs by expert index
      for (int j = k; j > 0 && idx_s[j - 1] > idx_s[j]; --j) {
        const int i = idx_s[j]; idx_s[j] = idx_s[j - 1]; idx_s[j - 1] = i;
        const float w = w_s[j]; w_s[j] = w_s[j - 1]; w_s[j - 1] = w;
      }
    for (int k = 0; k < top_k; ++k) { route_idx[k] = idx_s[k]; route_w[k] = w_s[k]; }
  }
}

// GATE_UP / EXPERT_GATE_UP: act[r] = bf16(bf16(silu(bf16(gate[r] . xn))) * bf16(up[r] . xn)),
// xn = norm(x), for r in [r0, r1); gate and up point at the (expert's) first row.
__device__ void fd_glue_swiglu_rows(const float* x, const fd_bf16* norm, float eps, int hidden, const fd_bf16* gate,
                                    const fd_bf16* up, int r0, int r1, float* act, void* smem) {
  fd_bf16* xs = static_cast<fd_bf16*>(smem);
  fd_glue_norm_input(x, norm, eps, hidden, xs);
  constexpr int kRowsPerPass = 2;  // gate and up of 2 rows: 4 rows in flight per warp
  for (int r = r0 + kRowsPerPass * fd_warp(); r < r1; r += kRowsPerPass * fd_num_warps()) {
    const fd_bf16* rows[2 * kRowsPerPass];
    const fd_bf16* xv[2 * kRowsPerPass];
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k) {
      const size_t row = static_cast<size_t>(min(r + k, r1 - 1)) * hidden;
      rows[2 * k] = gate + row;
      rows[2 * k + 1] = up + row;
      xv[2 * k] = xv[2 * k + 1] = xs;
    }
    float dots[2 * kRowsPerPass];
    fd_warp_rows_dot<2 * kRowsPerPass>(rows, xv, hidden, dots);
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k)
      if (fd_lane() == 0 && r + k < r1) {
        const float g = fd_round_bf16(dots[2 * k]), u = fd_round_bf16(dots[2 * k + 1]);
        act[r + k] = fd_round_bf16(fd_round_bf16(fd_silu(g)) * u);
      }
  }
}

// DOWN_ACCUM / EXPERT_DOWN_ACCUM: the contribution bf16(scale * bf16(down[r] . act)) (scale 1 and no
// second rounding for the dense MLP and the shared experts) of rows [r0, r1). With partial ==
// nullptr (the tile is the only adder of its rows) it is added to h_out[r] directly; otherwise it
// is stored in partial[r - r0] and the runtime's last-arriving adder of the row range sums all
// partials into h_out in graph order (fd_sum_partials), so the sum is the same on every run with no
// float atomics. HF rounds the routed sum and the residual sum to bf16 once more; here the fp32 sum
// is rounded by its readers (fd_glue_to_bf16).
__device__ void fd_glue_down_accum(const float* act, int inter, const fd_bf16* down, int r0, int r1, bool weighted,
                                   float scale, float* h_out, float* partial, void* smem) {
  fd_bf16* as = static_cast<fd_bf16*>(smem);
  fd_glue_to_bf16(act, inter, as);
  fd_gemv_rows(down, inter, as, r0, r1, [&](int r, float dot) {
    if (fd_lane() != 0) return;
    const float y = fd_round_bf16(dot);
    const float contribution = weighted ? fd_round_bf16(scale * y) : y;
    if (partial != nullptr)
      partial[r - r0] = contribution;
    else
      h_out[r] += contribution;
  });
}

// h_out[r] = (((h_out[r] + partials[0][r]) + partials[1][r]) + ...) over the group's n adders, in
// graph order: the same additions in the same order whichever adder arrives last.
__device__ void fd_sum_partials(const float* partials, int n, int r0, int r1, float* h_out) {
  const int rows = r1 - r0;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    float v = h_out[r0 + i];
    for (int k = 0; k < n; ++k) v += partials[k * rows + i];
    h_out[r0 + i] = v;
  }
}

// LM_HEAD through fd_task_lm_head (x converted to bf16 beside its own scratch).
__device__ void fd_glue_lm_head(const float* x, const fd_bf16* norm, const fd_bf16* lm_head, float eps, int hidden,
                                int r0, int r1, int tile, float* logits_row, float* part_max, int* part_idx,
                                void* smem) {
  fd_bf16* x_s = reinterpret_cast<fd_bf16*>(fd_smem_at(smem, fd_lm_head_smem_bytes(hidden)));
  fd_glue_to_bf16(x, hidden, x_s);
  fd_task_lm_head(x_s, norm, eps, lm_head, hidden, r0, r1, logits_row, tile, part_max, part_idx, smem);
}

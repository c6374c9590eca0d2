// Device helpers shared by the task kinds: the model's fixed MLA dimensions, bf16 vector
// unpacking, RMSNorm of an activation vector into shared memory and the weight-streaming dot
// product that every GEMV-shaped task is built on.
//
// Execution model of every task: ONE block runs the task; blockDim.x is any multiple of
// kWarpSize up to kMaxBlockThreads; the caller passes a dynamic shared-memory scratch pointer
// of at least the size the task's *_smem_bytes() function returns.
#pragma once
#include "../port.h"
#include "../runtime/graph_format.h"  // the compiled dimensions and limits, generated from Python

// DeepSeek-V2 MLA dimensions (config.json of DeepSeek-Coder-V2-Lite). Compile-time because
// per-head register arrays are sized from them; the launchers reject other configs.
constexpr int kHeads = FD_COMPILED_N_HEADS;
constexpr int kLatent = FD_COMPILED_KV_RANK;  // kv_lora_rank
constexpr int kRope = FD_COMPILED_QK_ROPE;    // qk_rope_head_dim
constexpr int kNope = FD_COMPILED_QK_NOPE;    // qk_nope_head_dim
constexpr int kVHead = FD_COMPILED_V_HEAD;    // v_head_dim
constexpr int kQHead = kNope + kRope;  // 192 rows of q_proj per head
constexpr int kKvbHead = kNope + kVHead;  // 256 rows of kv_b_proj per head: W_UK then W_UV
constexpr int kVecElems = 8;    // bf16 elements in one 16-byte load

// Block size of every standalone wrapper. The persistent runtime may use another multiple of
// kWarpSize; the tasks only read blockDim.x.
constexpr int kTaskThreads = FD_TASK_THREADS;
// Loads in flight per lane per row in the streaming dot: 256 bytes of weights per lane-row
// pass whatever the warp width, so a 2048-wide row is one pass on 32 and on 64 lanes.
constexpr int kStreamUnroll = 256 / kWarpSize > 0 ? 256 / kWarpSize : 1;

__device__ __forceinline__ void fd_unpack8(fd_vec16 v, float f[8]) {
  f[0] = fd_bf16_lo(v.x); f[1] = fd_bf16_hi(v.x);
  f[2] = fd_bf16_lo(v.y); f[3] = fd_bf16_hi(v.y);
  f[4] = fd_bf16_lo(v.z); f[5] = fd_bf16_hi(v.z);
  f[6] = fd_bf16_lo(v.w); f[7] = fd_bf16_hi(v.w);
}

__device__ __forceinline__ uint32_t fd_pack2(float lo, float hi) {
  return static_cast<uint32_t>(fd_float_to_bf16(lo)) | (static_cast<uint32_t>(fd_float_to_bf16(hi)) << 16);
}

__device__ __forceinline__ fd_vec16 fd_pack8(const float f[8]) {
  fd_vec16 v;
  v.x = fd_pack2(f[0], f[1]); v.y = fd_pack2(f[2], f[3]);
  v.z = fd_pack2(f[4], f[5]); v.w = fd_pack2(f[6], f[7]);
  return v;
}

__device__ __forceinline__ float fd_dot8(fd_vec16 w, const float x[8]) {
  float f[8];
  fd_unpack8(w, f);
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) acc = fmaf(f[j], x[j], acc);
  return acc;
}

__device__ __forceinline__ float fd_silu(float g) { return g / (1.f + __expf(-g)); }

// Activations are stored as bf16 (HF's storage: every stored value rounded where HF rounds) or
// as fp32 (the task graph's F32 buffers: kept as computed). Every task is a template on that
// type, Act; these helpers are the only place the choice shows.
__device__ __forceinline__ float fd_to_float(fd_bf16 v) { return fd_bf16_to_float(v); }
__device__ __forceinline__ float fd_to_float(float v) { return v; }

template <class T> __device__ __forceinline__ T fd_store_as(float v);
template <> __device__ __forceinline__ fd_bf16 fd_store_as<fd_bf16>(float v) { return fd_float_to_bf16(v); }
template <> __device__ __forceinline__ float fd_store_as<float>(float v) { return v; }

// The value v becomes once stored as T (bf16: rounded; fp32: unchanged).
template <class T> __device__ __forceinline__ float fd_as_stored(float v) { return fd_to_float(fd_store_as<T>(v)); }

// Eight consecutive activations as fp32, from bf16 or fp32 storage (shared or global memory).
__device__ __forceinline__ void fd_load_x8(const fd_bf16* xs, int v, float x[8]) {
  fd_unpack8(fd_load16(xs + v * kVecElems), x);
}
__device__ __forceinline__ void fd_load_x8(const float* xs, int v, float x[8]) {
  const float4 a = reinterpret_cast<const float4*>(xs)[2 * v], b = reinterpret_cast<const float4*>(xs)[2 * v + 1];
  x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}

__device__ __forceinline__ void fd_store_x8(fd_bf16* xs, int v, const float x[8]) {
  fd_store16(xs + v * kVecElems, fd_pack8(x));
}
__device__ __forceinline__ void fd_store_x8(float* xs, int v, const float x[8]) {
  reinterpret_cast<float4*>(xs)[2 * v] = make_float4(x[0], x[1], x[2], x[3]);
  reinterpret_cast<float4*>(xs)[2 * v + 1] = make_float4(x[4], x[5], x[6], x[7]);
}

// Loops strided by blockDim.x have a run-time trip count: the compiler then branches between
// iterations, and each iteration's loads wait for the previous ones to be used (one memory round
// trip per iteration). These copies issue a batch of kBatch iterations' loads, predicated, before
// storing any of them.

// dst[i] = convert(src[i]) for i < n, kBatch loads in flight per thread.
template <int kBatch, class To, class From, class Convert>
__device__ __forceinline__ void fd_block_load(To* dst, const From* src, int n, Convert convert) {
  for (int base = threadIdx.x; base < n; base += kBatch * blockDim.x) {
    To v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * blockDim.x;
      v[k] = i < n ? convert(src[i]) : To{};
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * blockDim.x;
      if (i < n) dst[i] = v[k];
    }
  }
}

// dst[i] = src[i] (16-byte values, e.g. float4).
template <int kBatch, class T>
__device__ __forceinline__ void fd_block_copy(T* dst, const T* src, int n) {
  fd_block_load<kBatch>(dst, src, n, [](T v) { return v; });
}

// dst[i] = fp32 of src[i] (bf16 or fp32 activations).
template <int kBatch, class In>
__device__ __forceinline__ void fd_block_to_float(float* dst, const In* src, int n) {
  fd_block_load<kBatch>(dst, src, n, [](In v) { return fd_to_float(v); });
}

// n values of x converted to Out (shared or global memory), then a barrier; n a multiple of 8.
template <class In, class Out>
__device__ __forceinline__ void fd_stage(const In* x, int n, Out* out) {
  for (int v = threadIdx.x; v < n / kVecElems; v += blockDim.x) {  // one piece per thread for a hidden state
    float f[8];
    fd_load_x8(x, v, f);
    fd_store_x8(out, v, f);
  }
  __syncthreads();
}

// The sum of `parts` (<= kMaxStageParts) vectors of n values (x, x + n, ...; added in that order)
// converted to Out, then a barrier; n a multiple of 8. Every part's loads are in flight at once.
constexpr int kMaxStageParts = FD_MAX_MERGE_LAT_PARTS;

template <class In, class Out>
__device__ __forceinline__ void fd_stage_sum(const In* x, int n, int parts, Out* out) {
  for (int v = threadIdx.x; v < n / kVecElems; v += blockDim.x) {
    float f[kMaxStageParts][8];
#pragma unroll
    for (int p = 0; p < kMaxStageParts; ++p)
      if (p < parts) fd_load_x8(x + static_cast<size_t>(p) * n, v, f[p]);
#pragma unroll
    for (int p = 1; p < kMaxStageParts; ++p)
      if (p < parts)
#pragma unroll
        for (int j = 0; j < 8; ++j) f[0][j] += f[p][j];
    fd_store_x8(out, v, f[0]);
  }
  __syncthreads();
}

// RMSNorm as HF's DeepseekV2RMSNorm: fp32 mean of squares, x * rsqrt(var + eps) cast back to
// the input's type (bf16: rounded), times the bf16 weight, stored as Out (bf16: rounded again).
// For an fp32 input that is x * rsqrt(var + eps) * w in fp32. Without a weight
// (weight == nullptr) it converts x to Out. Writes n values to out (shared or global memory);
// n must be a multiple of 8. Ends with a barrier, so out is ready for every thread.
template <class In, class Out>
__device__ __forceinline__ void fd_rmsnorm(const In* x, const fd_bf16* weight, float eps, int n, Out* out) {
  if (weight == nullptr) return fd_stage(x, n, out);
  const int n_vec = n / kVecElems;
  // The weight is read only after the block's sum: its lines start their way into L1 now, so
  // that read waits for no round trip (x's second read hits L1 as well).
  for (int v = threadIdx.x; v < n_vec; v += blockDim.x) fd_prefetch_l1(weight + v * kVecElems);
  float sum_sq = 0.f;
  for (int v = threadIdx.x; v < n_vec; v += blockDim.x) {
    float f[8];
    fd_load_x8(x, v, f);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum_sq = fmaf(f[j], f[j], sum_sq);
  }
  const float inv_rms = rsqrtf(fd_block_sum(sum_sq) / static_cast<float>(n) + eps);
  for (int v = threadIdx.x; v < n_vec; v += blockDim.x) {
    float f[8], w[8];
    fd_load_x8(x, v, f);
    fd_load_x8(weight, v, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = w[j] * fd_as_stored<In>(f[j] * inv_rms);
    fd_store_x8(out, v, f);
  }
  __syncthreads();
}

// RoPE of one adjacent pair (2i, 2i+1) as HF's DeepseekV2 apply_rotary_emb: a complex product
// in fp32 with cos/sin that already include YaRN's attention scaling.
template <class In, class Out>
__device__ __forceinline__ void fd_rope_pair(const In* in, Out* out, float cos_i, float sin_i) {
  const float a = fd_to_float(in[0]), b = fd_to_float(in[1]);
  out[0] = fd_store_as<Out>(a * cos_i - b * sin_i);
  out[1] = fd_store_as<Out>(a * sin_i + b * cos_i);
}

// q_pe of heads [head_begin, head_end): the last kRope of each head's kQHead q values, rotated
// at position pos (cos/sin tables [max_pos, kRope/2], fp32), into q_pe_out[h * kRope ...].
template <class Act>
__device__ __forceinline__ void fd_rope_q_heads(const Act* q, int head_begin, int head_end, const float* cos_table,
                                                const float* sin_table, int pos, Act* q_pe_out) {
  constexpr int kPairs = kRope / 2;
  const float* cos_p = cos_table + static_cast<size_t>(pos) * kPairs;
  const float* sin_p = sin_table + static_cast<size_t>(pos) * kPairs;
  for (int item = threadIdx.x; item < (head_end - head_begin) * kPairs; item += blockDim.x) {
    const int h = head_begin + item / kPairs, i = item % kPairs;
    fd_rope_pair(q + h * kQHead + kNope + 2 * i, q_pe_out + h * kRope + 2 * i, cos_p[i], sin_p[i]);
  }
}

// Where a task's weights are read from: global memory (streamed once, fd_load_stream16), or the
// copy the runtime staged in shared memory before the task's inputs were ready (fd_load_shared16).
// Each task that can be staged is a template on this policy, WL; the staged pointer is offset so
// that the task's own row arithmetic lands in the staged copy.
// kUnroll: the 16-byte pieces of a row a lane loads before it uses the first. From HBM they must be
// many, to keep the SM's share of the copy rate in flight; from shared memory one is enough, and the
// staged instantiations' code is then an eighth as long: staged kinds ran 1.4 % faster per step on
// the H200 with 1 than with 8 (docs/megakernel.md part 12).
struct fd_global_weights {
  static constexpr int kUnroll = kStreamUnroll;
  static __device__ __forceinline__ fd_vec16 load(const void* p) { return fd_load_stream16(p); }
};
struct fd_staged_weights {
  static constexpr int kUnroll = 1;
  static __device__ __forceinline__ fd_vec16 load(const void* p) { return fd_load_shared16(p); }
};

// NR dot products rows[r] . xs of bf16 weight rows with ONE activation vector (bf16 or fp32),
// length n (a multiple of 8), computed by ONE warp: every lane streams 16-byte pieces of the
// rows, WL::kUnroll pieces per row in flight before the first is used; fp32 accumulation.
// Each piece of xs is read once for all NR rows (it lies in shared memory, whose bandwidth a read
// per row would spend NR times). Returns the full sums in every lane.
template <int NR, class XT, class WL = fd_global_weights>
__device__ __forceinline__ void fd_warp_rows_dot(const fd_bf16* const (&rows)[NR], const XT* xs, int n,
                                                 float (&out)[NR]) {
  const int n_vec = n / kVecElems;
  float acc[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) acc[r] = 0.f;
  for (int base = fd_lane(); base < n_vec; base += WL::kUnroll * kWarpSize) {
    fd_vec16 w[NR][WL::kUnroll];
#pragma unroll
    for (int u = 0; u < WL::kUnroll; ++u) {
      const int v = base + u * kWarpSize;
#pragma unroll
      for (int r = 0; r < NR; ++r)
        w[r][u] = v < n_vec ? WL::load(rows[r] + static_cast<size_t>(v) * kVecElems) : fd_vec16{0, 0, 0, 0};
    }
#pragma unroll
    for (int u = 0; u < WL::kUnroll; ++u) {
      const int v = base + u * kWarpSize;
      if (v < n_vec) {
        float x[8];
        fd_load_x8(xs, v, x);
#pragma unroll
        for (int r = 0; r < NR; ++r) acc[r] += fd_dot8(w[r][u], x);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < NR; ++r) out[r] = fd_warp_sum(acc[r]);
}

// Rows [row_begin, row_end) of W (row-major, n columns) times one vector xs, kGemvRowsPerPass
// rows per warp pass so that more loads are in flight; emit(row, dot) runs in every lane.
constexpr int kGemvRowsPerPass = FD_GEMV_ROWS_PER_PASS;

template <class WL = fd_global_weights, int NR = kGemvRowsPerPass, class XT, class Emit>
__device__ __forceinline__ void fd_gemv_rows(const fd_bf16* W, int n, const XT* xs, int row_begin, int row_end,
                                             Emit emit) {
  for (int r = row_begin + NR * fd_warp(); r < row_end; r += NR * fd_num_warps()) {
    const fd_bf16* rows[NR];
#pragma unroll
    for (int k = 0; k < NR; ++k)
      rows[k] = W + static_cast<size_t>(min(r + k, row_end - 1)) * n;  // past the end: recompute the last row
    float dots[NR];
    fd_warp_rows_dot<NR, XT, WL>(rows, xs, n, dots);
#pragma unroll
    for (int k = 0; k < NR; ++k)
      if (r + k < row_end) emit(r + k, dots[k]);
  }
}

// act[r] = SiLU(gate[r] . xs) * (up[r] . xs) for rows [row_begin, row_end) of one MLP's gate and
// up matrices (n columns) and its normed input xs: gate and up rows of two intermediate rows per
// warp pass, four rows in flight. Stored as Act; bf16 rounds as HF does: gate and up rounded
// (nn.Linear output), SiLU(gate) rounded, the product rounded. Lane 0 writes.
template <class Act>
__device__ __forceinline__ void fd_gate_up_rows(const Act* xs, const fd_bf16* gate, const fd_bf16* up, int n,
                                                int row_begin, int row_end, Act* act) {
  constexpr int kRowsPerPass = 2;
  for (int r = row_begin + kRowsPerPass * fd_warp(); r < row_end; r += kRowsPerPass * fd_num_warps()) {
    const fd_bf16* rows[2 * kRowsPerPass];
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k) {
      const size_t row = static_cast<size_t>(min(r + k, row_end - 1)) * n;
      rows[2 * k] = gate + row;
      rows[2 * k + 1] = up + row;
    }
    float dots[2 * kRowsPerPass];
    fd_warp_rows_dot<2 * kRowsPerPass>(rows, xs, n, dots);
#pragma unroll
    for (int k = 0; k < kRowsPerPass; ++k)
      if (fd_lane() == 0 && r + k < row_end) {
        const float g = fd_as_stored<Act>(dots[2 * k]), u = fd_as_stored<Act>(dots[2 * k + 1]);
        act[r + k] = fd_store_as<Act>(fd_as_stored<Act>(fd_silu(g)) * u);
      }
  }
}

// W_UV rows [row_begin, row_end) of the 2048-vector attn_out (row r = h*kVHead + d):
// attn_out[r] = W_UV[h][d] . out_lat[h], W_UV[h] = rows h*256+128 .. h*256+255 of kv_b_proj.weight.
// lat_s holds out_lat of heads head_first.. (fp32, shared memory). Stored as Act (bf16: HF's
// attention output is bf16). Eight rows of one head per warp pass (a 512-wide row is only two
// 16-byte loads per lane, so eight rows keep sixteen loads in flight); row_begin a multiple of 8.
constexpr int kWuvRowsPerPass = FD_WUV_ROWS_PER_PASS;

template <class Act, class WL = fd_global_weights>
__device__ __forceinline__ void fd_wuv_rows(const float* lat_s, int head_first, const fd_bf16* kv_b, int row_begin,
                                            int row_end, Act* attn_out) {
  for (int r = row_begin + kWuvRowsPerPass * fd_warp(); r < row_end; r += kWuvRowsPerPass * fd_num_warps()) {
    const fd_bf16* rows[kWuvRowsPerPass];
#pragma unroll
    for (int k = 0; k < kWuvRowsPerPass; ++k) {
      const int rk = min(r + k, row_end - 1), h = rk / kVHead, d = rk % kVHead;
      rows[k] = kv_b + (static_cast<size_t>(h) * kKvbHead + kNope + d) * kLatent;
    }
    // r's head for every row of the pass (they share it: r and kVHead are multiples of 8, and a row
    // clamped to row_end - 1 is discarded): one read of out_lat serves all eight rows.
    const float* xs = lat_s + (r / kVHead - head_first) * kLatent;
    float dots[kWuvRowsPerPass];
    fd_warp_rows_dot<kWuvRowsPerPass, float, WL>(rows, xs, kLatent, dots);
#pragma unroll
    for (int k = 0; k < kWuvRowsPerPass; ++k)
      if (fd_lane() == 0 && r + k < row_end) attn_out[r + k] = fd_store_as<Act>(dots[k]);
  }
}

// Splits n_items among gridDim.x blocks in contiguous, nearly equal ranges (standalone wrappers).
__device__ __forceinline__ void fd_block_range(int n_items, int items_per_block, int* begin, int* end) {
  *begin = blockIdx.x * items_per_block;
  *end = min(n_items, *begin + items_per_block);
}

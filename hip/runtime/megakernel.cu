// The persistent megakernel: ONE launch decodes n_steps tokens. One worker (block) per SM/CU;
// worker w walks worker_tasks[worker_offsets[w] : worker_offsets[w+1]] of the encoded graph
// (docs/task-graph.md, graph_format.h: the same arrays the CPU simulator runs) once per step:
//   wait   thread 0 spins on acquire loads of each input counter until it reaches
//          TRIGGERS x (step + 1 - lag), under the watchdog; then a block barrier;
//   run    dispatch on KIND to one call of the kind's task function (hip/tasks/);
//   signal block barrier, then thread 0 does a release add of 1 on OUT_EVENT.
// Counters are zeroed by the host before the launch and never reset. The step chain (lm_head
// tiles -> argmax -> tokens[s+1] -> embed of step s+1) stays on the device.
//
// Every kind is one call of its task function (hip/tasks/, docs/kernels.md "The task graph's kinds
// as calls") with fp32 activations, as the graph's F32 buffers hold them (docs/task-graph.md §3).
// Several adders into one row range of the residual sum (the shared and routed experts' down
// tiles) each add their contribution into their own zeroed scratch row instead (alone there, so
// exact) and count themselves on the range's arrival counter (a host-computed table, not part of
// the graph); the last to arrive adds the rows into h.<l+1> in graph order and zeroes them again.
// So the sum is bit-identical from run to run, and no adder waits for another.
//
// Watchdog: a wait that lasts longer than timeout_ticks records (worker, task, event, counter,
// target, step, kind) in the error block (first one wins) and raises the abort flag, which every
// waiting worker polls, so all blocks return promptly and the host raises the error.
#define FD_NO_STANDALONE
#include "../tasks/common.h"
#include "graph_format.h"
// The task functions, compiled into this translation unit with internal linkage: the library also
// holds each file's own object (its standalone launcher), and nvcc emits host stubs for both.
namespace {
#include "../tasks/argmax.cu"
#include "../tasks/attention_chunk.cu"
#include "../tasks/attention_merge.cu"
#include "../tasks/embed.cu"
#include "../tasks/expert_down.cu"
#include "../tasks/expert_gate_up.cu"
#include "../tasks/lm_head.cu"
#include "../tasks/q_absorb.cu"
#include "../tasks/rmsnorm_gemv.cu"
#include "../tasks/rope_cache.cu"
#include "../tasks/router_topk.cu"
}  // namespace

// The runtime's shared-memory budget per block: the largest kind (the dense MLP's down tile, its
// 10944 fp32 activations) needs 43 776 bytes.
constexpr int FD_RUNTIME_SMEM_BYTES = 64 * 1024;

// Error block layout (int32 words), read by fleet_decode.kernels.megakernel.
enum fd_error_word {
  FD_ERR_FLAG = 0,  // 0: none, 1: watchdog timeout
  FD_ERR_WORKER,
  FD_ERR_TASK,
  FD_ERR_EVENT,
  FD_ERR_COUNTER,
  FD_ERR_TARGET,
  FD_ERR_STEP,
  FD_ERR_KIND,
  FD_ERR_ABORT,  // set once any worker timed out: every worker stops waiting
  FD_ERR_WORDS
};
// add_order: per task [arrival counter, rank, group size, offset (floats) of its scratch row];
// counter -1 = not one of several adders. The group's rows are the rank-0 row + r * row length.
constexpr int FD_ADD_ORDER_WORDS = 4;

constexpr int kRuntimeThreads = 256;

// prefetch: per task FD_PREFETCH_RANGES ranges of [source, byte begin, bytes, row bytes] (int64),
// host-computed (fleet_decode.kernels.prefetch): source >= 0 a weight slot, <= -2 the buffer
// -2 - source, -1 unused. row bytes > 0 marks an MLA cache range starting at row begin / row bytes:
// only rows below the step's position (filled before the step) are fetched.
// prefetch_routes: per task [route_idx buffer, top-k slot, bytes per expert, router event] (int64),
// -1s unless the task reads a routed expert; then its ranges are offsets inside the chosen expert,
// which is known (and its ranges fetched) only once the router's event has fired this step.
constexpr int FD_PREFETCH_RANGES = 4;
constexpr int FD_PREFETCH_WORDS = 4;
constexpr int FD_PREFETCH_ROUTE_WORDS = 4;
// prefetch_mode bits (a launch argument; 0 = no prefetch, the behaviour before it existed).
enum fd_prefetch_bit {
  FD_PREFETCH_THIS = 1,  // before waiting for a task's inputs, prefetch its own static ranges
  FD_PREFETCH_NEXT = 2,  // ... and the static ranges of the worker's next task
  FD_PREFETCH_BULK = 4,  // one bulk (TMA) prefetch per 64 KiB instead of one per 128-byte line
  FD_PREFETCH_ROUTED = 8,  // routed-expert tiles too, where the router has fired by then
  FD_PREFETCH_AFTER_WAIT = 16,  // once a task's inputs are ready, the next task's ranges (overlaps its run)
  FD_PREFETCH_READY = 32,  // once a task's inputs are ready, its own ranges: all in flight ahead of its loads
  FD_PREFETCH_ALL_BITS = 63,
};
constexpr long long kBulkPrefetchPiece = 64 * 1024;
// sync_mode (a launch argument): how a wait and a signal order memory.
//   FENCED: a device fence after the wait, fences around the adders' arrival, and a fence before
//           the returning release add of the signal (the runtime as first written).
//   LEAN:   the acquire loads and release atomics alone, ordered for the block by its barriers
//           (CUTLASS's GenericBarrier pattern), and the signal a non-returning red.release.
enum fd_sync_mode { FD_SYNC_FENCED = 0, FD_SYNC_LEAN = 1 };
// trace (optional): per step and task, thread 0's wall clock (port.h; 32 ns ticks on the H200)
// when the task is reached, when its inputs are ready (after the barrier) and after its signal.
// Off (nullptr) it costs one branch per task.
enum fd_trace_word { FD_TR_REACHED = 0, FD_TR_READY = 1, FD_TR_DONE = 2, FD_TRACE_WORDS = 3 };

struct fd_runtime_args {
  const int* blob;
  void* const* buffers;      // N_BUFFERS device pointers
  const void* const* weights;  // N_WEIGHTS device pointers
  int* counters;             // N_EVENTS, zeroed
  int* arrivals;             // per adder group, zeroed
  const int* add_order;      // [N_TASKS][FD_ADD_ORDER_WORDS]
  float* partials;           // the adders' scratch rows, zeroed
  int partial_row;           // floats per scratch row (the summed buffer's length)
  int* error;                // [FD_ERR_WORDS], zeroed
  unsigned long long* step_ticks;  // [n_steps + 1]: launch start, then each argmax's end
  int pos0;
  int n_steps;
  unsigned long long timeout_ticks;
  const long long* prefetch;  // [N_TASKS][FD_PREFETCH_RANGES][FD_PREFETCH_WORDS]
  const long long* prefetch_routes;  // [N_TASKS][FD_PREFETCH_ROUTE_WORDS]
  int prefetch_mode;          // fd_prefetch_bit flags
  long long prefetch_bytes;   // at most this many bytes per task prefetched (L2 holds ~50 MB for all workers)
  int poll_every;             // counter polls between two looks at the abort flag and the clock
  int sync_mode;              // fd_sync_mode
  unsigned long long* trace;  // nullptr, or [n_steps][N_TASKS][FD_TRACE_WORDS]
};

__device__ __forceinline__ void fd_trace_mark(unsigned long long* tr, int word) {
  if (tr != nullptr) tr[word] = fd_wall_ticks();
}

__device__ __forceinline__ float fd_header_f32(const int* h, int word) { return __int_as_float(h[word]); }

// Thread 0 waits until *counter >= target; false if the watchdog fired or another worker aborted.
// Only thread 0 calls it; the caller publishes the outcome to the block.
__device__ bool fd_wait_counter(const fd_runtime_args& a, const int* counter, int target, int task, int event, int step,
                                int kind) {
  if (target <= 0) return true;
  int value = fd_load_acquire(counter);
  if (value >= target) return true;
  const unsigned long long start = fd_wall_ticks();
  while (true) {
    // The abort flag and the clock are two more memory/clock reads per poll: look at them only
    // every poll_every polls, so the spin mostly watches the one counter.
    for (int k = 1; k < a.poll_every; ++k) {
      if (fd_load_acquire(counter) >= target) return true;
    }
    value = fd_load_acquire(counter);
    if (value >= target) return true;
    if (fd_load_acquire(a.error + FD_ERR_ABORT)) return false;
    if (fd_wall_ticks() - start > a.timeout_ticks) {
      if (fd_atomic_add_release(a.error + FD_ERR_FLAG, 1) == 0) {  // the first timeout is the one reported
        a.error[FD_ERR_WORKER] = blockIdx.x;
        a.error[FD_ERR_TASK] = task;
        a.error[FD_ERR_EVENT] = event;
        a.error[FD_ERR_COUNTER] = value;
        a.error[FD_ERR_TARGET] = target;
        a.error[FD_ERR_STEP] = step;
        a.error[FD_ERR_KIND] = kind;
      }
      fd_store_release(a.error + FD_ERR_ABORT, 1);
      return false;
    }
  }
}

// The whole block issues L2 prefetches of task t's ranges (hints: nothing waits for them). pos: the
// step's position; cache rows from pos on are not filled yet and are skipped.
__device__ void fd_prefetch_task(const fd_runtime_args& a, const int* h, int t, int step) {
  const int pos = a.pos0 + step;
  const long long* route = a.prefetch_routes + static_cast<size_t>(t) * FD_PREFETCH_ROUTE_WORDS;
  long long expert_offset = 0;
  if (route[0] >= 0) {  // a routed-expert tile: only once this step's route is out
    if (!(a.prefetch_mode & FD_PREFETCH_ROUTED)) return;
    const int event = static_cast<int>(route[3]);
    const int* events = h + h[FD_H_EVENTS_AT];
    if (fd_load_acquire(a.counters + event) < events[event * FD_EVENT_WORDS + FD_E_TRIGGERS] * (step + 1)) return;
    const int expert = static_cast<const int*>(a.buffers[route[0]])[route[1]];
    if (expert < 0 || expert >= h[FD_H_N_EXPERTS]) return;
    expert_offset = expert * route[2];
  }
  const long long* r = a.prefetch + static_cast<size_t>(t) * FD_PREFETCH_RANGES * FD_PREFETCH_WORDS;
  const bool bulk = (a.prefetch_mode & FD_PREFETCH_BULK) && fd_has_bulk_prefetch();
  long long budget = a.prefetch_bytes;
  for (int k = 0; k < FD_PREFETCH_RANGES && budget > 0; ++k, r += FD_PREFETCH_WORDS) {
    const long long source = r[0], begin = r[1], row_bytes = r[3];
    if (source == -1) continue;
    long long bytes = min(r[2], budget);
    if (row_bytes > 0) bytes = min(bytes, max(0LL, (pos - begin / row_bytes) * row_bytes));
    if (bytes <= 0) continue;
    budget -= bytes;
    const char* base =
        static_cast<const char*>(source >= 0 ? a.weights[source] : a.buffers[-2 - source]) + expert_offset + begin;
    if (bulk && (reinterpret_cast<uintptr_t>(base) % 16) == 0 && bytes % 16 == 0) {
      for (long long off = threadIdx.x * kBulkPrefetchPiece; off < bytes; off += blockDim.x * kBulkPrefetchPiece)
        fd_prefetch_l2_bulk(base + off, static_cast<uint32_t>(min(kBulkPrefetchPiece, bytes - off)));
      continue;
    }
    // One address per 128-byte line the range touches, each inside [base, base + bytes).
    const uintptr_t first_line = reinterpret_cast<uintptr_t>(base) & ~static_cast<uintptr_t>(kPrefetchLine - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(base) + bytes;
    for (uintptr_t line = first_line + threadIdx.x * kPrefetchLine; line < end; line += blockDim.x * kPrefetchLine)
      fd_prefetch_l2(reinterpret_cast<const void*>(max(line, reinterpret_cast<uintptr_t>(base))));
  }
}

// into: where an adding task adds (its own scratch row, or h_out itself when it is the only adder).
__device__ void fd_run_task(const fd_runtime_args& a, const int* h, const int* rec, int step, float* into,
                            void* smem) {
  void* const* B = a.buffers;
  const void* const* W = a.weights;
  const int* buf = rec + FD_T_BUF0;
  const int* wt = rec + FD_T_WT0;
  const int b0 = rec[FD_T_TILE_BEGIN], b1 = rec[FD_T_TILE_END], slot = rec[FD_T_SLOT];
  const int hidden = h[FD_H_HIDDEN], inter = h[FD_H_MOE_INTER], vocab = h[FD_H_VOCAB];
  const int pos = a.pos0 + step;
  const float eps = fd_header_f32(h, FD_H_RMS_EPS_F32);
  auto F = [&](int operand) { return static_cast<float*>(B[buf[operand]]); };
  auto I = [&](int operand) { return static_cast<int*>(B[buf[operand]]); };
  auto M = [&](int operand) { return static_cast<fd_bf16*>(B[buf[operand]]); };
  auto WM = [&](int operand) { return static_cast<const fd_bf16*>(W[wt[operand]]); };
  auto WF = [&](int operand) { return static_cast<const float*>(W[wt[operand]]); };
  const float* none = nullptr;

  switch (rec[FD_T_KIND]) {
    case FD_KIND_EMBED:
      fd_task_embed(WM(FD_EMBED_WT_EMBED), I(FD_EMBED_BUF_TOKENS) + step, hidden, b0, b1, F(FD_EMBED_BUF_OUT));
      break;
    case FD_KIND_RMSNORM_GEMV:
      fd_task_rmsnorm_gemv(F(FD_RMSNORM_GEMV_BUF_X), WM(FD_RMSNORM_GEMV_WT_NORM), eps, WM(FD_RMSNORM_GEMV_WT_MATRIX),
                           hidden, b0, b1, none, F(FD_RMSNORM_GEMV_BUF_Y), static_cast<float*>(nullptr), smem);
      break;
    case FD_KIND_ROPE_Q_ABSORB:
      fd_task_rope_q_absorb(F(FD_ROPE_Q_ABSORB_BUF_Q), WM(FD_ROPE_Q_ABSORB_WT_W_UK),
                            rec[FD_T_ARG0 + FD_ROPE_Q_ABSORB_ARG_PARTS], WF(FD_ROPE_Q_ABSORB_WT_ROPE_COS),
                            WF(FD_ROPE_Q_ABSORB_WT_ROPE_SIN), pos, b0, b1, F(FD_ROPE_Q_ABSORB_BUF_Q_LAT),
                            F(FD_ROPE_Q_ABSORB_BUF_Q_PE), smem);
      break;
    case FD_KIND_CACHE_APPEND:
      fd_task_cache_append(F(FD_CACHE_APPEND_BUF_KV_A), WM(FD_CACHE_APPEND_WT_KV_NORM), eps,
                           WF(FD_CACHE_APPEND_WT_ROPE_COS), WF(FD_CACHE_APPEND_WT_ROPE_SIN), pos,
                           M(FD_CACHE_APPEND_BUF_CKV), M(FD_CACHE_APPEND_BUF_KPE));
      break;
    case FD_KIND_ATTN_CHUNK: {
      float* part_ml = F(FD_ATTN_CHUNK_BUF_PART_ML) + 2 * slot * kHeads;
      fd_task_attention_chunk(F(FD_ATTN_CHUNK_BUF_Q_LAT), F(FD_ATTN_CHUNK_BUF_Q_PE), M(FD_ATTN_CHUNK_BUF_CKV),
                              M(FD_ATTN_CHUNK_BUF_KPE), pos + 1, b0, b1, fd_header_f32(h, FD_H_ATTN_SCALE_F32), part_ml,
                              part_ml + 1, 2, F(FD_ATTN_CHUNK_BUF_PART_O) + static_cast<size_t>(slot) * kHeads * kLatent,
                              smem);
      break;
    }
    case FD_KIND_ATTN_MERGE_UV: {
      const float* part_ml = F(FD_ATTN_MERGE_UV_BUF_PART_ML);
      fd_task_attention_merge_uv(part_ml, part_ml + 1, 2, F(FD_ATTN_MERGE_UV_BUF_PART_O),
                                 rec[FD_T_ARG0 + FD_ATTN_MERGE_UV_ARG_N_CHUNKS], WM(FD_ATTN_MERGE_UV_WT_KV_B), b0, b1,
                                 F(FD_ATTN_MERGE_UV_BUF_ATTN_OUT), smem);
      break;
    }
    case FD_KIND_O_PROJ_RESIDUAL:
      fd_task_rmsnorm_gemv(F(FD_O_PROJ_RESIDUAL_BUF_ATTN_OUT), static_cast<const fd_bf16*>(nullptr), 0.f,
                           WM(FD_O_PROJ_RESIDUAL_WT_O_PROJ), kHeads * kVHead, b0, b1,
                           F(FD_O_PROJ_RESIDUAL_BUF_RESIDUAL), F(FD_O_PROJ_RESIDUAL_BUF_H_ATTN),
                           F(FD_O_PROJ_RESIDUAL_BUF_H_OUT), smem);
      break;
    case FD_KIND_ROUTER:
      fd_task_router_logits(F(FD_ROUTER_BUF_X), WM(FD_ROUTER_WT_NORM), eps, WF(FD_ROUTER_WT_ROUTER), hidden, b0, b1,
                            F(FD_ROUTER_BUF_LOGITS), smem);
      break;
    case FD_KIND_ROUTE_TOPK:
      fd_task_route_topk(F(FD_ROUTE_TOPK_BUF_LOGITS), h[FD_H_N_EXPERTS], h[FD_H_TOP_K],
                         fd_header_f32(h, FD_H_ROUTED_SCALING_F32), nullptr, I(FD_ROUTE_TOPK_BUF_ROUTE_IDX),
                         F(FD_ROUTE_TOPK_BUF_ROUTE_W), static_cast<float*>(smem));
      break;
    case FD_KIND_GATE_UP:
      fd_task_expert_gate_up(F(FD_GATE_UP_BUF_X), WM(FD_GATE_UP_WT_NORM), eps, WM(FD_GATE_UP_WT_GATE),
                             WM(FD_GATE_UP_WT_UP), 0LL, static_cast<const int*>(nullptr), 0, hidden, b0, b1,
                             F(FD_GATE_UP_BUF_ACT), smem);
      break;
    case FD_KIND_DOWN_ACCUM: {
      // The act length (the down matrix's width) differs between the dense MLP and the shared
      // experts and is not in the task record: it is the act buffer's size.
      const int* act_rec = h + h[FD_H_BUFFERS_AT] + buf[FD_DOWN_ACCUM_BUF_ACT] * FD_BUFFER_WORDS;
      fd_task_down_accum(WM(FD_DOWN_ACCUM_WT_DOWN), 0LL, static_cast<const int*>(nullptr), none, 0,
                         F(FD_DOWN_ACCUM_BUF_ACT), act_rec[FD_B_ROWS] * act_rec[FD_B_COLS], b0, b1, into, smem);
      break;
    }
    case FD_KIND_EXPERT_GATE_UP: {
      const fd_bf16* gate_up = WM(FD_EXPERT_GATE_UP_WT_GATE_UP);
      fd_task_expert_gate_up(F(FD_EXPERT_GATE_UP_BUF_X), WM(FD_EXPERT_GATE_UP_WT_NORM), eps, gate_up,
                             gate_up + static_cast<size_t>(inter) * hidden, 2LL * inter * hidden,
                             I(FD_EXPERT_GATE_UP_BUF_ROUTE_IDX), slot, hidden, b0, b1, F(FD_EXPERT_GATE_UP_BUF_ACT),
                             smem);
      break;
    }
    case FD_KIND_EXPERT_DOWN_ACCUM:
      fd_task_down_accum(WM(FD_EXPERT_DOWN_ACCUM_WT_DOWN), static_cast<long long>(hidden) * inter,
                         I(FD_EXPERT_DOWN_ACCUM_BUF_ROUTE_IDX), F(FD_EXPERT_DOWN_ACCUM_BUF_ROUTE_W), slot,
                         F(FD_EXPERT_DOWN_ACCUM_BUF_ACT), inter, b0, b1, into, smem);
      break;
    case FD_KIND_LM_HEAD:
      fd_task_lm_head(F(FD_LM_HEAD_BUF_X), WM(FD_LM_HEAD_WT_NORM), eps, WM(FD_LM_HEAD_WT_LM_HEAD), hidden, b0, b1,
                      F(FD_LM_HEAD_BUF_LOGITS) + static_cast<size_t>(step) * vocab, slot, F(FD_LM_HEAD_BUF_PART_MAX),
                      I(FD_LM_HEAD_BUF_PART_IDX), smem);
      break;
    case FD_KIND_ARGMAX:
      fd_task_argmax(F(FD_ARGMAX_BUF_PART_MAX), I(FD_ARGMAX_BUF_PART_IDX), rec[FD_T_ARG0 + FD_ARGMAX_ARG_N_TILES],
                     nullptr, I(FD_ARGMAX_BUF_TOKENS), step + 1);
      break;
    default:
      break;  // decode_graph rejects unknown kinds before upload
  }
}

// The last adder of a row range: h_out[r] = ((h_out[r] + row_0[r]) + row_1[r]) + ... in graph order
// (the same additions whichever adder arrives last), zeroing the rows for the next step.
__device__ void fd_sum_partials(float* rows, int n, int row_length, int r0, int r1, float* h_out) {
  for (int r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    float v = h_out[r];
    for (int k = 0; k < n; ++k) {
      v += rows[static_cast<size_t>(k) * row_length + r];
      rows[static_cast<size_t>(k) * row_length + r] = 0.f;
    }
    h_out[r] = v;
  }
}

// The buffer an adding task adds into (its h_out operand).
__device__ __forceinline__ float* fd_accumulated(const fd_runtime_args& a, const int* rec) {
  const int operand = rec[FD_T_KIND] == FD_KIND_DOWN_ACCUM ? FD_DOWN_ACCUM_BUF_H_OUT : FD_EXPERT_DOWN_ACCUM_BUF_H_OUT;
  return static_cast<float*>(a.buffers[rec[FD_T_BUF0 + operand]]);
}

__global__ void __launch_bounds__(kRuntimeThreads, 1) fd_megakernel(fd_runtime_args a) {
  extern __shared__ __align__(16) unsigned char fd_smem[];
  __shared__ int proceed, last_adder;
  const int* h = a.blob;
  const int* tasks = h + h[FD_H_TASKS_AT];
  const int* events = h + h[FD_H_EVENTS_AT];
  const int* offsets = h + h[FD_H_WORKER_OFFSETS_AT];
  const int* list = h + h[FD_H_WORKER_TASKS_AT];
  const int first = offsets[blockIdx.x], last = offsets[blockIdx.x + 1];
  if (blockIdx.x == 0 && threadIdx.x == 0) a.step_ticks[0] = fd_wall_ticks();

  for (int step = 0; step < a.n_steps; ++step) {
    for (int i = first; i < last; ++i) {
      const int t = list[i];
      const int* rec = tasks + static_cast<size_t>(t) * FD_TASK_WORDS;
      const int* order = a.add_order + t * FD_ADD_ORDER_WORDS;
      unsigned long long* tr =
          a.trace != nullptr && threadIdx.x == 0
              ? a.trace + (static_cast<size_t>(step) * h[FD_H_N_TASKS] + t) * FD_TRACE_WORDS
              : nullptr;
      fd_trace_mark(tr, FD_TR_REACHED);
      if (a.prefetch_mode & FD_PREFETCH_THIS) fd_prefetch_task(a, h, t, step);
      if ((a.prefetch_mode & FD_PREFETCH_NEXT) && i + 1 < last) fd_prefetch_task(a, h, list[i + 1], step);
      if (threadIdx.x == 0) {
        bool ok = true;
        for (int j = 0; ok && j < rec[FD_T_N_INPUTS]; ++j) {
          const int e = rec[FD_T_IN0_EVENT + 2 * j], lag = rec[FD_T_IN0_LAG + 2 * j];
          ok = fd_wait_counter(a, a.counters + e, events[e * FD_EVENT_WORDS + FD_E_TRIGGERS] * (step + 1 - lag), t, e,
                               step, rec[FD_T_KIND]);
        }
        if (a.sync_mode == FD_SYNC_FENCED) fd_fence_device();
        proceed = ok;  // the whole block reads what the signallers published once the barrier below passes
      }
      __syncthreads();
      if (!proceed) return;
      fd_trace_mark(tr, FD_TR_READY);
      if (a.prefetch_mode & FD_PREFETCH_READY) fd_prefetch_task(a, h, t, step);
      if ((a.prefetch_mode & FD_PREFETCH_AFTER_WAIT) && i + 1 < last) fd_prefetch_task(a, h, list[i + 1], step);
      const bool adds = rec[FD_T_KIND] == FD_KIND_DOWN_ACCUM || rec[FD_T_KIND] == FD_KIND_EXPERT_DOWN_ACCUM;
      float* into = order[0] >= 0 ? a.partials + order[3] : adds ? fd_accumulated(a, rec) : nullptr;
      fd_run_task(a, h, rec, step, into, fd_smem);
      __syncthreads();
      if (order[0] >= 0) {
        if (threadIdx.x == 0) {
          if (a.sync_mode == FD_SYNC_FENCED) fd_fence_device();
          const int before = fd_atomic_add_acq_rel(a.arrivals + order[0], 1);
          if (a.sync_mode == FD_SYNC_FENCED) fd_fence_device();
          last_adder = before == (step + 1) * order[2] - 1;  // arrivals never reset: n per step
        }
        __syncthreads();
        if (last_adder) {
          fd_sum_partials(a.partials + order[3] - static_cast<size_t>(order[1]) * a.partial_row, order[2],
                          a.partial_row, rec[FD_T_TILE_BEGIN], rec[FD_T_TILE_END], fd_accumulated(a, rec));
          __syncthreads();
        }
      }
      if (threadIdx.x == 0) {
        if (a.sync_mode == FD_SYNC_FENCED) {
          fd_fence_device();
          if (rec[FD_T_OUT_EVENT] >= 0) fd_atomic_add_release(a.counters + rec[FD_T_OUT_EVENT], 1);
        } else if (rec[FD_T_OUT_EVENT] >= 0) {
          fd_signal_add_release(a.counters + rec[FD_T_OUT_EVENT], 1);
        }
        if (rec[FD_T_KIND] == FD_KIND_ARGMAX) a.step_ticks[step + 1] = fd_wall_ticks();
        fd_trace_mark(tr, FD_TR_DONE);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// C ABI (fleet_decode.kernels.megakernel). Returns 0, a negative argument error, or the
// runtime's error code (fd_error_string names both).
FD_EXPORT int fd_megakernel_threads() { return kRuntimeThreads; }
FD_EXPORT int fd_megakernel_smem_bytes() { return FD_RUNTIME_SMEM_BYTES; }
FD_EXPORT int fd_megakernel_error_words() { return FD_ERR_WORDS; }
FD_EXPORT int fd_megakernel_add_order_words() { return FD_ADD_ORDER_WORDS; }
FD_EXPORT int fd_megakernel_prefetch_ranges() { return FD_PREFETCH_RANGES; }
FD_EXPORT int fd_megakernel_prefetch_words() { return FD_PREFETCH_WORDS; }
FD_EXPORT int fd_megakernel_prefetch_route_words() { return FD_PREFETCH_ROUTE_WORDS; }
FD_EXPORT int fd_megakernel_trace_words() { return FD_TRACE_WORDS; }
FD_EXPORT int fd_megakernel_sync_modes() { return FD_SYNC_LEAN + 1; }
FD_EXPORT double fd_megakernel_ticks_per_second() { return fd_wall_ticks_per_second(); }

FD_EXPORT int fd_megakernel_launch(const int* blob, int n_workers, void* const* buffers, const void* const* weights,
                                   int* counters, int* arrivals, const int* add_order, float* partials, int* error,
                                   int partial_row, unsigned long long* step_ticks, int pos0, int n_steps,
                                   double timeout_seconds, const long long* prefetch,
                                   const long long* prefetch_routes, int prefetch_mode, long long prefetch_bytes,
                                   int poll_every, int sync_mode, unsigned long long* trace, void* stream) {
  if (n_workers <= 0 || n_steps <= 0 || pos0 < 0 || partial_row <= 0 || !(timeout_seconds > 0)) return -1;
  if (prefetch_mode < 0 || prefetch_mode > FD_PREFETCH_ALL_BITS || (prefetch_mode && !(prefetch && prefetch_routes)) ||
      prefetch_bytes < 0 || poll_every < 1 || (sync_mode != FD_SYNC_FENCED && sync_mode != FD_SYNC_LEAN))
    return -1;
  const fd_error_t attr = fd_set_max_dynamic_smem(reinterpret_cast<const void*>(&fd_megakernel), FD_RUNTIME_SMEM_BYTES);
  if (attr != fd_success) return static_cast<int>(attr);
  fd_runtime_args a{blob,     buffers,    weights,    counters, arrivals, add_order,
                    partials, partial_row, error,    step_ticks, pos0, n_steps,
                    static_cast<unsigned long long>(timeout_seconds * fd_wall_ticks_per_second()),
                    prefetch, prefetch_routes, prefetch_mode, prefetch_bytes, poll_every, sync_mode, trace};
  void* args[] = {&a};
  return static_cast<int>(fd_launch_cooperative(reinterpret_cast<const void*>(&fd_megakernel), dim3(n_workers),
                                                dim3(kRuntimeThreads), args, FD_RUNTIME_SMEM_BYTES,
                                                static_cast<fd_stream_t>(stream)));
}

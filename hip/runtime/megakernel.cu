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
// So the sum is bit-identical from run to run, and no adder waits for another. The same counters
// run tails (fleet_decode.graph.tails): a small task after a stage of tiles (the top-k
// after the router's tiles) is run by the last tile to arrive, not by a worker that waits for them.
//
// Staging: a task whose weights are one contiguous range that fits the stage (a shared-memory
// buffer beside the tasks' scratch; host table fleet_decode.kernels.staging) has that range copied
// there BEFORE the worker waits for the task's inputs: bulk copies (TMA) completing on an mbarrier
// on sm_90, a block copy elsewhere. The task then reads its weights from shared memory. On sm_90
// the host's planner may have an earlier entry of the list send the tile (the table's `ahead`).
//
// Stop: the ARGMAX task publishes each token to host-mapped memory (the host prints while the
// kernel runs) and, if the token is a stop id, records its step; every worker checks that record
// once per step, after its first wait of the step (which orders it after the previous token).
//
// Watchdog: a wait that lasts longer than timeout_ticks records (worker, task, event, counter,
// target, step, kind) in the error block (first one wins) and raises the abort flag, which every
// waiting worker polls, so all blocks return promptly and the host raises the error.
#define FD_NO_STANDALONE
#include "../tasks/common.h"
// The task functions, compiled into this translation unit with internal linkage: the library also
// holds each file's own object (its standalone launcher), and nvcc emits host stubs for both.
namespace {
#include "../tasks/argmax.cu"
#include "../tasks/attention_chunk.cu"
#include "../tasks/attention_merge_uv.cu"
#include "../tasks/cache_append.cu"
#include "../tasks/down_accum.cu"
#include "../tasks/embed.cu"
#include "../tasks/expert_gate_up.cu"
#include "../tasks/gate_up_down.cu"
#include "../tasks/lm_head.cu"
#include "../tasks/o_proj_router.cu"
#include "../tasks/rmsnorm_gemv.cu"
#include "../tasks/rope_q_absorb.cu"
#include "../tasks/router_topk.cu"
#include "../tasks/sum_fixed_point.cu"
#include "../tasks/sum_partials.cu"
}  // namespace

// The runtime's shared-memory scratch per block, which the task functions use: the largest kind
// (the dense MLP's down tile, its 10944 fp32 activations) needs 43 776 bytes; the host refuses a
// graph whose act vectors need more. No larger: with the stage, every KB more past 196 KB of shared
// memory per SM costs the SM half its L1 (the H200's carve-outs step from 196 to 228 KB).
constexpr int FD_SCRATCH_SMEM_BYTES = 48 * 1024;
static_assert(fd_attention_chunk_smem_bytes() <= FD_SCRATCH_SMEM_BYTES, "an attention chunk outgrows the scratch");
static_assert(fd_attention_merge_smem_bytes(1) <= FD_SCRATCH_SMEM_BYTES, "a merge outgrows the scratch");
static_assert(fd_sum_partials_smem_bytes(FD_RUNTIME_THREADS) <= FD_SCRATCH_SMEM_BYTES, "a sum outgrows the scratch");
// Beside it, the stage: where a task's weight tile is copied before its inputs are ready. 128 KB
// holds the largest tile of the attention chain (a head's W_UV, a 32-row q/kv tile); the H200
// allows 227 KB per block. AMD's CUs have 64 KB of LDS in all, which the scratch already needs.
#if FD_HIP
constexpr int FD_STAGE_SMEM_BYTES = 0;
#else
constexpr int FD_STAGE_SMEM_BYTES = 128 * 1024;
#endif
constexpr bool kStaging = FD_STAGE_SMEM_BYTES > 0;

// Error block layout (int32 words), read by fleet_decode.kernels.runtime.
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
// add_order: per task [arrival counter, rank, group size, offset (floats) of its scratch row, tail];
// counter -1 = counts nowhere. Adders: the group's rows are the rank-0 row + r * row length, tail -1.
// A tail's signallers: no rows; the last to arrive runs task `tail`, which no worker's list holds.
constexpr int FD_ADD_ORDER_WORDS = 5;
// stage: per task [weight slot, byte offset, bytes, ahead, source] (int64, fleet_decode.kernels.staging):
// the one weight range the task streams, copied into the stage before the task waits (slot -1: not
// staged), the later task of the same list whose tile this task's reach sends (-1: none), and the
// range's device address (resolved on the host: the copy leaves one dependent load after its record,
// not two). The host's planner guarantees the stage is free then and stays untouched until that task runs.
constexpr int FD_STAGE_WORDS = 5;

constexpr int kRuntimeThreads = FD_RUNTIME_THREADS;

// trace (optional): per step and task, thread 0's wall clock (port.h; 32 ns ticks on the H200)
// when the task is reached, when its inputs are ready (after the barrier) and after its signal, and
// whether its staged weights had landed when its inputs were ready (1 yes, 2 no, 0 not staged).
// Off (nullptr) it costs one branch per task.
enum fd_trace_word { FD_TR_REACHED = 0, FD_TR_READY = 1, FD_TR_DONE = 2, FD_TR_RESIDENT = 3, FD_TRACE_WORDS = 4 };

// The launch's arguments: ONE struct, mirrored field by field by fleet_decode.kernels.runtime.LaunchArgs
// (ctypes), so the two sides cannot disagree on an argument's position.
struct fd_launch_args {
  const int* blob;             // the encoded graph (graph_format.h)
  void* const* buffers;        // N_BUFFERS device pointers
  const void* const* weights;  // N_WEIGHTS device pointers
  int* counters;               // N_EVENTS, zeroed
  int* arrivals;               // per adder group, zeroed
  const int* add_order;        // [N_TASKS][FD_ADD_ORDER_WORDS]
  float* partials;             // the adders' scratch rows, zeroed
  int* error;                  // [FD_ERR_WORDS], zeroed
  unsigned long long* step_ticks;  // [n_steps + 1]: launch start, then each argmax's end
  const long long* stage;      // [N_TASKS][FD_STAGE_WORDS]
  unsigned long long* trace;   // nullptr, or [n_steps][N_TASKS][FD_TRACE_WORDS]
  const int* stop_ids;         // [n_stop_ids]: a token among them ends the launch after its step
  int* stopped_at;             // device int, zeroed: 1 + the step whose token was a stop id
  int* published;              // nullptr, or host-mapped [n_steps]: each step's token once made
  const float* logits;         // the graph's logits log [max_steps][vocab]: what a sampled token is drawn from
  const void* views;           // [N_TASKS] fd_task_view resolved on the host (runtime.task_views), or nullptr
  double timeout_seconds;      // the watchdog's bound on any one wait
  int n_workers;
  int partial_row;             // floats per scratch row (the summed buffer's length)
  int pos0;                    // the position of step 0
  int n_steps;
  int n_stop_ids;
  int stage_bytes;             // the stage's size; 0: nothing staged
  float temperature;           // sampling (hip/tasks/sampling.h fd_sampling): 0 greedy
  int top_k;                   // 0: no top-k
  float top_p;                 // >= 1: no top-p
  unsigned int seed_lo;         // the seed's low and high 32-bit words
  unsigned int seed_hi;
};

__device__ __forceinline__ void fd_trace_mark(unsigned long long* tr, int word) {
  if (tr != nullptr) tr[word] = fd_wall_ticks();
}

__device__ __forceinline__ float fd_header_f32(const int* h, int word) { return __int_as_float(h[word]); }

// How many events' trigger counts the runtime keeps in shared memory (a wait reads its event's
// count there instead of from the blob: one dependent round trip less before the first poll).
constexpr int kTriggersCached = 1024;
// And the first kListCached entries of the worker's task list (its tasks, in order, each step).
constexpr int kListCached = 512;
// And the inputs of the first kWaitsCached entries' tasks, two a task: event << kLagBits | lag (-1: none),
// or kWaitsInRecord where the task has more inputs (or a lag that does not fit), read from its record.
constexpr int kWaitsCached = 256;
constexpr int kLagBits = 4, kLagMask = (1 << kLagBits) - 1;
constexpr int kWaitsInRecord = -2;

// Where task t's staged range lies: the stage table's source word (host views), else its weight's
// address from the weight table plus the range's offset (a dependent load).
__device__ __forceinline__ const char* fd_stage_source(const fd_launch_args& a, const long long* st) {
  return a.views != nullptr ? reinterpret_cast<const char*>(st[4]) : static_cast<const char*>(a.weights[st[0]]) + st[1];
}

// Issues the stage copy of task t's tile (it is staged at this launch's stage size); true if it did.
__device__ __forceinline__ bool fd_send_tile(const fd_launch_args& a, long long t, uint64_t* barrier,
                                             unsigned char* stage) {
  const long long* st = a.stage + static_cast<size_t>(t) * FD_STAGE_WORDS;
  if (!(st[0] >= 0 && a.stage_bytes > 0 && st[2] <= a.stage_bytes)) return false;
  fd_stage_issue(barrier, stage, fd_stage_source(a, st), static_cast<uint32_t>(st[2]));
  return true;
}

// Thread 0 waits until *counter >= target; false if the watchdog fired or another worker aborted.
// Only thread 0 calls it; the caller publishes the outcome to the block.
__device__ bool fd_wait_counter(const fd_launch_args& a, unsigned long long timeout_ticks, const int* counter,
                                int target, int task, int event, int step, const int* rec) {
  if (target <= 0) return true;
  int value = fd_load_acquire(counter);
  if (value >= target) return true;
  const unsigned long long start = fd_wall_ticks();
  while (true) {
    value = fd_load_acquire(counter);
    if (value >= target) return true;
    if (fd_load_acquire(a.error + FD_ERR_ABORT)) return false;
    // A stop at an earlier step: this step's inputs will never come.
    const int stopped = fd_load_acquire(a.stopped_at);
    if (stopped != 0 && stopped <= step) return false;
    if (fd_wall_ticks() - start > timeout_ticks) {
      if (fd_atomic_add_release(a.error + FD_ERR_FLAG, 1) == 0) {  // the first timeout is the one reported
        a.error[FD_ERR_WORKER] = blockIdx.x;
        a.error[FD_ERR_TASK] = task;
        a.error[FD_ERR_EVENT] = event;
        a.error[FD_ERR_COUNTER] = value;
        a.error[FD_ERR_TARGET] = target;
        a.error[FD_ERR_STEP] = step;
        a.error[FD_ERR_KIND] = rec[FD_T_KIND];  // read here only: no poll waits for the record
      }
      fd_store_release(a.error + FD_ERR_ABORT, 1);
      return false;
    }
  }
}

// Calls f with the weight-load policy of the task: its staged copy, or global memory. Where the
// stage has no room (AMD) the staged instantiations are not compiled at all: they would only add
// register pressure to a path that never runs.
template <class F>
__device__ __forceinline__ void fd_with_weights(bool staged, F f) {
  if constexpr (kStaging) {
    if (staged) return f(fd_staged_weights{});
  }
  f(fd_global_weights{});
}

// The task about to run, its operands' addresses and fields resolved on the host
// (fleet_decode.kernels.runtime.task_views: the same layout, byte for byte): a few threads copy it in
// 16-byte pieces BEFORE the wait, in one round trip (resolving the record's buffer and weight indices
// here took two, and a task reached after its inputs were ready waited for the second), and the wait's
// barrier publishes it.
struct __align__(16) fd_task_view {
  void* buf[FD_MAX_BUFFERS];
  const void* wt[FD_MAX_WEIGHTS];
  int wt_slot[FD_MAX_WEIGHTS];
  int arg[FD_MAX_ARGS];
  int b0, b1, slot;
  int act_len;  // its act buffer's size: a DOWN_ACCUM's act length (the down matrix's width), an
                // O_PROJ_RESIDUAL's attn_out (one vector, or the merge's partial ones)
};
constexpr int kViewPieces = static_cast<int>(sizeof(fd_task_view) / 16);
static_assert(sizeof(fd_task_view) % 16 == 0, "a view is copied in 16-byte pieces");

// The header's model constants, read once per launch.
struct fd_model_constants {
  int hidden, inter, vocab, n_experts, top_k;
  float eps, attn_scale, routed_scaling;
};

// Threads at the block's end (but its last, which issues the stage's bulk copy) fill the view: not
// thread 0, which meanwhile starts waiting. With the host's views (a.views) a thread copies one piece;
// without them (Tuning.host_views off, kept to time the difference) it resolves one entry of the
// record: two dependent loads.
__device__ __forceinline__ void fd_resolve_task(const fd_launch_args& a, const int* h, int t, const int* rec,
                                                fd_task_view& v) {
  const int i = static_cast<int>(blockDim.x) - 2 - static_cast<int>(threadIdx.x);
  if (i < 0) return;  // the last thread: it issues the stage's copy
  if (a.views != nullptr) {
    if (i < kViewPieces)
      reinterpret_cast<fd_vec16*>(&v)[i] =
          fd_load16(static_cast<const char*>(a.views) + (static_cast<size_t>(t) * kViewPieces + i) * 16);
  } else if (i < FD_MAX_BUFFERS) {
    const int b = rec[FD_T_BUF0 + i];
    v.buf[i] = b >= 0 ? a.buffers[b] : nullptr;
  } else if (i < FD_MAX_BUFFERS + FD_MAX_WEIGHTS) {
    const int j = i - FD_MAX_BUFFERS, w = rec[FD_T_WT0 + j];
    v.wt[j] = w >= 0 ? a.weights[w] : nullptr;
    v.wt_slot[j] = w;
  } else if (i == FD_MAX_BUFFERS + FD_MAX_WEIGHTS) {
    v.b0 = rec[FD_T_TILE_BEGIN];
    v.b1 = rec[FD_T_TILE_END];
    v.slot = rec[FD_T_SLOT];
    for (int k = 0; k < FD_MAX_ARGS; ++k) v.arg[k] = rec[FD_T_ARG0 + k];
    v.act_len = 0;
    const int kind = rec[FD_T_KIND];
    if (kind == FD_KIND_DOWN_ACCUM || kind == FD_KIND_O_PROJ_RESIDUAL) {
      const int operand = kind == FD_KIND_DOWN_ACCUM ? FD_DOWN_ACCUM_BUF_ACT : FD_O_PROJ_RESIDUAL_BUF_ATTN_OUT;
      const int* act = h + h[FD_H_BUFFERS_AT] + rec[FD_T_BUF0 + operand] * FD_BUFFER_WORDS;
      v.act_len = act[FD_B_ROWS] * act[FD_B_COLS];
    }
  }
}

// into: where an adding task adds (its own scratch row, or h_out itself when it is the only adder).
// staged_slot >= 0: that weight operand is read from the stage, staged_base being where its byte 0
// would lie (the stage minus the staged range's offset), so the task's own indexing is unchanged.
// The stage as a task may use it while it runs (the split-K slices copy their down rows there).
struct fd_stage_state {
  unsigned char* base;
  uint64_t* barrier;
  uint32_t* parity;  // this thread's copy of the barrier's phase
  bool bulk;
};

// Returns true where the task is to be run again at once: a pool that took a piece (fd_run_task's
// EXPERT_POOL), so that the next call takes the next one; first_call: a pool task's first call (its first
// piece norms x and starts the taker's local row). kPool: this entry runs pools (the pool entries,
// megakernel_pool.cu); the others compile none of their code, so a pool costs them nothing.
template <bool kTensorCoreChunk, bool kPool>
__device__ __forceinline__ bool fd_run_task(const fd_launch_args& a, const fd_model_constants& c, const fd_task_view& v, int kind,
                            int step, float* into, void* smem, int staged_slot, const char* staged_base,
                            const fd_stage_state& stage, bool first_call) {
  const int b0 = v.b0, b1 = v.b1, slot = v.slot;
  const int hidden = c.hidden, inter = c.inter, vocab = c.vocab;
  const int pos = a.pos0 + step;
  const float eps = c.eps;
  const bool staged = staged_slot >= 0;
  auto weight = [&](int operand) -> const void* {
    if constexpr (kStaging) {
      if (v.wt_slot[operand] == staged_slot) return staged_base;
    }
    return v.wt[operand];
  };
  auto F = [&](int operand) { return static_cast<float*>(v.buf[operand]); };
  auto I = [&](int operand) { return static_cast<int*>(v.buf[operand]); };
  auto M = [&](int operand) { return static_cast<fd_bf16*>(v.buf[operand]); };
  auto WM = [&](int operand) { return static_cast<const fd_bf16*>(weight(operand)); };
  auto WF = [&](int operand) { return static_cast<const float*>(weight(operand)); };
  const float* none = nullptr;

  switch (kind) {
    case FD_KIND_EMBED:
      fd_task_embed(WM(FD_EMBED_WT_EMBED), I(FD_EMBED_BUF_TOKENS) + step, hidden, b0, b1, F(FD_EMBED_BUF_OUT));
      break;
    case FD_KIND_RMSNORM_GEMV:
      fd_with_weights(staged, [&](auto wl) {
        fd_task_rmsnorm_gemv<float, decltype(wl)>(F(FD_RMSNORM_GEMV_BUF_X), WM(FD_RMSNORM_GEMV_WT_NORM), eps,
                                                  WM(FD_RMSNORM_GEMV_WT_MATRIX), hidden, b0, b1, none,
                                                  F(FD_RMSNORM_GEMV_BUF_Y), static_cast<float*>(nullptr), smem);
      });
      break;
    case FD_KIND_ROPE_Q_ABSORB:
      fd_with_weights(staged, [&](auto wl) {
        fd_task_rope_q_absorb<float, decltype(wl)>(
            F(FD_ROPE_Q_ABSORB_BUF_Q), WM(FD_ROPE_Q_ABSORB_WT_W_UK), v.arg[FD_ROPE_Q_ABSORB_ARG_PARTS],
            WF(FD_ROPE_Q_ABSORB_WT_ROPE_COS), WF(FD_ROPE_Q_ABSORB_WT_ROPE_SIN), pos, b0, b1,
            F(FD_ROPE_Q_ABSORB_BUF_Q_LAT), F(FD_ROPE_Q_ABSORB_BUF_Q_PE), smem);
      });
      break;
    case FD_KIND_CACHE_APPEND:
      fd_task_cache_append(F(FD_CACHE_APPEND_BUF_KV_A), WM(FD_CACHE_APPEND_WT_KV_NORM), eps,
                           WF(FD_CACHE_APPEND_WT_ROPE_COS), WF(FD_CACHE_APPEND_WT_ROPE_SIN), pos,
                           M(FD_CACHE_APPEND_BUF_CKV), M(FD_CACHE_APPEND_BUF_KPE));
      break;
    case FD_KIND_ATTN_CHUNK: {
      float* part_ml = F(FD_ATTN_CHUNK_BUF_PART_ML) + 2 * slot * kHeads;
      fd_task_attention_chunk<kTensorCoreChunk>(F(FD_ATTN_CHUNK_BUF_Q_LAT), F(FD_ATTN_CHUNK_BUF_Q_PE), M(FD_ATTN_CHUNK_BUF_CKV),
                              M(FD_ATTN_CHUNK_BUF_KPE), pos + 1, b0, b1, c.attn_scale, part_ml,
                              part_ml + 1, 2, F(FD_ATTN_CHUNK_BUF_PART_O) + static_cast<size_t>(slot) * kHeads * kLatent,
                              smem, v.arg[FD_ATTN_CHUNK_ARG_HEAD_BEGIN], v.arg[FD_ATTN_CHUNK_ARG_HEAD_END]);
      break;
    }
    case FD_KIND_ATTN_MERGE_UV: {
      const float* part_ml = F(FD_ATTN_MERGE_UV_BUF_PART_ML);
      fd_with_weights(staged, [&](auto wl) {
        fd_task_attention_merge_uv<float, decltype(wl)>(
            part_ml, part_ml + 1, 2, F(FD_ATTN_MERGE_UV_BUF_PART_O), v.arg[FD_ATTN_MERGE_UV_ARG_N_CHUNKS],
            WM(FD_ATTN_MERGE_UV_WT_KV_B), b0, b1, F(FD_ATTN_MERGE_UV_BUF_ATTN_OUT), smem, slot,
            v.arg[FD_ATTN_MERGE_UV_ARG_V_PARTS]);
      });
      break;
    }
    case FD_KIND_ATTN_MERGE_COLS: {
      const float* part_ml = F(FD_ATTN_MERGE_COLS_BUF_PART_ML);
      const int lat_parts = v.arg[FD_ATTN_MERGE_COLS_ARG_LAT_PARTS];
      fd_with_weights(staged, [&](auto wl) {
        fd_task_attention_merge_cols<float, decltype(wl)>(
            part_ml, part_ml + 1, 2, F(FD_ATTN_MERGE_COLS_BUF_PART_O), v.arg[FD_ATTN_MERGE_COLS_ARG_N_CHUNKS],
            WM(FD_ATTN_MERGE_COLS_WT_W_UV_PARTS), b0, slot, lat_parts, F(FD_ATTN_MERGE_COLS_BUF_ATTN_PARTS), smem);
      });
      break;
    }
    case FD_KIND_O_PROJ_RESIDUAL:
      // attn_out is one vector, or the merge's lat_parts partial ones (ATTN_MERGE_COLS): its size says
      fd_with_weights(staged, [&](auto wl) {
        fd_task_rmsnorm_gemv<float, decltype(wl)>(
            F(FD_O_PROJ_RESIDUAL_BUF_ATTN_OUT), static_cast<const fd_bf16*>(nullptr), 0.f,
            WM(FD_O_PROJ_RESIDUAL_WT_O_PROJ), kHeads * kVHead, b0, b1, F(FD_O_PROJ_RESIDUAL_BUF_RESIDUAL),
            F(FD_O_PROJ_RESIDUAL_BUF_H_ATTN), F(FD_O_PROJ_RESIDUAL_BUF_H_OUT), smem, nullptr,
            v.act_len / (kHeads * kVHead));
      });
      break;
    case FD_KIND_O_PROJ_ROUTER:
      fd_with_weights(staged, [&](auto wl) {
        fd_task_o_proj_router<float, decltype(wl)>(
            F(FD_O_PROJ_ROUTER_BUF_ATTN_OUT), WM(FD_O_PROJ_ROUTER_WT_O_PROJ), kHeads * kVHead, b0, b1,
            F(FD_O_PROJ_ROUTER_BUF_RESIDUAL), F(FD_O_PROJ_ROUTER_BUF_H_ATTN), F(FD_O_PROJ_ROUTER_BUF_H_OUT),
            WM(FD_O_PROJ_ROUTER_WT_NORM), WF(FD_O_PROJ_ROUTER_WT_ROUTER), c.n_experts, hidden,
            F(FD_O_PROJ_ROUTER_BUF_ROUTER_PARTS) + static_cast<size_t>(slot) * (c.n_experts + 1), smem);
      });
      break;
    case FD_KIND_ROUTE_PARTS_TOPK:
      fd_task_route_parts_topk(F(FD_ROUTE_PARTS_TOPK_BUF_ROUTER_PARTS), v.arg[FD_ROUTE_PARTS_TOPK_ARG_N_PARTS],
                               c.n_experts, hidden, eps, c.top_k, c.routed_scaling, nullptr,
                               I(FD_ROUTE_PARTS_TOPK_BUF_ROUTE_IDX), F(FD_ROUTE_PARTS_TOPK_BUF_ROUTE_W),
                               static_cast<float*>(smem));
      break;
    case FD_KIND_ROUTER:
      fd_with_weights(staged, [&](auto wl) {
        fd_task_router_logits<float, decltype(wl)>(F(FD_ROUTER_BUF_X), WM(FD_ROUTER_WT_NORM), eps,
                                                   WF(FD_ROUTER_WT_ROUTER), hidden, b0, b1, F(FD_ROUTER_BUF_LOGITS),
                                                   smem);
      });
      break;
    case FD_KIND_ROUTE_TOPK:
      fd_task_route_topk(F(FD_ROUTE_TOPK_BUF_LOGITS), c.n_experts, c.top_k, c.routed_scaling, nullptr, I(FD_ROUTE_TOPK_BUF_ROUTE_IDX),
                         F(FD_ROUTE_TOPK_BUF_ROUTE_W), static_cast<float*>(smem));
      break;
    case FD_KIND_GATE_UP:
      fd_task_expert_gate_up(F(FD_GATE_UP_BUF_X), WM(FD_GATE_UP_WT_NORM), eps, WM(FD_GATE_UP_WT_GATE),
                             WM(FD_GATE_UP_WT_UP), 0LL, static_cast<const int*>(nullptr), 0, hidden, b0, b1,
                             F(FD_GATE_UP_BUF_ACT), smem);
      break;
    case FD_KIND_DOWN_ACCUM:
      // The act length (the down matrix's width) differs between the dense MLP and the shared
      // experts and is not in the task record: it is the act buffer's size.
      fd_task_down_accum(WM(FD_DOWN_ACCUM_WT_DOWN), 0LL, static_cast<const int*>(nullptr), none, 0,
                         F(FD_DOWN_ACCUM_BUF_ACT), v.act_len, b0, b1, into, smem);
      break;
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
    case FD_KIND_GATE_UP_DOWN:
    case FD_KIND_EXPERT_GATE_UP_DOWN:
    case FD_KIND_EXPERT_POOL: {
      // A pool (EXPERT_POOL) runs one piece of its slots' rows a call, taken at run time (fd_pool_take), as a
      // routed slice whose tile is the piece; the runtime calls it again while it takes one (the return), so
      // that no loop here holds registers across the slice's code. A slice is one call, its own tile. The
      // pool's operands sit where a routed slice's do.
      static_assert(FD_EXPERT_POOL_BUF_X == FD_EXPERT_GATE_UP_DOWN_BUF_X &&
                        FD_EXPERT_POOL_BUF_ROUTE_IDX == FD_EXPERT_GATE_UP_DOWN_BUF_ROUTE_IDX &&
                        FD_EXPERT_POOL_BUF_ROUTE_W == FD_EXPERT_GATE_UP_DOWN_BUF_ROUTE_W &&
                        FD_EXPERT_POOL_BUF_ACC == FD_EXPERT_GATE_UP_DOWN_BUF_PARTIALS &&
                        FD_EXPERT_POOL_WT_NORM == FD_EXPERT_GATE_UP_DOWN_WT_NORM &&
                        FD_EXPERT_POOL_WT_GATE_UP == FD_EXPERT_GATE_UP_DOWN_WT_GATE_UP &&
                        FD_EXPERT_POOL_WT_DOWN_T == FD_EXPERT_GATE_UP_DOWN_WT_DOWN_T,
                    "a pool's operands must sit where a routed slice's do");
      const bool pool = kPool && kind == FD_KIND_EXPERT_POOL, routed = kind != FD_KIND_GATE_UP_DOWN;
      int k = slot, r0 = b0, r1 = b1;
      const bool first = first_call;  // a pool's first piece: it norms x (and starts the taker's local row)
      // local_sum: the taker's own int64 row at the scratch's end, beyond the slice's (runtime._check_graph)
      long long* local = pool && v.arg[FD_EXPERT_POOL_ARG_LOCAL_SUM]
                             ? reinterpret_cast<long long*>(static_cast<char*>(smem) + FD_SCRATCH_SMEM_BYTES) - hidden
                             : nullptr;
      if (pool) {
        const int piece_rows = b1 - b0, per_slot = (inter + piece_rows - 1) / piece_rows, n_pieces = c.top_k * per_slot;
        const int p = fd_pool_take(I(FD_EXPERT_POOL_BUF_POOL), step * (n_pieces + v.arg[FD_EXPERT_POOL_ARG_N_TAKERS]));
        if (p >= n_pieces) {  // none left: the taker's row, if it ran a piece, into the accumulator
          if (local != nullptr && !first) fd_pool_flush(local, v.buf[FD_EXPERT_POOL_BUF_ACC], hidden);
          return false;
        }
        k = p / per_slot, r0 = p % per_slot * piece_rows, r1 = min(r0 + piece_rows, inter);
      }
      // routed: the expert the top-k chose (gate_up holds two [inter, hidden] matrices per expert)
      const size_t expert = routed ? static_cast<size_t>(I(FD_EXPERT_GATE_UP_DOWN_BUF_ROUTE_IDX)[k]) * inter * hidden : 0;
      const fd_bf16* gate = routed ? WM(FD_EXPERT_GATE_UP_DOWN_WT_GATE_UP) + 2 * expert : WM(FD_GATE_UP_DOWN_WT_GATE);
      const fd_bf16* up = routed ? gate + static_cast<size_t>(inter) * hidden : WM(FD_GATE_UP_DOWN_WT_UP);
      const fd_bf16* down_t = (routed ? WM(FD_EXPERT_GATE_UP_DOWN_WT_DOWN_T) + expert : WM(FD_GATE_UP_DOWN_WT_DOWN_T)) +
                              static_cast<size_t>(r0) * hidden;
      const float weight = routed ? F(FD_EXPERT_GATE_UP_DOWN_BUF_ROUTE_W)[k] : 1.f;
      const int row = pool ? 0 : v.arg[routed ? FD_EXPERT_GATE_UP_DOWN_ARG_ROW : FD_GATE_UP_DOWN_ARG_ROW];
      const bool fixed_point = pool || v.arg[routed ? FD_EXPERT_GATE_UP_DOWN_ARG_FIXED_POINT : FD_GATE_UP_DOWN_ARG_FIXED_POINT];
      // the fixed-point accumulator is one int64 row (row 0); a partial row is fp32
      const fd_slice_out slice_out{F(routed ? FD_EXPERT_GATE_UP_DOWN_BUF_PARTIALS : FD_GATE_UP_DOWN_BUF_PARTIALS) +
                                       static_cast<size_t>(row) * hidden,
                                   fixed_point};
      // The slice's down rows are one contiguous range, known once the expert is: the (idle) stage takes
      // its first rows by bulk copies while the block streams the gate/up rows, the rest after them.
      struct {
        int rows;
        const fd_bf16* base;
        const fd_stage_state* st;
        __device__ void wait() {
          fd_stage_wait(st->barrier, *st->parity);
          *st->parity ^= 1;
        }
        __device__ void issue(const fd_bf16* src, int n) {
          fd_stage_issue(st->barrier, st->base, src, static_cast<uint32_t>(n) * kDownRowBytes);
        }
        int kDownRowBytes;
      } down_stage{0, reinterpret_cast<const fd_bf16*>(stage.base), &stage, hidden * static_cast<int>(sizeof(fd_bf16))};
      if (kStaging && stage.bulk) down_stage.rows = min(r1 - r0, a.stage_bytes / down_stage.kDownRowBytes);
      if (down_stage.rows > 0 && threadIdx.x == 0) down_stage.issue(down_t, down_stage.rows);
      // a pool's later pieces reuse the first one's x_norm in smem (the same x); the pool entries put the
      // pieces' partials through fd_pool_out, the others compile fd_slice_out alone
      auto out = [&] {
        if constexpr (kPool) return fd_pool_out{slice_out, local, first};
        else return slice_out;
      }();
      fd_task_gate_up_down(F(routed ? FD_EXPERT_GATE_UP_DOWN_BUF_X : FD_GATE_UP_DOWN_BUF_X),
                           WM(routed ? FD_EXPERT_GATE_UP_DOWN_WT_NORM : FD_GATE_UP_DOWN_WT_NORM), eps, gate, up,
                           down_t - static_cast<size_t>(r0) * hidden, down_stage, weight, hidden, r0, r1, out,
                           smem, pool && !first);
      if (pool) return true;
      break;
    }
    case FD_KIND_SUM_PARTIALS:
      fd_task_sum_partials(F(FD_SUM_PARTIALS_BUF_PARTIALS), v.arg[FD_SUM_PARTIALS_ARG_N_ROWS], hidden, b0, b1, into,
                           smem);
      break;
    case FD_KIND_SUM_FIXED_POINT:
      fd_task_sum_fixed_point(static_cast<long long*>(v.buf[FD_SUM_FIXED_POINT_BUF_ACC]), b0, b1, into);
      break;
    case FD_KIND_LM_HEAD:
      fd_task_lm_head(F(FD_LM_HEAD_BUF_X), WM(FD_LM_HEAD_WT_NORM), eps, WM(FD_LM_HEAD_WT_LM_HEAD), hidden, b0, b1,
                      F(FD_LM_HEAD_BUF_LOGITS) + static_cast<size_t>(step) * vocab, slot, F(FD_LM_HEAD_BUF_PART_MAX),
                      I(FD_LM_HEAD_BUF_PART_IDX), smem);
      break;
    case FD_KIND_ARGMAX:
      if (a.temperature > 0.f) {  // the token takes position pos + 1; the draw is keyed by it
        const fd_sampling sampling{a.temperature, a.top_k, a.top_p, a.seed_lo, a.seed_hi};
        fd_task_sample(a.logits + static_cast<size_t>(step) * vocab, vocab, F(FD_ARGMAX_BUF_PART_MAX),
                       I(FD_ARGMAX_BUF_PART_IDX), v.arg[FD_ARGMAX_ARG_N_TILES], sampling, pos + 1,
                       I(FD_ARGMAX_BUF_TOKENS), step + 1);
      } else {
        fd_task_argmax(F(FD_ARGMAX_BUF_PART_MAX), I(FD_ARGMAX_BUF_PART_IDX), v.arg[FD_ARGMAX_ARG_N_TILES],
                       nullptr, I(FD_ARGMAX_BUF_TOKENS), step + 1);
      }
      break;
    default:
      break;  // decode_graph rejects unknown kinds before upload
  }
  return false;
}

// After a step's token is made (thread 0 of the ARGMAX task): publish it to the host, and mark the
// launch stopped if it is a stop id. Both are ordered before the task's release signal.
__device__ void fd_after_token(const fd_launch_args& a, int step, int token) {
  if (a.published != nullptr) fd_store_release_system(a.published + step, token);
  for (int k = 0; k < a.n_stop_ids; ++k)
    if (a.stop_ids[k] == token) {
      *a.stopped_at = step + 1;
      break;
    }
}

// The last adder of a row range: h_out[r] = ((h_out[r] + row_0[r]) + row_1[r]) + ... in graph order
// (the same additions whichever adder arrives last), zeroing the rows for the next step.
__device__ void fd_sum_partials(float* rows, int n, int row_length, int r0, int r1, float* h_out) {
  constexpr int kBatch = 8;  // rows' loads in flight at once (a run-time count would wait for each)
  for (int r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    float v = h_out[r];
    for (int k0 = 0; k0 < n; k0 += kBatch) {
      float part[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) part[k] = k0 + k < n ? rows[static_cast<size_t>(k0 + k) * row_length + r] : 0.f;
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        if (k0 + k < n) {
          v += part[k];
          rows[static_cast<size_t>(k0 + k) * row_length + r] = 0.f;
        }
    }
    h_out[r] = v;
  }
}

// The buffer an adding task adds into (its h_out operand).
__device__ __forceinline__ bool fd_adds(int kind) {
  return kind == FD_KIND_DOWN_ACCUM || kind == FD_KIND_EXPERT_DOWN_ACCUM || kind == FD_KIND_SUM_PARTIALS ||
         kind == FD_KIND_SUM_FIXED_POINT;
}

__device__ __forceinline__ float* fd_accumulated(const fd_task_view& v, int kind) {
  const int operand = kind == FD_KIND_DOWN_ACCUM          ? FD_DOWN_ACCUM_BUF_H_OUT
                      : kind == FD_KIND_EXPERT_DOWN_ACCUM ? FD_EXPERT_DOWN_ACCUM_BUF_H_OUT
                      : kind == FD_KIND_SUM_PARTIALS      ? FD_SUM_PARTIALS_BUF_H_OUT
                                                          : FD_SUM_FIXED_POINT_BUF_H_OUT;
  return static_cast<float*>(v.buf[operand]);
}

// One entry per attention-chunk form (fd_task_attention_chunk), each in a translation unit of its own:
// <false> here, <true> in megakernel_tensor_cores.cu. Both forms in one entry spilled (part 20), and both
// entries in one unit spilled too: the helpers they share, called from two entries, were no longer inlined.
// The same again with kPool, for graphs with EXPERT_POOL tasks: megakernel_pool.cu, megakernel_tensor_cores_pool.cu.
template <bool kTensorCoreChunk, bool kPool = false>
__global__ void __launch_bounds__(kRuntimeThreads, 1) fd_megakernel(fd_launch_args launch,
                                                                     unsigned long long timeout_ticks) {
  // The arguments in shared memory: passed by reference to the helpers, a kernel parameter would be
  // copied to scratch per lane on AMD (the copy was 160+ bytes of the megakernel's scratch).
  __shared__ fd_launch_args a;
  if (threadIdx.x == 0) a = launch;
  __syncthreads();
  extern __shared__ __align__(128) unsigned char fd_smem[];
  __shared__ __align__(8) uint64_t stage_barrier;
  __shared__ int proceed, last_adder;
  __shared__ fd_task_view view;
  __shared__ fd_model_constants constants;
  __shared__ int triggers_s[kTriggersCached];  // FD_E_TRIGGERS of the first kTriggersCached events
  __shared__ int list_s[kListCached];          // this worker's list[first ...]
  __shared__ int2 waits_s[kWaitsCached];        // their tasks' inputs
  unsigned char* stage = fd_smem + FD_SCRATCH_SMEM_BYTES;
  const int* h = a.blob;
  const int* tasks = h + h[FD_H_TASKS_AT];
  const int* events = h + h[FD_H_EVENTS_AT];
  const int* offsets = h + h[FD_H_WORKER_OFFSETS_AT];
  const int* list = h + h[FD_H_WORKER_TASKS_AT];
  const int first = offsets[blockIdx.x], last = offsets[blockIdx.x + 1];
  const bool bulk_stage = fd_has_bulk_stage();
  uint32_t stage_parity = 0;
  long long sent_ahead = -1;  // (the block's last thread) the task whose tile an earlier entry sent
  if (threadIdx.x == 0) {
    fd_stage_barrier_init(&stage_barrier);
    constants = {h[FD_H_HIDDEN],
                 h[FD_H_MOE_INTER],
                 h[FD_H_VOCAB],
                 h[FD_H_N_EXPERTS],
                 h[FD_H_TOP_K],
                 fd_header_f32(h, FD_H_RMS_EPS_F32),
                 fd_header_f32(h, FD_H_ATTN_SCALE_F32),
                 fd_header_f32(h, FD_H_ROUTED_SCALING_F32)};
    if (blockIdx.x == 0) a.step_ticks[0] = fd_wall_ticks();
  }
  for (int e = threadIdx.x; e < min(h[FD_H_N_EVENTS], kTriggersCached); e += blockDim.x)
    triggers_s[e] = events[e * FD_EVENT_WORDS + FD_E_TRIGGERS];
  for (int k = threadIdx.x; k < min(last - first, kListCached); k += blockDim.x) list_s[k] = list[first + k];
  for (int k = threadIdx.x; k < min(last - first, kWaitsCached); k += blockDim.x) {
    const int* rec = tasks + static_cast<size_t>(list[first + k]) * FD_TASK_WORDS;
    const int n = rec[FD_T_N_INPUTS];
    const int lag0 = rec[FD_T_IN0_LAG], lag1 = rec[FD_T_IN0_LAG + 2];
    const bool fits = n <= 2 && (n < 1 || (lag0 >= 0 && lag0 <= kLagMask)) && (n < 2 || (lag1 >= 0 && lag1 <= kLagMask));
    waits_s[k] = !fits ? make_int2(kWaitsInRecord, kWaitsInRecord)
                       : make_int2(n >= 1 ? rec[FD_T_IN0_EVENT] << kLagBits | lag0 : -1,
                                   n >= 2 ? rec[FD_T_IN0_EVENT + 2] << kLagBits | lag1 : -1);
  }
  __syncthreads();

  for (int step = 0; step < a.n_steps; ++step) {
    // A tail (fleet_decode.graph.tails) is run by the last of its signallers to arrive, as
    // the next task of that worker, through the same path but without a wait: its inputs are the
    // signallers' outputs, all written and acquired by the arrival. List entry i comes after it.
    int tail = -1;
    for (int i = first; i < last;) {
      const bool is_tail = tail >= 0;
      const int t = is_tail ? tail : i - first < kListCached ? list_s[i - first] : list[i];
      tail = -1;
      const int* rec = tasks + static_cast<size_t>(t) * FD_TASK_WORDS;
      const int* order = a.add_order + t * FD_ADD_ORDER_WORDS;
      const int kind = rec[FD_T_KIND], out_event = rec[FD_T_OUT_EVENT];
      const int add_group = order[0];
      unsigned long long* tr =
          a.trace != nullptr && threadIdx.x == 0
              ? a.trace + (static_cast<size_t>(step) * h[FD_H_N_TASKS] + t) * FD_TRACE_WORDS
              : nullptr;
      fd_trace_mark(tr, FD_TR_REACHED);
      // Weights do not depend on activations: the task's tile starts its way into the stage now,
      // and lands while the worker waits for the inputs.
      // The last thread issues the bulk copy, so that thread 0 goes straight to its wait.
      const long long* st = a.stage + static_cast<size_t>(t) * FD_STAGE_WORDS;
      const int staged_slot = !is_tail && kStaging && a.stage_bytes > 0 && st[0] >= 0 && st[2] <= a.stage_bytes
                                  ? static_cast<int>(st[0])
                                  : -1;
      if (is_tail) {
        // neither a stage copy nor a wait; any tile sent ahead for entry i stays in flight for it
      } else if (bulk_stage) {
        if (threadIdx.x == blockDim.x - 1) {
          if (staged_slot >= 0 && sent_ahead != t)
            fd_stage_issue(&stage_barrier, stage, fd_stage_source(a, st), static_cast<uint32_t>(st[2]));
          if (sent_ahead == t) sent_ahead = -1;
          // The planner's lookahead (staging.send_ahead): a task that leaves the stage alone sends a
          // later task's tile, which lands while this one and those between run.
          if (st[3] >= 0 && fd_send_tile(a, st[3], &stage_barrier, stage)) sent_ahead = st[3];
        }
      } else if (staged_slot >= 0) {
        fd_stage_copy(stage, fd_stage_source(a, st), static_cast<uint32_t>(st[2]));
      }
      fd_resolve_task(a, h, t, rec, view);  // published to the block by the barrier after the wait
      if (is_tail) {
        if (threadIdx.x == 0) proceed = 1;
      } else if (threadIdx.x == 0) {
        // The task's inputs from the copy in shared memory (no round trip before the first poll), else
        // the record's input slots read together (one, not one per input); the events' trigger counts
        // from shared memory.
        auto wait_for = [&](int e, int lag) {
          const int triggers = e < kTriggersCached ? triggers_s[e] : events[e * FD_EVENT_WORDS + FD_E_TRIGGERS];
          return fd_wait_counter(a, timeout_ticks, a.counters + e, triggers * (step + 1 - lag), t, e, step, rec);
        };
        const int2 cached =
            a.views != nullptr && i - first < kWaitsCached ? waits_s[i - first] : make_int2(kWaitsInRecord, 0);
        bool ok = true;
        if (cached.x != kWaitsInRecord) {
          if (cached.x >= 0) ok = wait_for(cached.x >> kLagBits, cached.x & kLagMask);
          if (ok && cached.y >= 0) ok = wait_for(cached.y >> kLagBits, cached.y & kLagMask);
        } else {
          int in_event[FD_MAX_INPUTS], in_lag[FD_MAX_INPUTS];
#pragma unroll
          for (int j = 0; j < FD_MAX_INPUTS; ++j) {
            in_event[j] = rec[FD_T_IN0_EVENT + 2 * j];
            in_lag[j] = rec[FD_T_IN0_LAG + 2 * j];
          }
          const int n_inputs = rec[FD_T_N_INPUTS];
#pragma unroll
          for (int j = 0; j < FD_MAX_INPUTS; ++j) {
            if (!ok || j >= n_inputs) break;
            ok = wait_for(in_event[j], in_lag[j]);
          }
        }
        // Every task of step s comes after step s - 1's token: a stop there ends the launch here.
        if (ok && step > 0 && i == first) {
          const int stopped = fd_load_acquire(a.stopped_at);
          ok = stopped == 0 || stopped > step;
        }
        if (tr != nullptr && staged_slot >= 0)
          tr[FD_TR_RESIDENT] = !bulk_stage || fd_stage_test(&stage_barrier, stage_parity) ? 1 : 2;
        proceed = ok;  // the whole block reads what the signallers published once the barrier below passes
      }
      __syncthreads();
      if (!proceed) {
        // no copy outlives the block
        if (bulk_stage && (staged_slot >= 0 || sent_ahead >= 0)) fd_stage_wait(&stage_barrier, stage_parity);
        return;
      }
      fd_trace_mark(tr, FD_TR_READY);
      if (staged_slot >= 0 && bulk_stage) {
        fd_stage_wait(&stage_barrier, stage_parity);
        stage_parity ^= 1;
      }
      const bool adds = fd_adds(kind);
      // Thread 0 signals after the task's last barrier, when the next task's view may already be
      // written: what it needs then is read now. Everything else reads the view before that barrier.
      int* token_row = kind == FD_KIND_ARGMAX ? static_cast<int*>(view.buf[FD_ARGMAX_BUF_TOKENS]) : nullptr;
      float* into = add_group >= 0 ? a.partials + order[3] : adds ? fd_accumulated(view, kind) : nullptr;
      // A pool runs a piece a call while it takes one (the other kinds: one call, and the loop folds away);
      // which call is its first, every thread knows alike.
      for (bool first_call = true;
           fd_run_task<kTensorCoreChunk, kPool>(a, constants, view, kind, step, into, fd_smem, staged_slot,
                                                staged_slot >= 0 ? reinterpret_cast<const char*>(stage) - st[1] : nullptr,
                                                fd_stage_state{stage, &stage_barrier, &stage_parity, bulk_stage},
                                                first_call);
           first_call = false) {
      }
      __syncthreads();
      if (add_group >= 0) {
        if (threadIdx.x == 0) {
          const int before = fd_atomic_add_acq_rel(a.arrivals + add_group, 1);
          last_adder = before == (step + 1) * order[2] - 1;  // arrivals never reset: n per step
        }
        __syncthreads();
        if (last_adder) {
          tail = order[4];
          if (tail < 0) {
            fd_sum_partials(a.partials + order[3] - static_cast<size_t>(order[1]) * a.partial_row, order[2],
                            a.partial_row, view.b0, view.b1, fd_accumulated(view, kind));
            __syncthreads();
          }
        }
      }
      if (threadIdx.x == 0) {
        if (kind == FD_KIND_ARGMAX) {
          fd_after_token(a, step, token_row[step + 1]);
          a.step_ticks[step + 1] = fd_wall_ticks();
        }
        if (out_event >= 0) fd_signal_add_release(a.counters + out_event, 1);
        fd_trace_mark(tr, FD_TR_DONE);
      }
      if (tail < 0) ++i;
    }
  }
}

#ifndef FD_MEGAKERNEL_BODY_ONLY
// ---------------------------------------------------------------------------------------------
// C ABI (fleet_decode.kernels.runtime). Returns 0, a negative argument error, or the runtime's
// error code (fd_error_string names both). The layout queries let the host refuse a library built
// with other tables.
FD_EXPORT int fd_megakernel_threads() { return kRuntimeThreads; }
FD_EXPORT int fd_megakernel_scratch_bytes() { return FD_SCRATCH_SMEM_BYTES; }
FD_EXPORT int fd_megakernel_stage_capacity() { return FD_STAGE_SMEM_BYTES; }
FD_EXPORT int fd_megakernel_error_words() { return FD_ERR_WORDS; }
FD_EXPORT int fd_megakernel_add_order_words() { return FD_ADD_ORDER_WORDS; }
FD_EXPORT int fd_megakernel_stage_words() { return FD_STAGE_WORDS; }
FD_EXPORT int fd_megakernel_view_bytes() { return static_cast<int>(sizeof(fd_task_view)); }
FD_EXPORT int fd_megakernel_trace_words() { return FD_TRACE_WORDS; }
FD_EXPORT int fd_megakernel_args_bytes() { return static_cast<int>(sizeof(fd_launch_args)); }
FD_EXPORT double fd_megakernel_ticks_per_second() { return fd_wall_ticks_per_second(); }

// Whether this library has the tensor-core chunk's entry (fd_megakernel<true>, megakernel_tensor_cores.cu):
// NVIDIA builds; on AMD (no WMMA path yet) the plain entry is the only one compiled.
#if FD_CUDA
const void* fd_megakernel_tensor_core_entry();
FD_EXPORT int fd_megakernel_tensor_core_chunk() { return 1; }
#else
FD_EXPORT int fd_megakernel_tensor_core_chunk() { return 0; }
#endif
// The pool entries (fd_megakernel<chunk form, true>: megakernel_pool.cu, megakernel_tensor_cores_pool.cu).
const void* fd_megakernel_pool_entry(int tensor_core_chunk);

// tensor_core_chunk: 1 launches fd_megakernel<true> (the attention chunk on the tensor cores), 0 <false>;
// pool: 1 launches the entry of that form that runs EXPERT_POOL tasks (a graph with pools needs it; the
// others run none). Arguments of their own, not fields of fd_launch_args: the entries sit at their register
// limit, and a field more in the struct they copy to shared memory cost the plain entry 8 bytes of spills.
FD_EXPORT int fd_megakernel_launch(const fd_launch_args* args, int tensor_core_chunk, int pool, void* stream) {
  if (args == nullptr) return -1;
  fd_launch_args a = *args;
  if (a.n_workers <= 0 || a.n_steps <= 0 || a.pos0 < 0 || a.partial_row <= 0 || !(a.timeout_seconds > 0) ||
      a.stage_bytes < 0 || a.stage_bytes > FD_STAGE_SMEM_BYTES || a.n_stop_ids < 0 ||
      (a.n_stop_ids > 0 && a.stop_ids == nullptr) || a.stopped_at == nullptr || a.stage == nullptr ||
      !(a.temperature >= 0.f) || (a.temperature > 0.f && a.logits == nullptr) || a.top_k < 0 || !(a.top_p > 0.f) ||
      tensor_core_chunk < 0 || tensor_core_chunk > fd_megakernel_tensor_core_chunk() || pool < 0 || pool > 1)
    return -1;
#if FD_CUDA
  const void* kernel = pool ? fd_megakernel_pool_entry(tensor_core_chunk)
                       : tensor_core_chunk ? fd_megakernel_tensor_core_entry()
                                           : reinterpret_cast<const void*>(&fd_megakernel<false>);
#else
  const void* kernel = pool ? fd_megakernel_pool_entry(0) : reinterpret_cast<const void*>(&fd_megakernel<false>);
#endif
  const int smem = FD_SCRATCH_SMEM_BYTES + a.stage_bytes;
  const fd_error_t attr = fd_set_max_dynamic_smem(kernel, smem);
  if (attr != fd_success) return static_cast<int>(attr);
  unsigned long long timeout_ticks = static_cast<unsigned long long>(a.timeout_seconds * fd_wall_ticks_per_second());
  void* kernel_args[] = {&a, &timeout_ticks};
  return static_cast<int>(fd_launch_cooperative(kernel, dim3(a.n_workers), dim3(kRuntimeThreads), kernel_args, smem,
                                                static_cast<fd_stream_t>(stream)));
}
#endif  // FD_MEGAKERNEL_BODY_ONLY

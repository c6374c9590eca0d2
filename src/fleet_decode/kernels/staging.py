"""The megakernel's stage table: per task, the one weight range the runtime copies into shared memory
before the worker waits for the task's inputs (hip/runtime/megakernel.cu, "Staging").

Weights do not depend on activations, so a task's tile can be on the SM by the time its inputs are
ready, and the task then runs at shared-memory latency instead of HBM's. A task is staged when its
kind reads its weights through the runtime's staged path (STAGED_KINDS), its static weights are
ONE contiguous range (norm vectors aside, which stay in L2), the range fits the stage and both ends
are 16-byte aligned (bulk copies need it). Everything else reads global memory as before.

When the copy starts is the table's fourth word (`ahead`): a task's own tile starts at its reach
(when its worker gets to it, before it waits), unless an earlier entry of the worker's list sent it
ahead while the stage had nothing else to hold. The stage is one buffer, so a tile may be sent only
once the worker's previous stage user has run, and only across entries that leave the stage alone.
The policies (STAGE_AHEAD) choose where in that free stretch the copy starts.
"""

import numpy as np

from fleet_decode.graph.format import DType, Kind
from fleet_decode.graph.reads import weight_reads

WORDS = 5  # FD_STAGE_WORDS: [weight slot, byte offset, bytes, ahead, source]; slot -1: not staged
# ahead: the task whose tile this one's reach sends (-1: none); source: the range's device address
# (0 where the table was built without the weights' addresses; the runtime always gives them)
NOT_STAGED = (-1, 0, 0, -1, 0)
# The kinds whose task functions take the weight-load policy (hip/tasks/common.h fd_staged_weights):
# the attention chain and the router, whose tiles fit a stage; expert and lm_head tiles do not.
STAGEABLE_KINDS = (Kind.RMSNORM_GEMV, Kind.ROPE_Q_ABSORB, Kind.ATTN_MERGE_UV, Kind.O_PROJ_RESIDUAL, Kind.ROUTER,
                   Kind.O_PROJ_ROUTER, Kind.ATTN_MERGE_COLS)
# The ones staged by default (Tuning.staged_kinds overrides): every stageable kind. A stage copy is HBM
# traffic beside whatever else runs when it is issued, so staging a kind can cost more than it saves: under
# the routing-free tiling the q/kv tiles (RMSNORM_GEMV) were left unstaged, their copies falling in the
# previous layer's saturated expert window (sweeps 45-47: 2.6-2.9 % faster without them). Under split-K a
# q/kv tile's copy leaves when its worker's expert slice is done, in the window's tail, and lands before the
# layer's output fires: sweep 83 (H200, one process) 2.129 ms against 2.204-2.209 unstaged, 2.099 with 32
# sum tiles (graph.plan.DECODE_SUM_ROWS). docs/megakernel.md parts 10 and 18.
STAGED_KINDS = STAGEABLE_KINDS
# Kinds that neither use the stage nor stream weights (hip/runtime/megakernel.cu): the "successor"
# policy sends the next task's tile while one of them runs.
LEAVES_STAGE_IDLE = (Kind.ATTN_CHUNK, Kind.CACHE_APPEND, Kind.ROUTE_TOPK, Kind.ROUTE_PARTS_TOPK, Kind.EMBED,
                     Kind.ARGMAX, Kind.SUM_PARTIALS, Kind.SUM_FIXED_POINT)
# Kinds whose task code fills the stage itself (the split-K slices copy their down rows there).
USES_STAGE = (Kind.GATE_UP_DOWN, Kind.EXPERT_GATE_UP_DOWN, Kind.EXPERT_POOL)
# Where a tile is sent ahead of its task's reach (Tuning.stage_ahead):
#   successor   the tile of the next entry, when that entry waits for this one's event and this one
#               leaves the stage idle (the merge's W_UV during its chunk; part 6's lookahead)
#   next-layer  that, and a tile of a later layer sent by the first entry after the stage frees
#               (the next layer's tiles travel before this layer's expert window, not after it)
#   from-down   that, and a tile of a later layer sent by a down tile (the expert window's down phase,
#               where HBM has room: the down tiles stream at their own pace, ~25 GB/s an SM)
#   early       every tile sent by the first entry after the stage frees
STAGE_AHEAD = ("successor", "next-layer", "from-down", "early")
DOWN_KINDS = (Kind.DOWN_ACCUM, Kind.EXPERT_DOWN_ACCUM)
DEVICE_BYTES = {DType.F32: 4, DType.I32: 4, DType.MODEL: 2}  # the device keeps MODEL weights in bf16
ALIGN = 16


def staged_range(task, graph, kinds=STAGED_KINDS):
    """(weight slot, byte offset, bytes) of the task's one static matrix range, or None (also for a
    kind not among `kinds`)."""
    if task.kind not in kinds or task.kind not in STAGEABLE_KINDS:
        return None
    reads = [r for r in weight_reads(task, graph) if r.part == -1 and len(graph.weights[r.weight].shape) > 1]
    if len(reads) != 1:
        return None
    read = reads[0]
    size = DEVICE_BYTES[graph.weights[read.weight].dtype]
    return read.weight, read.begin * read.cols * size, read.elements * size


def stage_table(graph, capacity: int, weight_addresses=None, kinds=STAGED_KINDS) -> np.ndarray:
    """int64 [n_tasks, WORDS]: each task's staged range, NOT_STAGED where it has none, where its kind is
    not among `kinds`, where the range exceeds `capacity` bytes, or (given the weights' device
    addresses) where a bulk copy of it would be misaligned."""
    table = np.tile(np.array(NOT_STAGED, dtype=np.int64), (len(graph.tasks), 1))
    for i, task in enumerate(graph.tasks):
        found = staged_range(task, graph, kinds)
        if found is None:
            continue
        slot, begin, nbytes = found
        if nbytes > capacity or nbytes % ALIGN or begin % ALIGN:
            continue
        source = 0 if weight_addresses is None else weight_addresses[slot] + begin
        if source % ALIGN:
            continue
        table[i] = (slot, begin, nbytes, -1, source)
    return table


def _waits_for(task, event) -> bool:
    return any(e == event and lag == 0 for e, lag in task.inputs)


def check_stage_ahead(policy: str) -> None:
    if policy not in STAGE_AHEAD:
        raise ValueError(f"stage_ahead {policy!r}: one of {', '.join(STAGE_AHEAD)}")


def yield_stage(graph, table: np.ndarray, kinds=()) -> frozenset[int]:
    """Unstages (in place) every staged entry whose next entry in its worker's list is a staged task of one of
    `kinds` that waits for it: the entry then reads its weights from global memory and sends the next one's
    tile while it runs (send_ahead's `senders`), so that tile is resident when the next task's inputs are
    ready instead of starting its way only then. Returns the tasks unstaged."""
    if not kinds:
        return frozenset()
    tasks, yielded = graph.tasks, set()
    for entries in graph.workers:
        for t, j in zip(entries, entries[1:]):
            if (table[t, 0] >= 0 and table[j, 0] >= 0 and tasks[j].kind in kinds
                    and _waits_for(tasks[j], tasks[t].out_event)):
                yielded.add(t)
    for t in yielded:
        table[t] = NOT_STAGED
    return frozenset(yielded)


def send_ahead(graph, table: np.ndarray, policy: str = "successor", senders=frozenset()) -> np.ndarray:
    """Fills the table's `ahead` word (in place, and returns it) for `policy` (STAGE_AHEAD): per worker
    list, an entry that leaves the stage alone may send the tile of the next staged entry, when no stage
    user lies between them and the stage is free (its previous user has run, no tile is in flight); an
    entry of `senders` (yield_stage's) sends the next entry's tile under every policy.
    Targets lie later in the same list, so no copy is in flight when a step's list (or the launch) ends."""
    check_stage_ahead(policy)
    table[:, 3] = -1
    tasks = graph.tasks
    staged = table[:, 0] >= 0
    for entries in graph.workers:
        in_flight = False  # a tile sent ahead, its task not yet reached
        for k, t in enumerate(entries):
            if staged[t]:
                in_flight = False  # reached: its tile is its own; the stage is free once it has run
                continue
            if tasks[t].kind in USES_STAGE:
                in_flight = False
                continue
            if in_flight or k + 1 >= len(entries):
                continue
            j = next((n for n in entries[k + 1:] if staged[n] or tasks[n].kind in USES_STAGE), None)
            if j is None or not staged[j]:
                continue
            successor = (j == entries[k + 1] and tasks[t].kind in LEAVES_STAGE_IDLE
                         and _waits_for(tasks[j], tasks[t].out_event))
            later_layer = tasks[j].layer != tasks[t].layer
            if ((t in senders and j == entries[k + 1]) or successor or policy == "early" or (policy == "next-layer" and later_layer)
                    or (policy == "from-down" and later_layer and tasks[t].kind in DOWN_KINDS)):
                table[t, 3] = j
                in_flight = True
    return table

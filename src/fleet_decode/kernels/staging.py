"""The megakernel's stage table: per task, the one weight range the runtime copies into shared memory
before the worker waits for the task's inputs (hip/runtime/megakernel.cu, "Staging").

Weights do not depend on activations, so a task's tile can be on the SM by the time its inputs are
ready, and the task then runs at shared-memory latency instead of HBM's. A task is staged when its
kind reads its weights through the runtime's staged path (STAGED_KINDS), its static weights are
ONE contiguous range (norm vectors aside, which stay in L2), the range fits the stage and both ends
are 16-byte aligned (bulk copies need it). Everything else reads global memory as before.
"""

import numpy as np

from fleet_decode.graph.format import OPERANDS, DType, Kind
from fleet_decode.graph.reads import weight_reads

WORDS = 3  # FD_STAGE_WORDS: [weight slot, byte offset, bytes]; slot -1: not staged
# A routed down tile's rows depend on the expert its slot was routed to, so its entry is dynamic:
# [down weight slot, -1 - the layer's routing event, the tile's bytes]. The runtime looks at that
# event when it reaches the tile and, if it has fired, sends as many of the tile's first rows as the
# stage holds, while the worker waits for the slot's gate/up (megakernel.cu).
NOT_STAGED = (-1, 0, 0)
# The kinds whose task functions take the weight-load policy (hip/tasks/common.h fd_staged_weights):
# the attention chain and the router, whose tiles fit a stage; expert and lm_head tiles do not.
STAGEABLE_KINDS = (Kind.RMSNORM_GEMV, Kind.ROPE_Q_ABSORB, Kind.ATTN_MERGE_UV, Kind.O_PROJ_RESIDUAL, Kind.ROUTER,
                   Kind.O_PROJ_ROUTER)
# The ones staged by default (Tuning.staged_kinds overrides): a stage copy is HBM traffic beside
# whatever else runs when it is issued, so staging a kind can cost more than it saves.
STAGED_KINDS = STAGEABLE_KINDS
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


def routing_events(graph) -> dict[int, int]:
    """route_idx buffer -> the event of the task that writes it (the layer's top-k)."""
    out = {}
    for t in graph.tasks:
        if t.kind in (Kind.ROUTE_TOPK, Kind.ROUTE_PARTS_TOPK):
            out[t.buffers[OPERANDS[t.kind][0].index("route_idx")]] = t.out_event
    return out


def stage_table(graph, capacity: int, weight_addresses=None, kinds=STAGED_KINDS, down_rows=False) -> np.ndarray:
    """int64 [n_tasks, WORDS]: each task's staged range, NOT_STAGED where it has none, where its kind is
    not among `kinds`, where the range exceeds `capacity` bytes, or (given the weights' device
    addresses) where a bulk copy of it would be misaligned. down_rows: the routed down tiles get
    their dynamic entries (above)."""
    table = np.tile(np.array(NOT_STAGED, dtype=np.int64), (len(graph.tasks), 1))
    routing = routing_events(graph) if down_rows and capacity > 0 else {}
    for i, task in enumerate(graph.tasks):
        if task.kind == Kind.EXPERT_DOWN_ACCUM and routing:
            down = task.weights[0]
            inter = graph.weights[down].shape[-1]
            row_bytes = inter * DEVICE_BYTES[graph.weights[down].dtype]
            aligned = weight_addresses is None or weight_addresses[down] % ALIGN == 0
            if row_bytes % ALIGN == 0 and aligned and capacity >= row_bytes:
                route_idx = task.buffers[OPERANDS[task.kind][0].index("route_idx")]
                table[i] = (down, -1 - routing[route_idx], (task.tile[1] - task.tile[0]) * row_bytes)
            continue
        found = staged_range(task, graph, kinds)
        if found is None:
            continue
        slot, begin, nbytes = found
        if nbytes > capacity or nbytes % ALIGN or begin % ALIGN:
            continue
        if weight_addresses is not None and (weight_addresses[slot] + begin) % ALIGN:
            continue
        table[i] = (slot, begin, nbytes)
    return table

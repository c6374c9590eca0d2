"""The megakernel's stage table: per task, the one weight range the runtime copies into shared memory
before the worker waits for the task's inputs (hip/runtime/megakernel.cu, "Staging").

Weights do not depend on activations, so a task's tile can be on the SM by the time its inputs are
ready, and the task then runs at shared-memory latency instead of HBM's. A task is staged when its
kind reads its weights through the runtime's staged path (STAGED_KINDS), its static weights are
ONE contiguous range (norm vectors aside, which stay in L2), the range fits the stage and both ends
are 16-byte aligned (bulk copies need it). Everything else reads global memory as before.
"""

import numpy as np

from fleet_decode.graph.format import DType, Kind
from fleet_decode.graph.reads import weight_reads

WORDS = 3  # FD_STAGE_WORDS: [weight slot, byte offset, bytes]; slot -1: not staged
NOT_STAGED = (-1, 0, 0)
# The kinds whose task functions take the weight-load policy (hip/tasks/common.h fd_staged_weights):
# the attention chain and the router, whose tiles fit a stage; expert and lm_head tiles do not.
STAGEABLE_KINDS = (Kind.RMSNORM_GEMV, Kind.ROPE_Q_ABSORB, Kind.ATTN_MERGE_UV, Kind.O_PROJ_RESIDUAL, Kind.ROUTER,
                   Kind.O_PROJ_ROUTER)
# The ones staged by default (Tuning.staged_kinds overrides): a stage copy is HBM traffic beside
# whatever else runs when it is issued, so staging a kind can cost more than it saves. The q/kv tiles
# (RMSNORM_GEMV) are not staged: their copies were issued during the previous layer's expert window,
# where HBM is saturated, and the layer's first stage reads them faster from an idle HBM than the
# window loses by carrying them (sweeps 45-47, one process each: 2.6-2.9 % faster without them; 0.2
# and 1.0 % with the worker stride of graph.plan.decode_worker_stride). docs/megakernel.md part 10.
STAGED_KINDS = tuple(k for k in STAGEABLE_KINDS if k != Kind.RMSNORM_GEMV)
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
        if weight_addresses is not None and (weight_addresses[slot] + begin) % ALIGN:
            continue
        table[i] = (slot, begin, nbytes)
    return table

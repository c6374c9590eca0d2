"""The megakernel's prefetch table: per task, the byte ranges it will stream that are known before it
may start, so a worker can ask L2 for them while it still waits for the task's inputs
(hip/runtime/megakernel.cu, `fd_prefetch_task`; docs/megakernel.md "Speed").

A range is a static weight tile (reads.weight_reads with part -1), a routed expert's tile (offsets
inside one expert; the device adds the chosen expert's offset once the router's event has fired,
and skips the range before that) or, for an attention chunk, its rows of the MLA cache (clipped on
the device to the rows filled before the step). Each task keeps its RANGES largest ranges.
"""

import numpy as np

from fleet_decode.graph.format import OPERANDS, DType, Kind
from fleet_decode.graph.reads import weight_reads

RANGES = 4  # FD_PREFETCH_RANGES of hip/runtime/megakernel.cu
WORDS = 4  # [source, byte begin, bytes, row bytes]; source >= 0 weight slot, -2 - b buffer b, -1 none
ROUTE_WORDS = 4  # [route_idx buffer, top-k slot, bytes per expert, router event], -1s for a static task
UNUSED = (-1, 0, 0, 0)
ROUTED_KINDS = (Kind.EXPERT_GATE_UP, Kind.EXPERT_DOWN_ACCUM)
DEVICE_BYTES = {DType.F32: 4, DType.I32: 4, DType.MODEL: 2}  # the device keeps MODEL weights in bf16


def _weight_ranges(task, graph):
    routed = task.kind in ROUTED_KINDS
    out = []
    for read in weight_reads(task, graph):
        # A routed task's ranges all lie in the chosen expert (its norm vector, hot in L2, is left out);
        # single rows picked by token or position (part -2) are not known ahead.
        if read.part != (task.slot if routed else -1):
            continue
        weight = graph.weights[read.weight]
        size = DEVICE_BYTES[weight.dtype]
        begin, nbytes = read.begin * read.cols * size, read.elements * size
        extent = int(np.prod(weight.shape[1:] if routed else weight.shape)) * size
        if begin + nbytes > extent:
            raise ValueError(f"{task.name}: prefetch of {weight.name} bytes [{begin}, {begin + nbytes}) "
                             f"runs past its end")
        out.append((read.weight, begin, nbytes, 0))
    return out


def _cache_ranges(task, graph):
    if task.kind != Kind.ATTN_CHUNK:
        return []
    r0, r1 = task.tile
    out = []
    for b in task.buffers[2:4]:  # ckv, kpe
        buffer = graph.buffers[b]
        row_bytes = buffer.cols * DEVICE_BYTES[buffer.dtype]
        if r1 > buffer.rows:
            raise ValueError(f"{task.name}: cache rows [{r0}, {r1}) run past {buffer.name}'s {buffer.rows}")
        out.append((-2 - b, r0 * row_bytes, (r1 - r0) * row_bytes, row_bytes))
    return out


def _route(task, graph, router_events):
    """The routed task's [route_idx buffer, slot, bytes per expert, router event]."""
    route_idx = task.buffers[OPERANDS[task.kind][0].index("route_idx")]
    weight = graph.weights[task.weights[-1]]  # gate_up / down: [experts, rows, cols]
    return route_idx, task.slot, int(np.prod(weight.shape[1:])) * DEVICE_BYTES[weight.dtype], router_events[route_idx]


def prefetch_table(graph) -> tuple[np.ndarray, np.ndarray]:
    """(ranges int64 [n_tasks, RANGES, WORDS]: each task's largest prefetchable ranges, unused rows
    UNUSED; routes int64 [n_tasks, ROUTE_WORDS]: where a routed task finds its expert, -1s elsewhere)."""
    router_events = {t.buffers[OPERANDS[Kind.ROUTE_TOPK][0].index("route_idx")]: t.out_event
                     for t in graph.tasks if t.kind == Kind.ROUTE_TOPK}
    table = np.tile(np.array(UNUSED, dtype=np.int64), (len(graph.tasks), RANGES, 1))
    routes = np.full((len(graph.tasks), ROUTE_WORDS), -1, dtype=np.int64)
    for i, task in enumerate(graph.tasks):
        ranges = sorted(_weight_ranges(task, graph) + _cache_ranges(task, graph), key=lambda r: -r[2])[:RANGES]
        if ranges:
            table[i, :len(ranges)] = ranges
        if task.kind in ROUTED_KINDS:
            routes[i] = _route(task, graph, router_events)
    return table, routes

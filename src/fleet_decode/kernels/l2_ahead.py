"""The megakernel's L2-ahead table: per task, up to RANGES weight ranges of a LATER task that the
runtime asks L2 to fetch and hold (evict-last bulk prefetches, port.h fd_l2_hold) when the worker
reaches this task, before it waits for the task's inputs (hip/runtime/megakernel.cu).

Why: a layer is a latency-bound attention chain (seven dependent stages, HBM mostly idle) followed by
a bandwidth-bound expert window. Weights are static, so bytes a later stage needs can be read from
HBM during the chain, where nothing else needs the bandwidth, and found in L2 when they are needed.
Two holds (HOLDS), each a choice of carriers and of what they hold:
- "next-chain": each layer's expert gate/up tiles (reached when the worker's previous task of the
  layer ends, in the chain) hold the NEXT layer's attention weights (q/kv, W_UK, W_UV, o_proj, the
  router: ~28 MB), read otherwise at the start of that chain and by stage copies in the expert window.
- "shared": each MoE layer's attention chunks (reached ~10 us into the layer) hold the layer's own
  shared experts (gate, up, down: ~35 MB), read otherwise from o_proj on, much of it in the window.

Nothing here changes a value: prefetches are hints; the held lines are the weights' own bytes.
"""

import numpy as np

from fleet_decode.graph.format import Kind
from fleet_decode.kernels.staging import DEVICE_BYTES, STAGEABLE_KINDS
from fleet_decode.graph.reads import weight_reads

RANGES = 4  # FD_L2_AHEAD_RANGES
WORDS = 3 * RANGES  # FD_L2_AHEAD_WORDS: [weight slot, byte offset, bytes] x RANGES; slot -1: none
HELD_KINDS = STAGEABLE_KINDS  # the attention chain and the router: whose weights are held
CARRIER_KINDS = (Kind.EXPERT_GATE_UP, Kind.GATE_UP)
SHARED_KINDS = (Kind.GATE_UP, Kind.DOWN_ACCUM)  # in an MoE layer: the shared experts' tiles
HOLDS = ("next-chain", "shared")
ALIGN = 128  # pieces start on L2 lines


def _is_moe(graph, layer: int) -> bool:
    return any(t.layer == layer and t.kind == Kind.EXPERT_GATE_UP for t in graph.tasks)


def held_ranges(graph, layer: int, kinds=HELD_KINDS) -> list[tuple[int, int, int]]:
    """(weight slot, byte begin, byte end) of the matrices the tasks of `kinds` in `layer` read, merged
    where they touch, in graph order of first use."""
    spans: dict[int, list[list[int]]] = {}
    for task in graph.tasks:
        if task.layer != layer or task.kind not in kinds:
            continue
        for read in weight_reads(task, graph):
            weight = graph.weights[read.weight]
            if read.part != -1 or len(weight.shape) < 2:
                continue  # norm vectors and rows picked at run time
            size = DEVICE_BYTES[weight.dtype]
            spans.setdefault(read.weight, []).append([read.begin * read.cols * size, read.end * read.cols * size])
    out = []
    for slot, pieces in spans.items():
        pieces.sort()
        merged = [pieces[0]]
        for begin, end in pieces[1:]:
            if begin <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([begin, end])
        out += [(slot, begin, end) for begin, end in merged]
    return out


def cut(ranges, n: int) -> list[tuple[int, int, int]]:
    """The ranges cut into pieces of near-equal bytes, at most about n of them: (slot, offset, bytes)."""
    total = sum(end - begin for _, begin, end in ranges)
    if total == 0 or n <= 0:
        return []
    target = -(-total // n)
    target = -(-target // ALIGN) * ALIGN
    pieces = []
    for slot, begin, end in ranges:
        at = begin
        while at < end:
            stop = min(end, (at // ALIGN) * ALIGN + target)
            pieces.append((slot, at, stop - at))
            at = stop
    return pieces


def _carried(graph, hold: str):
    """(carrier task indices, ranges they hold) per layer for one of HOLDS."""
    layers = sorted({t.layer for t in graph.tasks if t.kind in HELD_KINDS and t.layer >= 0})
    for k, layer in enumerate(layers):
        if hold == "next-chain":  # the last layer's carry the first's, for the next step
            carriers = [i for i, t in enumerate(graph.tasks) if t.layer == layer and t.kind in CARRIER_KINDS]
            yield layer, carriers, held_ranges(graph, layers[(k + 1) % len(layers)])
        elif hold == "shared":
            if _is_moe(graph, layer):
                carriers = [i for i, t in enumerate(graph.tasks) if t.layer == layer and t.kind == Kind.ATTN_CHUNK]
                yield layer, carriers, held_ranges(graph, layer, SHARED_KINDS)
        else:
            raise ValueError(f"unknown L2 hold {hold!r}; the holds are {HOLDS}")


def ahead_table(graph, weight_addresses=None, hold: str = "next-chain") -> np.ndarray:
    """int64 [n_tasks, WORDS]: for the hold (HOLDS), each layer's carriers hold their ranges, cut evenly
    over them. Pieces that are not 16-byte aligned (given the weights' device addresses) are left out:
    bulk prefetches need it."""
    table = np.full((len(graph.tasks), WORDS), -1, dtype=np.int64)
    table[:, 1::3] = 0
    table[:, 2::3] = 0
    for layer, carriers, ranges in _carried(graph, hold):
        if not carriers:
            continue
        pieces = cut(ranges, len(carriers))
        if weight_addresses is not None:
            pieces = [p for p in pieces if (weight_addresses[p[0]] + p[1]) % 16 == 0 and p[2] % 16 == 0]
        # the largest pieces first, each to the carrier with the fewest bytes so far
        filled, load = [0] * len(carriers), [0] * len(carriers)
        for slot, offset, nbytes in sorted(pieces, key=lambda p: -p[2]):
            c = min((c for c in range(len(carriers)) if filled[c] < RANGES), key=lambda c: load[c], default=None)
            if c is None:
                raise ValueError(f"layer {layer}: more pieces than {RANGES} for each of {len(carriers)} carriers")
            table[carriers[c], 3 * filled[c]:3 * filled[c] + 3] = (slot, offset, nbytes)
            filled[c] += 1
            load[c] += nbytes
    return table

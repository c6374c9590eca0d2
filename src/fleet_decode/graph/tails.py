"""Tails: small tasks that no worker waits for, run by the last of their input's signallers.

    from fleet_decode.graph.tails import tails, without_tails
    tail_of = tails(graph, ("ROUTE_TOPK", "ARGMAX"))   # tail task -> the tasks that signal its input
    runnable = without_tails(graph, tail_of)          # the workers' lists, tails taken out

A stage of tiles followed by one small task (the router's tiles, then the top-k; lm_head's tiles,
then the argmax) costs a wait and a wake-up after the stage. As a tail, the small task is run by
whichever tile arrives last, right after its own run: each signaller counts itself on an arrival
counter (the runtime's adders' counters, fleet_decode.kernels.runtime.add_order), and the last runs
the tail on its own worker and signals the tail's event. The graph does not change: the tail still
follows every signaller of its input, so the simulator (which runs tails the same way) checks it
with the same race and deadlock detection.
"""

import copy

from fleet_decode.graph.format import ACCUMULATES, Kind

# One small task after a stage of tiles; the runtime's tail path runs any kind, these are the ones
# whose single input is such a stage. SUM_FIXED_POINT: the split-K slices' fixed-point sum in one tile
# (Plan.sum_rows = hidden), run by the last slice to arrive.
TAIL_KINDS = ("ROUTE_TOPK", "ARGMAX", "SUM_FIXED_POINT")


def check_tail_kinds(kinds):
    """Raises ValueError naming any kind that cannot run as a tail."""
    unknown = [k for k in kinds if k not in TAIL_KINDS]
    if unknown:
        raise ValueError(f"{unknown} cannot run as tails; the runtime runs {list(TAIL_KINDS)}")


def tails(graph, kinds) -> dict[int, list[int]]:
    """Every task of the named kinds (TAIL_KINDS) -> the tasks that signal its one input, in graph
    order. Raises ValueError for a kind that cannot be a tail, or a task of it that does not wait for
    exactly one event of its own step whose signallers count nowhere else."""
    check_tail_kinds(kinds)
    if not kinds:
        return {}
    wanted = {Kind[name] for name in kinds}
    signallers = graph.signalers()
    out = {}
    for i, t in enumerate(graph.tasks):
        if t.kind not in wanted:
            continue
        if len(t.inputs) != 1 or t.inputs[0][1] != 0:
            raise ValueError(f"{t.name} waits for {t.inputs}: a tail waits for exactly one event, of its own step")
        producers = signallers[t.inputs[0][0]]
        if not producers or any(graph.tasks[p].kind in ACCUMULATES or graph.tasks[p].kind in wanted
                                for p in producers):
            raise ValueError(f"{t.name}: its input's signallers are none, or already count themselves "
                             f"(adders or tails)")
        taken = [p for other in out.values() for p in other if p in producers]
        if taken:
            raise ValueError(f"{t.name}: its signaller {graph.tasks[taken[0]].name} already signals another tail; "
                             f"a signaller counts itself for one tail (cut the stage after it into one task)")
        out[i] = producers
    return out


def without_tails(graph, tail_of: dict[int, list[int]]):
    """A shallow copy of graph whose worker lists leave out the tails (tasks, events and buffers are
    the same objects): what the runtime and the simulator walk when tails run."""
    trimmed = copy.copy(graph)
    trimmed.workers = [[t for t in tasks if t not in tail_of] for tasks in graph.workers]
    return trimmed

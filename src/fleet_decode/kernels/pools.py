"""The megakernel's pools: sets of tasks that any worker holding one of them may run, claimed once per
step in a fixed order (hip/runtime/megakernel.cu, "Pools").

Why: the balanced assignment fixes, before the launch, which SM streams which expert tile, but SMs
stream at different rates (trace 52: a routed gate/up tile at 27-39 GB/s), so a slot's down tiles wait
for its slowest gate/up tile while other SMs sit idle, and the down phase ends on the slowest down
tile. In a pool the routed tiles of a layer go to whichever worker is free first: the gate/up tiles
of every slot, then the down tiles of every slot, in that order.

The graph does not change (every task keeps its inputs, its signal and its adder's row, so tokens and
logits are those of the lists, bit for bit); only who runs a task does. That is safe because the
order is topological and no worker waits for a pool's task before it reaches its own first task of the
pool: a claimed task waits only for tasks outside the pool, which need nothing of the pool, or for
tasks of the pool claimed before it, each being run by the worker that claimed it (check_pools). The
routed tiles are never staged (staging.STAGED_KINDS), so no stage copy is sent ahead for them.
"""

import numpy as np

from fleet_decode.graph.format import Kind

POOLS = ("routed",)  # Tuning.pool values: which tasks are pooled
ROUTED_KINDS = (Kind.EXPERT_GATE_UP, Kind.EXPERT_DOWN_ACCUM)


def pool_tables(graph, pool: str = "routed") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pool_of [n_tasks] int32: each task's pool or -1; pool_offsets [n_pools + 1]; pool_tasks): one pool
    per MoE layer holding its routed gate/up tiles then its routed down tiles, each kind in graph order."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; the pools are {POOLS}")
    by_layer: dict[int, list[list[int]]] = {}
    for i, task in enumerate(graph.tasks):
        if task.kind in ROUTED_KINDS:
            by_layer.setdefault(task.layer, [[], []])[ROUTED_KINDS.index(task.kind)].append(i)
    pool_of = np.full(len(graph.tasks), -1, dtype=np.int32)
    offsets, members = [0], []
    for p, layer in enumerate(sorted(by_layer)):
        gate_up, down = by_layer[layer]
        members += gate_up + down
        offsets.append(len(members))
        pool_of[gate_up + down] = p
    tables = pool_of, np.array(offsets, dtype=np.int32), np.array(members, dtype=np.int32)
    check_pools(graph, *tables)
    return tables


def check_pools(graph, pool_of, offsets, members):
    """Raises ValueError unless the pools can run without deadlock: each pool's order is topological
    (no task waits for an event a task later in the pool signals), and no task that a worker runs before
    its first task of the pool waits, directly or through other tasks, for the pool's tasks."""
    signals: dict[int, list[int]] = {}
    for i, task in enumerate(graph.tasks):
        signals.setdefault(task.out_event, []).append(i)
    for p in range(len(offsets) - 1):
        order = [int(t) for t in members[offsets[p]:offsets[p + 1]]]
        rank = {t: k for k, t in enumerate(order)}
        # the events that wait, directly or through other tasks, for the pool (graph order is topological)
        after_pool = {graph.tasks[t].out_event for t in order}
        for task in graph.tasks:
            if any(lag == 0 and e in after_pool for e, lag in task.inputs):
                after_pool.add(task.out_event)
        for k, t in enumerate(order):
            for event, lag in graph.tasks[t].inputs:
                later = [s for s in signals.get(event, []) if rank.get(s, -1) > k]
                if lag == 0 and later:
                    raise ValueError(f"pool {p}: {graph.tasks[t].name} waits for {graph.tasks[later[0]].name}, "
                                     f"which comes after it in the pool")
        for w, tasks in enumerate(graph.workers):
            entry = next((j for j, t in enumerate(tasks) if pool_of[t] == p), None)
            if entry is None:
                continue
            for t in tasks[:entry]:
                if any(lag == 0 and e in after_pool for e, lag in graph.tasks[t].inputs):
                    raise ValueError(f"pool {p}: worker {w} runs {graph.tasks[t].name}, which waits for the pool, "
                                     f"before it reaches the pool")

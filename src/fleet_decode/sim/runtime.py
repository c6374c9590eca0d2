"""The Fleet-style runtime on the CPU: workers walking their task lists over monotonic event counters.

Each worker loops over the steps and, within a step, over its own list (the encoded worker_tasks).
A task is runnable when each input counter has reached triggers x (step + 1 - lag); a seeded
scheduler picks which runnable worker moves next; the task runs whole, then adds one to its output
counter. Counters are never reset. Besides the counters, every task carries what it knows has
happened (the tasks whose signals reached it through the events it waited on), which is what lets
memory.py report a missing edge however lucky the schedule. Tails (fleet_decode.graph.tails) are in
no list: the last of a tail's signallers to run in a step runs it right after itself, as the
megakernel does.
"""

import random

from fleet_decode.graph.format import NONE, OPERANDS
from fleet_decode.graph.graph import EncodedGraph, decode_graph
from fleet_decode.graph.tails import without_tails
from fleet_decode.sim.kinds import RUN, TaskContext
from fleet_decode.sim.memory import Memory, SimRace

SCHEDULES = ("round-robin", "random", "reverse")


class SimDeadlock(RuntimeError):
    """No worker can move. .waiting lists (task, event, counter, target); .cycle the tasks in a wait cycle."""

    def __init__(self, message, waiting, cycle):
        super().__init__(message)
        self.waiting, self.cycle = waiting, cycle


class Simulator:
    def __init__(self, encoded: EncodedGraph, weights, model_dtype, pos0: int, schedule="round-robin", seed=0,
                 sampling=None, stop_ids=(), tail_of: dict[int, list[int]] | None = None):
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        graph = decode_graph(encoded)
        self.graph = graph = without_tails(graph, tail_of) if tail_of else graph  # the lists the workers walk
        self.weights, self.model_dtype, self.pos0 = weights, model_dtype, pos0
        for slot, (w, tensor) in enumerate(zip(graph.weights, weights)):
            if tuple(tensor.shape) != w.shape:
                raise ValueError(f"weight slot {slot} ({w.name}) has shape {tuple(tensor.shape)}, the graph says {w.shape}")
        self.schedule, self.rng = schedule, random.Random(seed)
        self.memory = Memory(graph, model_dtype)
        self.counter = [0] * len(graph.events)
        self.event_knowledge = [0] * len(graph.events)  # OR of the knowledge of every signal so far
        self.runs = [0] * len(graph.tasks)
        self.signalers = graph.signalers()
        self.where = {t: (w, i) for w, tasks in enumerate(graph.workers) for i, t in enumerate(tasks)}
        # tails: signaller -> (tail, how many signal it); per (tail, step) the arrivals so far and the
        # knowledge they carried
        self.tail_of = {p: (tail, len(ps)) for tail, ps in (tail_of or {}).items() for p in ps}
        self.arrivals: dict[tuple[int, int], tuple[int, int]] = {}
        self.after_task = None  # callback(task_index, step), e.g. to snapshot buffers at the end of a step
        # How ARGMAX picks the token: None (or greedy) the first maximum, else a fleet_decode.sampling.Sampling.
        # A step that picks one of stop_ids is the launch's last: no worker starts a later step.
        self.sampling, self.stop_ids = sampling, frozenset(stop_ids)
        self.stopped_at = None  # the step that produced a stop id
        self.stats = {"tasks_run": 0, "scheduler_picks": 0, "blocked_checks": 0}
        self.pools: dict[tuple[int, int], tuple[int, int]] = {}  # (pool buffer, step) -> (pieces taken, takers done)

    def take_pieces(self, task: int, step: int, n_pieces: int) -> range:
        """The pieces of its pool (EXPERT_POOL) that this taker runs at this step, counted on the pool's
        counter as the device counts them (one take a piece, then the take that finds none left). A task
        runs whole here, so how many it takes stands for when the others take theirs: the step's last taker
        takes what is left; the others an even share of it (round-robin), any number (random) or none
        (reverse: one taker runs every piece). Raises SimRace if an earlier step's takers are not all done,
        whose pieces the device would then hand out as this step's."""
        t = self.graph.tasks[task]
        pool = t.buffers[OPERANDS[t.kind][0].index("pool")]
        n_takers = t.args[0]
        counter = self.memory.data[pool]
        taken, done = self.pools.get((pool, step), (0, 0))
        base = step * (n_pieces + n_takers)
        if int(counter[0]) != base + taken + done:
            raise SimRace(f"task {t.name} took from {self.graph.buffers[pool].name} at step {step} at count "
                          f"{int(counter[0])}, where step {step}'s takes start at {base}: an earlier step's takers "
                          f"are not all done, no event orders them first")
        left = n_pieces - taken
        if done == n_takers - 1:
            n = left
        elif self.schedule == "round-robin":
            n = -(-left // (n_takers - done))
        elif self.schedule == "random":
            n = self.rng.randint(0, left)
        else:
            n = 0
        counter[0] += n + 1
        self.pools[pool, step] = (taken + n, done + 1)
        return range(taken, taken + n)

    def stop(self, step):
        self.stopped_at = step if self.stopped_at is None else min(self.stopped_at, step)

    def _target(self, event, lag, step):
        return self.graph.events[event].triggers * (step + 1 - lag)

    def _blocking_input(self, task, step):
        for event, lag in self.graph.tasks[task].inputs:
            if self.counter[event] < self._target(event, lag, step):
                return event, lag
        return None

    def run(self, n_steps: int):
        g = self.graph
        if not 1 <= n_steps <= g.constants.max_steps:
            raise ValueError(f"n_steps must be in [1, {g.constants.max_steps}] (the graph's max_steps), got {n_steps}")
        cursor = [0] * len(g.workers)
        step = [0 if tasks else n_steps for tasks in g.workers]
        last, oldest = -1, 0
        while True:
            last_step = n_steps if self.stopped_at is None else min(n_steps, self.stopped_at + 1)
            active = [w for w in range(len(g.workers)) if step[w] < last_step]
            if not active:
                return
            runnable = [w for w in active if self._blocking_input(g.workers[w][cursor[w]], step[w]) is None]
            self.stats["blocked_checks"] += len(active) - len(runnable)
            if not runnable:
                raise self._deadlock(active, cursor, step)
            w = self._pick(runnable, cursor, step, last)
            last = w
            self._execute(g.workers[w][cursor[w]], step[w])
            cursor[w] += 1
            if cursor[w] == len(g.workers[w]):
                cursor[w], step[w] = 0, step[w] + 1
            if min(step) > oldest:
                oldest = min(step)
                self.memory.forget_before(oldest)

    def _pick(self, runnable, cursor, step, last):
        self.stats["scheduler_picks"] += 1
        if self.schedule == "round-robin":
            return min(runnable, key=lambda w: (w <= last, w))
        if self.schedule == "random":
            return self.rng.choice(runnable)
        # reverse: the worker whose next task comes latest (later step first, then later in the graph)
        return max(runnable, key=lambda w: (step[w], self.graph.workers[w][cursor[w]], w))

    def _execute(self, task, step, arrived=None):
        """Runs task at step. A tail knows what its signallers' arrivals carried (`arrived`), not what
        its input event has: the runtime orders it by the arrival counter alone."""
        t = self.graph.tasks[task]
        knowledge = 1 << (step * len(self.graph.tasks) + task)
        if arrived is not None:
            knowledge |= arrived
        else:
            for event, _ in t.inputs:
                knowledge |= self.event_knowledge[event]
        RUN[t.kind](TaskContext(self, task, step, knowledge))
        self.runs[task] += 1
        self.stats["tasks_run"] += 1
        if t.out_event != NONE:
            self.counter[t.out_event] += 1
            self.event_knowledge[t.out_event] |= knowledge
        if self.after_task:
            self.after_task(task, step)
        if task in self.tail_of:
            tail, n = self.tail_of[task]
            count, arrived = self.arrivals.pop((tail, step), (0, 0))
            count, arrived = count + 1, arrived | knowledge
            if count == n:
                self._execute(tail, step, arrived)
            else:
                self.arrivals[tail, step] = count, arrived

    def _deadlock(self, active, cursor, step):
        g = self.graph
        heads = {g.workers[w][cursor[w]]: w for w in active}
        waiting, waits_on, lines = [], {}, []
        for task, w in heads.items():
            event, lag = self._blocking_input(task, step[w])
            target = self._target(event, lag, step[w])
            waiting.append((g.tasks[task].name, g.events[event].name, self.counter[event], target))
            lines.append(f"  worker {w}: task {g.tasks[task].name} (step {step[w]}) waits on event "
                         f"{g.events[event].name}: counter {self.counter[event]} < target {target}")
            waits_on[task] = (event, [s for s in self.signalers[event] if self.runs[s] <= step[w] - lag])

        def blockers(task):
            if task in heads:
                event, missing = waits_on[task]
                return [(s, f"waits on event {g.events[event].name}, signalled by") for s in missing]
            if task not in self.where:  # a tail: it runs when its signallers have
                return []
            w, _ = self.where[task]
            return [(g.workers[w][cursor[w]], f"queued on worker {w} behind")] if w in active else []

        cycle = _find_cycle(list(heads), blockers)
        message = "deadlock: no worker can run\n" + "\n".join(lines)
        if cycle:
            chain = "".join(f"{g.tasks[t].name} --({why})--> " for t, why in cycle) + g.tasks[cycle[0][0]].name
            message += f"\n  cycle: {chain}"
        else:
            message += "\n  no wait cycle: a wait can never be satisfied (its event has too few signals per step)"
        return SimDeadlock(message, waiting, [g.tasks[t].name for t, _ in cycle])


def _find_cycle(starts, blockers):
    """A cycle in the wait-for graph as [(task, why it waits on the next)], or [] if there is none."""
    done = set()
    for start in starts:
        path, on_path, stack = [], {}, [(start, iter(blockers(start)))]
        on_path[start] = 0
        path.append((start, None))
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                stack.pop()
                path.pop()
                del on_path[node]
                done.add(node)
                continue
            target, why = nxt
            path[-1] = (node, why)
            if target in on_path:
                return path[on_path[target]:]
            if target not in done:
                on_path[target] = len(path)
                path.append((target, None))
                stack.append((target, iter(blockers(target))))
    return []


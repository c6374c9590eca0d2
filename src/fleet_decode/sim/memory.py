"""The simulator's buffers, with a record of who wrote and read each element at which step.

Every read is checked against happens-before, not against the order the schedule happened to
produce: a task may read an element only if it was written this step (or ever, for LOG buffers) and
every task that wrote or added to it is known to the reader through the events it waited on. So a
missing dependency is reported even by a schedule that ran the writer first by luck. Writes to STEP
buffers also check that last step's readers are known (no write-after-read race across steps).

COUNTER buffers (an EXPERT_POOL's counter) are atomics, outside these checks: the simulator hands out
their pieces itself (Simulator.take_pieces). A fixed-point accumulator (DType.I64, SUM_FIXED_POINT) is zeroed by its reader for the NEXT step: a
write of step s + 1's starting value by a task of step s (`for_next_step`). Its adders of step s + 1
must know that task, as any adder must know the plain write that starts its sum; the host zeroes
every accumulator before the launch (step 0's start).
"""

from dataclasses import dataclass

import numpy as np
import torch

from fleet_decode.graph.format import ACCUMULATES, OPERANDS, DType, Kind, Persistence, fixed_point_adds, pool_pieces

NEVER = -(2 ** 31)  # written_step of an element nobody wrote
HOST = -1  # written_step of an element the host wrote before the launch


class SimRace(RuntimeError):
    """A task touched memory without the dependency that makes it safe; the message names both sides."""


@dataclass
class Access:
    lo: int
    hi: int
    step: int
    task: int  # task index, or -1 for the host
    accumulate: bool = False
    ran: int | None = None  # the step the task ran at, where it wrote the next step's start (else `step`)

    @property
    def ran_step(self) -> int:
        return self.step if self.ran is None else self.ran


class Memory:
    def __init__(self, graph, model_dtype):
        self.graph = graph
        dtypes = {DType.F32: torch.float32, DType.I32: torch.int32, DType.I64: torch.int64, DType.MODEL: model_dtype}
        self.data = [torch.zeros(b.numel, dtype=dtypes[b.dtype]) for b in graph.buffers]
        self.written_step = [np.full(b.numel, NEVER, dtype=np.int64) for b in graph.buffers]
        self.added = [np.zeros(b.numel, dtype=np.int32) for b in graph.buffers]
        self.writes = [[] for _ in graph.buffers]
        self.reads = [[] for _ in graph.buffers]
        # How many tasks add into each element per step, plus the one plain write that starts it.
        self.expected_adds = [np.zeros(b.numel, dtype=np.int32) for b in graph.buffers]
        counted_pools = set()
        for t in graph.tasks:
            if t.kind in ACCUMULATES:
                buf = t.buffers[OPERANDS[t.kind][0].index(ACCUMULATES[t.kind])]
                self.expected_adds[buf][t.tile[0]:t.tile[1]] += 1
            operand = fixed_point_adds(t)
            if operand is None:
                continue
            acc = t.buffers[OPERANDS[t.kind][0].index(operand)]
            if t.kind != Kind.EXPERT_POOL:
                self.expected_adds[acc] += 1  # a split-K slice adds into the whole accumulator row
            elif (pool := t.buffers[OPERANDS[t.kind][0].index("pool")]) not in counted_pools:
                counted_pools.add(pool)  # a pool adds once a piece, whichever taker runs it
                self.expected_adds[acc] += pool_pieces(t, graph.constants.moe_inter, graph.constants.top_k)[1]
        self.n_tasks = len(graph.tasks)
        for buf, b in enumerate(graph.buffers):
            if b.dtype == DType.I64:
                self.host_zero_accumulator(buf)

    # ------------------------------------------------------------------ host side
    def host_write(self, buf: int, lo: int, values: torch.Tensor):
        """Before the launch. In a STEP buffer that is the input of step 0 (a layer graph's hidden state)."""
        values = values.reshape(-1)
        hi = lo + values.numel()
        self.data[buf][lo:hi] = values.to(self.data[buf].dtype)
        step = 0 if self.graph.buffers[buf].persistence == Persistence.STEP else HOST
        self.written_step[buf][lo:hi] = step
        self.added[buf][lo:hi] = self.expected_adds[buf][lo:hi]  # the host writes final values
        self.writes[buf].append(Access(lo, hi, step, -1))

    def host_zero_accumulator(self, buf: int):
        """Before the launch: a fixed-point accumulator's start for step 0, which its adders then add into."""
        self.data[buf].zero_()
        self.written_step[buf][:] = 0
        self.added[buf][:] = 0
        self.writes[buf].append(Access(0, self.graph.buffers[buf].numel, 0, -1))

    # ------------------------------------------------------------------ task side
    def _name(self, task):
        return self.graph.tasks[task].name if task >= 0 else "the host"

    def _known(self, access: Access, knowledge: int) -> bool:
        return access.task < 0 or bool(knowledge >> (access.ran_step * self.n_tasks + access.task) & 1)

    def _region(self, buf, lo, hi):
        b = self.graph.buffers[buf]
        if b.cols > 1:
            return f"{b.name}[rows {lo // b.cols}:{-(-hi // b.cols)}]"
        return f"{b.name}[{lo}:{hi}]"

    def read(self, task, step, knowledge, buf, lo, hi) -> torch.Tensor:
        b, name = self.graph.buffers[buf], self.graph.tasks[task].name
        written = self.written_step[buf][lo:hi]
        region = self._region(buf, lo, hi)
        if b.persistence == Persistence.STEP:
            stale = written != step
        else:
            stale = (written == NEVER) | (written > step)
        if stale.any():
            last = int(written[stale][0])
            when = "never written" if last == NEVER else f"last written at step {last}"
            raise SimRace(f"task {name} read {region} before it was written (step {step}; element "
                          f"{lo + int(np.argmax(stale))} {when})")
        if b.persistence == Persistence.STEP:
            short = self.added[buf][lo:hi] < self.expected_adds[buf][lo:hi]
            if short.any():
                i = int(np.argmax(short))
                raise SimRace(f"task {name} read {region} before it was written (step {step}): element {lo + i} "
                              f"has {int(self.added[buf][lo + i])} of its {int(self.expected_adds[buf][lo + i])} "
                              f"accumulations")
        current_only = b.persistence == Persistence.STEP  # earlier steps' writes there are overwritten
        for w in self.writes[buf]:
            if w.lo < hi and lo < w.hi and not (current_only and w.step != step) and not self._known(w, knowledge):
                raise SimRace(f"task {name} read {region} before it was written: its writer {self._name(w.task)} "
                              f"(step {w.step}) ran first only by chance, no event path leads from it to the reader")
        if b.persistence == Persistence.STEP:
            self.reads[buf].append(Access(lo, hi, step, task))
        return self.data[buf][lo:hi]

    def write(self, task, step, knowledge, buf, lo, hi, values, accumulate=False, for_next_step=False):
        b, name = self.graph.buffers[buf], self.graph.tasks[task].name
        region = self._region(buf, lo, hi)
        ran = None
        if for_next_step:  # the value that step + 1's adders start from (a fixed-point accumulator's zero)
            assert b.persistence == Persistence.STEP and not accumulate
            ran, step = step, step + 1
        written = self.written_step[buf][lo:hi]
        if accumulate:
            if (written != step).any():
                raise SimRace(f"task {name} added into {region} before it was written (step {step}): "
                              f"the plain write that starts the sum has not happened")
            for w in self.writes[buf]:
                if w.lo < hi and lo < w.hi and not w.accumulate and w.step == step and not self._known(w, knowledge):
                    raise SimRace(f"task {name} added into {region} before it was written: the starting write by "
                                  f"{self._name(w.task)} is not ordered before it by any event")
            self.data[buf][lo:hi] += values.to(self.data[buf].dtype)
            self.added[buf][lo:hi] += 1
        else:
            if b.persistence == Persistence.LOG and (written != NEVER).any():
                raise SimRace(f"task {name} wrote {region} at step {step}, which was already written "
                              f"(a LOG buffer is written once per launch)")
            if b.persistence == Persistence.STEP and (written == step).any():
                raise SimRace(f"task {name} wrote {region} twice in step {step}")
            for r in self.reads[buf]:
                if r.lo < hi and lo < r.hi and r.step < step and not self._known(r, knowledge):
                    raise SimRace(f"task {name} overwrote {region} at step {step} while {self._name(r.task)} "
                                  f"(step {r.step}) may still read it: no event path orders the read first")
            self.data[buf][lo:hi] = values.reshape(-1).to(self.data[buf].dtype)
            self.written_step[buf][lo:hi] = step
            self.added[buf][lo:hi] = 0
        self.writes[buf].append(Access(lo, hi, step, task, accumulate, ran))

    def forget_before(self, step):
        """Drop access records older than the previous step: later steps can only conflict with those."""
        for buf, b in enumerate(self.graph.buffers):
            if b.persistence == Persistence.STEP:
                self.writes[buf] = [a for a in self.writes[buf] if a.step >= step - 1]
                self.reads[buf] = [a for a in self.reads[buf] if a.step >= step - 1]

"""A decode task graph in Python form, and its int32 encoding (encode / decode_graph, with validation).

The Python objects mirror the records of format.py one to one, so encode -> decode_graph gives back an
equal Graph; names travel beside the arrays for the host's error messages and never reach the device.
"""

from dataclasses import dataclass, field, fields

import numpy as np

from fleet_decode.graph.format import (
    BUFFER, BUFFER_WORDS, EVENT, EVENT_WORDS, HEADER, HEADER_WORDS, MAGIC, MAX_ARGS, MAX_BUFFERS,
    MAX_INPUTS, MAX_WEIGHTS, NONE, OPERANDS, TASK, TASK_WORDS, VERSION, WEIGHT, WEIGHT_WORDS, DType, Kind,
    SPLIT_K_KINDS, Persistence, bits_f32, f32_bits, fixed_point_adds,
)


class GraphFormatError(ValueError):
    """An encoded graph that breaks docs/task-graph.md; the message names the record and the rule."""


@dataclass(frozen=True)
class Constants:
    """Model and launch constants every task kind may read (the header's second half)."""
    hidden: int
    n_heads: int
    qk_nope: int
    qk_rope: int
    v_head: int
    kv_rank: int
    n_experts: int
    top_k: int
    moe_inter: int
    vocab: int
    first_layer: int
    n_layers: int
    has_head: bool
    max_positions: int
    max_steps: int
    rms_eps: float  # floats are kept f32-exact so that they survive the int32 header unchanged
    attn_scale: float
    routed_scaling: float
    norm_topk_prob: bool


_FLOAT_CONSTANTS = {"rms_eps": "RMS_EPS_F32", "attn_scale": "ATTN_SCALE_F32", "routed_scaling": "ROUTED_SCALING_F32"}


@dataclass
class Task:
    kind: Kind
    name: str
    layer: int = NONE
    tile: tuple[int, int] = (0, 0)
    slot: int = NONE
    out_event: int = NONE
    inputs: list[tuple[int, int]] = field(default_factory=list)  # (event, lag): lag 1 = previous step's count
    buffers: tuple[int, ...] = ()
    weights: tuple[int, ...] = ()
    args: tuple[int, ...] = ()
    cost: int = 0  # elements of weights and cache it streams; the balanced assignment uses it


@dataclass
class Event:
    name: str
    triggers: int = 0  # signals per step; a waiter at step s with lag g waits for triggers * (s + 1 - g)
    layer: int = NONE


@dataclass
class Buffer:
    name: str
    rows: int
    cols: int
    dtype: DType = DType.F32
    persistence: Persistence = Persistence.STEP

    @property
    def numel(self):
        return self.rows * self.cols


@dataclass
class Weight:
    name: str  # the Hugging Face parameter name, or rope.cos / rope.sin for the host-computed tables
    shape: tuple[int, ...]
    dtype: DType = DType.MODEL


@dataclass
class Graph:
    constants: Constants
    tasks: list[Task]
    events: list[Event]
    buffers: list[Buffer]
    weights: list[Weight]
    workers: list[list[int]]  # per worker, task indices in the order that worker runs them

    def buffer_index(self, name):
        return next(i for i, b in enumerate(self.buffers) if b.name == name)

    def event_index(self, name):
        return next(i for i, e in enumerate(self.events) if e.name == name)

    def task_index(self, name):
        return next(i for i, t in enumerate(self.tasks) if t.name == name)

    def signalers(self):
        """For each event, the tasks that signal it."""
        out = [[] for _ in self.events]
        for i, t in enumerate(self.tasks):
            if t.out_event != NONE:
                out[t.out_event].append(i)
        return out

    def encode(self) -> "EncodedGraph":
        return encode(self)


@dataclass
class EncodedGraph:
    header: np.ndarray  # int32 [HEADER_WORDS]
    tasks: np.ndarray  # int32 [n_tasks, TASK_WORDS]
    events: np.ndarray  # int32 [n_events, EVENT_WORDS]
    buffers: np.ndarray  # int32 [n_buffers, BUFFER_WORDS]
    weights: np.ndarray  # int32 [n_weights, WEIGHT_WORDS]
    worker_offsets: np.ndarray  # int32 [n_workers + 1]
    worker_tasks: np.ndarray  # int32 [n_tasks]
    names: dict = field(default_factory=dict)  # host side only: tasks/events/buffers/weights -> list[str]

    SECTIONS = ("tasks", "events", "buffers", "weights", "worker_offsets", "worker_tasks")

    def blob(self) -> np.ndarray:
        """Header and sections in one int32 array, as the device receives it (offsets in the header)."""
        return np.concatenate([self.header] + [getattr(self, s).reshape(-1) for s in self.SECTIONS]).astype(np.int32)

    @classmethod
    def from_blob(cls, blob, names=None) -> "EncodedGraph":
        blob = np.asarray(blob, dtype=np.int32).reshape(-1)
        if blob.size < HEADER_WORDS:
            raise GraphFormatError(f"blob has {blob.size} words, fewer than the {HEADER_WORDS}-word header")
        h = blob[:HEADER_WORDS]
        if int(h[HEADER["TOTAL_WORDS"]]) != blob.size:
            raise GraphFormatError(f"blob has {blob.size} words but its header declares {int(h[HEADER['TOTAL_WORDS']])}")
        cut = {s: int(h[HEADER[k]]) for s, k in zip(cls.SECTIONS, ("TASKS_AT", "EVENTS_AT", "BUFFERS_AT", "WEIGHTS_AT",
                                                                     "WORKER_OFFSETS_AT", "WORKER_TASKS_AT"))}
        ends = list(cut.values())[1:] + [blob.size]
        widths = {"tasks": TASK_WORDS, "events": EVENT_WORDS, "buffers": BUFFER_WORDS, "weights": WEIGHT_WORDS}
        parts = {}
        for (s, start), end in zip(cut.items(), ends):
            if not 0 <= start <= end <= blob.size:
                raise GraphFormatError(f"section {s} spans [{start}, {end}), outside the {blob.size}-word blob")
            part = blob[start:end]
            parts[s] = part.reshape(-1, widths[s]) if s in widths and part.size % widths[s] == 0 else part
        return cls(header=h.copy(), names=names or {}, **parts)


def _header(graph: Graph, sizes) -> np.ndarray:
    c = graph.constants
    h = np.zeros(HEADER_WORDS, dtype=np.int64)
    at = HEADER_WORDS
    for key, size in zip(("TASKS_AT", "EVENTS_AT", "BUFFERS_AT", "WEIGHTS_AT", "WORKER_OFFSETS_AT", "WORKER_TASKS_AT"),
                         sizes):
        h[HEADER[key]] = at
        at += size
    values = dict(
        MAGIC=MAGIC, VERSION=VERSION, HEADER_WORDS=HEADER_WORDS, TASK_WORDS=TASK_WORDS, EVENT_WORDS=EVENT_WORDS,
        BUFFER_WORDS=BUFFER_WORDS, WEIGHT_WORDS=WEIGHT_WORDS, N_TASKS=len(graph.tasks), N_EVENTS=len(graph.events),
        N_BUFFERS=len(graph.buffers), N_WEIGHTS=len(graph.weights), N_WORKERS=len(graph.workers), TOTAL_WORDS=at,
        HIDDEN=c.hidden, N_HEADS=c.n_heads, QK_NOPE=c.qk_nope, QK_ROPE=c.qk_rope, V_HEAD=c.v_head, KV_RANK=c.kv_rank,
        N_EXPERTS=c.n_experts, TOP_K=c.top_k, MOE_INTER=c.moe_inter, VOCAB=c.vocab, FIRST_LAYER=c.first_layer,
        N_LAYERS=c.n_layers, HAS_HEAD=int(c.has_head), MAX_POSITIONS=c.max_positions, MAX_STEPS=c.max_steps,
        NORM_TOPK_PROB=int(c.norm_topk_prob),
        **{word: f32_bits(getattr(c, name)) for name, word in _FLOAT_CONSTANTS.items()},
    )
    for key, v in values.items():
        h[HEADER[key]] = v
    return h.astype(np.int32)


def encode(graph: Graph) -> EncodedGraph:
    tasks = np.full((len(graph.tasks), TASK_WORDS), NONE, dtype=np.int32)
    for i, t in enumerate(graph.tasks):
        r = tasks[i]
        r[len(TASK):] = 0  # reserved words
        r[TASK["KIND"]], r[TASK["LAYER"]], r[TASK["SLOT"]], r[TASK["OUT_EVENT"]] = t.kind, t.layer, t.slot, t.out_event
        r[TASK["TILE_BEGIN"]], r[TASK["TILE_END"]] = t.tile
        r[TASK["N_INPUTS"]], r[TASK["COST"]] = len(t.inputs), t.cost
        if len(t.inputs) > MAX_INPUTS:
            raise GraphFormatError(f"task {i} ({t.name}) has {len(t.inputs)} inputs, the record holds {MAX_INPUTS}")
        for j, (event, lag) in enumerate(t.inputs):
            r[TASK[f"IN{j}_EVENT"]], r[TASK[f"IN{j}_LAG"]] = event, lag
        for prefix, values in (("BUF", t.buffers), ("WT", t.weights), ("ARG", t.args)):
            for j, v in enumerate(values):
                r[TASK[f"{prefix}{j}"]] = v
    events = np.array([[e.triggers, e.layer] for e in graph.events], dtype=np.int32).reshape(-1, EVENT_WORDS)
    buffers = np.array([[b.dtype, b.rows, b.cols, b.persistence] for b in graph.buffers],
                       dtype=np.int32).reshape(-1, BUFFER_WORDS)
    weights = np.array([[w.dtype, len(w.shape), *w.shape, *[0] * (3 - len(w.shape))] for w in graph.weights],
                       dtype=np.int32).reshape(-1, WEIGHT_WORDS)
    offsets = np.cumsum([0] + [len(w) for w in graph.workers]).astype(np.int32)
    worker_tasks = np.array([t for w in graph.workers for t in w], dtype=np.int32)
    sizes = [tasks.size, events.size, buffers.size, weights.size, offsets.size, worker_tasks.size]
    names = {"tasks": [t.name for t in graph.tasks], "events": [e.name for e in graph.events],
             "buffers": [b.name for b in graph.buffers], "weights": [w.name for w in graph.weights]}
    return EncodedGraph(_header(graph, sizes), tasks, events, buffers, weights, offsets, worker_tasks, names)


def _check(ok, message):
    if not ok:
        raise GraphFormatError(message)


def _enum(cls, value, what):
    try:
        return cls(int(value))
    except ValueError:
        valid = ", ".join(f"{m.value}={m.name}" for m in cls)
        raise GraphFormatError(f"{what}: {int(value)} is not a valid {cls.__name__} ({valid})") from None


def _records(array, words, declared, what):
    array = np.asarray(array)
    _check(array.dtype == np.int32, f"{what} array must be int32, got {array.dtype}")
    _check(array.ndim == 2 and array.shape[1] == words,
           f"{what} array must have shape [n, {words}] (one {words}-word record per row), got {list(array.shape)}")
    _check(array.shape[0] == declared,
           f"{what} array holds {array.shape[0]} records but the header declares {declared}")
    return array


def _check_split_k_operands(t: Task, buffers: list[Buffer]):
    """A split-K slice's partials are F32 rows, or with fixed_point the layer's one I64 accumulator row,
    which SUM_FIXED_POINT reads (and a pool's takers add into, counting on one I32 COUNTER): the device
    reads them as the kind says, whatever the record claims."""
    if t.kind in SPLIT_K_KINDS:
        _check(t.args[1] in (0, 1), f"task {t.name}: fixed_point must be 0 or 1, got {t.args[1]}")
    operand = fixed_point_adds(t) or ("acc" if t.kind == Kind.SUM_FIXED_POINT else None)
    if operand is None and t.kind not in SPLIT_K_KINDS:
        return
    buf = buffers[t.buffers[OPERANDS[t.kind][0].index(operand or "partials")]]
    want = DType.I64 if operand else DType.F32
    _check(buf.dtype == want, f"task {t.name}: its {operand or 'partials'} buffer {buf.name} is {buf.dtype.name}, "
                              f"{'a fixed-point sum' if operand else 'partial rows'} must be {want.name}")
    if operand:
        _check(buf.rows == 1, f"task {t.name}: the fixed-point accumulator {buf.name} must be one row, has {buf.rows}")
    if t.kind == Kind.EXPERT_POOL:
        pool = buffers[t.buffers[OPERANDS[t.kind][0].index("pool")]]
        _check(pool.dtype == DType.I32 and pool.persistence == Persistence.COUNTER and pool.numel == 1,
               f"task {t.name}: its pool {pool.name} must be one I32 COUNTER")
        _check(t.tile[0] == 0 < t.tile[1] and t.args[0] >= 1 and t.args[1] in (0, 1),
               f"task {t.name}: a pool takes pieces of tile [0, rows) rows among n_takers >= 1, local_sum 0 or 1; "
               f"got tile {t.tile}, args {t.args}")


def decode_graph(enc: EncodedGraph) -> Graph:
    """Checks every rule of docs/task-graph.md and rebuilds the Graph; raises GraphFormatError naming what is wrong."""
    h = np.asarray(enc.header)
    _check(h.dtype == np.int32 and h.shape == (HEADER_WORDS,), f"header must be int32 [{HEADER_WORDS}]")
    _check(int(h[HEADER["MAGIC"]]) == MAGIC, f"bad magic {int(h[HEADER['MAGIC']]):#x}, expected {MAGIC:#x}")
    _check(int(h[HEADER["VERSION"]]) == VERSION, f"format version {int(h[HEADER['VERSION']])}, this reader reads {VERSION}")
    for key, words in (("HEADER_WORDS", HEADER_WORDS), ("TASK_WORDS", TASK_WORDS), ("EVENT_WORDS", EVENT_WORDS),
                       ("BUFFER_WORDS", BUFFER_WORDS), ("WEIGHT_WORDS", WEIGHT_WORDS)):
        _check(int(h[HEADER[key]]) == words, f"header {key} is {int(h[HEADER[key]])}, this format has {words}")
    _check(not h[len(HEADER):].any(), f"header words {len(HEADER)}..{HEADER_WORDS - 1} are reserved and must be 0")
    n = {k: int(h[HEADER[k]]) for k in ("N_TASKS", "N_EVENTS", "N_BUFFERS", "N_WEIGHTS", "N_WORKERS")}
    for k, v in n.items():
        _check(v >= 0 and (v > 0 or k in ("N_WEIGHTS",)), f"header {k} is {v}")
    tasks = _records(enc.tasks, TASK_WORDS, n["N_TASKS"], "tasks")
    events = _records(enc.events, EVENT_WORDS, n["N_EVENTS"], "events")
    buffers = _records(enc.buffers, BUFFER_WORDS, n["N_BUFFERS"], "buffers")
    weights = _records(enc.weights, WEIGHT_WORDS, n["N_WEIGHTS"], "weights")
    names = {k: list(enc.names.get(k, [])) for k in ("tasks", "events", "buffers", "weights")}
    for k, count in (("tasks", n["N_TASKS"]), ("events", n["N_EVENTS"]), ("buffers", n["N_BUFFERS"]),
                     ("weights", n["N_WEIGHTS"])):
        if len(names[k]) != count:
            names[k] = [f"{k[:-1]}{i}" for i in range(count)]

    c = {f.name: int(h[HEADER[f.name.upper()]]) for f in fields(Constants) if f.name not in _FLOAT_CONSTANTS}
    c.update({name: bits_f32(h[HEADER[word]]) for name, word in _FLOAT_CONSTANTS.items()})
    c["has_head"], c["norm_topk_prob"] = bool(c["has_head"]), bool(c["norm_topk_prob"])
    constants = Constants(**c)

    out_buffers = []
    for i, r in enumerate(buffers):
        what = f"buffer {i} ({names['buffers'][i]})"
        dtype = _enum(DType, r[BUFFER["DTYPE"]], f"{what} DTYPE")
        persistence = _enum(Persistence, r[BUFFER["PERSISTENCE"]], f"{what} PERSISTENCE")
        rows, cols = int(r[BUFFER["ROWS"]]), int(r[BUFFER["COLS"]])
        _check(rows > 0 and cols > 0, f"{what}: ROWS and COLS must be positive, got {rows} x {cols}")
        out_buffers.append(Buffer(names["buffers"][i], rows, cols, dtype, persistence))

    out_weights = []
    for i, r in enumerate(weights):
        what = f"weight {i} ({names['weights'][i]})"
        dtype = _enum(DType, r[WEIGHT["DTYPE"]], f"{what} DTYPE")
        ndim = int(r[WEIGHT["NDIM"]])
        _check(1 <= ndim <= 3, f"{what}: NDIM must be 1..3, got {ndim}")
        dims = [int(d) for d in r[WEIGHT["DIM0"]:WEIGHT["DIM0"] + 3]]
        _check(all(d > 0 for d in dims[:ndim]) and all(d == 0 for d in dims[ndim:]),
               f"{what}: dims {dims} must be positive up to NDIM={ndim} and 0 after")
        out_weights.append(Weight(names["weights"][i], tuple(dims[:ndim]), dtype))

    out_events = []
    for i, r in enumerate(events):
        triggers, layer = int(r[EVENT["TRIGGERS"]]), int(r[EVENT["LAYER"]])
        _check(triggers >= 0, f"event {i} ({names['events'][i]}): TRIGGERS must be >= 0, got {triggers}")
        out_events.append(Event(names["events"][i], triggers, layer))

    out_tasks = []
    signals = [0] * len(out_events)
    for i, r in enumerate(tasks):
        what = f"task {i} ({names['tasks'][i]})"
        kind = _enum(Kind, r[TASK["KIND"]], f"{what} KIND")
        n_inputs = int(r[TASK["N_INPUTS"]])
        _check(0 <= n_inputs <= MAX_INPUTS, f"{what}: N_INPUTS must be 0..{MAX_INPUTS}, got {n_inputs}")
        inputs = []
        for j in range(MAX_INPUTS):
            event, lag = int(r[TASK[f"IN{j}_EVENT"]]), int(r[TASK[f"IN{j}_LAG"]])
            if j >= n_inputs:
                _check(event == NONE and lag == NONE, f"{what}: input {j} is past N_INPUTS={n_inputs} but not {NONE}")
                continue
            _check(0 <= event < len(out_events),
                   f"{what}: input {j} waits on event index {event}, out of range [0, {len(out_events)})")
            _check(lag in (0, 1), f"{what}: input {j} has LAG {lag}, must be 0 or 1")
            inputs.append((event, lag))
        out_event = int(r[TASK["OUT_EVENT"]])
        _check(out_event == NONE or 0 <= out_event < len(out_events),
               f"{what}: OUT_EVENT {out_event} out of range [0, {len(out_events)}) and not {NONE}")
        if out_event != NONE:
            signals[out_event] += 1
        buf_names, wt_names, arg_names = OPERANDS[kind]
        operands = {}
        for prefix, used, limit, table, count in (("BUF", buf_names, MAX_BUFFERS, out_buffers, None),
                                                  ("WT", wt_names, MAX_WEIGHTS, out_weights, None),
                                                  ("ARG", arg_names, MAX_ARGS, None, None)):
            values = [int(r[TASK[f"{prefix}{j}"]]) for j in range(limit)]
            for j, v in enumerate(values):
                if j >= len(used):
                    _check(v == NONE, f"{what}: {prefix}{j} is unused by {kind.name} but holds {v}, not {NONE}")
                elif table is not None:
                    _check(0 <= v < len(table), f"{what}: {prefix}{j} ({used[j]}) = {v}, out of range [0, {len(table)})")
            operands[prefix] = tuple(values[:len(used)])
        _check(not r[len(TASK):].any(), f"{what}: reserved words {len(TASK)}..{TASK_WORDS - 1} must be 0")
        begin, end = int(r[TASK["TILE_BEGIN"]]), int(r[TASK["TILE_END"]])
        _check(0 <= begin <= end, f"{what}: tile [{begin}, {end}) is not a range")
        out_tasks.append(Task(kind, names["tasks"][i], int(r[TASK["LAYER"]]), (begin, end), int(r[TASK["SLOT"]]),
                              out_event, inputs, operands["BUF"], operands["WT"], operands["ARG"], int(r[TASK["COST"]])))
    for t in out_tasks:
        _check_split_k_operands(t, out_buffers)
    for i, e in enumerate(out_events):
        _check(e.triggers == signals[i],
               f"event {i} ({e.name}) declares {e.triggers} triggers per step but {signals[i]} tasks signal it")

    offsets = np.asarray(enc.worker_offsets)
    worker_tasks = np.asarray(enc.worker_tasks)
    _check(offsets.dtype == np.int32 and worker_tasks.dtype == np.int32, "worker arrays must be int32")
    _check(offsets.shape == (n["N_WORKERS"] + 1,),
           f"worker_offsets has {offsets.size} entries, the header's {n['N_WORKERS']} workers need {n['N_WORKERS'] + 1}")
    _check(offsets[0] == 0 and np.all(np.diff(offsets) >= 0), "worker_offsets must start at 0 and never decrease")
    _check(worker_tasks.shape == (int(offsets[-1]),),
           f"worker_tasks holds {worker_tasks.size} entries but worker_offsets declares {int(offsets[-1])}")
    _check(worker_tasks.size == n["N_TASKS"],
           f"worker lists hold {worker_tasks.size} entries, the graph has {n['N_TASKS']} tasks (each must appear once)")
    _check(np.all((worker_tasks >= 0) & (worker_tasks < n["N_TASKS"])), "worker_tasks holds a task index out of range")
    counts = np.bincount(worker_tasks, minlength=n["N_TASKS"])
    _check(np.all(counts == 1), f"task {int(np.argmax(counts != 1))} appears {int(counts[np.argmax(counts != 1)])} "
                                f"times in the worker lists; each task must appear exactly once")
    workers = [worker_tasks[offsets[w]:offsets[w + 1]].tolist() for w in range(n["N_WORKERS"])]
    return Graph(constants, out_tasks, out_events, out_buffers, out_weights, workers)

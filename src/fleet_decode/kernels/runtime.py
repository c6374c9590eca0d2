"""Host side of the persistent megakernel (hip/runtime/megakernel.cu): build the decode task graph,
upload it with the HF model's own weights, fill the MLA cache from HF's prefill, and decode N tokens
in ONE launch.

    from fleet_decode.model import load_model, prompt_ids
    from fleet_decode.kernels.runtime import Megakernel
    model = load_model("random:deepseek-coder-v2-lite", dtype=torch.bfloat16, device="cuda")
    mk = Megakernel(model)
    result = mk.decode(prompt_ids(1024), n_tokens=32)      # .tokens, .logits, .hidden_states, .step_seconds
    out, ref = Megakernel(model, layers=[1]).run_layer(prompt_ids(1024))   # M2

simulate_layer and simulate below are what the pipeline's `gpu` backend calls (they mirror the
simulator's, fleet_decode.sim). Measurements and speed sweeps live apart, in
fleet_decode.kernels.lab.
"""

import ctypes
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from fleet_decode.graph import Plan, build_graph, decode_plan, default_plan
from fleet_decode.graph.format import (ACCUMULATES, COMPILED_DIMS, KERNEL_LIMITS, MAX_ARGS, MAX_BUFFERS, MAX_WEIGHTS,
                                       OPERANDS, TASK, DType, Kind, Persistence)
from fleet_decode.graph.plan import absorb_parts_fit
from fleet_decode.graph.tails import check_tail_kinds, tails, without_tails
from fleet_decode.graph.weights import weight_table
from fleet_decode.kernels import library, staging
from fleet_decode.model.reference import Reference, softmax_scale

TRACE_WORDS = 4  # fd_trace_word: wall ticks when reached, ready, done; staged weights resident when ready
ADD_ORDER_WORDS = 5  # FD_ADD_ORDER_WORDS
ERROR_FIELDS = ("flag", "worker", "task", "event", "counter", "target", "step", "kind", "abort")
# hip/runtime/megakernel.cu's fd_task_view, byte for byte: each task's operand addresses and fields,
# resolved here once, so that a worker reads them in one round trip instead of two.
VIEW = np.dtype([("buf", "<u8", (MAX_BUFFERS,)), ("wt", "<u8", (MAX_WEIGHTS,)), ("wt_slot", "<i4", (MAX_WEIGHTS,)),
                 ("arg", "<i4", (MAX_ARGS,)), ("b0", "<i4"), ("b1", "<i4"), ("slot", "<i4"), ("act_len", "<i4")],
                align=True)
VIEW_BYTES = -(-VIEW.itemsize // 16) * 16  # the device struct is 16-byte aligned
# The attention chunk's forms (hip/tasks/attention_chunk.cu), one megakernel entry each. The tensor cores' form
# multiplies 16 rows whatever the task's heads, so it pays only where a chunk task carries many: Tuning.chunk_form
# "auto" takes it for graphs whose chunk tasks carry TENSOR_CORE_CHUNK_HEADS heads or more (the decode plan's 2 or
# 1 head groups, from ~2,120 positions on; docs/megakernel.md part 21: 4.3 % slower with 4 heads a task at 2,080
# positions, 3.3-4.7 % faster with 8 from 2,208 to 4,128).
CHUNK_FORMS = ("auto", "plain", "tensor-cores")
TENSOR_CORE_CHUNK_HEADS = 8
# Kinds whose view carries the length of an activation operand (the runtime has no other way to know it).
ACT_LEN_OPERAND = {Kind.DOWN_ACCUM: "act", Kind.O_PROJ_RESIDUAL: "attn_out"}


class LaunchArgs(ctypes.Structure):
    """hip/runtime/megakernel.cu's fd_launch_args, field for field (the library's
    fd_megakernel_args_bytes() must equal ctypes.sizeof of this)."""
    _fields_ = [
        ("blob", ctypes.c_void_p), ("buffers", ctypes.c_void_p), ("weights", ctypes.c_void_p),
        ("counters", ctypes.c_void_p), ("arrivals", ctypes.c_void_p), ("add_order", ctypes.c_void_p),
        ("partials", ctypes.c_void_p), ("error", ctypes.c_void_p), ("step_ticks", ctypes.c_void_p),
        ("stage", ctypes.c_void_p), ("trace", ctypes.c_void_p), ("stop_ids", ctypes.c_void_p),
        ("stopped_at", ctypes.c_void_p), ("published", ctypes.c_void_p), ("logits", ctypes.c_void_p),
        ("views", ctypes.c_void_p),
        ("timeout_seconds", ctypes.c_double),
        ("n_workers", ctypes.c_int), ("partial_row", ctypes.c_int), ("pos0", ctypes.c_int), ("n_steps", ctypes.c_int),
        ("n_stop_ids", ctypes.c_int), ("stage_bytes", ctypes.c_int),
        ("temperature", ctypes.c_float), ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
        ("seed_lo", ctypes.c_uint), ("seed_hi", ctypes.c_uint),
    ]


@dataclass(frozen=True)
class Tuning:
    """Launch-time knobs of the runtime (no rebuild of the graph; docs/megakernel.md "Speed").
    stage: copy each task's weight tile into shared memory before waiting for its inputs
    (fleet_decode.kernels.staging); stage_kib caps the stage (None: all the runtime was built with);
    staged_kinds names the kinds staged (None: staging.STAGED_KINDS). tail_kinds names kinds whose
    tasks no worker waits for: the last of their input's signallers runs them (graph.tails).
    stage_ahead: which earlier list entry sends a staged tile (staging.STAGE_AHEAD); stage_yield: kinds whose
    staged predecessor in a list gives them the stage (staging.yield_stage). host_views: the
    workers read each task's operands as resolved here (task_views: one round trip at a task's reach)
    instead of resolving its record themselves (two). chunk_form: the attention chunk's form, one of
    CHUNK_FORMS ("auto": by the heads a chunk task carries, runtime.chunk_form)."""
    stage: bool = True
    stage_kib: int | None = None
    staged_kinds: tuple[str, ...] | None = None
    tail_kinds: tuple[str, ...] = ()
    stage_ahead: str = "successor"
    stage_yield: tuple[str, ...] = ()
    host_views: bool = True
    chunk_form: str = "auto"

    def __post_init__(self):
        if self.stage_kib is not None and self.stage_kib < 0:
            raise ValueError(f"bad tuning {self}")
        if self.chunk_form not in CHUNK_FORMS:
            raise ValueError(f"chunk_form {self.chunk_form!r}: one of {', '.join(CHUNK_FORMS)}")
        stageable = [k.name for k in staging.STAGEABLE_KINDS]
        unknown = [k for k in (*(self.staged_kinds or ()), *self.stage_yield) if k not in stageable]
        if unknown:
            raise ValueError(f"staged_kinds {unknown} cannot be staged; the runtime stages {stageable}")
        check_tail_kinds(self.tail_kinds)
        staging.check_stage_ahead(self.stage_ahead)

    # Read when a Megakernel builds its tables (the tails' graph, the stage table): a Megakernel's
    # tuning may change only the other fields between launches.
    BUILT = ("staged_kinds", "tail_kinds", "stage_ahead", "stage_yield")

    def changes(self) -> dict:
        """The fields that differ from Tuning()'s: what a variant of the lab or the trace sets."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if getattr(self, name) != getattr(Tuning(), name)}

    def built_fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.BUILT)

    def kinds(self) -> tuple:
        """The Kind values staged."""
        if self.staged_kinds is None:
            return staging.STAGED_KINDS
        return tuple(Kind[name] for name in self.staged_kinds)


class MegakernelError(RuntimeError):
    """The megakernel could not be set up or launched."""


class WatchdogTimeout(MegakernelError):
    """A worker waited past the watchdog's bound; the message names the task and what it waited for."""

    def __init__(self, message, record):
        super().__init__(message)
        self.record = record


@dataclass
class DecodeResult:
    tokens: list[int]  # tokens[s]: the token step s produced (fed to step s + 1)
    logits: list[torch.Tensor]  # fp32 [vocab] per step, read back from the graph's logits log
    # per step, each layer's output (fp32 [hidden]); the graph keeps layer outputs for the LAST step
    # only (they are per-step buffers), so earlier steps hold None
    hidden_states: list
    seconds: float = 0.0  # the launch, host clock, synchronised
    step_seconds: list[float] = field(default_factory=list)  # per step, from the device's clock
    launches: int = 1
    counts: dict = field(default_factory=dict)
    stopped: bool = False  # the last token is a stop id and the launch ended there
    chunk_form: str = "plain"  # the attention chunk's form the launch ran (Tuning.chunk_form resolved)


def add_order(graph, tail_of: dict[int, list[int]] | None = None) -> tuple[np.ndarray, int, int, int]:
    """The runtime's table of arrivals: per task (arrival counter, rank, group size, scratch row offset,
    tail task), -1s for a task that counts nowhere. Adders into one row range of one buffer form a
    group, ranked in graph order; rank r adds into scratch row r of that buffer (alone there, so
    exactly) and the last to arrive adds the rows in rank order, so the sum is deterministic. A
    tail's signallers (tail_of, from graph.tails.tails) form a group too, without rows: the last to
    arrive runs the tail. Returns (table, number of groups, scratch floats, floats per scratch row)."""
    order = np.full((len(graph.tasks), ADD_ORDER_WORDS), -1, dtype=np.int32)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, t in enumerate(graph.tasks):
        if t.kind in ACCUMULATES:
            buf = t.buffers[OPERANDS[t.kind][0].index(ACCUMULATES[t.kind])]
            groups.setdefault((buf, *t.tile), []).append(i)
    spans: dict[int, list[tuple[int, int]]] = {}
    for buf, lo, hi in groups:
        for other_lo, other_hi in spans.setdefault(buf, []):
            if lo < other_hi and other_lo < hi:
                raise MegakernelError(f"adders into {graph.buffers[buf].name} overlap in rows [{lo}, {hi}) and "
                                      f"[{other_lo}, {other_hi}): the runtime sums only identical row ranges")
        spans[buf].append((lo, hi))
    shared = [(key, members) for key, members in groups.items() if len(members) > 1]  # a lone adder adds in place
    lengths = {graph.buffers[buf].numel for (buf, _, _), _ in shared}
    if len(lengths) > 1:
        raise MegakernelError(f"summed buffers of different lengths {sorted(lengths)}: the runtime has one row length")
    row = lengths.pop() if lengths else 1
    base: dict[int, int] = {}
    for (buf, _, _), members in shared:
        base[buf] = max(base.get(buf, 0), len(members))
    offset, start = 0, {}
    for buf, rows in base.items():
        start[buf], offset = offset, offset + rows * row
    for counter, ((buf, _, _), members) in enumerate(shared):
        for rank, task in enumerate(members):
            order[task] = (counter, rank, len(members), start[buf] + rank * row, -1)
    for counter, (tail, producers) in enumerate((tail_of or {}).items(), start=len(shared)):
        for rank, task in enumerate(producers):
            order[task] = (counter, rank, len(producers), -1, tail)
    return order, len(shared) + len(tail_of or {}), offset, row


def task_views(graph, encoded_tasks: np.ndarray, buffer_addresses, weight_addresses) -> np.ndarray:
    """uint8 [n_tasks, VIEW_BYTES]: each task's fd_task_view (the encoded record's operands as device
    addresses, 0 where absent; its weight slots, args, tile and slot; the act length its kind needs)."""
    rec = encoded_tasks.astype(np.int64)
    views = np.zeros(len(rec), dtype=VIEW)
    buffers, weights = np.asarray(buffer_addresses, np.uint64), np.asarray(weight_addresses or [0], np.uint64)
    for j in range(MAX_BUFFERS):
        index = rec[:, TASK[f"BUF{j}"]]
        views["buf"][:, j] = np.where(index >= 0, buffers[np.clip(index, 0, None)], np.uint64(0)) if len(buffers) else 0
    for j in range(MAX_WEIGHTS):
        index = rec[:, TASK[f"WT{j}"]]
        views["wt"][:, j] = np.where(index >= 0, weights[np.clip(index, 0, None)], np.uint64(0))
        views["wt_slot"][:, j] = index
    for j in range(MAX_ARGS):
        views["arg"][:, j] = rec[:, TASK[f"ARG{j}"]]
    views["b0"], views["b1"], views["slot"] = rec[:, TASK["TILE_BEGIN"]], rec[:, TASK["TILE_END"]], rec[:, TASK["SLOT"]]
    for i, t in enumerate(graph.tasks):
        if t.kind in ACT_LEN_OPERAND:
            views["act_len"][i] = graph.buffers[t.buffers[OPERANDS[t.kind][0].index(ACT_LEN_OPERAND[t.kind])]].numel
    out = np.zeros((len(rec), VIEW_BYTES), dtype=np.uint8)
    out[:, :VIEW.itemsize] = views.view(np.uint8).reshape(len(rec), VIEW.itemsize)
    return out


def _check_graph(graph, n_sm, scratch_bytes: int):
    """Refuses a graph the compiled runtime cannot run on n_sm SMs with scratch_bytes of shared-memory
    scratch per worker (the library's fd_megakernel_scratch_bytes())."""
    c = graph.constants
    for name, value in COMPILED_DIMS.items():
        if getattr(c, name) != value:
            raise MegakernelError(f"the kernels are compiled for {name} = {value}, the graph has {getattr(c, name)}")
    if len(graph.workers) > n_sm:
        raise MegakernelError(f"graph has {len(graph.workers)} workers, the GPU {n_sm} SMs/CUs: one worker per SM")
    max_chunk, max_merge, threads = (KERNEL_LIMITS[k] for k in ("MAX_ATTN_CHUNK", "MAX_MERGE_CHUNKS", "RUNTIME_THREADS"))
    for t in graph.tasks:
        if t.kind == Kind.ATTN_CHUNK and t.tile[1] - t.tile[0] > max_chunk:
            raise MegakernelError(f"{t.name} spans {t.tile[1] - t.tile[0]} positions, the kernel at most {max_chunk}")
        if t.kind == Kind.ROPE_Q_ABSORB and not absorb_parts_fit(t.args[0], c.kv_rank):
            raise MegakernelError(f"{t.name}: {t.args[0]} column blocks of {c.kv_rank} latent columns; the kernel "
                                  f"needs blocks of a multiple of 8 columns, at most {8 * threads}")
        if t.kind == Kind.DOWN_ACCUM and graph.buffers[t.buffers[0]].numel * 4 > scratch_bytes:
            raise MegakernelError(f"{t.name}: its {graph.buffers[t.buffers[0]].numel} activations do not fit the "
                                  f"runtime's {scratch_bytes} bytes of shared-memory scratch")
        if t.kind in (Kind.SUM_PARTIALS, Kind.SUM_FIXED_POINT) and (t.tile[0] % 4 or t.tile[1] % 4 or c.hidden % 4):
            raise MegakernelError(f"{t.name} sums rows [{t.tile[0]}, {t.tile[1]}); the kernel reads 4 at a time: "
                                  f"both ends must be multiples of 4")
        if t.kind == Kind.EXPERT_POOL:
            # hip/tasks/gate_up_down.cu: x_norm, act and the fp32 sums, then (local_sum) the taker's int64 row
            # at the scratch's end
            rows, d = t.tile[1] - t.tile[0], c.hidden
            need = (d + rows) * 4 + 16 + d * 4 + (d * 8 if t.args[1] else 0)
            if need > scratch_bytes:
                raise MegakernelError(f"{t.name}: pieces of {rows} rows need {need} bytes of shared-memory scratch, "
                                      f"the runtime has {scratch_bytes}")
        if t.kind in (Kind.ATTN_MERGE_UV, Kind.ATTN_MERGE_COLS) and t.args[0] > max_merge:
            raise MegakernelError(f"{t.name} merges {t.args[0]} chunks, the merge task holds at most "
                                  f"{max_merge}: use longer attention chunks")


def chunk_form(form: str, chunk_heads: int, has_tensor_cores: bool) -> str:
    """The attention chunk's form, "plain" or "tensor-cores", that Tuning.chunk_form `form` runs on a graph whose
    chunk tasks carry up to `chunk_heads` heads: "auto" takes the tensor cores from TENSOR_CORE_CHUNK_HEADS heads
    on where the library has them; naming a form the library lacks is an error."""
    if form == "auto":
        return "tensor-cores" if has_tensor_cores and chunk_heads >= TENSOR_CORE_CHUNK_HEADS else "plain"
    if form == "tensor-cores" and not has_tensor_cores:
        raise MegakernelError("chunk_form 'tensor-cores': this library has no tensor-core chunk (an AMD build); "
                              "use 'plain' or 'auto'")
    return form  # Tuning has checked it is one of CHUNK_FORMS


def _pinned_int32(n: int) -> torch.Tensor:
    """Page-locked host memory the device can write (unified addressing maps it at the same address)."""
    return torch.full((n,), -1, dtype=torch.int32).pin_memory()


def default_tuning(plan: Plan, config) -> Tuning:
    """The tuning a Megakernel runs a plan with unless given one: Tuning(), with the fixed-point sum run as a
    tail (graph.tails) where a layer's sum is one tile, so that no worker waits for it and the last slice
    to arrive runs it (docs/megakernel.md part 26)."""
    one_tile = plan.split_k_sum == "fixed-point" and plan.sum_rows >= config.hidden_size
    return Tuning(tail_kinds=("SUM_FIXED_POINT",) if one_tile else ())


def on_default_tuning(tuning: Tuning, plan: Plan, config) -> Tuning:
    """The fields of `tuning` that differ from Tuning()'s, set on the plan's default_tuning: how the lab and the
    trace read a variant's tuning, so that its default is the decode's."""
    return replace(default_tuning(plan, config), **tuning.changes())


class Megakernel:
    """One graph (the whole model, or a run of layers) resident on the GPU with its buffers."""

    def __init__(self, hf_model, plan: Plan | None = None, layers=None, graph=None, lib=None,
                 tuning: Tuning | None = None):
        self.model, config = hf_model, hf_model.config
        self.device = next(hf_model.parameters()).device
        if self.device.type != "cuda":
            raise MegakernelError(f"the model is on {self.device}; the megakernel needs it on a GPU")
        n_sm = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.plan = plan or default_plan(config, workers=n_sm)
        self._tuning = tuning = tuning or default_tuning(self.plan, config)
        graph = graph if graph is not None else build_graph(config, self.plan, layers)
        try:
            tail_of = tails(graph, tuning.tail_kinds)
        except ValueError as e:
            raise MegakernelError(str(e)) from None
        self.graph = without_tails(graph, tail_of) if tail_of else graph
        self.lib = self._load(lib)
        self.last_chunk_form: str | None = None  # the form the last launch ran (chunk_form_for)
        # the most heads one attention chunk task carries (0: none): what Tuning.chunk_form "auto" goes by
        # graphs with EXPERT_POOL tasks run on the library's pool entries (hip/runtime/megakernel_pool.cu)
        self.has_pools = any(t.kind == Kind.EXPERT_POOL for t in self.graph.tasks)
        self.chunk_heads = max((t.args[1] - t.args[0] for t in self.graph.tasks if t.kind == Kind.ATTN_CHUNK),
                               default=0)
        _check_graph(self.graph, n_sm, self.lib.fd_megakernel_scratch_bytes())
        if not math.isclose(self.graph.constants.attn_scale, softmax_scale(config), rel_tol=1e-6):
            raise MegakernelError("the graph's softmax scale differs from the model's")
        self.encoded = self.graph.encode()
        self.names = self.encoded.names
        self.blob = torch.from_numpy(self.encoded.blob()).to(self.device)
        dtypes = {DType.F32: torch.float32, DType.I32: torch.int32, DType.I64: torch.int64, DType.MODEL: torch.bfloat16}
        self.buffers = [torch.zeros(b.numel, dtype=dtypes[b.dtype], device=self.device) for b in self.graph.buffers]
        # step 0's start of each fixed-point sum (its readers zero it for the steps after), and the pools'
        # counters (step s's counts start at s * (pieces + takers)): zeroed per launch, so that a launch stopped
        # mid-step (a watchdog) leaves the next one nothing
        self.accumulators = [t for t, b in zip(self.buffers, self.graph.buffers)
                             if b.dtype == DType.I64 or b.persistence == Persistence.COUNTER]
        self.weights = self._weights(dtypes)
        self.buffer_ptrs = torch.tensor([t.data_ptr() for t in self.buffers], dtype=torch.int64, device=self.device)
        self.weight_ptrs = torch.tensor([t.data_ptr() for t in self.weights] or [0], dtype=torch.int64,
                                        device=self.device)
        self.views = torch.from_numpy(task_views(self.graph, self.encoded.tasks, [t.data_ptr() for t in self.buffers],
                                                 [t.data_ptr() for t in self.weights])).to(self.device)
        order, n_groups, n_scratch, self.partial_row = add_order(self.graph, tail_of)
        self.add_order = torch.from_numpy(order).to(self.device)
        self.stage_capacity = self.lib.fd_megakernel_stage_capacity()
        table = staging.stage_table(self.graph, self.stage_capacity, [t.data_ptr() for t in self.weights],
                                    tuning.kinds())
        senders = staging.yield_stage(self.graph, table, tuple(Kind[name] for name in tuning.stage_yield))
        self.stage_table = torch.from_numpy(staging.send_ahead(self.graph, table, tuning.stage_ahead,
                                                               senders)).to(self.device)
        self.counters = torch.zeros(len(self.graph.events), dtype=torch.int32, device=self.device)
        self.arrivals = torch.zeros(max(1, n_groups), dtype=torch.int32, device=self.device)
        self.partials = torch.zeros(max(1, n_scratch), dtype=torch.float32, device=self.device)
        self.error = torch.zeros(self.lib.fd_megakernel_error_words(), dtype=torch.int32, device=self.device)
        self.stopped_at = torch.zeros(1, dtype=torch.int32, device=self.device)
        self.step_ticks = torch.zeros(self.graph.constants.max_steps + 1, dtype=torch.int64, device=self.device)
        self.published = _pinned_int32(self.graph.constants.max_steps)

    @property
    def tuning(self) -> Tuning:
        return self._tuning

    @tuning.setter
    def tuning(self, tuning: Tuning):
        """Launch-time knobs only: the fields the tables were built from (Tuning.BUILT) are fixed."""
        if tuning.built_fields() != self._tuning.built_fields():
            changed = [n for n in Tuning.BUILT if getattr(tuning, n) != getattr(self._tuning, n)]
            raise MegakernelError(f"tuning fields {changed} are read when the megakernel is built: build a new "
                                  f"Megakernel with them")
        self._tuning = tuning

    def _weights(self, dtypes):
        out = []
        for slot, tensor in zip(self.graph.weights, weight_table(self.model, self.graph)):
            want = dtypes[slot.dtype]
            if tuple(tensor.shape) != slot.shape:
                raise MegakernelError(f"weight {slot.name} has shape {tuple(tensor.shape)}, the graph {slot.shape}")
            if tensor.dtype != want or not tensor.is_contiguous() or tensor.device != self.device:
                tensor = tensor.to(self.device, want).contiguous()  # a copy only where the layout needs one
            out.append(tensor)
        return out

    @staticmethod
    def _load(lib):
        handle = (lib or library.load()).lib
        handle.fd_megakernel_launch.argtypes = [ctypes.POINTER(LaunchArgs), ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        handle.fd_megakernel_launch.restype = ctypes.c_int
        handle.fd_megakernel_ticks_per_second.restype = ctypes.c_double
        # The tables' layouts and the argument struct as compiled: a library built before a change to
        # either is refused rather than misread.
        host = (ctypes.sizeof(LaunchArgs), staging.WORDS, TRACE_WORDS, ADD_ORDER_WORDS,
                KERNEL_LIMITS["RUNTIME_THREADS"], VIEW_BYTES)
        try:
            handle.fd_megakernel_tensor_core_chunk  # noqa: B018  (a library from before the two entries lacks it)
            compiled = (handle.fd_megakernel_args_bytes(), handle.fd_megakernel_stage_words(),
                        handle.fd_megakernel_trace_words(), handle.fd_megakernel_add_order_words(),
                        handle.fd_megakernel_threads(), handle.fd_megakernel_view_bytes())
        except AttributeError:  # a library from before the argument struct, the views or the chunk's entries
            compiled = None
        if compiled != host:
            raise MegakernelError(f"the runtime's layouts (argument bytes, stage words, trace words, add-order words, "
                                  f"threads, view bytes) are {compiled}, the host's {host}: rebuild "
                                  f"(python -m fleet_decode.kernels.build)")
        return handle

    # ------------------------------------------------------------------ host writes
    def buffer(self, name) -> torch.Tensor:
        return self.buffers[self.graph.buffer_index(name)]

    def fill_cache(self, ref: Reference, n_prompt: int):
        """Copies the prefill's compressed cache (normalised latent, roped k_pe) into every layer's log."""
        c = self.graph.constants
        for layer in range(c.first_layer, c.first_layer + c.n_layers):
            self.buffer(f"L{layer}.ckv").view(c.max_positions, -1)[:n_prompt] = ref.ckv[layer, :n_prompt]
            self.buffer(f"L{layer}.kpe").view(c.max_positions, -1)[:n_prompt] = ref.kpe[layer, :n_prompt]

    # ------------------------------------------------------------------ the launch
    @property
    def has_tensor_core_chunk(self) -> bool:
        """Whether the library has the megakernel entry whose attention chunk runs on the tensor cores."""
        return bool(self.lib.fd_megakernel_tensor_core_chunk())

    def chunk_form_for(self) -> str:
        """The attention chunk's form a launch runs under this tuning (chunk_form) on this graph."""
        return chunk_form(self.tuning.chunk_form, self.chunk_heads, self.has_tensor_core_chunk)

    def launch(self, pos0: int, n_steps: int, timeout_s: float = 1.0, trace: torch.Tensor | None = None,
               stop_ids=(), on_token=None, sampling=None) -> float:
        """Runs n_steps steps at positions pos0.. in one launch; returns its seconds (host clock).
        Raises WatchdogTimeout naming the stuck task if any wait outlasts timeout_s. trace: None, or
        an int64 tensor [n_steps, tasks, TRACE_WORDS] the runtime fills (fleet_decode.kernels.trace).
        stop_ids: the launch ends after the step whose token is one of them. on_token(step, token) is
        called from this thread as the kernel publishes each token, while it still runs. sampling: a
        fleet_decode.sampling.Sampling drawn from on the device (None or temperature 0: greedy)."""
        c = self.graph.constants
        self.last_chunk_form = self.chunk_form_for()
        if n_steps > c.max_steps or pos0 + n_steps > c.max_positions:
            raise MegakernelError(f"{n_steps} steps from position {pos0} exceed the graph's {c.max_steps} steps "
                                  f"/ {c.max_positions} positions")
        if trace is not None and (trace.dtype != torch.int64 or trace.device != self.device or not trace.is_contiguous()
                                  or trace.numel() < n_steps * len(self.graph.tasks) * TRACE_WORDS):
            raise MegakernelError(f"the trace must be a contiguous int64 tensor on {self.device} of at least "
                                  f"{n_steps} x {len(self.graph.tasks)} x {TRACE_WORDS} elements")
        for t in (self.counters, self.arrivals, self.partials, self.error, self.step_ticks, self.stopped_at,
                  *self.accumulators):
            t.zero_()
        self.published.fill_(-1)
        stops = torch.tensor(list(stop_ids) or [0], dtype=torch.int32, device=self.device)
        stage_bytes = 0
        if self.tuning.stage:
            stage_bytes = self.stage_capacity if self.tuning.stage_kib is None else \
                min(self.stage_capacity, self.tuning.stage_kib * 1024)
        args = LaunchArgs(
            blob=self.blob.data_ptr(), buffers=self.buffer_ptrs.data_ptr(), weights=self.weight_ptrs.data_ptr(),
            counters=self.counters.data_ptr(), arrivals=self.arrivals.data_ptr(),
            add_order=self.add_order.data_ptr(), partials=self.partials.data_ptr(), error=self.error.data_ptr(),
            step_ticks=self.step_ticks.data_ptr(), stage=self.stage_table.data_ptr(),
            trace=None if trace is None else trace.data_ptr(), stop_ids=stops.data_ptr(),
            stopped_at=self.stopped_at.data_ptr(), published=self.published.data_ptr(),
            timeout_seconds=float(timeout_s), n_workers=len(self.graph.workers), partial_row=self.partial_row,
            pos0=pos0, n_steps=n_steps, n_stop_ids=len(stop_ids), stage_bytes=stage_bytes,
            logits=self.buffer("logits").data_ptr() if self.graph.constants.has_head else None,
            views=self.views.data_ptr() if self.tuning.host_views else None)
        if sampling is not None:
            args.temperature, args.top_k, args.top_p, args.seed_lo, args.seed_hi = sampling.device_args()
        else:
            args.top_p = 1.0
        stream = torch.cuda.current_stream(self.device)
        torch.cuda.synchronize(self.device)
        started = time.perf_counter()
        code = self.lib.fd_megakernel_launch(ctypes.byref(args), int(self.last_chunk_form == "tensor-cores"),
                                             int(self.has_pools),
                                             stream.cuda_stream)
        if code != 0:
            raise MegakernelError(f"fd_megakernel_launch: {self.lib.fd_error_string(code).decode()} ({code})")
        if on_token is not None:
            self._stream_tokens(stream, n_steps, on_token)
        torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - started
        record = dict(zip(ERROR_FIELDS, self.error.tolist()))
        if record["flag"]:
            raise WatchdogTimeout(self._describe(record, timeout_s), record)
        return seconds

    def _stream_tokens(self, stream, n_steps, on_token):
        """Hands each published token to on_token while the launch runs, then any left at its end."""
        published = self.published.numpy()
        done = torch.cuda.Event()
        done.record(stream)
        seen = 0
        while seen < n_steps:
            finished = done.query()  # read before the tokens, so none published before the end is missed
            while seen < n_steps and published[seen] >= 0:
                on_token(seen, int(published[seen]))
                seen += 1
            if finished:
                break
            time.sleep(20e-6)

    def _describe(self, r, timeout_s):
        return (f"megakernel watchdog: worker {r['worker']} waited over {timeout_s} s at step {r['step']} in task "
                f"{self.names['tasks'][r['task']]} for event {self.names['events'][r['event']]}: counter "
                f"{r['counter']} < target {r['target']}; every worker was stopped")

    def step_seconds(self, n_steps) -> list[float]:
        ticks = self.step_ticks[: n_steps + 1].tolist()
        rate = self.lib.fd_megakernel_ticks_per_second()
        return [(b - a) / rate for a, b in zip(ticks, ticks[1:])]

    # ------------------------------------------------------------------ decode / layer
    @torch.no_grad()
    def decode(self, prompt_ids, n_tokens: int, timeout_s: float = 1.0) -> DecodeResult:
        """HF prefill of prompt_ids, then n_tokens greedy steps in ONE launch."""
        self.prefill(prompt_ids)
        return self.generate(len(prompt_ids), n_tokens, timeout_s)

    @torch.no_grad()
    def prefill(self, prompt_ids) -> int:
        """HF prefill of prompt_ids into the graph's cache; its greedy token becomes tokens[0] and is returned."""
        if not self.graph.constants.has_head:
            raise MegakernelError("decode needs the whole-model graph (layers=None); use run_layer for a layer graph")
        n_prompt = len(prompt_ids)
        if n_prompt + 1 > self.graph.constants.max_positions:
            raise MegakernelError(f"a prompt of {n_prompt} tokens does not fit the graph's cache of "
                                  f"{self.graph.constants.max_positions} positions")
        ref = Reference(self.model, max_positions=n_prompt + 1)
        first = int(ref.prefill(prompt_ids).argmax())
        self.fill_cache(ref, n_prompt)
        del ref
        self.buffer("tokens")[0] = first
        return first

    @torch.no_grad()
    def generate(self, n_prompt: int, n_tokens: int, timeout_s: float = 1.0, trace=None, start_token: int | None = None,
                 stop_ids=(), on_token=None, sampling=None) -> DecodeResult:
        """n_tokens greedy steps in ONE launch at positions n_prompt.. of the filled cache (repeatable:
        each launch rewrites the cache rows and tokens it decodes). start_token: the token step 0 is
        fed (default: the one prefill() left); a longer generation continues with the last position
        and token of the previous launch. stop_ids / on_token / sampling: as launch(); the result ends
        at a stop."""
        c = self.graph.constants
        tokens = self.buffer("tokens")
        if start_token is not None:
            tokens[0] = int(start_token)
        seconds = self.launch(n_prompt, n_tokens, timeout_s, trace, stop_ids, on_token, sampling)
        stopped = int(self.stopped_at.item())
        made = stopped if stopped else n_tokens
        logits = self.buffer("logits").view(c.max_steps, c.vocab)
        last = [self.buffer(f"h.{l + 1}").clone() for l in range(c.n_layers)]
        return DecodeResult(
            tokens=tokens[1:made + 1].tolist(),
            logits=[logits[s].clone() for s in range(made)],
            hidden_states=[None] * (made - 1) + [last],
            seconds=seconds,
            step_seconds=self.step_seconds(made) if c.has_head else [],
            counts={"tasks": len(self.graph.tasks), "events": len(self.graph.events), "workers": len(self.graph.workers)},
            stopped=bool(stopped),
            chunk_form=self.last_chunk_form,
        )

    def routes(self) -> dict[int, list[int]]:
        """Each MoE layer's chosen experts (ascending) at the last step run."""
        names = {b.name: i for i, b in enumerate(self.graph.buffers)}
        c = self.graph.constants
        layers = range(c.first_layer, c.first_layer + c.n_layers)
        return {l: self.buffers[names[f"L{l}.route_idx"]].tolist() for l in layers if f"L{l}.route_idx" in names}

    @torch.no_grad()
    def run_layer(self, prompt_ids, timeout_s: float = 1.0):
        """M2: one decode step of the graph's single layer after the prefill, fed the prefill's greedy
        token; returns (megakernel output, reference output) of that layer, fp32 [hidden]."""
        c = self.graph.constants
        if c.has_head or c.n_layers != 1:
            raise MegakernelError("run_layer needs a one-layer graph (Megakernel(model, layers=[l]))")
        layer, n_prompt = c.first_layer, len(prompt_ids)
        ref = Reference(self.model, max_positions=n_prompt + 1)
        token = int(ref.prefill(prompt_ids).argmax())
        self.fill_cache(ref, n_prompt)
        ref.step(token)
        x_in = ref.weights.embed[token].float() if layer == 0 else ref.hidden_states[layer - 1]
        self.buffer(f"h.{layer}").copy_(x_in)
        self.launch(n_prompt, 1, timeout_s)
        return self.buffer(f"h.{layer + 1}").clone(), ref.hidden_states[layer].clone()


# ---------------------------------------------------------------------- the pipeline's gpu backend

def simulate_layer(hf_model, prompt_ids, layer: int, workers=None, schedule=None, seed=0, plan=None):
    """M2 through the megakernel. workers / schedule / seed are the simulator's knobs: the device runs
    one worker per SM and its own interleaving, so they are accepted and ignored."""
    return Megakernel(hf_model, plan=plan, layers=[layer]).run_layer(prompt_ids)


def simulate(hf_model, prompt_ids, n_tokens: int, workers=None, schedule=None, seed=0, plan=None) -> DecodeResult:
    """M3 / M4 / bench through the megakernel: n_tokens greedy steps in one launch."""
    if plan is None:
        n_sm = torch.cuda.get_device_properties(next(hf_model.parameters()).device).multi_processor_count
        plan = decode_plan(hf_model.config, len(prompt_ids) + n_tokens, n_sm)
    return Megakernel(hf_model, plan=plan).decode(prompt_ids, n_tokens)

"""Host side of the persistent megakernel (hip/runtime/megakernel.cu): build the decode task graph,
upload it with the HF model's own weights, fill the MLA cache from HF's prefill, and decode N tokens
in ONE launch.

    from fleet_decode.model import load_model, prompt_ids
    from fleet_decode.kernels.megakernel import Megakernel
    model = load_model("random:deepseek-coder-v2-lite", dtype=torch.bfloat16, device="cuda")
    mk = Megakernel(model)
    result = mk.decode(prompt_ids(1024), n_tokens=32)      # .tokens, .logits, .hidden_states, .step_seconds
    out, ref = Megakernel(model, layers=[1]).run_layer(prompt_ids(1024))   # M2

    python -m fleet_decode.kernels.megakernel --tokens 32 --out mk.json   # on a GPU host: checks + timings
    python -m fleet_decode.kernels.megakernel --sweep --out sweep.json   # speed variants side by side

It is also the pipeline's `gpu` backend: build, check_task_kinds, simulate_layer and simulate below
follow the simulator's calls (fleet_decode.sim) one for one.
"""

import argparse
import ctypes
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from fleet_decode.graph import Plan, build_graph, default_plan
from fleet_decode.graph.format import ACCUMULATES, OPERANDS, DType, Kind
from fleet_decode.kernels import library
from fleet_decode.kernels.build import build as build_kernels
from fleet_decode.kernels import prefetch as prefetch_tables
from fleet_decode.model.compare import cosine, exact_twin, relative_error
from fleet_decode.model.reference import Reference, softmax_scale
from fleet_decode.sim.decode import weight_table

P, I, D, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_longlong
MAX_ATTN_CHUNK = 64  # kMaxChunk of hip/tasks/attention_chunk.cu
THREADS = 256  # kRuntimeThreads of hip/runtime/megakernel.cu
MAX_MERGE_CHUNKS = 1024  # kMaxChunks of hip/tasks/attention_merge.cu
COMPILED_DIMS = dict(n_heads=16, kv_rank=512, qk_rope=64, qk_nope=128, v_head=128)  # hip/tasks/common.h
TRACE_WORDS = 3  # fd_trace_word: wall ticks when reached, ready, done
ERROR_FIELDS = ("flag", "worker", "task", "event", "counter", "target", "step", "kind", "abort")


PREFETCH_BITS = {  # fd_prefetch_bit
    "this": 1,  # before waiting for a task's inputs, its own ranges
    "next": 2,  # ... and the ranges of the worker's next task
    "bulk": 4,  # bulk (TMA, sm_90) prefetches of 64 KiB instead of one per 128-byte line
    "routed": 8,  # routed-expert tiles too, once the router has fired
    "after_wait": 16,  # once a task's inputs are ready, the next task's ranges (overlapping the run)
    "ready": 32,  # once a task's inputs are ready, its own ranges (all in flight at once, ahead of its loads)
}
SYNC_MODES = {  # fd_sync_mode: how a wait and a signal order memory
    "fenced": 0,  # a device fence after each wait and before each signal's (returning) release add
    "lean": 1,  # acquire loads and release atomics alone, the block ordered by its barriers; red.release signals
}


def prefetch_mode(*names: str) -> int:
    return sum(PREFETCH_BITS[n] for n in names)


@dataclass(frozen=True)
class Tuning:
    """Launch-time knobs of the runtime (no rebuild of the graph; docs/megakernel.md "Speed").
    The defaults are the fastest of the H200 sweep (docs/measurements/megakernel-h200-sweep7-block-topk.json):
    lean synchronisation without prefetch, 2.95 ms per token against 3.36 ms fenced with the own-tile
    prefetch that sweep 1 had adopted."""
    # L2 prefetch, sums of PREFETCH_BITS (hip/runtime/megakernel.cu fd_prefetch_bit); 0: none
    prefetch: int = 0
    prefetch_kib: int = 512  # at most this much of one task's ranges (132 workers share ~50 MB of L2)
    poll_every: int = 1  # counter polls between two looks at the watchdog's abort flag and clock
    sync: str = "lean"  # a key of SYNC_MODES

    def __post_init__(self):
        if not 0 <= self.prefetch < 2 * max(PREFETCH_BITS.values()) or self.prefetch_kib < 0 or self.poll_every < 1 \
                or self.sync not in SYNC_MODES:
            raise ValueError(f"bad tuning {self}")


class MegakernelError(RuntimeError):
    """The megakernel could not be set up or launched."""


class WatchdogTimeout(MegakernelError):
    """A worker waited past the watchdog's bound; the message names the task and what it waited for."""

    def __init__(self, message, record):
        super().__init__(message)
        self.record = record


@dataclass
class DecodeResult:
    tokens: list[int]  # tokens[s]: the greedy token step s produced (fed to step s + 1)
    logits: list[torch.Tensor]  # fp32 [vocab] per step, read back from the graph's logits log
    # per step, each layer's output (fp32 [hidden]); the graph keeps layer outputs for the LAST step
    # only (they are per-step buffers), so earlier steps hold None
    hidden_states: list
    seconds: float = 0.0  # the launch, host clock, synchronised
    step_seconds: list[float] = field(default_factory=list)  # per step, from the device's clock
    launches: int = 1
    counts: dict = field(default_factory=dict)


def add_order(graph) -> tuple[np.ndarray, int, int, int]:
    """The runtime's table of adders: per task (arrival counter, rank, group size, scratch row offset),
    -1s for a task that is not one of several adders into the same rows. Adders into one row range of
    one buffer form a group, ranked in graph order; rank r adds into scratch row r of that buffer
    (alone there, so exactly) and the last to arrive adds the rows in rank order, so the sum is
    deterministic. Returns (table, number of groups, scratch floats, floats per scratch row)."""
    order = np.full((len(graph.tasks), 4), -1, dtype=np.int32)
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
            order[task] = (counter, rank, len(members), start[buf] + rank * row)
    return order, len(shared), offset, row


def _check_graph(graph, n_sm):
    c = graph.constants
    for name, value in COMPILED_DIMS.items():
        if getattr(c, name) != value:
            raise MegakernelError(f"the kernels are compiled for {name} = {value}, the graph has {getattr(c, name)}")
    if len(graph.workers) > n_sm:
        raise MegakernelError(f"graph has {len(graph.workers)} workers, the GPU {n_sm} SMs/CUs: one worker per SM")
    for t in graph.tasks:
        if t.kind == Kind.ATTN_CHUNK and t.tile[1] - t.tile[0] > MAX_ATTN_CHUNK:
            raise MegakernelError(f"{t.name} spans {t.tile[1] - t.tile[0]} positions, the kernel at most {MAX_ATTN_CHUNK}")
        if t.kind == Kind.ROPE_Q_ABSORB and (c.kv_rank % t.args[0] or (c.kv_rank // t.args[0]) % 8
                                             or c.kv_rank // t.args[0] // 8 > THREADS):
            raise MegakernelError(f"{t.name}: {t.args[0]} column blocks of {c.kv_rank} latent columns; the kernel "
                                  f"needs blocks of a multiple of 8 columns, at most {8 * THREADS}")
        if t.kind == Kind.ATTN_MERGE_UV and t.args[0] > MAX_MERGE_CHUNKS:
            raise MegakernelError(f"{t.name} merges {t.args[0]} chunks, the merge task holds at most "
                                  f"{MAX_MERGE_CHUNKS}: use longer attention chunks")


class Megakernel:
    """One graph (the whole model, or a run of layers) resident on the GPU with its buffers."""

    def __init__(self, hf_model, plan: Plan | None = None, layers=None, graph=None, lib=None,
                 tuning: Tuning = Tuning()):
        self.model, config = hf_model, hf_model.config
        self.tuning = tuning
        self.device = next(hf_model.parameters()).device
        if self.device.type != "cuda":
            raise MegakernelError(f"the model is on {self.device}; the megakernel needs it on a GPU")
        n_sm = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.plan = plan or default_plan(config, workers=n_sm)
        self.graph = graph if graph is not None else build_graph(config, self.plan, layers)
        _check_graph(self.graph, n_sm)
        if not math.isclose(self.graph.constants.attn_scale, softmax_scale(config), rel_tol=1e-6):
            raise MegakernelError("the graph's softmax scale differs from the model's")
        self.encoded = self.graph.encode()
        self.names = self.encoded.names
        self.blob = torch.from_numpy(self.encoded.blob()).to(self.device)
        dtypes = {DType.F32: torch.float32, DType.I32: torch.int32, DType.MODEL: torch.bfloat16}
        self.buffers = [torch.zeros(b.numel, dtype=dtypes[b.dtype], device=self.device) for b in self.graph.buffers]
        self.weights = self._weights(dtypes)
        self.buffer_ptrs = torch.tensor([t.data_ptr() for t in self.buffers], dtype=torch.int64, device=self.device)
        self.weight_ptrs = torch.tensor([t.data_ptr() for t in self.weights] or [0], dtype=torch.int64,
                                        device=self.device)
        order, n_groups, n_scratch, self.partial_row = add_order(self.graph)
        self.add_order = torch.from_numpy(order).to(self.device)
        ranges, routes = prefetch_tables.prefetch_table(self.graph)
        self.prefetch_ranges = torch.from_numpy(ranges).to(self.device)
        self.prefetch_routes = torch.from_numpy(routes).to(self.device)
        self.counters = torch.zeros(len(self.graph.events), dtype=torch.int32, device=self.device)
        self.arrivals = torch.zeros(max(1, n_groups), dtype=torch.int32, device=self.device)
        self.partials = torch.zeros(max(1, n_scratch), dtype=torch.float32, device=self.device)
        self.lib = self._load(lib)
        self.error = torch.zeros(self.lib.fd_megakernel_error_words(), dtype=torch.int32, device=self.device)
        self.step_ticks = torch.zeros(self.graph.constants.max_steps + 1, dtype=torch.int64, device=self.device)

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

    def _load(self, lib):
        handle = (lib or library.load()).lib
        handle.fd_megakernel_launch.argtypes = [P, I, P, P, P, P, P, P, P, I, P, I, I, D, P, P, I, L, I, I, P, P]
        handle.fd_megakernel_launch.restype = I
        # The side tables' layouts (prefetch ranges, words, route words; trace words) and the sync
        # modes as compiled: a library built before a change to the launch's arguments is refused
        host = (prefetch_tables.RANGES, prefetch_tables.WORDS, prefetch_tables.ROUTE_WORDS, TRACE_WORDS,
                len(SYNC_MODES))
        try:
            compiled = (handle.fd_megakernel_prefetch_ranges(), handle.fd_megakernel_prefetch_words(),
                        handle.fd_megakernel_prefetch_route_words(), handle.fd_megakernel_trace_words(),
                        handle.fd_megakernel_sync_modes())
        except AttributeError:  # a library built before the prefetch table, the trace or sync_mode existed
            compiled = None
        if compiled != host:
            raise MegakernelError(f"the runtime's table layouts (prefetch ranges, words, route words; trace words; "
                                  f"sync modes) are {compiled}, the host's {host}: rebuild (python -m fleet_decode.kernels.build)")
        handle.fd_megakernel_ticks_per_second.restype = D
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
    def launch(self, pos0: int, n_steps: int, timeout_s: float = 1.0, trace: torch.Tensor | None = None) -> float:
        """Runs n_steps steps at positions pos0.. in one launch; returns its seconds (host clock).
        Raises WatchdogTimeout naming the stuck task if any wait outlasts timeout_s. trace: None, or
        an int64 tensor [n_steps, tasks, TRACE_WORDS] the runtime fills (fleet_decode.kernels.trace)."""
        c = self.graph.constants
        if n_steps > c.max_steps or pos0 + n_steps > c.max_positions:
            raise MegakernelError(f"{n_steps} steps from position {pos0} exceed the graph's {c.max_steps} steps "
                                  f"/ {c.max_positions} positions")
        if trace is not None and (trace.dtype != torch.int64 or trace.device != self.device or not trace.is_contiguous()
                                  or trace.numel() < n_steps * len(self.graph.tasks) * TRACE_WORDS):
            raise MegakernelError(f"the trace must be a contiguous int64 tensor on {self.device} of at least "
                                  f"{n_steps} x {len(self.graph.tasks)} x {TRACE_WORDS} elements")
        for t in (self.counters, self.arrivals, self.partials, self.error, self.step_ticks):
            t.zero_()
        torch.cuda.synchronize(self.device)
        started = time.perf_counter()
        code = self.lib.fd_megakernel_launch(
            self.blob.data_ptr(), len(self.graph.workers), self.buffer_ptrs.data_ptr(), self.weight_ptrs.data_ptr(),
            self.counters.data_ptr(), self.arrivals.data_ptr(), self.add_order.data_ptr(), self.partials.data_ptr(),
            self.error.data_ptr(), self.partial_row, self.step_ticks.data_ptr(), pos0, n_steps, float(timeout_s),
            self.prefetch_ranges.data_ptr(), self.prefetch_routes.data_ptr(), self.tuning.prefetch,
            self.tuning.prefetch_kib * 1024, self.tuning.poll_every, SYNC_MODES[self.tuning.sync],
            None if trace is None else trace.data_ptr(),
            torch.cuda.current_stream(self.device).cuda_stream)
        if code != 0:
            raise MegakernelError(f"fd_megakernel_launch: {self.lib.fd_error_string(code).decode()} ({code})")
        torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - started
        record = dict(zip(ERROR_FIELDS, self.error.tolist()))
        if record["flag"]:
            raise WatchdogTimeout(self._describe(record, timeout_s), record)
        return seconds

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
    def prefill(self, prompt_ids):
        """HF prefill of prompt_ids into the graph's cache, and its greedy token as tokens[0]."""
        if not self.graph.constants.has_head:
            raise MegakernelError("decode needs the whole-model graph (layers=None); use run_layer for a layer graph")
        n_prompt = len(prompt_ids)
        ref = Reference(self.model, max_positions=n_prompt + 1)
        first = int(ref.prefill(prompt_ids).argmax())
        self.fill_cache(ref, n_prompt)
        del ref
        self.buffer("tokens")[0] = first

    @torch.no_grad()
    def generate(self, n_prompt: int, n_tokens: int, timeout_s: float = 1.0, trace=None) -> DecodeResult:
        """n_tokens greedy steps in ONE launch after prefill() of n_prompt tokens (repeatable: each
        launch rewrites the cache rows and tokens it decodes). trace: as launch()."""
        c = self.graph.constants
        tokens = self.buffer("tokens")
        seconds = self.launch(n_prompt, n_tokens, timeout_s, trace)
        logits = self.buffer("logits").view(c.max_steps, c.vocab)
        last = [self.buffer(f"h.{l + 1}").clone() for l in range(c.n_layers)]
        return DecodeResult(
            tokens=tokens[1:n_tokens + 1].tolist(),
            logits=[logits[s].clone() for s in range(n_tokens)],
            hidden_states=[None] * (n_tokens - 1) + [last],
            seconds=seconds,
            step_seconds=self.step_seconds(n_tokens) if c.has_head else [],
            counts={"tasks": len(self.graph.tasks), "events": len(self.graph.events), "workers": len(self.graph.workers)},
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

def build(arch: str | None = None, compiler: str | None = None) -> dict:
    """Builds hip/ (task kernels + runtime) for arch (default: this GPU's) and returns the build record."""
    import os
    arch = arch or library.device_arch()
    if compiler:
        os.environ["NVCC" if arch.startswith("sm_") else "HIPCC"] = compiler
    return build_kernels(arch, library.default_library_path(arch).parent)


def check_task_kinds(hf_model, seed: int = 0) -> dict:
    """M1: every task kernel alone at the real shapes (fleet_decode.kernels.check), as the pipeline's
    M1 records them: per kind its numbers (flags as 0/1) and shape; names and notes are dropped."""
    from fleet_decode.kernels import check

    results = check.check_all(seed=seed, device=str(next(hf_model.parameters()).device))
    return {kind: {k: v for k, v in r.items() if k == "shape" or not isinstance(v, str)} for kind, r in results.items()}


def simulate_layer(hf_model, prompt_ids, layer: int, workers=None, schedule=None, seed=0, plan=None):
    """M2 through the megakernel. workers / schedule / seed are the simulator's knobs: the device runs
    one worker per SM and its own interleaving, so they are accepted and ignored."""
    return Megakernel(hf_model, plan=plan, layers=[layer]).run_layer(prompt_ids)


# The H200 sweeps' fastest tiling (docs/measurements/megakernel-h200-sweep{1,2,9}*.json): a cache no
# longer than the decode needs (sweep 1: 3.96 -> 3.78 ms per token with 32-position chunks) and,
# once the merge read its partials all at once, the shortest chunks that still fit one round of the
# workers: 16 positions at 1,024 (sweep 2: 3.68 -> 3.54 ms; 8 positions is 8 % slower), 32 at 4,096
# (sweep 9: 3.47 -> 3.12 ms; 16 positions makes 258 chunks, two rounds and a longer merge).
DECODE_ATTN_CHUNKS = (16, 32, MAX_ATTN_CHUNK)
CACHE_ROUNDING = 64


def decode_plan(config, n_positions: int, workers: int) -> Plan:
    """The plan for decoding n_positions (prompt + tokens + 1): a cache of just that many rows
    (rounded up), since empty rows still cost attention-chunk tasks, cut into chunks of the first of
    DECODE_ATTN_CHUNKS that makes at most one chunk per worker (else the longest)."""
    rows = -(-n_positions // CACHE_ROUNDING) * CACHE_ROUNDING
    chunk = next((c for c in DECODE_ATTN_CHUNKS if -(-rows // c) <= workers), DECODE_ATTN_CHUNKS[-1])
    return default_plan(config, workers=workers, max_positions=rows, attn_chunk=chunk)


def simulate(hf_model, prompt_ids, n_tokens: int, workers=None, schedule=None, seed=0, plan=None) -> DecodeResult:
    """M3 / M4 / bench through the megakernel: n_tokens greedy steps in one launch."""
    if plan is None:
        n_sm = torch.cuda.get_device_properties(next(hf_model.parameters()).device).multi_processor_count
        plan = decode_plan(hf_model.config, len(prompt_ids) + n_tokens + 1, n_sm)
    return Megakernel(hf_model, plan=plan).decode(prompt_ids, n_tokens)


# ---------------------------------------------------------------------- CLI: checks and timings on a GPU host

def _exact_step(model, prompt, token, forced_routes):
    """One step of exact arithmetic (compare.exact_twin) from the bf16 prefill's cache, on the given experts."""
    bf16 = Reference(model, max_positions=len(prompt) + 1)
    bf16.prefill(prompt)
    exact = exact_twin(model, bf16, len(prompt))
    logits = exact.step(token, forced_routes=forced_routes)
    hidden = exact.hidden_states
    del exact, bf16
    torch.cuda.empty_cache()
    return hidden, logits


def _p50_ms(step_seconds):
    steady = sorted(step_seconds[2:]) or sorted(step_seconds)  # steps 0-1 include the launch's ramp-up
    return steady[len(steady) // 2] * 1e3


PLAN_SWEEP = {  # tilings to time: one tile per worker per stage (default), fewer and larger tiles, ...
    "default": {}, "stage_tiles=66": {"stage_tiles": 66}, "stage_tiles=264": {"stage_tiles": 264},
    "heads_per_tile=2": {"heads_per_tile": 2}, "round-robin": {"assign": "round-robin"},
}


@torch.no_grad()
def measure(source: str, n_prompt: int, n_tokens: int) -> dict:
    """Numbers for the notes (docs/megakernel.md): every layer alone vs the Reference (M2), one step
    vs the Reference on the same experts and vs HF eager (M3), n_tokens in one launch vs HF greedy and
    HF teacher-forced (M4), per-step times for a few tilings, and the watchdog on a broken graph."""
    from fleet_decode.model import hf_decode, load_model, prompt_ids
    from fleet_decode.model.reference import Route

    out = {"source": source, "prompt": n_prompt, "tokens": n_tokens}
    model = load_model(source, dtype=torch.bfloat16, device="cuda")
    config = model.config
    prompt = prompt_ids(n_prompt, vocab_size=config.vocab_size)
    out["m2_rel_vs_reference"] = {}
    for layer in range(config.num_hidden_layers):
        ours, ref = Megakernel(model, layers=[layer]).run_layer(prompt)
        out["m2_rel_vs_reference"][layer] = relative_error(ours, ref)

    mk = Megakernel(model)
    one = mk.decode(prompt, 1)
    ref = Reference(model, max_positions=n_prompt + 1)
    first = int(ref.prefill(prompt).argmax())
    mk_routes = mk.routes()
    forced = {l: Route(torch.tensor(e, device="cuda"), None) for l, e in mk_routes.items()}
    ref_logits = ref.step(first, forced_routes=forced)
    ref_hidden, own_routes = ref.hidden_states, ref.routes
    hf_tokens, hf_logits, hf_hidden, _ = hf_decode(model, prompt, 2)
    exact_hidden, exact_logits = _exact_step(model, prompt, first, forced)
    out["m3_vs_exact_same_experts"] = {  # exact: fp32 arithmetic on the same weights, cache and experts
        "megakernel": [relative_error(a, b) for a, b in zip(one.hidden_states[0], exact_hidden)],
        "reference": [relative_error(a, b) for a, b in zip(ref_hidden, exact_hidden)],
        "megakernel_logits_cos": cosine(one.logits[0], exact_logits), "reference_logits_cos": cosine(ref_logits, exact_logits),
    }
    out["m3"] = {
        "rel_vs_reference_same_experts": [relative_error(a, b) for a, b in zip(one.hidden_states[0], ref_hidden)],
        "rel_vs_hf": [relative_error(a, b) for a, b in zip(one.hidden_states[0], hf_hidden[1])],
        "route_differences_vs_reference": {
            l: {"ours": mk_routes[l], "reference": own_routes[l].experts.tolist(), "margin": own_routes[l].margin()}
            for l in mk_routes if mk_routes[l] != own_routes[l].experts.tolist()},
        "logits_cos_vs_hf": cosine(one.logits[0], hf_logits[1]),
        "logits_cos_vs_reference_same_experts": cosine(one.logits[0], ref_logits),
        "next_token": one.tokens[0], "hf_next_token": hf_tokens[1],
    }

    many = mk.decode(prompt, n_tokens)
    again = mk.decode(prompt, n_tokens)
    hf_free = hf_decode(model, prompt, n_tokens + 1)[0][1:]
    forced_hf = hf_decode(model, prompt, n_tokens + 1, forced_tokens=[first] + many.tokens)[1][1:]
    ref = Reference(model, max_positions=n_prompt + n_tokens + 1)
    token, ref_cos = int(ref.prefill(prompt).argmax()), []
    for s in range(n_tokens):
        ref_cos.append(cosine(many.logits[s], ref.step(token)))
        token = many.tokens[s]
    same = [a == b for a, b in zip(many.tokens, hf_free)]
    diverge = same.index(False) if False in same else None
    out["m4"] = {
        "tokens": many.tokens, "hf_tokens": hf_free, "identical_prefix": diverge if diverge is not None else n_tokens,
        "hf_top2_margin_at_divergence": None if diverge is None else
        float(forced_hf[diverge].topk(2).values.diff().abs()),
        "cos_vs_hf_teacher_forced": [cosine(a, b) for a, b in zip(many.logits, forced_hf)],
        "cos_vs_reference_teacher_forced": ref_cos,
        "deterministic_logits": all(torch.equal(a, b) for a, b in zip(many.logits, again.logits)),
        "launch_seconds": many.seconds, "step_ms": [s * 1e3 for s in many.step_seconds],
        "p50_ms": _p50_ms(many.step_seconds),
    }

    out["plans"] = {}
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    for name, overrides in PLAN_SWEEP.items():
        variant = Megakernel(model, plan=default_plan(config, workers=n_sm, **overrides))
        result = variant.decode(prompt, n_tokens)
        out["plans"][name] = {"p50_ms": _p50_ms(result.step_seconds), "tasks": len(variant.graph.tasks),
                              "same_tokens": result.tokens == many.tokens}

    broken = build_graph(config, mk.plan, layers=[1])
    victim = broken.task_index("L1.q_absorb[0]")
    broken.tasks[victim].inputs.append((broken.event_index("L1.o_proj"), 0))  # a cycle: never fires
    bad = Megakernel(model, graph=broken)
    started = time.perf_counter()
    try:
        bad.run_layer(prompt, timeout_s=0.5)
        out["watchdog"] = {"raised": False}
    except WatchdogTimeout as err:
        out["watchdog"] = {"raised": True, "message": str(err), "seconds": time.perf_counter() - started}
    ours, ref_out = Megakernel(model, layers=[1]).run_layer(prompt)
    out["watchdog"]["next_launch_rel"] = relative_error(ours, ref_out)
    return out


@dataclass(frozen=True)
class Variant:
    plan: dict = field(default_factory=dict)  # default_plan overrides (a new graph)
    tuning: Tuning = Tuning()  # launch arguments (same graph)


def speed_variants(n_prompt: int, n_tokens: int) -> dict[str, Variant]:
    """What `--sweep` times, each a change to decode_plan() and Tuning() (docs/megakernel.md "Speed";
    sweep 1's list, on default_plan(), is in docs/measurements/megakernel-h200-sweep1.json)."""
    return {
        "default": Variant(),  # decode_plan + Tuning(): cache sized to the decode, its chunks, lean sync
        "prefetch this": Variant(tuning=Tuning(prefetch=PREFETCH_BITS["this"])),
        "sync=fenced": Variant(tuning=Tuning(sync="fenced")),
        "after_wait+routed prefetch": Variant(tuning=Tuning(prefetch=prefetch_mode("after_wait", "routed"))),
        "ready prefetch": Variant(tuning=Tuning(prefetch=prefetch_mode("ready"))),
        "ready+routed prefetch": Variant(tuning=Tuning(prefetch=prefetch_mode("ready", "routed"))),
        "ready+routed+bulk prefetch": Variant(tuning=Tuning(prefetch=prefetch_mode("ready", "routed", "bulk"))),
        "ready+routed prefetch 2 MiB": Variant(tuning=Tuning(prefetch=prefetch_mode("ready", "routed"),
                                                              prefetch_kib=2048)),
        "attn_chunk=8": Variant({"attn_chunk": 8}),
        "attn_chunk=16": Variant({"attn_chunk": 16}),
        "sync=fenced + prefetch this": Variant(tuning=Tuning(sync="fenced", prefetch=PREFETCH_BITS["this"])),
        "attn_chunk=32": Variant({"attn_chunk": 32}),
        "attn_chunk=64": Variant({"attn_chunk": 64}),
        "heads_per_tile=2": Variant({"heads_per_tile": 2}),
        "task_overhead=32768": Variant({"task_overhead": 32768}),
        "poll_every=32": Variant(tuning=Tuning(poll_every=32)),
    }


@torch.no_grad()
def sweep(source: str, n_prompt: int, n_tokens: int, variants: dict | None = None, launches: int = 3) -> dict:
    """Times every variant: `launches` launches of n_tokens steps each, P50 over the steps >= 2 of all
    of them, and checks its tokens (and, for the default's graph, its logits bit for bit) against the
    default's. One prefill per graph; a variant that fails is recorded and the sweep goes on."""
    from fleet_decode.graph.counts import graph_counts
    from fleet_decode.model import load_model, prompt_ids

    model = load_model(source, dtype=torch.bfloat16, device="cuda")
    prompt = prompt_ids(n_prompt, vocab_size=model.config.vocab_size)
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    variants = variants or speed_variants(n_prompt, n_tokens)
    graphs: dict[tuple, Megakernel] = {}
    rows, baseline = {}, None
    for name, variant in variants.items():
        started = time.perf_counter()
        try:
            key = tuple(sorted(variant.plan.items()))
            if key not in graphs:
                plan = replace(decode_plan(model.config, n_prompt + n_tokens + 1, n_sm), **variant.plan)
                graphs[key] = Megakernel(model, plan=plan)
                graphs[key].prefill(prompt)
            mk = graphs[key]
            mk.tuning = variant.tuning
            results = [mk.generate(n_prompt, n_tokens) for _ in range(launches)]
        except Exception as err:  # noqa: BLE001 -- one broken variant must not cost the others their numbers
            rows[name] = {"error": f"{type(err).__name__}: {err}"}
            continue
        steady = sorted(t for r in results for t in r.step_seconds[2:])
        weight_bytes = graph_counts(mk.graph)["weight_bytes_per_token_total"]
        first = results[0]
        if baseline is None:
            baseline = first
        rows[name] = {
            "p50_ms": steady[len(steady) // 2] * 1e3, "p95_ms": steady[int(0.95 * (len(steady) - 1))] * 1e3,
            "weight_tb_per_s_at_p50": weight_bytes / steady[len(steady) // 2] / 1e12,
            "p50_ms_per_launch": [_p50_ms(r.step_seconds) for r in results],
            "same_tokens_as_default": first.tokens == baseline.tokens,
            "same_tokens_every_launch": all(r.tokens == first.tokens for r in results),
            "max_abs_logit_diff_vs_default": max(float((a - b).abs().max()) for a, b in zip(first.logits, baseline.logits)),
            "tasks": len(mk.graph.tasks), "plan": variant.plan, "tuning": asdict(variant.tuning),
            "seconds": time.perf_counter() - started,
        }
    return {"source": source, "prompt": n_prompt, "tokens": n_tokens, "launches": launches, "sm": n_sm,
            "variants": rows}


def print_sweep(result: dict):
    rows = result["variants"]
    default = rows.get("default", {}).get("p50_ms")
    print(f"{'variant':44s} {'P50 ms':>8s} {'P95 ms':>8s} {'vs default':>10s} {'TB/s':>5s}  tokens  max |dlogit|")
    for name, r in sorted(rows.items(), key=lambda kv: kv[1].get("p50_ms", math.inf)):
        if "error" in r:
            print(f"{name:44s} FAILED {r['error']}")
            continue
        ratio = f"{r['p50_ms'] / default:10.3f}" if default else f"{'-':>10s}"
        same = "same" if r["same_tokens_as_default"] and r["same_tokens_every_launch"] else "DIFFER"
        print(f"{name:44s} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} {ratio} {r['weight_tb_per_s_at_p50']:5.2f}  {same:6s}  "
              f"{r['max_abs_logit_diff_vs_default']:.3g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="random:deepseek-coder-v2-lite")
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--out", help="write the numbers as JSON here")
    parser.add_argument("--sweep", action="store_true",
                        help="only time the speed variants (speed_variants) side by side, sorted by P50")
    parser.add_argument("--variants", help="with --sweep: only these variants, comma-separated (default always runs)")
    args = parser.parse_args(argv)
    if args.sweep:
        variants = speed_variants(args.prompt, args.tokens)
        if args.variants:
            wanted = ["default", *(v.strip() for v in args.variants.split(",") if v.strip() != "default")]
            unknown = [v for v in wanted if v not in variants]
            if unknown:
                parser.error(f"unknown variants {unknown}; known: {', '.join(variants)}")
            variants = {name: variants[name] for name in wanted}
        result = sweep(args.model, args.prompt, args.tokens, variants)
        if args.out:
            with open(args.out, "w") as f:
                f.write(json.dumps(result, indent=1, default=str) + "\n")
        print_sweep(result)
        return 0
    result = measure(args.model, args.prompt, args.tokens)
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(result, indent=1, default=str) + "\n")
    m3, m4 = result["m3"], result["m4"]
    print(f"M2 every layer vs reference: max rel {max(result['m2_rel_vs_reference'].values()):.4f}")
    print(f"M3 layer 26 rel vs reference (same experts) {m3['rel_vs_reference_same_experts'][-1]:.4f}, vs HF "
          f"{m3['rel_vs_hf'][-1]:.4f}; logits cos vs HF {m3['logits_cos_vs_hf']:.5f}; token {m3['next_token']} "
          f"(HF {m3['hf_next_token']}); route differences at layers {sorted(m3['route_differences_vs_reference'])}")
    exact = result["m3_vs_exact_same_experts"]
    print(f"vs exact fp32 arithmetic at layer 26: megakernel {exact['megakernel'][-1]:.4f}, reference "
          f"{exact['reference'][-1]:.4f}")
    print(f"M4 {m4['identical_prefix']}/{len(m4['tokens'])} tokens as HF greedy (HF top-2 margin there "
          f"{m4['hf_top2_margin_at_divergence']}); min cos vs HF teacher-forced {min(m4['cos_vs_hf_teacher_forced']):.5f}; "
          f"deterministic {m4['deterministic_logits']}; p50 {m4['p50_ms']:.3f} ms/token")
    print("plans: " + ", ".join(f"{k} {v['p50_ms']:.3f} ms" for k, v in result["plans"].items()))
    print(f"watchdog: {result['watchdog']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The M1 harness: shapes, seeded inputs, poisoned outputs, error measures, timing and the Result
row, shared by every kind's check (fleet_decode.kernels.checks.per_kind).

Outputs are poisoned (NaN / -1) before each run; an output with any element left unwritten fails.
Times are CUDA-event medians of graph replays that rotate through enough weight copies to defeat
the L2.
"""
import math
import statistics
from dataclasses import dataclass

import torch
from transformers.models.deepseek_v2.modeling_deepseek_v2 import yarn_apply_mscale

try:  # transformers 5.17 defines it beside the model; later releases only in modeling_rope_utils
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import yarn_get_mscale
except ImportError:
    from transformers.modeling_rope_utils import yarn_get_mscale

from fleet_decode.graph.format import COMPILED_DIMS, KERNEL_LIMITS
from fleet_decode.model import get_config

BF16_TOL = 8e-3          # one bf16 ulp at the largest output: its rounding plus one accumulation-order flip
F32_TOL = 1e-4           # fp32 activations: fp32 accumulation over up to 10944 terms, __expf
ABSORB_PARTS = 4          # Plan.absorb_parts: (head, column block) units of the graph's q-absorb
ROUTER_TILE_ROWS = 8      # the task graph's ROUTER tiles at 132 workers (Plan.row_align experts each)
ROTATE_BYTES = 256 << 20  # weights touched per timed launch sequence: several times the L2 (50-60 MB)


@dataclass
class Shapes:
    hidden: int = 2048
    heads: int = COMPILED_DIMS["n_heads"]  # the MLA widths the kernels are compiled for
    kv_lora: int = COMPILED_DIMS["kv_rank"]
    rope: int = COMPILED_DIMS["qk_rope"]
    nope: int = COMPILED_DIMS["qk_nope"]
    v_head: int = COMPILED_DIMS["v_head"]
    experts: int = 64
    top_k: int = 6
    moe_inter: int = 1408
    shared_inter: int = 2816
    dense_inter: int = 10944
    vocab: int = 102400
    cache_len: int = 1024
    n_pos: int = 1000          # valid cache positions in the attention check (last chunk partial)
    chunk_len: int = 32         # 32 chunks: one block each; kMaxChunk (64) bounds it
    eps: float = 1e-6
    routed_scaling: float = 1.0

    config: str = "deepseek-coder-v2-lite"  # whose rope parameters (YaRN) set the softmax scale

    @property
    def softmax_scale(self) -> float:
        return yarn_apply_mscale(get_config(self.config).rope_parameters, (self.nope + self.rope) ** -0.5)

    @property
    def rope_attention_factor(self) -> float:
        """YaRN's factor on cos/sin (HF folds it into the rotary tables)."""
        rope = get_config(self.config).rope_parameters
        return yarn_get_mscale(rope["factor"]) if rope.get("rope_type", "default") == "yarn" else 1.0


@dataclass
class Result:
    kind: str
    max_abs: float
    max_rel: float
    tol: float
    passed: bool
    shape: str
    us: float
    bytes: int
    gbps: float
    written: bool
    note: str = ""
    us_eager: float = 0.0


class Inputs:
    def __init__(self, seed: int, device: str):
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.device = device

    def randn(self, *shape, std=1.0, dtype=torch.bfloat16) -> torch.Tensor:
        return (torch.randn(*shape, generator=self.gen, device=self.device) * std).to(dtype)

    def uniform(self, *shape, low=0.0, high=1.0) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, device=self.device) * (high - low) + low

    def distinct(self, n: int, k: int) -> torch.Tensor:
        return torch.randperm(n, generator=self.gen, device=self.device)[:k].to(torch.int32)

    def copies(self, nbytes: int) -> int:
        """Weight copies to rotate through so the timed sequence reads past the L2 (1 off the GPU)."""
        if torch.device(self.device).type != "cuda":
            return 1
        return max(1, min(64, math.ceil(ROTATE_BYTES / max(nbytes, 1))))

    def norm_weight(self, n: int) -> torch.Tensor:
        return self.randn(n, std=0.1, dtype=torch.float32).add(1.0).to(torch.bfloat16)


def poisoned(*shape, dtype, device) -> torch.Tensor:
    t = torch.empty(*shape, dtype=dtype, device=device)
    if dtype == torch.int32:
        return t.fill_(-1)
    if dtype == torch.bfloat16:
        return t.view(torch.int16).fill_(-1).view(torch.bfloat16)  # 0xFFFF: a NaN
    return t.fill_(float("nan"))


def unwritten(t: torch.Tensor) -> bool:
    return bool((t == -1).any()) if t.dtype == torch.int32 else bool(torch.isnan(t.double()).any())


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """max |out - ref| and that over max |ref| (a scale-free error that a NaN makes infinite)."""
    diff = (out.double() - ref.double()).abs()
    if torch.isnan(diff).any():
        return math.inf, math.inf
    max_abs = diff.max().item()
    return max_abs, max_abs / max(ref.double().abs().max().item(), 1e-30)


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_launches(launches: list, device: str, repeats: int = 20) -> tuple[float, float]:
    """Median microseconds per launch, (graph, eager): the launches replayed from one CUDA graph
    (no host gaps between kernels; the figure reported) and the same launches issued eagerly
    back to back (a cross-check that the graph really holds the kernels), both timed with CUDA
    events. (0, 0) off the GPU (the CPU tests run the harness against a torch model)."""
    if torch.device(device).type != "cuda":
        for launch in launches:  # still run them: the checks must not depend on what timing overwrites
            launch()
        return 0.0, 0.0
    for launch in launches[: min(3, len(launches))]:
        launch()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def eager():
        for launch in launches:
            launch()

    def median_us(run):
        run()
        times = []
        for _ in range(repeats):
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / len(launches))
        return statistics.median(times)

    eager_us = median_us(eager)
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            eager()
        graph_us = median_us(graph.replay)
    except Exception:  # capture unsupported here: report the eager time
        torch.cuda.synchronize()
        graph_us = eager_us
    return graph_us, eager_us


def measure(outs_refs) -> tuple[float, float]:
    """Worst (max_abs, max_rel) over (output, reference) pairs. Called before timing, since the
    timed launches rotate inputs and overwrite the outputs."""
    errs = [errors(o, r) for o, r in outs_refs]
    return max(e[0] for e in errs), max(e[1] for e in errs)


def result(kind, errs, tol, shape, timing, nbytes, written, extra_ok=True, note="") -> Result:
    us, us_eager = timing
    max_abs, max_rel = errs
    passed = bool(written and extra_ok and max_rel <= tol)
    return Result(kind, max_abs, max_rel, tol, passed, shape, round(us, 2), nbytes,
                  round(nbytes / us / 1e3, 1) if us > 0 else 0.0, written, note, round(us_eager, 2))


@dataclass
class Grid:
    n_sm: int
    warp_size: int

    def tile_rows(self, n_rows: int) -> int:
        """Rows per tile: about two tiles per SM, a multiple of the rows one block streams per pass."""
        per_pass = KERNEL_LIMITS["GEMV_ROWS_PER_PASS"] * KERNEL_LIMITS["TASK_THREADS"] // self.warp_size
        return max(per_pass, math.ceil(n_rows / (2 * self.n_sm) / per_pass) * per_pass)


def tol_for(dtype: torch.dtype, bf16_tol: float) -> float:
    return bf16_tol if dtype == torch.bfloat16 else F32_TOL


def row_name(kind, dtype: torch.dtype, variant: str = "") -> str:
    """The M1 row of a kind: its Kind name as on every backend, then the variant and, for the bf16
    activations HF stores (the task graph's buffers are fp32), `:bf16`."""
    return kind.name + (f":{variant}" if variant else "") + (":bf16" if dtype == torch.bfloat16 else "")

"""M1 kernel check: every task kernel alone, at the real DeepSeek-Coder-V2-Lite shapes, on fresh
random inputs, against a torch reference computed in fp64 with the same bf16 rounding points as
HF's DeepseekV2 (docs/kernels.md lists them), plus its time (CUDA events, median of graph replays
that rotate through enough weight copies to defeat the L2).

    python -m fleet_decode.kernels.check [--lib PATH] [--seed 0] [--out kernels.json] [--kinds a,b]

Outputs are poisoned (NaN / -1) before each run; an output with any element left unwritten fails.
"""
import argparse
import contextlib
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from fleet_decode.graph.derived import w_uk_parts
from fleet_decode.kernels.library import TaskKernels, load

TASK_THREADS = 256        # kTaskThreads in hip/tasks/common.h
BF16_TOL = 8e-3          # one bf16 ulp at the largest output: its rounding plus one accumulation-order flip
F32_TOL = 1e-4           # fp32 activations: fp32 accumulation over up to 10944 terms, __expf
WARP_ROWS = 2             # kGemvRowsPerPass: rows a warp streams at once
ROUTER_THREADS = 512      # the router is one block on the critical path: more warps (92 registers each fit 512)
ABSORB_PARTS = 4          # Plan.absorb_parts: (head, column block) units of the graph's q-absorb
ROUTER_TILE_ROWS = 8      # the task graph's ROUTER tiles at 132 workers (Plan.row_align experts each)
ROTATE_BYTES = 256 << 20  # weights touched per timed launch sequence: several times the L2 (50-60 MB)


@dataclass
class Shapes:
    hidden: int = 2048
    heads: int = 16
    kv_lora: int = 512
    rope: int = 64
    nope: int = 128
    v_head: int = 128
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

    @property
    def softmax_scale(self) -> float:
        mscale = 0.1 * 0.707 * math.log(40) + 1  # YaRN, factor 40, mscale_all_dim 0.707
        return (self.nope + self.rope) ** -0.5 * mscale * mscale


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


# --------------------------------------------------------------------------------------------
# Inputs, poison, comparison, timing

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
        per_pass = WARP_ROWS * TASK_THREADS // self.warp_size
        return max(per_pass, math.ceil(n_rows / (2 * self.n_sm) / per_pass) * per_pass)


# --------------------------------------------------------------------------------------------
# References: products in fp64; every stored activation takes the kernel's storage type, so a
# bf16 run rounds where HF's DeepseekV2 rounds and an fp32 run (the task graph's F32 buffers)
# rounds nowhere but the cache and the logits.

def stored(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The value t takes once stored as dtype, in fp64."""
    return t.to(dtype).double()


def bf16(t: torch.Tensor) -> torch.Tensor:
    return stored(t, torch.bfloat16)


def rms_norm_ref(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """fd_rmsnorm: x * rsqrt(mean(x^2) + eps) cast back to x's type, times the bf16 weight, stored
    as x's type (for bf16, DeepseekV2RMSNorm exactly)."""
    xf = x.float()
    h = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return stored(w.to(x.dtype) * h, x.dtype) if x.dtype == torch.bfloat16 else h.double() * w.double()


def silu_mul_ref(g: torch.Tensor, u: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """SiLU(gate) * up with gate, up, SiLU and the product each stored as dtype (HF: bf16)."""
    if dtype == torch.bfloat16:
        gb, ub = g.to(dtype), u.to(dtype)
        return (F.silu(gb) * ub).double()
    return F.silu(g) * u


def tol_for(dtype: torch.dtype, bf16_tol: float) -> float:
    return bf16_tol if dtype == torch.bfloat16 else F32_TOL


def named(kind: str, dtype: torch.dtype) -> str:
    return kind + (":f32" if dtype == torch.float32 else "")


# --------------------------------------------------------------------------------------------
# One check per kind (and per shape variant and activation type of a kind)

def check_embed(k: TaskKernels, s: Shapes, rnd: Inputs, grid: Grid, dtype=torch.bfloat16) -> Result:
    table = rnd.randn(s.vocab, s.hidden)
    tokens = [torch.randint(0, s.vocab, (1,), generator=rnd.gen, device=rnd.device, dtype=torch.int32)
              for _ in range(16)]
    out = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    k.embed(table, tokens[0], out)
    sync(rnd.device)
    written = not unwritten(out)
    errs = measure([(out, table[tokens[0].item()])])
    us = time_launches([lambda t=t: k.embed(table, t, out) for t in tokens], rnd.device)
    return result(named("embed", dtype), errs, 0.0, f"[{s.vocab},{s.hidden}] -> [{s.hidden}]", us, 2 * s.hidden,
                  written)


def check_rmsnorm_gemv(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    rows = s.heads * (s.nope + s.rope) + s.kv_lora + s.rope  # q_proj | kv_a_proj_with_mqa
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    nbytes = rows * s.hidden * 2
    weights = [rnd.randn(rows, s.hidden, std=0.02) for _ in range(rnd.copies(nbytes))]
    out = poisoned(rows, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(rows)
    k.rmsnorm_gemv(x, w, s.eps, weights[0], out, tile)
    sync(rnd.device)
    ref = weights[0].double() @ rms_norm_ref(x, w, s.eps)
    written = not unwritten(out)
    errs = measure([(out, ref)])
    us = time_launches([lambda W=W: k.rmsnorm_gemv(x, w, s.eps, W, out, tile) for W in weights], rnd.device)
    return result(named("rmsnorm_gemv", dtype), errs, tol_for(dtype, BF16_TOL), f"[{rows},{s.hidden}] tile {tile}",
                  us, nbytes, written, note="q_proj|kv_a_proj_with_mqa after input_layernorm")


def rope_tables(s: Shapes, rnd: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Random angles with YaRN's attention factor folded into cos/sin, [cache_len, rope/2] fp32."""
    angle = rnd.uniform(s.cache_len, s.rope // 2, high=2 * math.pi)
    attn_scale = 0.1 * math.log(40) + 1
    return (torch.cos(angle) * attn_scale).contiguous(), (torch.sin(angle) * attn_scale).contiguous()


def rope_ref(x: torch.Tensor, cos_p: torch.Tensor, sin_p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """HF apply_rotary_emb: adjacent pairs as complex numbers, fp32, stored as dtype."""
    pairs = x.float().view(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return stored(torch.stack([a * cos_p - b * sin_p, a * sin_p + b * cos_p], -1).flatten(-2), dtype)


def check_rope_cache(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    q = rnd.randn(s.heads * (s.nope + s.rope), dtype=dtype)
    kv_a = rnd.randn(s.kv_lora + s.rope, dtype=dtype)
    kv_w = rnd.norm_weight(s.kv_lora)
    cos, sin = rope_tables(s, rnd)
    p = int(torch.randint(0, s.cache_len, (1,), generator=rnd.gen, device=rnd.device))
    ckv, kpe = rnd.randn(s.cache_len, s.kv_lora), rnd.randn(s.cache_len, s.rope)
    ckv[p], kpe[p] = float("nan"), float("nan")
    ckv_before, kpe_before = ckv.clone(), kpe.clone()
    q_pe = poisoned(s.heads, s.rope, dtype=dtype, device=rnd.device)
    k.rope_cache(q, kv_a, kv_w, s.eps, cos, sin, p, q_pe, ckv, kpe)
    sync(rnd.device)
    q_pe_ref = rope_ref(q.view(s.heads, -1)[:, s.nope:], cos[p], sin[p], dtype)
    kpe_ref = rope_ref(kv_a[s.kv_lora:], cos[p], sin[p], torch.bfloat16)
    ckv_ref = rms_norm_ref(kv_a[: s.kv_lora], kv_w, s.eps)
    others = torch.arange(s.cache_len, device=rnd.device) != p
    untouched = bool(torch.equal(ckv[others], ckv_before[others]) and torch.equal(kpe[others], kpe_before[others]))
    written = not (unwritten(q_pe) or unwritten(ckv[p]) or unwritten(kpe[p]))
    errs = measure([(q_pe, q_pe_ref), (ckv[p], ckv_ref), (kpe[p], kpe_ref)])
    us = time_launches([lambda: k.rope_cache(q, kv_a, kv_w, s.eps, cos, sin, p, q_pe, ckv, kpe)] * 8, rnd.device)
    return result(named("rope_cache", dtype), errs, BF16_TOL, f"q_pe [{s.heads},{s.rope}], cache row {p} of "
                  f"{s.cache_len}", us, 0, written, untouched,
                  note="other cache rows untouched" if untouched else "OTHER CACHE ROWS CHANGED")


def q_absorb_ref(q, kv_b, s):
    w_uk = kv_b.view(s.heads, s.nope + s.v_head, s.kv_lora)[:, : s.nope].double()
    return torch.einsum("hd,hdc->hc", q.view(s.heads, -1)[:, : s.nope].double(), w_uk)


def check_q_absorb(k, s, rnd, grid) -> Result:
    q = rnd.randn(s.heads * (s.nope + s.rope))
    nbytes = s.heads * s.nope * s.kv_lora * 2  # W_UK rows only
    kv_bs = [rnd.randn(s.heads * (s.nope + s.v_head), s.kv_lora, std=0.02) for _ in range(rnd.copies(nbytes))]
    q_lat = poisoned(s.heads, s.kv_lora, dtype=torch.float32, device=rnd.device)
    k.q_absorb(q, kv_bs[0], q_lat)
    sync(rnd.device)
    written = not unwritten(q_lat)
    errs = measure([(q_lat, q_absorb_ref(q, kv_bs[0], s))])
    us = time_launches([lambda kv_b=kv_b: k.q_absorb(q, kv_b, q_lat) for kv_b in kv_bs], rnd.device)
    return result("q_absorb", errs, 1e-5, f"[{s.heads},{s.nope}] x [{s.heads},{s.nope},{s.kv_lora}]", us, nbytes,
                  written)


def check_rope_q_absorb(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    q = rnd.randn(s.heads * (s.nope + s.rope), dtype=dtype)
    cos, sin = rope_tables(s, rnd)
    p = int(torch.randint(0, s.cache_len, (1,), generator=rnd.gen, device=rnd.device))
    nbytes = s.heads * s.nope * s.kv_lora * 2
    kv_bs = [rnd.randn(s.heads * (s.nope + s.v_head), s.kv_lora, std=0.02) for _ in range(rnd.copies(nbytes))]
    parts = ABSORB_PARTS
    w_uks = [w_uk_parts(kv_b, s.heads, s.nope, s.v_head, parts) for kv_b in kv_bs]  # the graph's layout
    q_lat = poisoned(s.heads, s.kv_lora, dtype=torch.float32, device=rnd.device)
    q_pe = poisoned(s.heads, s.rope, dtype=dtype, device=rnd.device)
    k.rope_q_absorb(q, w_uks[0], parts, cos, sin, p, q_lat, q_pe)
    sync(rnd.device)
    written = not (unwritten(q_lat) or unwritten(q_pe))
    q_pe_ref = rope_ref(q.view(s.heads, -1)[:, s.nope:], cos[p], sin[p], dtype)
    errs = measure([(q_lat, q_absorb_ref(q, kv_bs[0], s)), (q_pe, q_pe_ref)])  # against kv_b as HF holds it
    us = time_launches([lambda w=w: k.rope_q_absorb(q, w, parts, cos, sin, p, q_lat, q_pe) for w in w_uks],
                       rnd.device)
    return result(named("rope_q_absorb", dtype), errs, tol_for(dtype, BF16_TOL),
                  f"{s.heads} heads x {parts} column blocks, one per tile, position {p}", us, nbytes, written,
                  note="the task graph's ROPE_Q_ABSORB (W_UK in its derived layout)")


def attention_partials_ref(q_lat, q_pe, ckv, kpe, n_pos, chunk_len, scale):
    scores = scale * (q_lat.double() @ ckv[:n_pos].double().T + q_pe.double() @ kpe[:n_pos].double().T)
    ms, ls, os_ = [], [], []
    for t0 in range(0, n_pos, chunk_len):
        t1 = min(t0 + chunk_len, n_pos)
        m = scores[:, t0:t1].max(-1).values
        prob = torch.exp(scores[:, t0:t1] - m[:, None])
        ms.append(m), ls.append(prob.sum(-1)), os_.append(prob @ ckv[t0:t1].double())
    return torch.stack(ms), torch.stack(ls), torch.stack(os_)


def check_attention_chunk(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    q_lat = rnd.randn(s.heads, s.kv_lora, std=0.75, dtype=torch.float32)
    q_pe = rnd.randn(s.heads, s.rope, dtype=dtype)
    ckv, kpe = rnd.randn(s.cache_len, s.kv_lora), rnd.randn(s.cache_len, s.rope)
    n_chunks = math.ceil(s.n_pos / s.chunk_len)
    m, l, o = (poisoned(n_chunks, s.heads, dtype=torch.float32, device=rnd.device),
               poisoned(n_chunks, s.heads, dtype=torch.float32, device=rnd.device),
               poisoned(n_chunks, s.heads, s.kv_lora, dtype=torch.float32, device=rnd.device))
    k.attention_chunk(q_lat, q_pe, ckv, kpe, s.n_pos, s.chunk_len, s.softmax_scale, m, l, o)
    sync(rnd.device)
    m_ref, l_ref, o_ref = attention_partials_ref(q_lat, q_pe, ckv, kpe, s.n_pos, s.chunk_len, s.softmax_scale)
    written = not (unwritten(m) or unwritten(l) or unwritten(o))
    errs = measure([(m, m_ref), (l, l_ref), (o, o_ref)])
    us = time_launches([lambda: k.attention_chunk(q_lat, q_pe, ckv, kpe, s.n_pos, s.chunk_len, s.softmax_scale,
                                                  m, l, o)] * 8, rnd.device)
    return result(named("attention_chunk", dtype), errs, 1e-4,
                  f"{s.heads} heads, {s.n_pos} of {s.cache_len} positions, {n_chunks} chunks of {s.chunk_len}",
                  us, s.n_pos * (s.kv_lora + s.rope) * 2, written)


def random_partials(s: Shapes, rnd: Inputs):
    """Chunk partials (m, l, o) of every head, the last chunk empty (past the valid positions)."""
    n_chunks = math.ceil(s.n_pos / s.chunk_len) + 1
    m = rnd.randn(n_chunks, s.heads, std=2.0, dtype=torch.float32)
    l = rnd.uniform(n_chunks, s.heads, low=1.0, high=30.0)
    o = rnd.randn(n_chunks, s.heads, s.kv_lora, std=5.0, dtype=torch.float32)
    m[-1], l[-1], o[-1] = -math.inf, 0.0, 0.0
    return m, l, o


def merge_ref(m, l, o):
    weight = torch.exp(m[:-1].double() - m[:-1].double().max(0).values)  # [chunks, heads]; the empty one left out
    return (weight[..., None] * o[:-1].double()).sum(0) / (weight * l[:-1].double()).sum(0)[:, None]


def check_attention_merge(k, s, rnd, grid) -> Result:
    m, l, o = random_partials(s, rnd)
    out = poisoned(s.heads, s.kv_lora, dtype=torch.float32, device=rnd.device)
    k.attention_merge(m, l, o, out)
    sync(rnd.device)
    written = not unwritten(out)
    errs = measure([(out, merge_ref(m, l, o))])
    us = time_launches([lambda: k.attention_merge(m, l, o, out)] * 8, rnd.device)
    return result("attention_merge", errs, 1e-5, f"{m.shape[0]} chunks (one empty) x {s.heads} heads", us, 0,
                  written)


def check_attention_merge_uv(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    m, l, o = random_partials(s, rnd)
    part_ml = torch.stack([m, l], -1).contiguous()  # the task graph's interleaved (m, l) pairs
    nbytes = s.heads * s.v_head * s.kv_lora * 2
    kv_bs = [rnd.randn(s.heads * (s.nope + s.v_head), s.kv_lora, std=0.02) for _ in range(rnd.copies(nbytes))]
    attn_out = poisoned(s.heads * s.v_head, dtype=dtype, device=rnd.device)
    k.attention_merge_uv(part_ml, o, kv_bs[0], attn_out)
    sync(rnd.device)
    w_uv = kv_bs[0].view(s.heads, s.nope + s.v_head, s.kv_lora)[:, s.nope:].double()
    ref = torch.einsum("hdc,hc->hd", w_uv, merge_ref(m, l, o)).flatten()
    written = not unwritten(attn_out)
    errs = measure([(attn_out, ref)])
    us = time_launches([lambda kv_b=kv_b: k.attention_merge_uv(part_ml, o, kv_b, attn_out) for kv_b in kv_bs],
                       rnd.device)
    return result(named("attention_merge_uv", dtype), errs, tol_for(dtype, BF16_TOL),
                  f"{m.shape[0]} chunks (one empty), W_UV [{s.heads},{s.v_head},{s.kv_lora}], one head per tile",
                  us, nbytes, written, note="the task graph's ATTN_MERGE_UV")


def check_wuv_oproj(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    out_lat = rnd.randn(s.heads, s.kv_lora, std=0.3, dtype=torch.float32)
    residual = rnd.randn(s.hidden, dtype=dtype)
    n_attn = s.heads * s.v_head
    nbytes = n_attn * s.kv_lora * 2 + s.hidden * n_attn * 2
    sets = [(rnd.randn(s.heads * (s.nope + s.v_head), s.kv_lora, std=0.02), rnd.randn(s.hidden, n_attn, std=0.02))
            for _ in range(rnd.copies(nbytes))]
    attn_out = poisoned(n_attn, dtype=dtype, device=rnd.device)
    out = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(s.hidden)
    k.wuv_oproj(out_lat, sets[0][0], sets[0][1], residual, attn_out, out, 16, tile)
    sync(rnd.device)
    w_uv = sets[0][0].view(s.heads, s.nope + s.v_head, s.kv_lora)[:, s.nope:].double()
    attn_ref = torch.einsum("hdc,hc->hd", w_uv, out_lat.double()).flatten()
    out_ref = residual.double() + stored(sets[0][1].double() @ stored(attn_ref, dtype), dtype)
    written = not (unwritten(attn_out) or unwritten(out))
    errs = measure([(attn_out, attn_ref), (out, out_ref)])
    us = time_launches([lambda kv_b=kv_b, o_proj=o_proj: k.wuv_oproj(out_lat, kv_b, o_proj, residual, attn_out, out,
                                                                     16, tile) for kv_b, o_proj in sets], rnd.device)
    return result(named("wuv_oproj", dtype), errs, tol_for(dtype, BF16_TOL),
                  f"W_UV [{s.heads},{s.v_head},{s.kv_lora}] + o_proj [{s.hidden},{n_attn}] + residual",
                  us, nbytes, written, note="two launches per call (W_UV tiles, then o_proj tiles)")


def check_router_topk(k, s, rnd, grid, dtype=torch.bfloat16, tiled=False) -> Result:
    """tiled=False: the one-block router_topk; True: the task graph's ROUTER tiles then ROUTE_TOPK."""
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    nbytes = s.experts * s.hidden * 4
    routers = [rnd.randn(s.experts, s.hidden, std=0.02, dtype=torch.float32) for _ in range(rnd.copies(nbytes))]
    probs = poisoned(s.experts, dtype=torch.float32, device=rnd.device)
    idx = poisoned(s.top_k, dtype=torch.int32, device=rnd.device)
    weight = poisoned(s.top_k, dtype=torch.float32, device=rnd.device)
    logits = poisoned(s.experts, dtype=torch.float32, device=rnd.device)

    def run(W):
        if tiled:
            k.router_tiles(x, w, s.eps, W, ROUTER_TILE_ROWS, s.top_k, s.routed_scaling, logits, probs, idx, weight)
        else:
            k.router_topk(x, w, s.eps, W, s.top_k, s.routed_scaling, probs, idx, weight, ROUTER_THREADS)

    run(routers[0])
    sync(rnd.device)
    probs_ref = torch.softmax(routers[0].double() @ rms_norm_ref(x, w, s.eps), -1)
    # The chosen experts: exactly the top-k of the kernel's own probabilities (ties to the lower index), in
    # ascending expert order; the same set as the reference's unless its k-th and k+1-th are a near-tie.
    chosen = sorted(sorted(range(s.experts), key=lambda e: (-probs[e].item(), e))[: s.top_k])
    ref_sorted = probs_ref.sort(descending=True).values
    near_tie = (ref_sorted[s.top_k - 1] - ref_sorted[s.top_k]).item() < 1e-6
    same_set = set(idx.tolist()) == set(probs_ref.topk(s.top_k).indices.tolist()) or near_tie
    exact = idx.tolist() == chosen and torch.equal(weight, probs[idx.long()] * s.routed_scaling)
    written = not (unwritten(probs) or unwritten(idx) or unwritten(weight))
    errs = measure([(probs, probs_ref)])
    us = time_launches([lambda W=W: run(W) for W in routers], rnd.device)
    shape = f"[{s.experts},{s.hidden}] fp32, top-{s.top_k}" + (f", tiles of {ROUTER_TILE_ROWS}" if tiled else "")
    return result(named("router_tiles" if tiled else "router_topk", dtype), errs, 1e-5, shape, us, nbytes, written,
                  exact and same_set,
                  note=f"experts {idx.tolist()}; order/weights exact={exact}, same set as reference={same_set}"
                  + ("; the task graph's ROUTER tiles + ROUTE_TOPK (two launches)" if tiled else ""))


def gate_up_ref(gate, up, xn, dtype):
    return silu_mul_ref(gate.double() @ xn, up.double() @ xn, dtype)


def check_expert_gate_up(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    gate_up = rnd.randn(s.experts, 2 * s.moe_inter, s.hidden, std=0.02)
    idx_sets = [rnd.distinct(s.experts, s.top_k) for _ in range(8)]
    out = poisoned(s.top_k, s.moe_inter, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(s.top_k * s.moe_inter)
    stride = 2 * s.moe_inter * s.hidden
    up_view = gate_up[:, s.moe_inter:]

    def launch(idx):
        k.expert_gate_up(x, w, s.eps, gate_up, up_view, stride, idx, out, tile)

    launch(idx_sets[0])
    sync(rnd.device)
    xn = rms_norm_ref(x, w, s.eps)
    ref = torch.stack([gate_up_ref(gate_up[e, : s.moe_inter], gate_up[e, s.moe_inter:], xn, dtype)
                       for e in idx_sets[0].tolist()])
    written = not unwritten(out)
    errs = measure([(out, ref)])
    us = time_launches([lambda i=i: launch(i) for i in idx_sets], rnd.device)
    return result(named("expert_gate_up", dtype), errs, tol_for(dtype, 1e-2),
                  f"{s.top_k} of {s.experts} experts x [2x{s.moe_inter},{s.hidden}], tile {tile}",
                  us, s.top_k * stride * 2, written, note="routed; expert ids read on device")


def check_mlp_gate_up(k, s, rnd, grid, inter: int, kind: str, dtype=torch.bfloat16) -> Result:
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    nbytes = 2 * inter * s.hidden * 2
    sets = [(rnd.randn(inter, s.hidden, std=0.02), rnd.randn(inter, s.hidden, std=0.02))
            for _ in range(rnd.copies(nbytes))]
    out = poisoned(1, inter, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(inter)
    k.expert_gate_up(x, w, s.eps, sets[0][0], sets[0][1], 0, None, out, tile)
    sync(rnd.device)
    written = not unwritten(out)
    errs = measure([(out[0], gate_up_ref(sets[0][0], sets[0][1], rms_norm_ref(x, w, s.eps), dtype))])
    us = time_launches([lambda g=g, u=u: k.expert_gate_up(x, w, s.eps, g, u, 0, None, out, tile) for g, u in sets],
                       rnd.device)
    return result(named(kind, dtype), errs, tol_for(dtype, 1e-2), f"[2x{inter},{s.hidden}], tile {tile}", us,
                  nbytes, written)


def down_ref(down, idx, topk_weight, act, shared_down, shared_act, residual, dtype):
    shared = stored(shared_down.double() @ shared_act.double(), dtype)
    if idx is None:
        return residual.double() + shared
    routed = sum(topk_weight[i].double() * stored(down[e].double() @ act[i].double(), dtype)
                 for i, e in enumerate(idx.tolist()))
    return residual.double() + stored(stored(routed, dtype) + shared, dtype)


def check_expert_down(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    down = rnd.randn(s.experts, s.hidden, s.moe_inter, std=0.02)
    shared_down = rnd.randn(s.hidden, s.shared_inter, std=0.02)
    act, shared_act = rnd.randn(s.top_k, s.moe_inter, dtype=dtype), rnd.randn(s.shared_inter, dtype=dtype)
    residual = rnd.randn(s.hidden, dtype=dtype)
    idx_sets = [rnd.distinct(s.experts, s.top_k) for _ in range(8)]
    topk_weight = rnd.uniform(s.top_k, low=0.02, high=0.3)
    out = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(s.hidden) // WARP_ROWS  # one row per warp pass here

    def launch(idx):
        k.expert_down(down, idx, topk_weight, act, shared_down, shared_act, residual, out, tile)

    launch(idx_sets[0])
    sync(rnd.device)
    written = not unwritten(out)
    errs = measure([(out, down_ref(down, idx_sets[0], topk_weight, act, shared_down, shared_act, residual, dtype))])
    us = time_launches([lambda i=i: launch(i) for i in idx_sets], rnd.device)
    nbytes = (s.top_k * s.moe_inter + s.shared_inter) * s.hidden * 2
    return result(named("expert_down", dtype), errs, tol_for(dtype, 1e-2),
                  f"{s.top_k} x [{s.hidden},{s.moe_inter}] + shared [{s.hidden},{s.shared_inter}] + residual, "
                  f"tile {tile}", us, nbytes, written, note="deterministic weighted sum, no atomics")


def check_dense_down(k, s, rnd, grid, dtype=torch.bfloat16) -> Result:
    nbytes = s.hidden * s.dense_inter * 2
    downs = [rnd.randn(s.hidden, s.dense_inter, std=0.02) for _ in range(rnd.copies(nbytes))]
    act, residual = rnd.randn(s.dense_inter, dtype=dtype), rnd.randn(s.hidden, dtype=dtype)
    out = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(s.hidden) // WARP_ROWS
    k.expert_down(None, None, None, None, downs[0], act, residual, out, tile)
    sync(rnd.device)
    written = not unwritten(out)
    errs = measure([(out, down_ref(None, None, None, None, downs[0], act, residual, dtype))])
    us = time_launches([lambda d=d: k.expert_down(None, None, None, None, d, act, residual, out, tile)
                        for d in downs], rnd.device)
    return result(named("expert_down:dense", dtype), errs, tol_for(dtype, 1e-2),
                  f"[{s.hidden},{s.dense_inter}] + residual, tile {tile}", us, nbytes, written,
                  note="layer-0 dense MLP down_proj")


def check_down_accum(k, s, rnd, grid) -> Result:
    down = rnd.randn(s.experts, s.hidden, s.moe_inter, std=0.02)
    act = rnd.randn(s.top_k, s.moe_inter, dtype=torch.float32)
    start = rnd.randn(s.hidden, dtype=torch.float32)  # what o_proj wrote into h_out before the adds
    idx_sets = [rnd.distinct(s.experts, s.top_k) for _ in range(8)]
    expert_weight = rnd.uniform(s.top_k, low=0.02, high=0.3)
    h_out = start.clone()
    tile = grid.tile_rows(s.hidden)
    stride = s.hidden * s.moe_inter

    def launch(idx):
        k.down_accum(down, stride, idx, expert_weight, act, h_out, tile)

    launch(idx_sets[0])
    sync(rnd.device)
    added = sum(expert_weight[i].double() * (down[e].double() @ act[i].double())
                for i, e in enumerate(idx_sets[0].tolist()))
    written = not unwritten(h_out)
    errs = measure([(h_out - start, added)])  # the adds alone: the start value would hide their errors
    us = time_launches([lambda i=i: launch(i) for i in idx_sets], rnd.device)
    return result("down_accum:f32", errs, F32_TOL,
                  f"{s.top_k} slots x [{s.hidden},{s.moe_inter}] added into h_out, tile {tile}",
                  us, s.top_k * stride * 2, written,
                  note="the task graph's EXPERT_DOWN_ACCUM (fp32 atomics, one slot per grid row)")


def check_lm_head_argmax(k, s, rnd, grid, dtype=torch.bfloat16) -> list[Result]:
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    W = rnd.randn(s.vocab, s.hidden, std=0.02)
    tile = grid.tile_rows(s.vocab)
    n_tiles = math.ceil(s.vocab / tile)
    logits = poisoned(s.vocab, dtype=torch.float32, device=rnd.device)
    part_v = poisoned(n_tiles, dtype=torch.float32, device=rnd.device)
    part_i = poisoned(n_tiles, dtype=torch.int32, device=rnd.device)
    k.lm_head(x, w, s.eps, W, logits, part_v, part_i, tile)
    sync(rnd.device)
    ref = W.double() @ rms_norm_ref(x, w, s.eps)
    padded = torch.full((n_tiles * tile,), -math.inf, device=rnd.device)
    padded[: s.vocab] = logits
    tile_best = padded.view(n_tiles, tile).max(-1)  # first occurrence on ties, as the kernel
    partials_ok = bool(torch.equal(part_v, tile_best.values) and
                       torch.equal(part_i.long(), tile_best.indices + torch.arange(n_tiles, device=rnd.device) * tile))
    rounded = torch.equal(logits, logits.to(torch.bfloat16).float())
    written = not (unwritten(logits) or unwritten(part_v) or unwritten(part_i))
    errs = measure([(logits, ref)])
    us = time_launches([lambda: k.lm_head(x, w, s.eps, W, logits, part_v, part_i, tile)] * 4, rnd.device)
    lm = result(named("lm_head", dtype), errs, BF16_TOL, f"[{s.vocab},{s.hidden}], {n_tiles} tiles of {tile}", us,
                s.vocab * s.hidden * 2, written, partials_ok and rounded,
                note=f"per-tile argmax partials exact={partials_ok}; logits bf16-rounded={rounded}")
    if dtype != torch.bfloat16:
        return [lm]

    # Second level over the lm_head partials, then over a raw logits vector with a planted tie.
    token = poisoned(1, dtype=torch.int32, device=rnd.device)
    tokens = poisoned(32, dtype=torch.int32, device=rnd.device)
    step = int(torch.randint(0, 32, (1,), generator=rnd.gen, device=rnd.device))
    k.argmax(part_v, token, index=part_i, tokens=tokens, step=step)
    sync(rnd.device)
    two_level_ok = token.item() == int(torch.argmax(logits)) and tokens[step].item() == token.item() \
        and int((tokens == -1).sum()) == 31
    raw = rnd.uniform(s.vocab, low=-10.0, high=10.0)
    i, j = sorted(rnd.distinct(s.vocab, 2).tolist())
    raw[i] = raw[j] = 11.0
    raw_token = poisoned(1, dtype=torch.int32, device=rnd.device)
    k.argmax(raw, raw_token)
    sync(rnd.device)
    tie_ok = raw_token.item() == i
    us = time_launches([lambda: k.argmax(part_v, token, index=part_i)] * 8, rnd.device)
    am = Result("argmax", float(abs(raw_token.item() - i)), 0.0, 0.0, bool(two_level_ok and tie_ok),
                f"{n_tiles} partials; raw [{s.vocab}] with a tie at {i},{j}", round(us[0], 2), 0, 0.0,
                not (unwritten(token) or unwritten(raw_token)),
                note=f"two-level == torch.argmax: {two_level_ok}; tie to lower index: {tie_ok}",
                us_eager=round(us[1], 2))
    return [lm, am]


def check_all(seed: int = 0, device: str = "cuda", lib=None,
              kinds: list[str] | None = None, shapes: Shapes | None = None) -> dict[str, dict]:
    """Runs every task kernel alone at the real shapes; returns {kind: Result fields}."""
    lib = lib or load()
    s = shapes or Shapes()
    on_gpu = torch.device(device).type == "cuda"
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count if on_gpu else 8
    grid = Grid(n_sm, lib.warp_size)
    f32 = torch.float32
    checks = {
        "embed": check_embed,
        "rmsnorm_gemv": check_rmsnorm_gemv,
        "rope_cache": check_rope_cache,
        "q_absorb": check_q_absorb,
        "rope_q_absorb": check_rope_q_absorb,
        "attention_chunk": check_attention_chunk,
        "attention_merge": check_attention_merge,
        "attention_merge_uv": check_attention_merge_uv,
        "wuv_oproj": check_wuv_oproj,
        "router_topk": check_router_topk,
        "router_tiles": lambda *a: check_router_topk(*a, tiled=True),
        "expert_gate_up": check_expert_gate_up,
        "expert_gate_up:shared": lambda *a: check_mlp_gate_up(*a, s.shared_inter, "expert_gate_up:shared"),
        "expert_gate_up:dense": lambda *a: check_mlp_gate_up(*a, s.dense_inter, "expert_gate_up:dense"),
        "expert_down": check_expert_down,
        "expert_down:dense": check_dense_down,
        "lm_head+argmax": check_lm_head_argmax,
        # The same tasks on fp32 activations (the task graph's F32 buffers), and its adding kind.
        "embed:f32": lambda *a: check_embed(*a, f32),
        "rmsnorm_gemv:f32": lambda *a: check_rmsnorm_gemv(*a, f32),
        "rope_cache:f32": lambda *a: check_rope_cache(*a, f32),
        "rope_q_absorb:f32": lambda *a: check_rope_q_absorb(*a, f32),
        "attention_chunk:f32": lambda *a: check_attention_chunk(*a, f32),
        "attention_merge_uv:f32": lambda *a: check_attention_merge_uv(*a, f32),
        "wuv_oproj:f32": lambda *a: check_wuv_oproj(*a, f32),
        "router_topk:f32": lambda *a: check_router_topk(*a, f32),
        "router_tiles:f32": lambda *a: check_router_topk(*a, f32, tiled=True),
        "expert_gate_up:f32": lambda *a: check_expert_gate_up(*a, f32),
        "expert_gate_up:shared:f32": lambda *a: check_mlp_gate_up(*a, s.shared_inter, "expert_gate_up:shared", f32),
        "expert_gate_up:dense:f32": lambda *a: check_mlp_gate_up(*a, s.dense_inter, "expert_gate_up:dense", f32),
        "expert_down:f32": lambda *a: check_expert_down(*a, f32),
        "expert_down:dense:f32": lambda *a: check_dense_down(*a, f32),
        "down_accum:f32": check_down_accum,
        "lm_head:f32": lambda *a: check_lm_head_argmax(*a, f32),
    }
    results: dict[str, dict] = {}
    with torch.cuda.device(device) if on_gpu else contextlib.nullcontext():
        for number, (name, fn) in enumerate(checks.items()):
            if kinds and not any(kind in name for kind in kinds):
                continue
            rnd = Inputs(seed * len(checks) + number, device)  # the same inputs whichever kinds run
            try:
                out = fn(lib, s, rnd, grid)
            except Exception as exc:  # record it and go on: one broken kind must not hide the others
                out = Result(name, math.inf, math.inf, 0.0, False, "", 0.0, 0, 0.0, False,
                             note=f"{type(exc).__name__}: {exc}")
            for r in out if isinstance(out, list) else [out]:
                results[r.kind] = asdict(r)
            if on_gpu:
                torch.cuda.empty_cache()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", help="path of libfleet_kernels.so (default: build for this GPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", help="comma-separated kinds, or parts of their names (default: all)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    lib = load(args.lib) if args.lib else load()
    results = check_all(args.seed, "cuda", lib, args.kinds.split(",") if args.kinds else None)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": args.seed, "kernels": results}, f, indent=2)
    print(f"{'kind':22s} {'pass':5s} {'max_rel':>9s} {'tol':>7s} {'us':>8s} {'eager':>8s} {'GB/s':>7s}  shape")
    for kind, r in results.items():
        print(f"{kind:22s} {str(r['passed']):5s} {r['max_rel']:9.2e} {r['tol']:7.0e} {r['us']:8.2f} "
              f"{r['us_eager']:8.2f} {r['gbps']:7.1f}  {r['shape']}  {r['note']}")
    return 0 if all(r["passed"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

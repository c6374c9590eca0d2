"""fp64 references of the task kernels: products in fp64; every stored activation takes the
kernel's storage type, so a bf16 run rounds where HF's DeepseekV2 rounds and an fp32 run (the task
graph's F32 buffers) rounds nowhere but the cache and the logits."""
import math

import torch
import torch.nn.functional as F

from fleet_decode.kernels.checks.harness import Inputs, Shapes


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


def rope_tables(s: Shapes, rnd: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Random angles with YaRN's attention factor folded into cos/sin, [cache_len, rope/2] fp32."""
    angle = rnd.uniform(s.cache_len, s.rope // 2, high=2 * math.pi)
    factor = s.rope_attention_factor
    return (torch.cos(angle) * factor).contiguous(), (torch.sin(angle) * factor).contiguous()


def rope_ref(x: torch.Tensor, cos_p: torch.Tensor, sin_p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """HF apply_rotary_emb: adjacent pairs as complex numbers, fp32, stored as dtype."""
    pairs = x.float().view(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return stored(torch.stack([a * cos_p - b * sin_p, a * sin_p + b * cos_p], -1).flatten(-2), dtype)


def q_absorb_ref(q, kv_b, s):
    w_uk = kv_b.view(s.heads, s.nope + s.v_head, s.kv_lora)[:, : s.nope].double()
    return torch.einsum("hd,hdc->hc", q.view(s.heads, -1)[:, : s.nope].double(), w_uk)


def attention_partials_ref(q_lat, q_pe, ckv, kpe, n_pos, chunk_len, scale):
    scores = scale * (q_lat.double() @ ckv[:n_pos].double().T + q_pe.double() @ kpe[:n_pos].double().T)
    ms, ls, os_ = [], [], []
    for t0 in range(0, n_pos, chunk_len):
        t1 = min(t0 + chunk_len, n_pos)
        m = scores[:, t0:t1].max(-1).values
        prob = torch.exp(scores[:, t0:t1] - m[:, None])
        ms.append(m), ls.append(prob.sum(-1)), os_.append(prob @ ckv[t0:t1].double())
    return torch.stack(ms), torch.stack(ls), torch.stack(os_)


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


def gate_up_ref(gate, up, xn, dtype):
    return silu_mul_ref(gate.double() @ xn, up.double() @ xn, dtype)

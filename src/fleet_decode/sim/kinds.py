"""What each task kind computes, in torch, over the simulator's memory.

One function per kind, registered under its Kind (fleet_decode.task_kinds), reading its operands by
the names format.OPERANDS gives them; all products accumulate in fp32 with the reference's own
functions (fleet_decode.model.reference), so the graph's tiling and flash-decoding split are the only
differences from the reference decode step.
"""

import torch
import torch.nn.functional as F

from fleet_decode.fixed_point import from_fixed_point, to_fixed_point
from fleet_decode.graph.format import Kind, OPERANDS, pool_pieces
from fleet_decode.model.reference import linear, rms_norm, rope, route
from fleet_decode.sampling import sample
from fleet_decode.task_kinds import REGISTRY, missing, simulates


class TaskContext:
    """One task at one step: its operands by name, the step's position, and the read/write checks."""

    def __init__(self, sim, task_index, step, knowledge):
        self.sim, self.index, self.step, self.knowledge = sim, task_index, step, knowledge
        self.task = sim.graph.tasks[task_index]
        self.c = sim.graph.constants
        self.pos = sim.pos0 + step
        bufs, wts, _ = OPERANDS[self.task.kind]
        self._buf = dict(zip(bufs, self.task.buffers))
        self._wt = dict(zip(wts, self.task.weights))

    def buffer(self, operand) -> int:
        return self._buf[operand]

    def size(self, operand):
        return self.sim.graph.buffers[self._buf[operand]].numel

    def read(self, operand, lo=0, hi=None) -> torch.Tensor:
        hi = self.size(operand) if hi is None else hi
        return self.sim.memory.read(self.index, self.step, self.knowledge, self._buf[operand], lo, hi)

    def write(self, operand, lo, values):
        self.sim.memory.write(self.index, self.step, self.knowledge, self._buf[operand], lo, lo + values.numel(), values)

    def add(self, operand, lo, values):
        self.sim.memory.write(self.index, self.step, self.knowledge, self._buf[operand], lo, lo + values.numel(), values,
                              accumulate=True)

    def write_for_next_step(self, operand, lo, values):
        """The value next step's adders start from (a fixed-point accumulator's zero)."""
        self.sim.memory.write(self.index, self.step, self.knowledge, self._buf[operand], lo, lo + values.numel(), values,
                              for_next_step=True)

    def weight(self, operand) -> torch.Tensor:
        return self.sim.weights[self._wt[operand]]

    def arg(self, i):
        return self.task.args[i]


def _normed(ctx):
    return rms_norm(ctx.read("x").float(), ctx.weight("norm"), ctx.c.rms_eps)


@simulates(Kind.EMBED)
def embed(ctx):
    token = int(ctx.read("tokens", ctx.step, ctx.step + 1))
    c0, c1 = ctx.task.tile
    ctx.write("out", c0, ctx.weight("embed")[token, c0:c1].float())


@simulates(Kind.RMSNORM_GEMV)
def rmsnorm_gemv(ctx):
    r0, r1 = ctx.task.tile
    ctx.write("y", r0, linear(_normed(ctx), ctx.weight("matrix")[r0:r1]))


def _per_head(ctx):
    c = ctx.c
    return ctx.weight("kv_b").view(c.n_heads, c.qk_nope + c.v_head, c.kv_rank)


@simulates(Kind.ROPE_Q_ABSORB)
def rope_q_absorb(ctx):
    """Units [b, e) of (head, column block): the block's columns of q_lat[h]; the head's q_pe with its
    first block."""
    c, (u0, u1), parts = ctx.c, ctx.task.tile, ctx.arg(0)
    width, cols = c.qk_nope + c.qk_rope, c.kv_rank // parts
    w_uk = ctx.weight("w_uk").view(c.n_heads * parts, c.qk_nope, cols)
    cos, sin = ctx.weight("rope_cos")[ctx.pos], ctx.weight("rope_sin")[ctx.pos]
    for u in range(u0, u1):
        h, block = divmod(u, parts)
        q = ctx.read("q", h * width, (h + 1) * width)
        ctx.write("q_lat", h * c.kv_rank + block * cols, q[:c.qk_nope].float() @ w_uk[u].float())
        if block == 0:
            ctx.write("q_pe", h * c.qk_rope, rope(q[None, c.qk_nope:], cos, sin).reshape(-1))


@simulates(Kind.CACHE_APPEND)
def cache_append(ctx):
    c, pos = ctx.c, ctx.pos
    kv = ctx.read("kv_a").float()
    cos, sin = ctx.weight("rope_cos")[pos], ctx.weight("rope_sin")[pos]
    ckv = rms_norm(kv[:c.kv_rank], ctx.weight("kv_norm"), c.rms_eps)
    ctx.write("ckv", pos * c.kv_rank, ckv)
    ctx.write("kpe", pos * c.qk_rope, rope(kv[c.kv_rank:], cos, sin))


@simulates(Kind.ATTN_CHUNK)
def attn_chunk(ctx):
    """Flash-decoding partial: per head the chunk's max score m, sum of exp(score - m) l, and the
    unnormalised sum of exp(score - m)·c_kv o. Positions past the current one are not attended."""
    c, (p0, p1), (h0, h1) = ctx.c, ctx.task.tile, (ctx.arg(0), ctx.arg(1))
    H, R, chunk = h1 - h0, c.kv_rank, ctx.task.slot
    end = min(p1, ctx.pos + 1)
    q_lat = ctx.read("q_lat", h0 * R, h1 * R).view(H, R).float()
    q_pe = ctx.read("q_pe", h0 * c.qk_rope, h1 * c.qk_rope).view(H, c.qk_rope).float()
    if end > p0:
        ckv = ctx.read("ckv", p0 * R, end * R).view(-1, R).float()
        kpe = ctx.read("kpe", p0 * c.qk_rope, end * c.qk_rope).view(-1, c.qk_rope).float()
        scores = c.attn_scale * (q_lat @ ckv.T + q_pe @ kpe.T)
        m = scores.max(dim=-1).values
        p = torch.exp(scores - m[:, None])
        l, o = p.sum(dim=-1), p @ ckv
    else:
        m, l, o = torch.full((H,), -torch.inf), torch.zeros(H), torch.zeros(H, R)
    row = chunk * c.n_heads + h0  # the chunk's partials row, from this task's first head
    ctx.write("part_o", row * R, o.reshape(-1))
    ctx.write("part_ml", row * 2, torch.stack((m, l), dim=-1).reshape(-1))


@simulates(Kind.ATTN_MERGE_UV)
def attn_merge_uv(ctx):
    c, (h0, h1) = ctx.c, ctx.task.tile
    out_lat = torch.stack([_merged(ctx, h, 0, c.kv_rank) for h in range(h0, h1)])
    part_rows = c.v_head // ctx.arg(1)
    v0 = ctx.task.slot * part_rows  # the task's part of each head's W_UV rows
    w_uv = _per_head(ctx)[h0:h1, c.qk_nope + v0:c.qk_nope + v0 + part_rows]
    out = torch.einsum("hc,hvc->hv", out_lat, w_uv.float())
    for h in range(h0, h1):
        ctx.write("attn_out", h * c.v_head + v0, out[h - h0])


def _merged(ctx, h, col0, col1):
    """Head h's merge of the chunks' partials over latent columns [col0, col1) (fp32)."""
    c = ctx.c
    H, R, n = c.n_heads, c.kv_rank, ctx.arg(0)
    o = torch.stack([ctx.read("part_o", (k * H + h) * R + col0, (k * H + h) * R + col1) for k in range(n)])
    ml = torch.stack([ctx.read("part_ml", (k * H + h) * 2, (k * H + h) * 2 + 2) for k in range(n)])
    m, l = ml[:, 0], ml[:, 1]
    scale = torch.exp(m - m.max())  # empty chunks have m = -inf and weigh 0
    return (scale[:, None] * o).sum(dim=0) / (scale * l).sum()


@simulates(Kind.ATTN_MERGE_COLS)
def attn_merge_cols(ctx):
    """A head's merge over one block of latent columns, times those columns of its W_UV: one of
    lat_parts partial attn_out vectors (o_proj adds them)."""
    c, h, part, parts = ctx.c, ctx.task.tile[0], ctx.task.slot, ctx.arg(1)
    cols = c.kv_rank // parts
    out_lat = _merged(ctx, h, part * cols, (part + 1) * cols)
    first = (h * parts + part) * c.v_head  # the block's rows in w_uv_parts (graph.derived)
    w_uv = ctx.weight("w_uv_parts")[first:first + c.v_head]
    ctx.write("attn_parts", (part * c.n_heads + h) * c.v_head, w_uv.float() @ out_lat)


def _attn_out(ctx):
    """attn_out, or the sum of its lat_parts partial vectors in part order (ATTN_MERGE_COLS)."""
    x = ctx.read("attn_out").float()
    n = ctx.c.n_heads * ctx.c.v_head
    total = x[:n].clone()
    for part in range(1, x.numel() // n):
        total += x[part * n:(part + 1) * n]
    return total


@simulates(Kind.O_PROJ_RESIDUAL)
def o_proj_residual(ctx):
    r0, r1 = ctx.task.tile
    projected = linear(_attn_out(ctx), ctx.weight("o_proj")[r0:r1])
    out = ctx.read("residual", r0, r1).float() + projected
    ctx.write("h_attn", r0, out)
    ctx.write("h_out", r0, out)  # the start of the sum the MLP tiles add into
    return out


@simulates(Kind.O_PROJ_ROUTER)
def o_proj_router(ctx):
    r0, r1 = ctx.task.tile
    h = o_proj_residual(ctx)
    dots = ctx.weight("router")[:, r0:r1].float() @ (ctx.weight("norm")[r0:r1].float() * h)
    ctx.write("router_parts", ctx.task.slot * (ctx.c.n_experts + 1), torch.cat((dots, (h * h).sum()[None])))


@simulates(Kind.ROUTER)
def router(ctx):
    e0, e1 = ctx.task.tile
    ctx.write("logits", e0, linear(_normed(ctx), ctx.weight("router")[e0:e1]))


@simulates(Kind.ROUTE_TOPK)
def route_topk(ctx, logits=None):
    logits = ctx.read("logits").float() if logits is None else logits
    weights, experts, _ = route(logits, ctx.c.top_k, ctx.c.routed_scaling)
    ctx.write("route_idx", 0, experts.to(torch.int32))
    ctx.write("route_w", 0, weights.float())


@simulates(Kind.ROUTE_PARTS_TOPK)
def route_parts_topk(ctx):
    E, n = ctx.c.n_experts, ctx.arg(0)
    sums = ctx.read("router_parts", 0, n * (E + 1)).view(n, E + 1).float().sum(dim=0)
    route_topk(ctx, sums[:E] * torch.rsqrt(sums[E] / ctx.c.hidden + ctx.c.rms_eps))


def _swiglu(ctx, gate, up):
    x = _normed(ctx)
    return F.silu(linear(x, gate)) * linear(x, up)


@simulates(Kind.GATE_UP)
def gate_up(ctx):
    r0, r1 = ctx.task.tile
    ctx.write("act", r0, _swiglu(ctx, ctx.weight("gate")[r0:r1], ctx.weight("up")[r0:r1]))


@simulates(Kind.DOWN_ACCUM)
def down_accum(ctx):
    r0, r1 = ctx.task.tile
    ctx.add("h_out", r0, linear(ctx.read("act"), ctx.weight("down")[r0:r1]))


@simulates(Kind.EXPERT_GATE_UP)
def expert_gate_up(ctx):
    r0, r1, k, inter = *ctx.task.tile, ctx.task.slot, ctx.c.moe_inter
    expert = ctx.weight("gate_up")[int(ctx.read("route_idx", k, k + 1))]
    ctx.write("act", r0, _swiglu(ctx, expert[r0:r1], expert[inter + r0:inter + r1]))


@simulates(Kind.EXPERT_DOWN_ACCUM)
def expert_down_accum(ctx):
    r0, r1, k = *ctx.task.tile, ctx.task.slot
    expert = int(ctx.read("route_idx", k, k + 1))
    weight = ctx.read("route_w", k, k + 1).float()
    ctx.add("h_out", r0, weight * linear(ctx.read("act"), ctx.weight("down")[expert, r0:r1]))


def _partial(ctx, gate, up, down_t_rows, weight=1.0):
    """A split-K slice's act, then the same rows of the transposed down matrix: its partial of the MLP's output."""
    return weight * linear(_swiglu(ctx, gate, up), down_t_rows.T)


def _put_partial(ctx, partial):
    """A slice's partial as its own row, or added in fixed point into the layer's accumulator."""
    if ctx.arg(1):
        ctx.add("partials", 0, to_fixed_point(partial))
    else:
        ctx.write("partials", ctx.arg(0) * ctx.c.hidden, partial)


def _routed_partial(ctx, k, r0, r1):
    """Rows [r0, r1) of the expert the top-k put in slot k, times its route weight."""
    inter = ctx.c.moe_inter
    e = int(ctx.read("route_idx", k, k + 1))
    expert = ctx.weight("gate_up")[e]
    return _partial(ctx, expert[r0:r1], expert[inter + r0:inter + r1], ctx.weight("down_t")[e, r0:r1],
                    ctx.read("route_w", k, k + 1).float())


@simulates(Kind.GATE_UP_DOWN)
def gate_up_down(ctx):
    r0, r1 = ctx.task.tile
    _put_partial(ctx, _partial(ctx, ctx.weight("gate")[r0:r1], ctx.weight("up")[r0:r1], ctx.weight("down_t")[r0:r1]))


@simulates(Kind.EXPERT_GATE_UP_DOWN)
def expert_gate_up_down(ctx):
    _put_partial(ctx, _routed_partial(ctx, ctx.task.slot, *ctx.task.tile))


@simulates(Kind.EXPERT_POOL)
def expert_pool(ctx):
    """The pieces the pool hands this taker (Simulator.take_pieces, as the device's counter would), each a
    routed slice of slot p // per_slot added in fixed point into the layer's accumulator."""
    per_slot, n_pieces = pool_pieces(ctx.task, ctx.c.moe_inter, ctx.c.top_k)
    rows = ctx.task.tile[1]
    for p in ctx.sim.take_pieces(ctx.index, ctx.step, n_pieces):
        r0 = p % per_slot * rows
        ctx.add("acc", 0, to_fixed_point(_routed_partial(ctx, p // per_slot, r0, min(r0 + rows, ctx.c.moe_inter))))


@simulates(Kind.SUM_PARTIALS)
def sum_partials(ctx):
    """The partial rows added in row order (the whole buffer is read: every slice must be done)."""
    r0, r1 = ctx.task.tile
    rows = ctx.read("partials").float().view(ctx.arg(0), ctx.c.hidden)
    ctx.add("h_out", r0, rows[:, r0:r1].sum(0))


@simulates(Kind.SUM_FIXED_POINT)
def sum_fixed_point(ctx):
    """The accumulator's rows (every slice must be done) added into h_out, then zeroed for next step's slices."""
    r0, r1 = ctx.task.tile
    ctx.add("h_out", r0, from_fixed_point(ctx.read("acc", r0, r1)))
    ctx.write_for_next_step("acc", r0, torch.zeros(r1 - r0, dtype=torch.int64))


@simulates(Kind.LM_HEAD)
def lm_head(ctx):
    """Logits rows of this step, rounded to the model dtype as HF's lm_head output is (so ties break
    the same way), and this tile's first maximum for the argmax."""
    r0, r1, vocab = *ctx.task.tile, ctx.c.vocab
    logits = linear(_normed(ctx), ctx.weight("lm_head")[r0:r1]).to(ctx.sim.model_dtype).float()
    ctx.write("logits", ctx.step * vocab + r0, logits)
    best = int(torch.argmax(logits))
    ctx.write("part_max", ctx.task.slot, logits[best:best + 1])
    ctx.write("part_idx", ctx.task.slot, torch.tensor([r0 + best], dtype=torch.int32))


@simulates(Kind.ARGMAX)
def argmax(ctx):
    """The first maximum over the tiles' first maxima: torch.argmax's answer over the whole row. With a
    sampling mode given to the Simulator, a seeded draw from the step's logits row instead
    (fleet_decode.sampling, what hip/tasks/sampling.h does on the device)."""
    sampling = ctx.sim.sampling
    if sampling is None or sampling.greedy:
        n = ctx.arg(0)
        best = int(torch.argmax(ctx.read("part_max", 0, n)))
        token = ctx.read("part_idx", best, best + 1).clone()
    else:
        # the logits row is ordered before this task by the same lm_head event as the tiles' maxima
        vocab, logits = ctx.c.vocab, ctx.sim.graph.buffer_index("logits")
        row = ctx.sim.memory.read(ctx.index, ctx.step, ctx.knowledge, logits, ctx.step * vocab, (ctx.step + 1) * vocab)
        token = torch.tensor([sample(row, sampling, position=ctx.pos + 1)], dtype=torch.int32)
    ctx.write("tokens", ctx.step + 1, token)
    if int(token) in ctx.sim.stop_ids:
        ctx.sim.stop(ctx.step)


RUN = {kind: entry.simulate for kind, entry in REGISTRY.items()}
assert not missing("simulate"), f"task kinds without a simulator implementation: {missing('simulate')}"

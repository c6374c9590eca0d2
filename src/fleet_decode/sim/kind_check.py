"""Milestone M1 on the sim backend: each task kind run alone by the simulator vs an independent torch answer.

    from fleet_decode.model import load_model
    from fleet_decode.sim import check_task_kinds
    errors = check_task_kinds(load_model("tiny"))   # {"RMSNORM_GEMV": {"max_abs": ..., ...}, ...}

One check per kind, registered under its Kind (fleet_decode.task_kinds). Each gets seeded random
inputs, written by the host into a fresh simulator, and runs one of its tiles; the expected answer comes from Hugging Face's own modules (norms, linears, rotary embedding,
router, experts) or, where HF has no piece of that shape (flash-decoding partials), from the plain
softmax definition.
"""

import dataclasses
import functools

import torch
import torch.nn.functional as F
from transformers.models.deepseek_v2.modeling_deepseek_v2 import apply_rotary_emb

from fleet_decode.fixed_point import from_fixed_point
from fleet_decode.graph.build import build_graph
from fleet_decode.graph.plan import SPLIT_K_SUMS
from fleet_decode.graph.format import Kind
from fleet_decode.sim.decode import make_simulator, sim_plan
from fleet_decode.sim.kinds import RUN, TaskContext
from fleet_decode.task_kinds import REGISTRY, checks_on_simulator, missing

KNOW_ALL = -1  # every bit set: a lone task is ordered after everything the host wrote


class _Case:
    """One task of one kind in a fresh simulator, with host-written operands."""

    def __init__(self, model, graph, kind, pos0, name_has=""):
        self.sim = make_simulator(model, graph, pos0, "round-robin", 0)
        g = self.sim.graph
        self.index = next(i for i, t in enumerate(g.tasks) if t.kind == kind and name_has in t.name)
        self.task = g.tasks[self.index]
        self.ctx = TaskContext(self.sim, self.index, 0, KNOW_ALL)

    def put(self, operand, values, at=0):
        self.sim.memory.host_write(self.ctx.buffer(operand), at, values)

    def run(self):
        RUN[self.task.kind](self.ctx)

    def out(self, operand):
        return self.sim.memory.data[self.ctx.buffer(operand)]


def _error(got, want):
    got, want = got.float().reshape(-1), want.float().reshape(-1)
    max_abs = float((got - want).abs().max())
    return {"max_abs": max_abs, "max_rel": max_abs / max(float(want.abs().max()), 1e-30), "shape": list(want.shape)}


def _worst(*errors):
    return max(errors, key=lambda e: e["max_rel"])


def _rotate(x, model, pos):
    """HF's rotary embedding of one position applied to x [n, rope] (as the query side)."""
    freqs = model.model.rotary_emb(x, torch.tensor([[pos]]))
    out, _ = apply_rotary_emb(x[None, :, None, :], x[None, :1, None, :], freqs)
    return out[0, :, 0, :]


class SimCheck:
    """What every kind's check shares: the model, a small graph, the random stream, HF's modules."""

    positions = 24

    def __init__(self, hf_model, seed):
        self.model, self.config = hf_model, hf_model.config
        self.gen = torch.Generator().manual_seed(seed)
        self.graph = build_graph(self.config, sim_plan(1, self.positions, 1))
        self.pos0 = self.positions - 1  # the last position: every attention chunk is full
        self.c = self.graph.constants
        self.dense = hf_model.model.layers[0]
        self.moe = hf_model.model.layers[self.config.first_k_dense_replace]
        self.moe_layer = f"L{self.config.first_k_dense_replace}."
        c = self.c
        # [latent r, head, nope|v]: kv_b_proj as HF holds it, read back through the identity
        self.kv_b = self.dense.self_attn.kv_b_proj(torch.eye(c.kv_rank)).view(c.kv_rank, c.n_heads, c.qk_nope + c.v_head)

    def rand(self, *shape):
        return torch.randn(*shape, generator=self.gen)

    def case(self, kind, name_has=""):
        return _Case(self.model, self.graph, kind, self.pos0, name_has)

    def split_k_case(self, kind, name_has=""):
        """A task of the split-K expert tiling (its own graph: the default tiling has none)."""
        return self.plan_case(kind, name_has, moe_tiles="split-k")

    def plan_case(self, kind, name_has="", **plan_options):
        """A task of a graph built with these plan options (kinds the default plan does not emit)."""
        plan = dataclasses.replace(sim_plan(1, self.positions, 1), **plan_options)
        return _Case(self.model, build_graph(self.config, plan), kind, self.pos0, name_has)

    @functools.cached_property
    def attention(self):
        """(q_lat, q_pe, ckv, kpe, scores [heads, positions]) with HF's softmax scale."""
        c = self.c
        q_lat, q_pe = self.rand(c.n_heads, c.kv_rank), self.rand(c.n_heads, c.qk_rope)
        ckv, kpe = self.rand(self.positions, c.kv_rank), self.rand(self.positions, c.qk_rope)
        scores = self.dense.self_attn.scaling * (q_lat @ ckv.T + q_pe @ kpe.T)
        return q_lat, q_pe, ckv, kpe, scores

    @functools.cached_property
    def routed(self):
        """(chosen experts in ascending order, their weights)."""
        chosen = torch.randperm(self.c.n_experts, generator=self.gen)[:self.c.top_k].sort().values
        return chosen, torch.rand(self.c.top_k, generator=self.gen)


@checks_on_simulator(Kind.EMBED)
def _embed(t):
    k = t.case(Kind.EMBED)
    token = int(torch.randint(t.c.vocab, (1,), generator=t.gen))
    k.put("tokens", torch.tensor([token], dtype=torch.int32))
    k.run()
    return _error(k.out("out"), t.model.model.embed_tokens(torch.tensor(token)))


@checks_on_simulator(Kind.RMSNORM_GEMV)
def _rmsnorm_gemv(t):
    k = t.case(Kind.RMSNORM_GEMV, "L0.q_proj")
    x = t.rand(t.c.hidden)
    k.put("x", x)
    k.run()
    r0, r1 = k.task.tile
    return _error(k.out("y")[r0:r1], t.dense.self_attn.q_proj(t.dense.input_layernorm(x))[r0:r1])


@checks_on_simulator(Kind.ROPE_Q_ABSORB)
def _rope_q_absorb(t):
    c = t.c
    H, R, nope, rope = c.n_heads, c.kv_rank, c.qk_nope, c.qk_rope
    k = t.case(Kind.ROPE_Q_ABSORB, "L0.")
    q = t.rand(H, nope + rope)
    k.put("q", q)
    k.run()
    parts, (u0, u1) = k.task.args[0], k.task.tile  # units of (head, column block); q_pe with block 0
    cols = R // parts
    want_lat = torch.einsum("hd,rhd->hr", q[:, :nope], t.kv_b[:, :, :nope]).view(H * parts, cols)
    want_pe = _rotate(q[:, nope:], t.model, t.pos0)
    heads = sorted({u // parts for u in range(u0, u1) if u % parts == 0})
    return _worst(_error(k.out("q_lat").view(H * parts, cols)[u0:u1], want_lat[u0:u1]),
                  _error(k.out("q_pe").view(H, rope)[heads], want_pe[heads]))


@checks_on_simulator(Kind.CACHE_APPEND)
def _cache_append(t):
    R, rope, attn = t.c.kv_rank, t.c.qk_rope, t.dense.self_attn
    k = t.case(Kind.CACHE_APPEND, "L0.")
    kv = t.rand(R + rope)
    k.put("kv_a", kv)
    k.run()
    return _worst(_error(k.out("ckv").view(-1, R)[t.pos0], attn.kv_a_layernorm(kv[:R])),
                  _error(k.out("kpe").view(-1, rope)[t.pos0], _rotate(kv[None, R:], t.model, t.pos0)[0]))


@checks_on_simulator(Kind.ATTN_CHUNK)
def _attn_chunk(t):
    H, R = t.c.n_heads, t.c.kv_rank
    q_lat, q_pe, ckv, kpe, scores = t.attention
    k = t.case(Kind.ATTN_CHUNK, "L0.")
    for name, value in (("q_lat", q_lat), ("q_pe", q_pe), ("ckv", ckv), ("kpe", kpe)):
        k.put(name, value)
    k.run()
    (p0, p1), (h0, h1) = k.task.tile, k.task.args
    o = k.out("part_o").view(-1, H, R)[k.task.slot, h0:h1]
    ml = k.out("part_ml").view(-1, H, 2)[k.task.slot, h0:h1]
    return _worst(_error(o / ml[:, 1:], torch.softmax(scores[h0:h1, p0:p1], -1) @ ckv[p0:p1]),
                  _error(ml[:, 0], scores[h0:h1, p0:p1].max(-1).values))


def _run_on_partials(k, t):
    """Runs a merge case on the chunk partials of layer 0's attention (from the exact scores)."""
    H, R = t.c.n_heads, t.c.kv_rank
    _, _, ckv, _, scores = t.attention
    chunks = [task.tile for task in k.sim.graph.tasks if task.kind == Kind.ATTN_CHUNK and task.layer == 0]
    for i, (p0, p1) in enumerate(chunks):
        s = scores[:, p0:p1]
        m = s.max(-1).values
        e = torch.exp(s - m[:, None])
        k.put("part_o", e @ ckv[p0:p1], at=i * H * R)
        k.put("part_ml", torch.stack((m, e.sum(-1)), -1), at=i * H * 2)
    k.run()


@checks_on_simulator(Kind.ATTN_MERGE_UV)
def _attn_merge_uv(t):
    H, nope, v = t.c.n_heads, t.c.qk_nope, t.c.v_head
    _, _, ckv, _, scores = t.attention
    k = t.case(Kind.ATTN_MERGE_UV, "L0.")
    _run_on_partials(k, t)
    (h0, h1), part_rows = k.task.tile, v // k.task.args[1]
    v0 = nope + k.task.slot * part_rows
    out_lat = torch.softmax(scores, -1) @ ckv
    want = torch.einsum("hr,rhv->hv", out_lat[h0:h1], t.kv_b[:, h0:h1, v0:v0 + part_rows])
    return _error(k.out("attn_out").view(H, v)[h0:h1, v0 - nope:v0 - nope + part_rows], want)


@checks_on_simulator(Kind.ATTN_MERGE_COLS)
def _attn_merge_cols(t):
    H, R, nope = t.c.n_heads, t.c.kv_rank, t.c.qk_nope
    _, _, ckv, _, scores = t.attention
    k = t.plan_case(Kind.ATTN_MERGE_COLS, "L0.attn_merge[1.c1]", merge_lat_parts=2, heads_per_tile=1)
    _run_on_partials(k, t)
    h, part, parts = k.task.tile[0], k.task.slot, k.task.args[1]
    c0, c1 = part * R // parts, (part + 1) * R // parts
    out_lat = (torch.softmax(scores, -1) @ ckv)[h, c0:c1]
    want = t.kv_b[c0:c1, h, nope:].T @ out_lat  # this block's columns' share of the head's attn_out
    v = t.c.v_head
    return _error(k.out("attn_parts")[(part * H + h) * v:(part * H + h + 1) * v], want)


@checks_on_simulator(Kind.O_PROJ_RESIDUAL)
def _o_proj_residual(t):
    """attn_out whole, and in two partial vectors (after ATTN_MERGE_COLS) that the tile adds."""
    errors = []
    for parts in (1, 2):
        k = (t.case(Kind.O_PROJ_RESIDUAL, "L0.") if parts == 1 else
             t.plan_case(Kind.O_PROJ_RESIDUAL, "L0.", merge_lat_parts=parts, heads_per_tile=1))
        pieces, residual = [t.rand(t.c.n_heads * t.c.v_head) for _ in range(parts)], t.rand(t.c.hidden)
        k.put("attn_out", torch.cat(pieces))
        k.put("residual", residual)
        k.run()
        r0, r1 = k.task.tile
        want = (residual + t.dense.self_attn.o_proj(sum(pieces)))[r0:r1]
        errors += [_error(k.out("h_attn")[r0:r1], want), _error(k.out("h_out")[r0:r1], want)]
    return _worst(*errors)


def _router_parts(t, h, r0, r1):
    """One o_proj tile's row of router_parts, from h_attn's rows [r0, r1) and the MoE layer's router."""
    gate, norm = t.moe.mlp.gate.weight.float(), t.moe.post_attention_layernorm.weight.float()
    return torch.cat((gate[:, r0:r1] @ (norm[r0:r1] * h[r0:r1]), (h[r0:r1] ** 2).sum()[None]))


@checks_on_simulator(Kind.O_PROJ_ROUTER)
def _o_proj_router(t):
    k = t.plan_case(Kind.O_PROJ_ROUTER, t.moe_layer + "o_proj[1]", router_in_o_proj=True)
    attn_out, residual = t.rand(t.c.n_heads * t.c.v_head), t.rand(t.c.hidden)
    k.put("attn_out", attn_out)
    k.put("residual", residual)
    k.run()
    (r0, r1), row = k.task.tile, k.task.slot * (t.c.n_experts + 1)
    h = residual + t.moe.self_attn.o_proj(attn_out)
    return _worst(_error(k.out("h_attn")[r0:r1], h[r0:r1]), _error(k.out("h_out")[r0:r1], h[r0:r1]),
                  _error(k.out("router_parts")[row:row + t.c.n_experts + 1], _router_parts(t, h, r0, r1)))


@checks_on_simulator(Kind.ROUTE_PARTS_TOPK)
def _route_parts_topk(t):
    k = t.plan_case(Kind.ROUTE_PARTS_TOPK, t.moe_layer, router_in_o_proj=True)
    x = t.rand(t.c.hidden)
    tiles = [task for task in k.sim.graph.tasks if task.kind == Kind.O_PROJ_ROUTER and task.name.startswith(t.moe_layer)]
    for task in tiles:
        k.put("router_parts", _router_parts(t, x, *task.tile), at=task.slot * (t.c.n_experts + 1))
    k.run()
    _, weights, experts = _hf_route(t, x)
    order = experts.argsort()
    return _worst(_error(k.out("route_idx"), experts[order]), _error(k.out("route_w"), weights[order]))


def _hf_route(t, x):
    """(router logits, top-k weights, top-k experts) of HF's MoE gate on x after the layer's norm."""
    logits, weights, experts = t.moe.mlp.gate(t.moe.post_attention_layernorm(x)[None])
    return logits[0], weights[0], experts[0]


@checks_on_simulator(Kind.ROUTER)
def _router(t):
    k = t.case(Kind.ROUTER, t.moe_layer)
    x = t.rand(t.c.hidden)
    k.put("x", x)
    k.run()
    e0, e1 = k.task.tile
    return _error(k.out("logits")[e0:e1], _hf_route(t, x)[0][e0:e1])


@checks_on_simulator(Kind.ROUTE_TOPK)
def _route_topk(t):
    logits, weights, experts = _hf_route(t, t.rand(t.c.hidden))
    k = t.case(Kind.ROUTE_TOPK, t.moe_layer)
    k.put("logits", logits)
    k.run()
    order = experts.argsort()
    return _worst(_error(k.out("route_idx"), experts[order]), _error(k.out("route_w"), weights[order]))


@checks_on_simulator(Kind.GATE_UP)
def _gate_up(t):
    k = t.case(Kind.GATE_UP, "L0.")
    x = t.rand(t.c.hidden)
    k.put("x", x)
    k.run()
    r0, r1 = k.task.tile
    mlp, xn = t.dense.mlp, t.dense.post_attention_layernorm(x)
    return _error(k.out("act")[r0:r1], (mlp.act_fn(mlp.gate_proj(xn)) * mlp.up_proj(xn))[r0:r1])


@checks_on_simulator(Kind.DOWN_ACCUM)
def _down_accum(t):
    k = t.case(Kind.DOWN_ACCUM, "L0.")
    act, start = t.rand(t.config.intermediate_size), t.rand(t.c.hidden)
    k.put("act", act)
    k.put("h_out", start)
    k.run()
    r0, r1 = k.task.tile
    return _error(k.out("h_out")[r0:r1], (start + t.dense.mlp.down_proj(act))[r0:r1])


def _hf_routed_act(t, x, expert):
    """HF's act of one routed expert (its full intermediate vector) for the MoE layer's input x."""
    experts = t.moe.mlp.experts
    gate, up = F.linear(t.moe.post_attention_layernorm(x), experts.gate_up_proj[expert]).chunk(2, dim=-1)
    return experts.act_fn(gate) * up


@checks_on_simulator(Kind.EXPERT_GATE_UP)
def _expert_gate_up(t):
    chosen, _ = t.routed
    k = t.case(Kind.EXPERT_GATE_UP, t.moe_layer + "expert_gate_up.1")
    x = t.rand(t.c.hidden)
    k.put("x", x)
    k.put("route_idx", chosen.to(torch.int32))
    k.run()
    r0, r1 = k.task.tile
    return _error(k.out("act")[r0:r1], _hf_routed_act(t, x, chosen[1])[r0:r1])


@checks_on_simulator(Kind.EXPERT_DOWN_ACCUM)
def _expert_down_accum(t):
    chosen, route_w = t.routed
    k = t.case(Kind.EXPERT_DOWN_ACCUM, t.moe_layer + "expert_down.1")
    act, start = t.rand(t.c.moe_inter), t.rand(t.c.hidden)
    for name, value in (("act", act), ("h_out", start), ("route_idx", chosen.to(torch.int32)), ("route_w", route_w)):
        k.put(name, value)
    k.run()
    r0, r1 = k.task.tile
    want = start + route_w[1] * F.linear(act, t.moe.mlp.experts.down_proj[chosen[1]])
    return _error(k.out("h_out")[r0:r1], want[r0:r1])


def _slice_partial(k, t):
    """A split-K slice's partial row: HF's expert MLP on an input whose other intermediate rows are
    cut off (act outside the slice zeroed through the down matrix's columns). In the fixed-point form
    the accumulator (the host's zero plus this one slice) read back."""
    if k.task.args[1]:
        return from_fixed_point(k.out("partials"))
    return k.out("partials").view(-1, t.c.hidden)[k.task.args[0]]


def _split_k_forms(t, kind, name, inputs, want):
    """A slice's check in both sums' forms (its own partial row; added into the fixed-point accumulator)."""
    errors = []
    for split_k_sum in SPLIT_K_SUMS:
        k = t.plan_case(kind, name, moe_tiles="split-k", split_k_sum=split_k_sum)
        for operand, value in inputs.items():
            k.put(operand, value)
        k.run()
        errors.append(_error(_slice_partial(k, t), want(*k.task.tile)))
    return _worst(*errors)


@checks_on_simulator(Kind.GATE_UP_DOWN)
def _gate_up_down(t):
    x = t.rand(t.c.hidden)
    mlp, xn = t.moe.mlp.shared_experts, t.moe.post_attention_layernorm(x)
    act = mlp.act_fn(mlp.gate_proj(xn)) * mlp.up_proj(xn)
    return _split_k_forms(t, Kind.GATE_UP_DOWN, t.moe_layer + "shared_slice[1]", {"x": x},
                          lambda r0, r1: F.linear(act[r0:r1], mlp.down_proj.weight[:, r0:r1]))


@checks_on_simulator(Kind.EXPERT_GATE_UP_DOWN)
def _expert_gate_up_down(t):
    chosen, route_w = t.routed
    x, e = t.rand(t.c.hidden), int(chosen[1])
    act = _hf_routed_act(t, x, e)
    return _split_k_forms(t, Kind.EXPERT_GATE_UP_DOWN, t.moe_layer + "expert_slice.1[1]",
                          {"x": x, "route_idx": chosen.to(torch.int32), "route_w": route_w},
                          lambda r0, r1: route_w[1] * F.linear(act[r0:r1], t.moe.mlp.experts.down_proj[e][:, r0:r1]))


@checks_on_simulator(Kind.SUM_PARTIALS)
def _sum_partials(t):
    k = t.split_k_case(Kind.SUM_PARTIALS, t.moe_layer + "sum_slices[1]")
    n = k.task.args[0]
    partials, start = t.rand(n, t.c.hidden), t.rand(t.c.hidden)
    k.put("partials", partials)
    k.put("h_out", start)
    k.run()
    r0, r1 = k.task.tile
    return _error(k.out("h_out")[r0:r1], (start + partials.double().sum(0))[r0:r1])


@checks_on_simulator(Kind.EXPERT_POOL)
def _expert_pool(t):
    """Every taker of one layer's pool run in turn (each an even share of what is left): their pieces cover
    each routed slot's rows once, so the accumulator holds the routed experts' whole weighted output."""
    chosen, route_w = t.routed
    x = t.rand(t.c.hidden)
    k = t.plan_case(Kind.EXPERT_POOL, t.moe_layer + "expert_pool[0]", moe_tiles="split-k", split_k_sum="fixed-point",
                    routed_pool_rows=8)
    for name, value in (("x", x), ("route_idx", chosen.to(torch.int32)), ("route_w", route_w)):
        k.put(name, value)
    graph = k.sim.graph
    for i, task in enumerate(graph.tasks):
        if task.kind == Kind.EXPERT_POOL and task.layer == k.task.layer:
            RUN[Kind.EXPERT_POOL](TaskContext(k.sim, i, 0, KNOW_ALL))
    want = sum(route_w[j] * F.linear(_hf_routed_act(t, x, int(e)), t.moe.mlp.experts.down_proj[int(e)])
               for j, e in enumerate(chosen))
    return _error(from_fixed_point(k.out("acc")), want)


@checks_on_simulator(Kind.SUM_FIXED_POINT)
def _sum_fixed_point(t):
    """The accumulator's rows (any int64 sum of slices' units) added into h_out, and zeroed."""
    k = t.plan_case(Kind.SUM_FIXED_POINT, t.moe_layer + "sum_slices[1]", moe_tiles="split-k",
                    split_k_sum="fixed-point")
    acc, start = (t.rand(t.c.hidden) * 2.0 ** 33).to(torch.int64), t.rand(t.c.hidden)
    k.put("acc", acc)
    k.put("h_out", start)
    k.run()
    r0, r1 = k.task.tile
    zeroed = _error(k.out("acc")[r0:r1], torch.zeros(r1 - r0))
    return _worst(_error(k.out("h_out")[r0:r1], (start.double() + acc.double() / 2.0 ** 32)[r0:r1]), zeroed)


@checks_on_simulator(Kind.LM_HEAD)
def _lm_head(t):
    k = t.case(Kind.LM_HEAD)
    x = t.rand(t.c.hidden)
    k.put("x", x)
    k.run()
    r0, r1 = k.task.tile
    want = t.model.lm_head(t.model.model.norm(x))[r0:r1]
    best = int(want.argmax())
    return _worst(_error(k.out("logits")[r0:r1], want), _error(k.out("part_idx")[k.task.slot], torch.tensor(r0 + best)))


@checks_on_simulator(Kind.ARGMAX)
def _argmax(t):
    k = t.case(Kind.ARGMAX)
    n = k.task.args[0]
    part_max, part_idx = t.rand(n), torch.randint(t.c.vocab, (n,), generator=t.gen, dtype=torch.int32)
    k.put("part_max", part_max)
    k.put("part_idx", part_idx)
    k.run()
    return _error(k.out("tokens")[1], part_idx[part_max.argmax()])


@torch.no_grad()
def check_task_kinds(hf_model, seed=0) -> dict:
    """{Kind name: {max_abs, max_rel, shape}} for every kind, in the graph's kind order."""
    assert not missing("check_on_simulator"), f"kinds without a check: {missing('check_on_simulator')}"
    context = SimCheck(hf_model, seed)
    return {kind.name: entry.check_on_simulator(context) for kind, entry in REGISTRY.items()}

"""Milestone M1 on the sim backend: each task kind run alone by the simulator vs an independent torch answer.

    from fleet_decode.model import load_model
    from fleet_decode.sim import check_task_kinds
    errors = check_task_kinds(load_model("tiny"))   # {"RMSNORM_GEMV": {"max_abs": ..., ...}, ...}

Each kind gets seeded random inputs, written by the host into a fresh simulator, and runs one of its
tiles; the expected answer comes from Hugging Face's own modules (norms, linears, rotary embedding,
router, experts) or, where HF has no piece of that shape (flash-decoding partials), from the plain
softmax definition.
"""

import torch
import torch.nn.functional as F
from transformers.models.deepseek_v2.modeling_deepseek_v2 import apply_rotary_emb

from fleet_decode.graph.build import build_graph
from fleet_decode.graph.format import Kind
from fleet_decode.sim.decode import make_simulator, sim_plan
from fleet_decode.sim.kinds import RUN, TaskContext

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


@torch.no_grad()
def check_task_kinds(hf_model, seed=0) -> dict:
    config = hf_model.config
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
    positions = 24
    graph = build_graph(config, sim_plan(1, positions, 1))
    pos0 = positions - 1  # the last position: every attention chunk is full
    c = graph.constants
    H, R, nope, rope, v, d = c.n_heads, c.kv_rank, c.qk_nope, c.qk_rope, c.v_head, c.hidden
    dense, moe = hf_model.model.layers[0], hf_model.model.layers[config.first_k_dense_replace]
    attn, moe_layer = dense.self_attn, f"L{config.first_k_dense_replace}."
    kv_b_of_identity = attn.kv_b_proj(torch.eye(R)).view(R, H, nope + v)  # [latent r, head, nope|v]
    results = {}

    def case(kind, name_has=""):
        return _Case(hf_model, graph, kind, pos0, name_has)

    k = case(Kind.EMBED)
    token = int(torch.randint(c.vocab, (1,), generator=gen))
    k.put("tokens", torch.tensor([token], dtype=torch.int32))
    k.run()
    results["EMBED"] = _error(k.out("out"), hf_model.model.embed_tokens(torch.tensor(token)))

    k = case(Kind.RMSNORM_GEMV, "L0.q_proj")
    x = rand(d)
    k.put("x", x)
    k.run()
    r0, r1 = k.task.tile
    results["RMSNORM_GEMV"] = _error(k.out("y")[r0:r1], attn.q_proj(dense.input_layernorm(x))[r0:r1])

    k = case(Kind.ROPE_Q_ABSORB, "L0.")
    q = rand(H, nope + rope)
    k.put("q", q)
    k.run()
    parts, (u0, u1) = k.task.args[0], k.task.tile  # units of (head, column block); q_pe with block 0
    cols = R // parts
    want_lat = torch.einsum("hd,rhd->hr", q[:, :nope], kv_b_of_identity[:, :, :nope]).view(H * parts, cols)
    want_pe = _rotate(q[:, nope:], hf_model, pos0)
    heads = sorted({u // parts for u in range(u0, u1) if u % parts == 0})
    results["ROPE_Q_ABSORB"] = _worst(_error(k.out("q_lat").view(H * parts, cols)[u0:u1], want_lat[u0:u1]),
                                      _error(k.out("q_pe").view(H, rope)[heads], want_pe[heads]))

    k = case(Kind.CACHE_APPEND, "L0.")
    kv = rand(R + rope)
    k.put("kv_a", kv)
    k.run()
    results["CACHE_APPEND"] = _worst(_error(k.out("ckv").view(-1, R)[pos0], attn.kv_a_layernorm(kv[:R])),
                                     _error(k.out("kpe").view(-1, rope)[pos0], _rotate(kv[None, R:], hf_model, pos0)[0]))

    q_lat, q_pe, ckv, kpe = rand(H, R), rand(H, rope), rand(positions, R), rand(positions, rope)
    scores = attn.scaling * (q_lat @ ckv.T + q_pe @ kpe.T)  # [H, positions]

    k = case(Kind.ATTN_CHUNK, "L0.")
    for name, value in (("q_lat", q_lat), ("q_pe", q_pe), ("ckv", ckv), ("kpe", kpe)):
        k.put(name, value)
    k.run()
    p0, p1 = k.task.tile
    o, ml = k.out("part_o").view(-1, H, R)[k.task.slot], k.out("part_ml").view(-1, H, 2)[k.task.slot]
    results["ATTN_CHUNK"] = _worst(_error(o / ml[:, 1:], torch.softmax(scores[:, p0:p1], -1) @ ckv[p0:p1]),
                                   _error(ml[:, 0], scores[:, p0:p1].max(-1).values))

    k = case(Kind.ATTN_MERGE_UV, "L0.")
    chunks = [t.tile for t in graph.tasks if t.kind == Kind.ATTN_CHUNK and t.layer == 0]
    for i, (p0, p1) in enumerate(chunks):
        s = scores[:, p0:p1]
        m = s.max(-1).values
        e = torch.exp(s - m[:, None])
        k.put("part_o", e @ ckv[p0:p1], at=i * H * R)
        k.put("part_ml", torch.stack((m, e.sum(-1)), -1), at=i * H * 2)
    k.run()
    h0, h1 = k.task.tile
    out_lat = torch.softmax(scores, -1) @ ckv
    want = torch.einsum("hr,rhv->hv", out_lat[h0:h1], kv_b_of_identity[:, h0:h1, nope:])
    results["ATTN_MERGE_UV"] = _error(k.out("attn_out").view(H, v)[h0:h1], want)

    k = case(Kind.O_PROJ_RESIDUAL, "L0.")
    attn_out, residual = rand(H * v), rand(d)
    k.put("attn_out", attn_out)
    k.put("residual", residual)
    k.run()
    r0, r1 = k.task.tile
    want = (residual + attn.o_proj(attn_out))[r0:r1]
    results["O_PROJ_RESIDUAL"] = _worst(_error(k.out("h_attn")[r0:r1], want), _error(k.out("h_out")[r0:r1], want))

    k = case(Kind.ROUTER, moe_layer)
    x = rand(d)
    k.put("x", x)
    k.run()
    e0, e1 = k.task.tile
    hf_logits, weights, experts = moe.mlp.gate(moe.post_attention_layernorm(x)[None])
    results["ROUTER"] = _error(k.out("logits")[e0:e1], hf_logits[0, e0:e1])

    k = case(Kind.ROUTE_TOPK, moe_layer)
    k.put("logits", hf_logits[0])
    k.run()
    order = experts[0].argsort()
    results["ROUTE_TOPK"] = _worst(_error(k.out("route_idx"), experts[0][order]),
                                   _error(k.out("route_w"), weights[0][order]))

    k = case(Kind.GATE_UP, "L0.")
    x = rand(d)
    k.put("x", x)
    k.run()
    r0, r1 = k.task.tile
    xn = dense.post_attention_layernorm(x)
    want = dense.mlp.act_fn(dense.mlp.gate_proj(xn)) * dense.mlp.up_proj(xn)
    results["GATE_UP"] = _error(k.out("act")[r0:r1], want[r0:r1])

    k = case(Kind.DOWN_ACCUM, "L0.")
    act, start = rand(config.intermediate_size), rand(d)
    k.put("act", act)
    k.put("h_out", start)
    k.run()
    r0, r1 = k.task.tile
    results["DOWN_ACCUM"] = _error(k.out("h_out")[r0:r1], (start + dense.mlp.down_proj(act))[r0:r1])

    chosen = torch.randperm(c.n_experts, generator=gen)[:c.top_k].sort().values
    route_w = torch.rand(c.top_k, generator=gen)
    experts = moe.mlp.experts

    k = case(Kind.EXPERT_GATE_UP, moe_layer + "expert_gate_up.1")
    x = rand(d)
    k.put("x", x)
    k.put("route_idx", chosen.to(torch.int32))
    k.run()
    r0, r1 = k.task.tile
    gate, up = F.linear(moe.post_attention_layernorm(x), experts.gate_up_proj[chosen[1]]).chunk(2, dim=-1)
    results["EXPERT_GATE_UP"] = _error(k.out("act")[r0:r1], (experts.act_fn(gate) * up)[r0:r1])

    k = case(Kind.EXPERT_DOWN_ACCUM, moe_layer + "expert_down.1")
    act, start = rand(c.moe_inter), rand(d)
    for name, value in (("act", act), ("h_out", start), ("route_idx", chosen.to(torch.int32)), ("route_w", route_w)):
        k.put(name, value)
    k.run()
    r0, r1 = k.task.tile
    want = start + route_w[1] * F.linear(act, experts.down_proj[chosen[1]])
    results["EXPERT_DOWN_ACCUM"] = _error(k.out("h_out")[r0:r1], want[r0:r1])

    k = case(Kind.LM_HEAD)
    x = rand(d)
    k.put("x", x)
    k.run()
    r0, r1 = k.task.tile
    want = hf_model.lm_head(hf_model.model.norm(x))[r0:r1]
    best = int(want.argmax())
    results["LM_HEAD"] = _worst(_error(k.out("logits")[r0:r1], want),
                                _error(k.out("part_idx")[k.task.slot], torch.tensor(r0 + best)))

    k = case(Kind.ARGMAX)
    n = k.task.args[0]
    part_max, part_idx = rand(n), torch.randint(c.vocab, (n,), generator=gen, dtype=torch.int32)
    k.put("part_max", part_max)
    k.put("part_idx", part_idx)
    k.run()
    results["ARGMAX"] = _error(k.out("tokens")[1], part_idx[part_max.argmax()])

    missing = {kind.name for kind in Kind} - set(results)
    assert not missing, f"kinds without a check: {missing}"
    return results

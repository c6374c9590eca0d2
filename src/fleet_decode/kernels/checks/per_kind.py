"""One M1 check per task kind the graph emits, registered under its Kind (fleet_decode.task_kinds):
the kind's kernel alone at the real DeepSeek-Coder-V2-Lite shapes, on fresh random inputs, against
its fp64 reference (fleet_decode.kernels.checks.references), then timed.

Every check takes (kernels, shapes, inputs, grid, dtype): dtype is the activations' type, fp32 as
in the task graph's buffers, or bf16 as HF stores them.
"""
import math

import torch

from fleet_decode.graph.derived import w_uk_parts, w_uv_parts
from fleet_decode.fixed_point import from_fixed_point, to_fixed_point
from fleet_decode.graph.format import FIXED_POINT_BITS, Kind
from fleet_decode.kernels.checks.harness import (ABSORB_PARTS, BF16_TOL, F32_TOL, ROUTER_TILE_ROWS, Grid,
                                                 Inputs, Result, Shapes, measure, poisoned, result, row_name, sync,
                                                 time_launches, tol_for, unwritten)
from fleet_decode.kernels.checks.references import (attention_partials_ref, gate_up_ref, merge_ref, q_absorb_ref,
                                                    random_partials, rms_norm_ref, rope_ref, rope_tables, stored)
from fleet_decode.task_kinds import checks_on_device

F32 = torch.float32


@checks_on_device(Kind.EMBED)
def check_embed(k, s: Shapes, rnd: Inputs, grid: Grid, dtype=F32) -> Result:
    table = rnd.randn(s.vocab, s.hidden)
    tokens = [torch.randint(0, s.vocab, (1,), generator=rnd.gen, device=rnd.device, dtype=torch.int32)
              for _ in range(16)]
    out = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    k.embed(table, tokens[0], out)
    sync(rnd.device)
    written = not unwritten(out)
    errs = measure([(out, table[tokens[0].item()])])
    us = time_launches([lambda t=t: k.embed(table, t, out) for t in tokens], rnd.device)
    return result(row_name(Kind.EMBED, dtype), errs, 0.0, f"[{s.vocab},{s.hidden}] -> [{s.hidden}]", us, 2 * s.hidden,
                  written)


@checks_on_device(Kind.RMSNORM_GEMV)
def check_rmsnorm_gemv(k, s, rnd, grid, dtype=F32) -> Result:
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
    return result(row_name(Kind.RMSNORM_GEMV, dtype), errs, tol_for(dtype, BF16_TOL),
                  f"[{rows},{s.hidden}] tile {tile}", us, nbytes, written,
                  note="q_proj|kv_a_proj_with_mqa after input_layernorm")


@checks_on_device(Kind.CACHE_APPEND)
def check_cache_append(k, s, rnd, grid, dtype=F32) -> Result:
    """The launcher also rotates q_pe (the same RoPE as the cache's k_pe): both are held to the reference."""
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
    return result(row_name(Kind.CACHE_APPEND, dtype), errs, BF16_TOL,
                  f"q_pe [{s.heads},{s.rope}], cache row {p} of {s.cache_len}", us, 0, written, untouched,
                  note="other cache rows untouched" if untouched else "OTHER CACHE ROWS CHANGED")


@checks_on_device(Kind.ROPE_Q_ABSORB)
def check_rope_q_absorb(k, s, rnd, grid, dtype=F32) -> Result:
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
    return result(row_name(Kind.ROPE_Q_ABSORB, dtype), errs, tol_for(dtype, BF16_TOL),
                  f"{s.heads} heads x {parts} column blocks, one per tile, position {p}", us, nbytes, written,
                  note="W_UK in the graph's derived layout")


@checks_on_device(Kind.ATTN_CHUNK)
def check_attention_chunk(k, s, rnd, grid, dtype=F32) -> Result:
    q_lat = rnd.randn(s.heads, s.kv_lora, std=0.75, dtype=torch.float32)
    q_pe = rnd.randn(s.heads, s.rope, dtype=dtype)
    ckv, kpe = rnd.randn(s.cache_len, s.kv_lora), rnd.randn(s.cache_len, s.rope)
    n_chunks = math.ceil(s.n_pos / s.chunk_len)
    m, l, o = (poisoned(n_chunks, s.heads, dtype=torch.float32, device=rnd.device),
               poisoned(n_chunks, s.heads, dtype=torch.float32, device=rnd.device),
               poisoned(n_chunks, s.heads, s.kv_lora, dtype=torch.float32, device=rnd.device))
    m_ref, l_ref, o_ref = attention_partials_ref(q_lat, q_pe, ckv, kpe, s.n_pos, s.chunk_len, s.softmax_scale)
    worst, written = [], True
    # every chunk's heads in one block, in two (Plan.attn_head_groups) and one at a time, in both forms
    # (the megakernel's plain and tensor-core entries; runtime.Tuning.chunk_form)
    for tensor_cores in (False, True):
        for groups in (1, 2, s.heads):
            for t in (m, l, o):
                t.copy_(poisoned(*t.shape, dtype=t.dtype, device=t.device))
            k.attention_chunk(q_lat, q_pe, ckv, kpe, s.n_pos, s.chunk_len, s.softmax_scale, m, l, o,
                              head_groups=groups, tensor_cores=tensor_cores)
            sync(rnd.device)
            written = written and not (unwritten(m) or unwritten(l) or unwritten(o))
            worst.append(measure([(m, m_ref), (l, l_ref), (o, o_ref)]))
    errs = max(e[0] for e in worst), max(e[1] for e in worst)
    us = time_launches([lambda: k.attention_chunk(q_lat, q_pe, ckv, kpe, s.n_pos, s.chunk_len, s.softmax_scale,
                                                  m, l, o)] * 8, rnd.device)
    return result(row_name(Kind.ATTN_CHUNK, dtype), errs, 1e-4,
                  f"{s.heads} heads (in 1, 2 and {s.heads} blocks, plain and tensor-core forms), {s.n_pos} of {s.cache_len} positions, "
                  f"{n_chunks} chunks of {s.chunk_len}",
                  us, s.n_pos * (s.kv_lora + s.rope) * 2, written)


@checks_on_device(Kind.ATTN_MERGE_UV)
def check_attention_merge_uv(k, s, rnd, grid, dtype=F32) -> Result:
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
    return result(row_name(Kind.ATTN_MERGE_UV, dtype), errs, tol_for(dtype, BF16_TOL),
                  f"{m.shape[0]} chunks (one empty), W_UV [{s.heads},{s.v_head},{s.kv_lora}], one head per tile",
                  us, nbytes, written)


@checks_on_device(Kind.ATTN_MERGE_COLS)
def check_attention_merge_cols(k, s, rnd, grid, dtype=F32, lat_parts=4) -> Result:
    m, l, o = random_partials(s, rnd)
    part_ml = torch.stack([m, l], -1).contiguous()
    nbytes = s.heads * s.v_head * s.kv_lora * 2
    kv_bs = [rnd.randn(s.heads * (s.nope + s.v_head), s.kv_lora, std=0.02) for _ in range(rnd.copies(nbytes))]
    blocks = [w_uv_parts(kv_b, s.heads, s.nope, s.v_head, lat_parts) for kv_b in kv_bs]  # the graph's layout
    attn_parts = poisoned(lat_parts * s.heads * s.v_head, dtype=dtype, device=rnd.device)
    k.attention_merge_cols(part_ml, o, blocks[0], lat_parts, attn_parts)
    sync(rnd.device)
    w_uv = kv_bs[0].view(s.heads, s.nope + s.v_head, s.kv_lora)[:, s.nope:].double()
    out_lat = merge_ref(m, l, o)
    cols = s.kv_lora // lat_parts
    ref = torch.stack([torch.einsum("hdc,hc->hd", w_uv[..., p * cols:(p + 1) * cols], out_lat[:, p * cols:(p + 1) * cols])
                       for p in range(lat_parts)]).flatten()
    written = not unwritten(attn_parts)
    errs = measure([(attn_parts, ref)])
    us = time_launches([lambda w=w: k.attention_merge_cols(part_ml, o, w, lat_parts, attn_parts) for w in blocks],
                       rnd.device)
    return result(row_name(Kind.ATTN_MERGE_COLS, dtype), errs, tol_for(dtype, BF16_TOL),
                  f"{m.shape[0]} chunks (one empty), W_UV [{s.heads},{s.v_head},{s.kv_lora}] in {lat_parts} column "
                  f"blocks, one (head, block) per tile", us, nbytes, written)


@checks_on_device(Kind.O_PROJ_RESIDUAL)
def check_o_proj_residual(k, s, rnd, grid, dtype=F32) -> Result:
    """The GEMV without a norm, plus the residual: what the runtime runs for O_PROJ_RESIDUAL."""
    n_attn = s.heads * s.v_head
    attn_out, residual = rnd.randn(n_attn, std=0.3, dtype=dtype), rnd.randn(s.hidden, dtype=dtype)
    nbytes = s.hidden * n_attn * 2
    weights = [rnd.randn(s.hidden, n_attn, std=0.02) for _ in range(rnd.copies(nbytes))]
    out = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    tile = grid.tile_rows(s.hidden)
    k.rmsnorm_gemv(attn_out, None, 0.0, weights[0], out, tile, residual=residual)
    sync(rnd.device)
    ref = residual.double() + stored(weights[0].double() @ attn_out.double(), dtype)
    written = not unwritten(out)
    errs = measure([(out, ref)])
    us = time_launches([lambda W=W: k.rmsnorm_gemv(attn_out, None, 0.0, W, out, tile, residual=residual)
                        for W in weights], rnd.device)
    return result(row_name(Kind.O_PROJ_RESIDUAL, dtype), errs, tol_for(dtype, BF16_TOL),
                  f"o_proj [{s.hidden},{n_attn}] + residual, tile {tile}", us, nbytes, written)


def topk_verdict(s, probs, probs_ref, idx, weight) -> tuple[bool, bool]:
    """(exact, same_set): the chosen experts are exactly the top-k of the kernel's own probabilities (ties
    to the lower index) in ascending expert order, with their weights; and the same set as the
    reference's, unless its k-th and k+1-th are a near-tie."""
    chosen = sorted(sorted(range(s.experts), key=lambda e: (-probs[e].item(), e))[: s.top_k])
    ref_sorted = probs_ref.sort(descending=True).values
    near_tie = (ref_sorted[s.top_k - 1] - ref_sorted[s.top_k]).item() < 1e-6
    same_set = set(idx.tolist()) == set(probs_ref.topk(s.top_k).indices.tolist()) or near_tie
    exact = idx.tolist() == chosen and torch.equal(weight, probs[idx.long()] * s.routed_scaling)
    return exact, same_set


def router_parts_ref(h, norm_weight, w_router, tile):
    """Each o_proj tile's row of router_parts in fp64: its rows' terms of the router's dot products with
    norm * h, then its rows' sum of squares."""
    h, w, g = h.double(), norm_weight.double(), w_router.double()
    return torch.stack([torch.cat((g[:, r0:r0 + tile] @ (w[r0:r0 + tile] * h[r0:r0 + tile]), (h[r0:r0 + tile] ** 2).sum()[None]))
                        for r0 in range(0, h.numel(), tile)])


@checks_on_device(Kind.O_PROJ_ROUTER, Kind.ROUTE_PARTS_TOPK)
def check_o_proj_router(k, s, rnd, grid, dtype=F32) -> list[Result]:
    """The o_proj tiles with the router's partial sums, then the top-k from the sums, launched back to
    back. References from the h_attn the tiles wrote: its fp64 parts, and the router's probabilities
    from RMSNorm in exact arithmetic (the fused form never rounds the normed vector, at either width)."""
    n_attn = s.heads * s.v_head
    attn_out, residual = rnd.randn(n_attn, std=0.3, dtype=dtype), rnd.randn(s.hidden, dtype=dtype)
    norm = rnd.norm_weight(s.hidden)
    nbytes = s.hidden * n_attn * 2 + s.experts * s.hidden * 4
    pairs = [(rnd.randn(s.hidden, n_attn, std=0.02), rnd.randn(s.experts, s.hidden, std=0.02, dtype=torch.float32))
             for _ in range(rnd.copies(nbytes))]
    tile = grid.tile_rows(s.hidden)
    n_tiles = -(-s.hidden // tile)
    h_attn = poisoned(s.hidden, dtype=dtype, device=rnd.device)
    parts = poisoned(n_tiles, s.experts + 1, dtype=torch.float32, device=rnd.device)
    probs = poisoned(s.experts, dtype=torch.float32, device=rnd.device)
    idx = poisoned(s.top_k, dtype=torch.int32, device=rnd.device)
    weight = poisoned(s.top_k, dtype=torch.float32, device=rnd.device)

    def run(W_o, W_r):
        k.o_proj_router(attn_out, W_o, residual, h_attn, norm, s.eps, W_r, tile, s.top_k, s.routed_scaling, parts,
                        probs, idx, weight)

    W_o, W_r = pairs[0]
    run(W_o, W_r)
    sync(rnd.device)
    h_ref = residual.double() + stored(W_o.double() @ attn_out.double(), dtype)
    h = h_attn.double()
    logits_ref = (W_r.double() @ (norm.double() * h)) * torch.rsqrt((h ** 2).mean() + s.eps)
    probs_ref = torch.softmax(logits_ref, -1)
    exact, same_set = topk_verdict(s, probs, probs_ref, idx, weight)
    tiles_errs = measure([(h_attn, h_ref), (parts, router_parts_ref(h, norm, W_r, tile))])
    probs_errs = measure([(probs, probs_ref)])
    written = not (unwritten(h_attn) or unwritten(parts))
    us = time_launches([lambda W_o=W_o, W_r=W_r: run(W_o, W_r) for W_o, W_r in pairs], rnd.device)
    shape = f"o_proj [{s.hidden},{n_attn}] + residual, router [{s.experts},{s.hidden}] fp32, tile {tile}, top-{s.top_k}"
    return [result(row_name(Kind.O_PROJ_ROUTER, dtype), tiles_errs, tol_for(dtype, BF16_TOL), shape, us, nbytes,
                   written, note="timed with its top-k (one launch sequence)"),
            result(row_name(Kind.ROUTE_PARTS_TOPK, dtype), probs_errs, 1e-5, shape, (0.0, 0.0), 0,
                   not (unwritten(probs) or unwritten(idx) or unwritten(weight)), exact and same_set,
                   note=f"experts {idx.tolist()}; order/weights exact={exact}, same set as reference={same_set}")]


@checks_on_device(Kind.ROUTER, Kind.ROUTE_TOPK)
def check_router(k, s, rnd, grid, dtype=F32) -> list[Result]:
    """The router's tiles (logits) and its top-k (probabilities, experts, weights), launched back to back."""
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    nbytes = s.experts * s.hidden * 4
    routers = [rnd.randn(s.experts, s.hidden, std=0.02, dtype=torch.float32) for _ in range(rnd.copies(nbytes))]
    logits = poisoned(s.experts, dtype=torch.float32, device=rnd.device)
    probs = poisoned(s.experts, dtype=torch.float32, device=rnd.device)
    idx = poisoned(s.top_k, dtype=torch.int32, device=rnd.device)
    weight = poisoned(s.top_k, dtype=torch.float32, device=rnd.device)

    def run(W):
        k.router_tiles(x, w, s.eps, W, ROUTER_TILE_ROWS, s.top_k, s.routed_scaling, logits, probs, idx, weight)

    run(routers[0])
    sync(rnd.device)
    logits_ref = routers[0].double() @ rms_norm_ref(x, w, s.eps)
    probs_ref = torch.softmax(logits_ref, -1)
    exact, same_set = topk_verdict(s, probs, probs_ref, idx, weight)
    logits_errs, probs_errs = measure([(logits, logits_ref)]), measure([(probs, probs_ref)])
    us = time_launches([lambda W=W: run(W) for W in routers], rnd.device)
    shape = f"[{s.experts},{s.hidden}] fp32, tiles of {ROUTER_TILE_ROWS}, top-{s.top_k}"
    return [result(row_name(Kind.ROUTER, dtype), logits_errs, F32_TOL, shape, us, nbytes, not unwritten(logits),
                   note="timed with its top-k (one launch sequence)"),
            result(row_name(Kind.ROUTE_TOPK, dtype), probs_errs, 1e-5, shape, (0.0, 0.0), 0,
                   not (unwritten(probs) or unwritten(idx) or unwritten(weight)), exact and same_set,
                   note=f"experts {idx.tolist()}; order/weights exact={exact}, same set as reference={same_set}")]


@checks_on_device(Kind.GATE_UP)
def check_gate_up(k, s, rnd, grid, dtype=F32) -> list[Result]:
    """At both widths the graph runs it: the shared experts of every MoE layer and layer 0's dense MLP."""
    return [_mlp_gate_up(k, s, rnd, grid, s.shared_inter, "", dtype),
            _mlp_gate_up(k, s, rnd, grid, s.dense_inter, "dense", dtype)]


def _mlp_gate_up(k, s, rnd, grid, inter: int, variant: str, dtype) -> Result:
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
    return result(row_name(Kind.GATE_UP, dtype, variant), errs, tol_for(dtype, 1e-2),
                  f"[2x{inter},{s.hidden}], tile {tile}", us, nbytes, written)


@checks_on_device(Kind.EXPERT_GATE_UP)
def check_expert_gate_up(k, s, rnd, grid, dtype=F32) -> Result:
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
    return result(row_name(Kind.EXPERT_GATE_UP, dtype), errs, tol_for(dtype, 1e-2),
                  f"{s.top_k} of {s.experts} experts x [2x{s.moe_inter},{s.hidden}], tile {tile}",
                  us, s.top_k * stride * 2, written, note="expert ids read on device")


def _down_accum(k, s, rnd, grid, kind, inter, n_experts, dtype) -> Result:
    """h_out += Σ_slot w_slot · down[e_slot] @ act[slot]: routed (n_experts > 0, fp32 atomics, one slot
    per grid row) or one plain matrix (the dense MLP and the shared experts: no expert ids, weight 1)."""
    routed = n_experts > 0
    slots = s.top_k if routed else 1
    down = rnd.randn(*((n_experts,) if routed else ()), s.hidden, inter, std=0.02)
    act = rnd.randn(slots, inter, dtype=dtype)
    start = rnd.randn(s.hidden, dtype=torch.float32)  # what o_proj wrote into h_out before the adds
    idx_sets = [rnd.distinct(n_experts, slots) for _ in range(8)] if routed else [None]
    expert_weight = rnd.uniform(slots, low=0.02, high=0.3) if routed else None
    h_out = start.clone()
    tile = grid.tile_rows(s.hidden)
    stride = s.hidden * inter if routed else 0

    def launch(idx):
        k.down_accum(down, stride, idx, expert_weight, act, h_out, tile)

    launch(idx_sets[0])
    sync(rnd.device)
    if routed:
        added = sum(expert_weight[i].double() * (down[e].double() @ act[i].double())
                    for i, e in enumerate(idx_sets[0].tolist()))
    else:
        added = down.double() @ act[0].double()
    written = not unwritten(h_out)
    errs = measure([(h_out - start, added)])  # the adds alone: the start value would hide their errors
    us = time_launches([lambda i=i: launch(i) for i in idx_sets * (8 // len(idx_sets))], rnd.device)
    return result(row_name(kind, dtype), errs, F32_TOL,
                  f"{slots} slot(s) x [{s.hidden},{inter}] added into h_out, tile {tile}", us,
                  slots * s.hidden * inter * 2, written)


@checks_on_device(Kind.DOWN_ACCUM)
def check_down_accum(k, s, rnd, grid, dtype=F32) -> Result:
    return _down_accum(k, s, rnd, grid, Kind.DOWN_ACCUM, s.dense_inter, 0, dtype)


@checks_on_device(Kind.EXPERT_DOWN_ACCUM)
def check_expert_down_accum(k, s, rnd, grid, dtype=F32) -> Result:
    return _down_accum(k, s, rnd, grid, Kind.EXPERT_DOWN_ACCUM, s.moe_inter, s.experts, dtype)


def _split_k(k, s, rnd, kind, inter, rows, n_experts, dtype) -> Result:
    """Split-K slices of `rows` intermediate rows (the real graph's: 24 of the shared experts', 32 of a
    routed expert's), each slice's partial row against fp64 (act rounded as its dtype stores it). The
    standalone kernel reads its down rows from global memory; the runtime's staged copy is checked
    by the megakernel's GPU tests."""
    routed = n_experts > 0
    slots, slices = (s.top_k if routed else 1), -(-inter // rows)
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    lead = (n_experts,) if routed else ()
    gate_up = rnd.randn(*lead, 2 * inter, s.hidden, std=0.02)
    down_t = rnd.randn(*lead, inter, s.hidden, std=0.02)  # the graph's transposed down matrix
    idx = rnd.distinct(n_experts, slots) if routed else None
    weight = rnd.uniform(slots, low=0.02, high=0.3) if routed else None
    gate, up = (gate_up[:, :inter], gate_up[:, inter:]) if routed else (gate_up[:inter], gate_up[inter:])
    partials = poisoned(slots * slices, s.hidden, dtype=F32, device=rnd.device)
    acc = torch.zeros(s.hidden, dtype=torch.int64, device=rnd.device)  # the fixed-point form: one row for all

    def launch(into=partials):
        k.gate_up_down(x, w, s.eps, gate, up, down_t, idx, weight, inter, into, rows)

    launch()
    launch(acc)
    sync(rnd.device)
    fixed = acc.clone()
    acc.zero_()
    launch(acc)  # integer adds: the same bits whichever slice adds first
    sync(rnd.device)
    identical = torch.equal(acc, fixed)
    xn = rms_norm_ref(x, w, s.eps)
    want = []
    for slot, e in enumerate(idx.tolist() if routed else [None]):
        g, u, dn_t = (gate_up[e, :inter], gate_up[e, inter:], down_t[e]) if routed else (gate, up, down_t)
        act_ref = gate_up_ref(g, u, xn, dtype)
        scale = float(weight[slot]) if routed else 1.0
        want += [scale * (dn_t[r0:r0 + rows].double().T @ act_ref[r0:r0 + rows]) for r0 in range(0, inter, rows)]
    written = not unwritten(partials)
    want = torch.stack(want)
    errs = measure([(partials, want), (from_fixed_point(fixed), want.sum(0))])
    us = time_launches([launch] * 8, rnd.device)
    nbytes = slots * 3 * inter * s.hidden * 2
    return result(row_name(kind, dtype), errs, tol_for(dtype, 1e-2),
                  f"{slots} slot(s) x [3x{inter},{s.hidden}] in slices of {rows} rows", us, nbytes, written,
                  extra_ok=identical, note=("expert ids read on device; " if routed else "") +
                  f"also added in fixed point, twice bit-identical: {identical}")


@checks_on_device(Kind.GATE_UP_DOWN)
def check_gate_up_down(k, s, rnd, grid, dtype=F32) -> Result:
    return _split_k(k, s, rnd, Kind.GATE_UP_DOWN, s.shared_inter, 24, 0, dtype)


@checks_on_device(Kind.EXPERT_GATE_UP_DOWN)
def check_expert_gate_up_down(k, s, rnd, grid, dtype=F32) -> Result:
    return _split_k(k, s, rnd, Kind.EXPERT_GATE_UP_DOWN, s.moe_inter, 32, s.experts, dtype)


@checks_on_device(Kind.SUM_PARTIALS)
def check_sum_partials(k, s, rnd, grid, dtype=F32) -> Result:
    """220 partial rows (the real config's slices per layer) added into a started sum."""
    n = 220
    partials = rnd.randn(n, s.hidden, dtype=F32)
    start = rnd.randn(s.hidden, dtype=F32)
    into = start.clone()
    rows = 16
    k.sum_partials(partials, into, rows)
    sync(rnd.device)
    errs = measure([(into - start, partials.double().sum(0))])
    again = start.clone()
    k.sum_partials(partials, again, rows)
    sync(rnd.device)
    identical = torch.equal(into, again)  # the fixed order: bit for bit from launch to launch
    us = time_launches([lambda: k.sum_partials(partials, again, rows)] * 8, rnd.device)
    return result(row_name(Kind.SUM_PARTIALS, dtype), errs, F32_TOL, f"[{n},{s.hidden}] rows of {rows}", us,
                  n * s.hidden * 4, bool(torch.isfinite(into).all()), extra_ok=identical,
                  note=f"two launches bit-identical: {identical}")


@checks_on_device(Kind.EXPERT_POOL)
def check_expert_pool(k, s, rnd, grid, dtype=F32) -> Result:
    """Every slot's rows in pieces of 32, taken at run time by 5 blocks from one counter and added in fixed
    point: the routed experts' whole weighted output against fp64, and the counter at pieces + takers (each
    taker's last take found none left)."""
    slots, piece_rows, takers = s.top_k, 32, 5
    x, w = rnd.randn(s.hidden, dtype=dtype), rnd.norm_weight(s.hidden)
    gate_up = rnd.randn(s.experts, 2 * s.moe_inter, s.hidden, std=0.02)
    down_t = rnd.randn(s.experts, s.moe_inter, s.hidden, std=0.02)
    idx, weight = rnd.distinct(s.experts, slots), rnd.uniform(slots, low=0.02, high=0.3)
    pool = torch.zeros(1, dtype=torch.int32, device=rnd.device)
    acc = torch.zeros(s.hidden, dtype=torch.int64, device=rnd.device)

    def launch(local_sum=True):
        pool.zero_()
        acc.zero_()
        k.expert_pool(x, w, s.eps, gate_up, down_t, idx, weight, piece_rows, takers, pool, acc, local_sum)

    launch(local_sum=False)  # every piece adds into acc itself
    sync(rnd.device)
    piecewise = acc.clone()
    launch()
    sync(rnd.device)
    identical = torch.equal(acc, piecewise)  # each taker's pieces summed first: integer adds, the same bits
    xn = rms_norm_ref(x, w, s.eps)
    want = sum(float(weight[j]) * (down_t[e].double().T @ gate_up_ref(gate_up[e, :s.moe_inter], gate_up[e, s.moe_inter:],
                                                                       xn, dtype))
               for j, e in enumerate(idx.tolist()))
    n_pieces = slots * -(-s.moe_inter // piece_rows)
    counted = int(pool[0]) == n_pieces + takers
    errs = measure([(from_fixed_point(acc), want)])
    us = time_launches([launch] * 8, rnd.device)
    return result(row_name(Kind.EXPERT_POOL, dtype), errs, tol_for(dtype, 1e-2),
                  f"{slots} slots x [3x{s.moe_inter},{s.hidden}] in pieces of {piece_rows} rows, {takers} takers", us,
                  slots * 3 * s.moe_inter * s.hidden * 2, bool(acc.any()), extra_ok=counted and identical,
                  note=f"counter at pieces + takers: {counted}; summed per taker first, the same bits: {identical}")


@checks_on_device(Kind.SUM_FIXED_POINT)
def check_sum_fixed_point(k, s, rnd, grid, dtype=F32) -> Result:
    """A layer's fixed-point accumulator (as 220 slices' partials might sum to) added into a started sum, and
    zeroed for the next step."""
    acc = to_fixed_point(rnd.randn(s.hidden, std=15.0, dtype=F32))
    start = rnd.randn(s.hidden, dtype=F32)
    held, into = acc.clone(), start.clone()
    rows = 16
    k.sum_fixed_point(held, into, rows)
    sync(rnd.device)
    errs = measure([(into, start.double() + acc.double() / 2.0 ** FIXED_POINT_BITS)])
    zeroed = not bool(held.any())
    us = time_launches([lambda: k.sum_fixed_point(held, into, rows)] * 8, rnd.device)
    return result(row_name(Kind.SUM_FIXED_POINT, dtype), errs, F32_TOL, f"[{s.hidden}] int64 in rows of {rows}", us,
                  s.hidden * 12, bool(torch.isfinite(into).all()), extra_ok=zeroed,
                  note=f"the accumulator zeroed: {zeroed}")


@checks_on_device(Kind.LM_HEAD, Kind.ARGMAX)
def check_lm_head_argmax(k, s, rnd, grid, dtype=F32) -> list[Result]:
    """The lm_head tiles with their per-tile maxima, then the argmax over those (and over a raw
    logits row with a planted tie, which must go to the lower index)."""
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
    lm = result(row_name(Kind.LM_HEAD, dtype), errs, BF16_TOL, f"[{s.vocab},{s.hidden}], {n_tiles} tiles of {tile}",
                us, s.vocab * s.hidden * 2, written, partials_ok and rounded,
                note=f"per-tile argmax partials exact={partials_ok}; logits bf16-rounded={rounded}")

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
    am = Result(row_name(Kind.ARGMAX, dtype), float(abs(raw_token.item() - i)), 0.0, 0.0, bool(two_level_ok and tie_ok),
                f"{n_tiles} partials; raw [{s.vocab}] with a tie at {i},{j}", round(us[0], 2), 0, 0.0,
                not (unwritten(token) or unwritten(raw_token)),
                note=f"two-level == torch.argmax: {two_level_ok}; tie to lower index: {tie_ok}",
                us_eager=round(us[1], 2))
    return [lm, am]

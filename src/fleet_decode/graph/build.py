"""Builds the task graph of one decode step of a DeepseekV2 model from its config and a Plan.

Buffers are per layer (h.0 .. h.L, L3.q, ...), so no buffer is reused inside a step and the only
write-after-read hazards are across steps, which the step chain (argmax -> next embed) orders.
Routed experts are dynamic: tasks exist per top-k slot, and read the chosen expert from the router's
output at run time.
"""

from itertools import accumulate

from transformers.models.deepseek_v2.modeling_deepseek_v2 import yarn_apply_mscale

from fleet_decode.graph.derived import W_UK_PARTS, W_UV_PARTS, cols, rows, transposed
from fleet_decode.graph.format import KERNEL_LIMITS, NONE, DType, Kind, Persistence, bits_f32, f32_bits
from fleet_decode.graph.graph import Buffer, Constants, Event, Graph, Task, Weight
from fleet_decode.graph.plan import (Plan, assign, even_tiles, merge_lat_parts_fit, merge_v_parts_fit, skewed_tiles,
                                    split_k_tiles, tiles)
from fleet_decode.graph.reads import task_cost


def _f32(x):
    return bits_f32(f32_bits(float(x)))


def model_constants(config, plan: Plan, first_layer: int, n_layers: int, has_head: bool) -> Constants:
    if config.q_lora_rank is not None:
        raise NotImplementedError("the graph covers q_lora_rank None (DeepSeek-V2-Lite); this config has a q LoRA")
    if config.topk_method != "greedy":
        raise NotImplementedError(f"only greedy top-k routing is supported, config has {config.topk_method!r}")
    if config.norm_topk_prob:
        raise NotImplementedError("norm_topk_prob: neither HF's DeepseekV2 nor the reference renormalises top-k weights")
    qk_head = config.qk_nope_head_dim + config.qk_rope_head_dim
    return Constants(
        hidden=config.hidden_size, n_heads=config.num_attention_heads, qk_nope=config.qk_nope_head_dim,
        qk_rope=config.qk_rope_head_dim, v_head=config.v_head_dim, kv_rank=config.kv_lora_rank,
        n_experts=config.n_routed_experts or 0, top_k=config.num_experts_per_tok or 0,
        moe_inter=config.moe_intermediate_size, vocab=config.vocab_size, first_layer=first_layer,
        n_layers=n_layers, has_head=has_head, max_positions=plan.max_positions, max_steps=plan.max_steps,
        rms_eps=_f32(config.rms_norm_eps), attn_scale=_f32(yarn_apply_mscale(config.rope_parameters, qk_head ** -0.5)),
        routed_scaling=_f32(config.routed_scaling_factor), norm_topk_prob=bool(config.norm_topk_prob),
    )


class _Builder:
    def __init__(self, config, plan):
        self.config, self.plan = config, plan
        self.tasks, self.events, self.buffers, self.weights = [], [], [], []
        self._weight_slots = {}

    def buffer(self, name, rows, cols=1, dtype=DType.F32, persistence=Persistence.STEP):
        self.buffers.append(Buffer(name, rows, cols, dtype, persistence))
        return len(self.buffers) - 1

    def event(self, name, layer=NONE):
        self.events.append(Event(name, 0, layer))
        return len(self.events) - 1

    def weight(self, name, shape, dtype=DType.MODEL):
        if name not in self._weight_slots:
            self.weights.append(Weight(name, tuple(shape), dtype))
            self._weight_slots[name] = len(self.weights) - 1
        return self._weight_slots[name]

    def task(self, kind, name, out_event, inputs, buffers, weights=(), args=(), layer=NONE, tile=(0, 0), slot=NONE):
        inputs = [(e, lag) for e, lag in inputs if e is not None]
        self.tasks.append(Task(kind, name, layer, tile, slot, out_event, inputs, tuple(buffers), tuple(weights),
                               tuple(args)))
        self.events[out_event].triggers += 1

    def gemv_tiles(self, kind, name, total_rows, stage_rows, out_event, inputs, buffers, weights, layer, slot=NONE,
                   reserved=0, tile_list=None):
        """A stage's tiles of total_rows rows: tiles of the stage's rows (Plan.tile_rows), or tile_list."""
        for i, tile in enumerate(tile_list or tiles(total_rows, self.plan.tile_rows(stage_rows, reserved))):
            self.task(kind, f"{name}[{i}]", out_event, inputs, buffers, weights, layer=layer, tile=tile, slot=slot)


def _attention(b: _Builder, layer, h_in, h_in_ready, h_out):
    cfg, plan = b.config, b.plan
    H, nope, rope, v, R, d = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                              cfg.kv_lora_rank, cfg.hidden_size)
    p = f"model.layers.{layer}."
    L = f"L{layer}."
    in_norm = b.weight(p + "input_layernorm.weight", (d,))
    q_w = b.weight(p + "self_attn.q_proj.weight", (H * (nope + rope), d))
    kva_w = b.weight(p + "self_attn.kv_a_proj_with_mqa.weight", (R + rope, d))
    kv_norm = b.weight(p + "self_attn.kv_a_layernorm.weight", (R,))
    kv_b = b.weight(p + "self_attn.kv_b_proj.weight", (H * (nope + v), R))
    parts = plan.absorb_parts
    if R % parts:
        raise ValueError(f"kv_lora_rank {R} does not split into plan.absorb_parts = {parts} column blocks")
    w_uk = b.weight(p + W_UK_PARTS, (H * parts * nope, R // parts))  # derived on the host (graph.derived)
    o_w = b.weight(p + "self_attn.o_proj.weight", (d, H * v))
    # host-computed tables, one row per position, one column per rotated pair (YaRN scaling folded in)
    cos = b.weight("rope.cos", (plan.max_positions, rope // 2), DType.F32)
    sin = b.weight("rope.sin", (plan.max_positions, rope // 2), DType.F32)

    q, kv_a = b.buffer(L + "q", H * (nope + rope)), b.buffer(L + "kv_a", R + rope)
    ev_q, ev_kva = b.event(L + "q_proj", layer), b.event(L + "kv_a_proj", layer)
    stage = H * (nope + rope) + R + rope
    wait_h = [(h_in_ready, 0)]
    b.gemv_tiles(Kind.RMSNORM_GEMV, L + "q_proj", H * (nope + rope), stage, ev_q, wait_h, (h_in, q), (in_norm, q_w), layer)
    b.gemv_tiles(Kind.RMSNORM_GEMV, L + "kv_a_proj", R + rope, stage, ev_kva, wait_h, (h_in, kv_a), (in_norm, kva_w), layer)

    q_lat, q_pe = b.buffer(L + "q_lat", H * R), b.buffer(L + "q_pe", H * rope)
    ev_qabs = b.event(L + "q_absorb", layer)
    # Tiles of (head, column block) units, so 16 heads make 64 tasks of 32 KB instead of 16 of 128 KB.
    for i, tile in enumerate(tiles(H * parts, plan.heads_per_tile)):
        b.task(Kind.ROPE_Q_ABSORB, f"{L}q_absorb[{i}]", ev_qabs, [(ev_q, 0)], (q, q_lat, q_pe), (w_uk, cos, sin),
               (parts,), layer=layer, tile=tile)
    ckv = b.buffer(L + "ckv", plan.max_positions, R, DType.MODEL, Persistence.LOG)
    kpe = b.buffer(L + "kpe", plan.max_positions, rope, DType.MODEL, Persistence.LOG)
    ev_cache = ev_qabs if plan.append_signals_absorb else b.event(L + "cache_append", layer)
    b.task(Kind.CACHE_APPEND, L + "cache_append", ev_cache, [(ev_kva, 0)], (kv_a, ckv, kpe), (kv_norm, cos, sin),
           layer=layer)

    chunks = tiles(plan.max_positions, plan.attn_chunk)
    part_o = b.buffer(L + "attn_part_o", len(chunks) * H, R)
    part_ml = b.buffer(L + "attn_part_ml", len(chunks) * H, 2)
    ev_chunk = b.event(L + "attn_chunk", layer)
    if H % plan.attn_head_groups:
        raise ValueError(f"plan.attn_head_groups={plan.attn_head_groups} does not divide the {H} heads")
    group = H // plan.attn_head_groups
    for i, tile in enumerate(chunks):
        for g, h0 in enumerate(range(0, H, group)):
            name = f"{L}attn_chunk[{i}]" if plan.attn_head_groups == 1 else f"{L}attn_chunk[{i}.h{g}]"
            b.task(Kind.ATTN_CHUNK, name, ev_chunk, [(e, 0) for e in dict.fromkeys((ev_qabs, ev_cache))],
                   (q_lat, q_pe, ckv, kpe, part_o, part_ml), args=(h0, h0 + group), layer=layer, tile=tile, slot=i)
    ev_merge = b.event(L + "attn_merge", layer)
    lat_parts = plan.merge_lat_parts
    if lat_parts > 1:
        if plan.merge_v_parts != 1 or not merge_lat_parts_fit(lat_parts, R, plan.heads_per_tile, plan.router_in_o_proj):
            raise ValueError(f"plan.merge_lat_parts={lat_parts} needs merge_v_parts 1, heads_per_tile 1, no "
                             f"router_in_o_proj, at most {KERNEL_LIMITS['MAX_MERGE_LAT_PARTS']} parts and latent "
                             f"columns ({R}) that split into that many blocks of a multiple of 8")
        attn_out = b.buffer(L + "attn_out", lat_parts * H * v)  # lat_parts partial vectors, o_proj adds them
        w_uv = b.weight(p + W_UV_PARTS, (H * lat_parts * v, R // lat_parts))  # derived on the host
        for h in range(H):
            for part in range(lat_parts):
                b.task(Kind.ATTN_MERGE_COLS, f"{L}attn_merge[{h}.c{part}]", ev_merge, [(ev_chunk, 0)],
                       (part_o, part_ml, attn_out), (w_uv,), (len(chunks), lat_parts), layer=layer, tile=(h, h + 1),
                       slot=part)
    else:
        attn_out = b.buffer(L + "attn_out", H * v)
    parts = plan.merge_v_parts
    if lat_parts == 1 and not merge_v_parts_fit(parts, v, plan.heads_per_tile):
        raise ValueError(f"plan.merge_v_parts={parts} needs heads_per_tile 1 and {v} rows a head that split into "
                         f"parts of a multiple of {KERNEL_LIMITS['WUV_ROWS_PER_PASS']} (the kernel's W_UV passes)")
    for i, tile in enumerate(tiles(H, plan.heads_per_tile) if lat_parts == 1 else []):
        for part in range(parts):
            name = f"{L}attn_merge[{i}]" if parts == 1 else f"{L}attn_merge[{i}.v{part}]"
            b.task(Kind.ATTN_MERGE_UV, name, ev_merge, [(ev_chunk, 0)], (part_o, part_ml, attn_out), (kv_b,),
                   (len(chunks), parts), layer=layer, tile=tile, slot=part)

    h_attn = b.buffer(L + "h_attn", d)
    ev_o = b.event(L + "o_proj", layer)
    if not _router_in_o_proj(cfg, plan, layer):
        b.gemv_tiles(Kind.O_PROJ_RESIDUAL, L + "o_proj", d, d, ev_o, [(ev_merge, 0)], (attn_out, h_in, h_attn, h_out),
                     (o_w,), layer)
        return h_attn, ev_o, None
    # Each o_proj tile has its rows of h_attn in hand: it also adds them into the router's dot products
    # (its own row of router_parts), so the top-k follows o_proj with no router stage between them.
    E = cfg.n_routed_experts
    o_tiles = tiles(d, plan.tile_rows(d))
    router_parts = b.buffer(L + "router_parts", len(o_tiles), E + 1)
    post_norm = b.weight(p + "post_attention_layernorm.weight", (d,))
    router_w = b.weight(p + "mlp.gate.weight", (E, d), DType.F32)  # HF keeps the router in fp32
    for i, tile in enumerate(o_tiles):
        b.task(Kind.O_PROJ_ROUTER, f"{L}o_proj[{i}]", ev_o, [(ev_merge, 0)], (attn_out, h_in, h_attn, h_out, router_parts),
               (o_w, post_norm, router_w), layer=layer, tile=tile, slot=i)
    return h_attn, ev_o, router_parts


def _router_in_o_proj(config, plan: Plan, layer) -> bool:
    return plan.router_in_o_proj and layer >= config.first_k_dense_replace


def _routing_tasks(config, plan: Plan) -> int:
    """Tasks that decide the routing of one MoE layer: the router's expert tiles (none where the o_proj
    tiles compute its dot products) and the top-k."""
    if plan.router_in_o_proj:
        return 1
    return len(tiles(config.n_routed_experts, plan.tile_rows(config.n_routed_experts))) + 1


def _mlp(b: _Builder, layer, h_attn, ev_o, h_out, ev_out, router_parts=None):
    cfg = b.config
    d = cfg.hidden_size
    p = f"model.layers.{layer}."
    L = f"L{layer}."
    post_norm = b.weight(p + "post_attention_layernorm.weight", (d,))
    if layer < cfg.first_k_dense_replace:
        inter = cfg.intermediate_size
        gate, up = b.weight(p + "mlp.gate_proj.weight", (inter, d)), b.weight(p + "mlp.up_proj.weight", (inter, d))
        if b.plan.dense_split_k:
            slices = split_k_tiles(inter, b.plan.stage_tiles or b.plan.workers, max_rows=inter)
            partials = _partials(b, L + "mlp", len(slices))
            ev_parts = b.event(L + "mlp_slices", layer)
            weights = (post_norm, gate, up, b.weight(transposed(p + "mlp.down_proj.weight"), (inter, d)))
            for i, tile in enumerate(slices):
                b.task(Kind.GATE_UP_DOWN, f"{L}mlp_slice[{i}]", ev_parts, [(ev_o, 0)], (h_attn, partials), weights,
                       _slice_args(b, i), layer=layer, tile=tile)
            _sum_partials(b, layer, partials, ev_parts, h_out, ev_out, tiles(d, b.plan.sum_tile_rows(d)))
            return
        down = b.weight(p + "mlp.down_proj.weight", (d, inter))
        act = b.buffer(L + "mlp_act", inter)
        ev_gu = b.event(L + "mlp_gate_up", layer)
        b.gemv_tiles(Kind.GATE_UP, L + "mlp_gate_up", inter, inter, ev_gu, [(ev_o, 0)], (h_attn, act),
                     (post_norm, gate, up), layer)
        b.gemv_tiles(Kind.DOWN_ACCUM, L + "mlp_down", d, d, ev_out, [(ev_gu, 0)], (act, h_out), (down,), layer)
        return

    E, K, inter = cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size
    shared = inter * cfg.n_shared_experts
    router_w = b.weight(p + "mlp.gate.weight", (E, d), DType.F32)  # HF keeps the router in fp32
    gate_up = b.weight(p + "mlp.experts.gate_up_proj", (E, 2 * inter, d))
    sh_gate_name, sh_up_name = p + "mlp.shared_experts.gate_proj.weight", p + "mlp.shared_experts.up_proj.weight"
    n_parts = 1 if b.plan.moe_tiles.startswith("split-k") else b.plan.shared_parts
    if shared % n_parts:
        raise ValueError(f"the shared experts' {shared} intermediate rows do not split into {n_parts} parts")
    part = shared // n_parts
    if n_parts == 1:
        sh_gate, sh_up = b.weight(sh_gate_name, (shared, d)), b.weight(sh_up_name, (shared, d))
    down_name, sh_down_name = p + "mlp.experts.down_proj", p + "mlp.shared_experts.down_proj.weight"

    def router():
        if router_parts is not None:  # the o_proj tiles computed the dot products: the top-k adds them
            n_parts = b.buffers[router_parts].rows
            b.task(Kind.ROUTE_PARTS_TOPK, L + "route_topk", ev_route, [(ev_o, 0)], (router_parts, route_idx, route_w),
                   args=(n_parts,), layer=layer)
            return ev_o
        # The router's 512 KB (fp32) cut into expert tiles over several workers, then one small task
        # picks the top k from the logits: one more round trip, but no single worker streams it all.
        logits = b.buffer(L + "router_logits", E)
        ev_logits = b.event(L + "router", layer)
        b.gemv_tiles(Kind.ROUTER, L + "router", E, E, ev_logits, [(ev_o, 0)], (h_attn, logits), (post_norm, router_w),
                     layer)
        b.task(Kind.ROUTE_TOPK, L + "route_topk", ev_route, [(ev_logits, 0)], (logits, route_idx, route_w), layer=layer)
        return ev_logits

    route_idx, route_w = b.buffer(L + "route_idx", K, 1, DType.I32), b.buffer(L + "route_w", K)
    ev_route = b.event(L + "route_topk", layer)
    if b.plan.moe_tiles == "split-k":
        router()
        # The down matrices transposed (derived on the host), so that a slice's band of down columns
        # is contiguous rows: streamed whole, where the band itself would be 64-128 byte pieces.
        down_t = b.weight(transposed(down_name), (E, inter, d))
        sh_down_t = b.weight(transposed(sh_down_name), (shared, d))
        _split_k_experts(b, layer, h_attn, ev_o, h_out, ev_out, ev_route, route_idx, route_w,
                         (post_norm, sh_gate, sh_up, sh_down_t), (post_norm, gate_up, down_t))
        return
    if n_parts == 1:
        shared_mlps = [("", (sh_gate, sh_up, b.weight(sh_down_name, (d, shared))))]
    else:  # part q: rows q*part .. of gate and up (views), the same columns of down (a copy)
        shared_mlps = [(f".{q}", (b.weight(rows(sh_gate_name, q * part, (q + 1) * part), (part, d)),
                                  b.weight(rows(sh_up_name, q * part, (q + 1) * part), (part, d)),
                                  b.weight(cols(sh_down_name, q * part, (q + 1) * part), (d, part))))
                       for q in range(n_parts)]
    routing_tasks = _routing_tasks(cfg, b.plan)
    shared_acts = [(b.buffer(f"{L}shared_act{sfx}", part), b.event(f"{L}shared_gate_up{sfx}", layer))
                   for sfx, _ in shared_mlps]

    def shared_gate_up(stage_rows, after=ev_o, reserved=routing_tasks):
        for (sfx, (gate, up, _)), (act, ev) in zip(shared_mlps, shared_acts):
            b.gemv_tiles(Kind.GATE_UP, f"{L}shared_gate_up{sfx}", part, stage_rows, ev, [(after, 0)], (h_attn, act),
                         (post_norm, gate, up), layer, reserved=reserved)

    if b.plan.moe_tiles == "split-k-routed":
        router()
        # the shared gate/up tiles as routing-free cuts them (a stage beside the routed gate/up)
        shared_gate_up(shared + K * inter)
        (_, (_, _, sh_down)), ((shared_act, ev_shared),) = shared_mlps[0], shared_acts
        down_t = b.weight(transposed(down_name), (E, inter, d))

        def shared_down(sums):  # in the sum's row tiles, ahead of them: each row range gets two adders
            for i, tile in enumerate(sums):
                b.task(Kind.DOWN_ACCUM, f"{L}shared_down[{i}]", ev_out, [(ev_shared, 0)], (shared_act, h_out),
                       (sh_down,), layer=layer, tile=tile)

        _split_k_experts(b, layer, h_attn, ev_o, h_out, ev_out, ev_route, route_idx, route_w, None,
                         (post_norm, gate_up, down_t), before_sums=shared_down)
        return

    down = b.weight(down_name, (E, d, inter))
    # every down tile of one row range adds into h_out with the others: same tiles
    down_stage = d * (K + n_parts) // b.plan.down_split
    down_tiles = (even_tiles(d, (b.plan.stage_tiles or b.plan.workers) * b.plan.down_split // (K + n_parts),
                             b.plan.row_align)
                  if b.plan.down_fit else tiles(d, b.plan.tile_rows(down_stage)))
    acts = [b.buffer(f"{L}expert_act.{k}", inter) for k in range(K)]
    ev_gus = [b.event(f"{L}expert_gate_up.{k}", layer) for k in range(K)]

    def shared_down():
        for (sfx, (_, _, down_part)), (act, ev) in zip(shared_mlps, shared_acts):
            b.gemv_tiles(Kind.DOWN_ACCUM, f"{L}shared_down{sfx}", d, down_stage, ev_out, [(ev, 0)], (act, h_out),
                         (down_part,), layer, tile_list=down_tiles)

    def routed_gate_up(stage_rows, reserved):
        for k in range(K):
            b.gemv_tiles(Kind.EXPERT_GATE_UP, f"{L}expert_gate_up.{k}", inter, stage_rows, ev_gus[k],
                         [(ev_route, 0)], (h_attn, route_idx, acts[k]), (post_norm, gate_up), layer, slot=k,
                         reserved=reserved)

    if b.plan.moe_tiles == "routing-free":
        # One gate/up stage (shared experts and every slot) cut over the workers the routing leaves
        # free, so that each worker gets at most one of its tiles; shared experts first in the graph
        # (they only need h_attn, so they stream while routing is decided) and every gate/up tile
        # before any down tile, so list scheduling hands them the free workers first.
        ev_logits = router()
        gate_up_stage = shared + K * inter
        if b.plan.gate_up_all_workers:  # the routed tiles ahead of the shared down tiles, on the routing's workers too
            shared_gate_up(gate_up_stage, ev_logits if b.plan.shared_after_router else ev_o, 0)
            routed_gate_up(gate_up_stage, 0)
            shared_down()
        else:
            shared_gate_up(gate_up_stage, ev_logits if b.plan.shared_after_router else ev_o)
            shared_down()
            routed_gate_up(gate_up_stage, routing_tasks)
    else:
        # The shared experts' gate/up alone over the free workers: short tiles that are done about
        # when the routing is, so the routed gate/up then has the workers to itself.
        if b.plan.shared_after_router:
            shared_gate_up(shared, router())
        else:
            shared_gate_up(shared)
            router()
        shared_down()
        n_shared_down = n_parts * len(down_tiles)
        routed_gate_up(K * inter, 0 if b.plan.moe_tiles == "shared-first-all" else n_shared_down)
    for k in range(K):
        b.gemv_tiles(Kind.EXPERT_DOWN_ACCUM, f"{L}expert_down.{k}", d, down_stage, ev_out, [(ev_gus[k], 0)],
                     (acts[k], route_idx, route_w, h_out), (down,), layer, slot=k, tile_list=down_tiles)


def _split_k_experts(b: _Builder, layer, h_attn, ev_o, h_out, ev_out, ev_route, route_idx, route_w, shared_weights,
                     routed_weights, before_sums=None):
    """Every expert as slices of its intermediate rows, each slice one task from h_attn to a partial
    row of the layer's output: the shared experts' slices over the workers the routing leaves free
    (they need only h_attn), then the routed slots' slices (about one per worker), then the sum.
    shared_weights None: routed slices only (the caller tiles the shared experts, before_sums(row
    tiles) adding their down tiles in the sum's row tiles ahead of it)."""
    cfg, plan = b.config, b.plan
    d, K, inter = cfg.hidden_size, cfg.num_experts_per_tok, cfg.moe_intermediate_size
    shared = inter * cfg.n_shared_experts
    L = f"L{layer}."
    stage = plan.stage_tiles or plan.workers
    # By default one slice per worker the routing leaves free, each at most split_k_rows; a chosen
    # number of shared slices is taken as asked, however long they get.
    if shared_weights is None:
        shared_slices = []
    elif plan.split_k_shared_tiles:
        shared_slices = split_k_tiles(shared, plan.split_k_shared_tiles, max_rows=shared)
    else:
        shared_slices = split_k_tiles(shared, max(1, stage - _routing_tasks(cfg, plan)), max_rows=plan.split_k_rows)
    routed_slices = [] if plan.routed_pool_rows else split_k_tiles(inter, max(1, stage // K), max_rows=plan.split_k_rows)
    per_slot = [routed_slices] * K  # none where the routed rows go to a pool's takers
    if plan.split_k_skew and shared_slices and len(routed_slices) > 1:
        # the workers without a shared slice, spread over the slots: each slot's first slices are longer
        n_long = max(0, stage - len(shared_slices))
        per_slot = [skewed_tiles(inter, len(routed_slices), n_long // K + (k < n_long % K), plan.split_k_skew)
                    for k in range(K)]
    n_rows = len(shared_slices) + sum(len(s) for s in per_slot)
    partials = _partials(b, L + "moe", n_rows)
    ev_parts = b.event(L + "moe_slices", layer)
    norm, gate_up, down = routed_weights
    for i, tile in enumerate(shared_slices):
        _, sh_gate, sh_up, sh_down = shared_weights
        b.task(Kind.GATE_UP_DOWN, f"{L}shared_slice[{i}]", ev_parts, [(ev_o, 0)], (h_attn, partials),
               (norm, sh_gate, sh_up, sh_down), _slice_args(b, i), layer=layer, tile=tile)
    if plan.routed_pool_rows:
        # one taker a worker: each takes pieces of every slot's rows until the pool is empty
        pool = b.buffer(L + "moe_pool", 1, 1, DType.I32, Persistence.COUNTER)
        for i in range(stage):
            b.task(Kind.EXPERT_POOL, f"{L}expert_pool[{i}]", ev_parts, [(ev_route, 0)],
                   (h_attn, route_idx, route_w, partials, pool), (norm, gate_up, down),
                   (stage, int(plan.pool_local_sum)), layer=layer,
                   tile=(0, plan.routed_pool_rows))
    first_row = list(accumulate([len(shared_slices)] + [len(s) for s in per_slot]))
    # longest first: the list scheduler hands a stage's first tasks to the workers free first
    slices = [(k, i, tile) for k, slot in enumerate(per_slot) for i, tile in enumerate(slot)]
    for k, i, tile in sorted(slices, key=lambda s: s[2][0] - s[2][1]):  # stable: equal lengths keep slot order
        b.task(Kind.EXPERT_GATE_UP_DOWN, f"{L}expert_slice.{k}[{i}]", ev_parts, [(ev_route, 0)],
               (h_attn, route_idx, route_w, partials), (norm, gate_up, down), _slice_args(b, first_row[k] + i),
               layer=layer, tile=tile, slot=k)
    sums = tiles(d, plan.sum_tile_rows(d))
    if before_sums:
        before_sums(sums)
    _sum_partials(b, layer, partials, ev_parts, h_out, ev_out, sums)


def _partials(b: _Builder, prefix, n_slices):
    """Where a layer's split-K slices put their partials: a row each, or one fixed-point row they all add into."""
    d = b.config.hidden_size
    if b.plan.split_k_sum == "fixed-point":
        return b.buffer(prefix + "_acc", 1, d, DType.I64)
    return b.buffer(prefix + "_partials", n_slices, d)


def _slice_args(b: _Builder, row):
    """A split-K slice's (row, fixed_point): its own partial row, or the one accumulator (row 0)."""
    return (0, 1) if b.plan.split_k_sum == "fixed-point" else (row, 0)


def _sum_partials(b: _Builder, layer, partials, ev_parts, h_out, ev_out, sums):
    """The split-K slices' partials added into h_out, one task per row tile of `sums`: the rows in a fixed
    order (SUM_PARTIALS), or the fixed-point accumulator's rows, zeroed for the next step (SUM_FIXED_POINT)."""
    for i, tile in enumerate(sums):
        if b.plan.split_k_sum == "fixed-point":
            b.task(Kind.SUM_FIXED_POINT, f"L{layer}.sum_slices[{i}]", ev_out, [(ev_parts, 0)], (partials, h_out),
                   layer=layer, tile=tile)
        else:
            b.task(Kind.SUM_PARTIALS, f"L{layer}.sum_slices[{i}]", ev_out, [(ev_parts, 0)], (partials, h_out),
                   args=(b.buffers[partials].rows,), layer=layer, tile=tile)


def build_graph(config, plan: Plan, layers=None) -> Graph:
    """The decode-step graph. layers=None: embed, every layer, head and argmax (steps chain through the
    token buffer). A contiguous list of layers: just those, reading h.<first> from the host."""
    n_all = config.num_hidden_layers
    if layers is None:
        layers, has_head = list(range(n_all)), True
    else:
        layers, has_head = list(layers), False
        if not layers or layers != list(range(layers[0], layers[0] + len(layers))) or not 0 <= layers[0] <= layers[-1] < n_all:
            raise ValueError(f"layers must be a non-empty ascending run of consecutive indices in [0, {n_all}), got {layers}")
    b = _Builder(config, plan)
    d = config.hidden_size
    hidden = {l: b.buffer(f"h.{l}", d) for l in range(layers[0], layers[-1] + 2)}
    ready = None
    if has_head:
        tokens = b.buffer("tokens", plan.max_steps + 1, 1, DType.I32, Persistence.LOG)
        ev_token = b.event("argmax")
        ev_embed = b.event("embed")
        embed = b.weight("model.embed_tokens.weight", (config.vocab_size, d))
        b.task(Kind.EMBED, "embed", ev_embed, [(ev_token, 1)], (tokens, hidden[0]), (embed,), tile=(0, d))
        ready = ev_embed
    for layer in layers:
        ev_out = b.event(f"L{layer}.out", layer)
        h_attn, ev_o, router_parts = _attention(b, layer, hidden[layer], ready, hidden[layer + 1])
        _mlp(b, layer, h_attn, ev_o, hidden[layer + 1], ev_out, router_parts)
        ready = ev_out
    if has_head:
        V = config.vocab_size
        norm = b.weight("model.norm.weight", (d,))
        lm_head = b.weight("lm_head.weight", (V, d))
        head_tiles = tiles(V, plan.tile_rows(V))
        logits = b.buffer("logits", plan.max_steps, V, DType.F32, Persistence.LOG)
        part_max, part_idx = b.buffer("argmax_part_max", len(head_tiles)), b.buffer("argmax_part_idx", len(head_tiles), 1, DType.I32)
        ev_head = b.event("lm_head")
        for i, tile in enumerate(head_tiles):
            b.task(Kind.LM_HEAD, f"lm_head[{i}]", ev_head, [(ready, 0)], (hidden[n_all], logits, part_max, part_idx),
                   (norm, lm_head), tile=tile, slot=i)
        b.task(Kind.ARGMAX, "argmax", ev_token, [(ev_head, 0)], (part_max, part_idx, tokens), args=(len(head_tiles),))

    constants = model_constants(config, plan, layers[0], len(layers), has_head)
    graph = Graph(constants, b.tasks, b.events, b.buffers, b.weights, [])
    for t in graph.tasks:
        t.cost = task_cost(t, graph)
    graph.workers = assign(graph.tasks, graph.events, plan)
    return graph

"""CPU checks of the megakernel's stage table (fleet_decode.kernels.staging): every staged range lies
inside its weight and fits the stage, a stage's tiles cover their matrix once, and the kinds the
runtime cannot stage (experts, lm_head, attention chunks) never are."""
import numpy as np
import pytest

from fleet_decode.graph import Plan, build_graph
from fleet_decode.graph.format import Kind
from fleet_decode.kernels.runtime import Tuning
from fleet_decode.kernels.staging import (DEVICE_BYTES, DOWN_KINDS, LEAVES_STAGE_IDLE, NOT_STAGED, STAGE_AHEAD,
                                          STAGEABLE_KINDS, STAGED_KINDS, USES_STAGE, WORDS, send_ahead, stage_table)
from fleet_decode.model import get_config

CAPACITY = 128 * 1024


@pytest.fixture(scope="module")
def graph():
    return build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=132, max_positions=256, max_steps=4),
                       layers=[0, 1])


def _bytes(graph, slot):
    w = graph.weights[slot]
    return int(np.prod(w.shape)) * DEVICE_BYTES[w.dtype]


def test_staged_ranges_lie_inside_their_weight_and_fit(graph):
    table = stage_table(graph, CAPACITY)
    assert table.shape == (len(graph.tasks), WORDS)
    staged = [i for i in range(len(graph.tasks)) if table[i, 0] >= 0]
    assert staged, "the real config's attention chain must stage"
    for i in staged:
        slot, begin, nbytes, ahead, source = (int(v) for v in table[i])
        assert ahead == -1  # stage_table alone sends nothing ahead
        assert source == 0  # no weight addresses given
        assert graph.tasks[i].kind in STAGED_KINDS
        assert 0 < nbytes <= CAPACITY and begin % 16 == 0 and nbytes % 16 == 0
        assert begin + nbytes <= _bytes(graph, slot), graph.tasks[i].name


def test_every_stageable_kind_is_staged_at_132_workers(graph):
    # the router's kinds of the other plan (Plan.router_in_o_proj) in a graph of their own
    fused = build_graph(get_config("deepseek-coder-v2-lite"),
                        Plan(workers=132, max_positions=256, max_steps=4, router_in_o_proj=True), layers=[0, 1])
    # and the merge cut by latent columns
    cut = build_graph(get_config("deepseek-coder-v2-lite"),
                      Plan(workers=132, max_positions=256, max_steps=4, merge_lat_parts=4), layers=[0, 1])
    for g in (graph, fused, cut):
        table = stage_table(g, CAPACITY, kinds=STAGEABLE_KINDS)
        for kind in STAGEABLE_KINDS:
            tasks = [i for i, t in enumerate(g.tasks) if t.kind == kind]
            assert all(table[i, 0] >= 0 for i in tasks), kind.name
    for kind in STAGEABLE_KINDS:
        assert any(t.kind == kind for g in (graph, fused, cut) for t in g.tasks), kind.name


def test_only_the_kinds_asked_for_are_staged(graph):
    kinds = (Kind.ATTN_MERGE_UV, Kind.ROUTER)
    table = stage_table(graph, CAPACITY, kinds=kinds)
    staged_kinds = {graph.tasks[i].kind for i in range(len(graph.tasks)) if table[i, 0] >= 0}
    assert staged_kinds == set(kinds)
    assert set(STAGED_KINDS) <= set(STAGEABLE_KINDS)
    # the default table is the default kinds'
    default = stage_table(graph, CAPACITY)
    present = {t.kind for t in graph.tasks}
    assert {graph.tasks[i].kind for i in range(len(graph.tasks)) if default[i, 0] >= 0} == set(STAGED_KINDS) & present


def test_tuning_names_the_staged_kinds_and_refuses_others():
    assert Tuning().kinds() == STAGED_KINDS
    assert Tuning(staged_kinds=("ROUTER", "ATTN_MERGE_UV")).kinds() == (Kind.ROUTER, Kind.ATTN_MERGE_UV)
    assert Tuning(staged_kinds=()).kinds() == ()
    with pytest.raises(ValueError, match="LM_HEAD"):
        Tuning(staged_kinds=("LM_HEAD",))


def test_a_stage_of_tiles_stages_its_matrix_exactly_once(graph):
    table = stage_table(graph, CAPACITY, kinds=STAGEABLE_KINDS)  # the q/kv tiles are not staged by default
    q_w = next(i for i, w in enumerate(graph.weights) if w.name == "model.layers.1.self_attn.q_proj.weight")
    tiles = [i for i, t in enumerate(graph.tasks) if t.name.startswith("L1.q_proj[")]
    spans = sorted((int(table[i, 1]), int(table[i, 1] + table[i, 2])) for i in tiles)
    assert all(table[i, 0] == q_w for i in tiles)
    assert spans[0][0] == 0 and spans[-1][1] == _bytes(graph, q_w)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # contiguous, no overlap


def test_the_table_carries_each_staged_range_s_device_address(graph):
    """The runtime copies from the table's source word alone (no weight-table lookup on the device)."""
    addresses = [(1 << 32) + 4096 * k for k in range(len(graph.weights))]
    table = stage_table(graph, CAPACITY, addresses)
    staged = table[:, 0] >= 0
    assert staged.any()
    assert (table[staged, 4] == np.array(addresses)[table[staged, 0]] + table[staged, 1]).all()
    assert (table[~staged, 4] == 0).all()


def test_nothing_is_staged_without_room_or_on_misaligned_weights(graph):
    assert (stage_table(graph, 0)[:, 0] == -1).all()
    addresses = [8] * len(graph.weights)  # every weight 8 bytes off a 16-byte boundary
    assert (stage_table(graph, CAPACITY, addresses)[:, 0] == -1).all()


def test_experts_head_and_chunks_are_never_staged(graph):
    table = stage_table(graph, 1 << 30)
    for i, t in enumerate(graph.tasks):
        if t.kind in (Kind.EXPERT_GATE_UP, Kind.EXPERT_DOWN_ACCUM, Kind.GATE_UP, Kind.DOWN_ACCUM, Kind.ATTN_CHUNK,
                      Kind.LM_HEAD, Kind.EMBED, Kind.ARGMAX):
            assert tuple(table[i]) == NOT_STAGED, t.name


def test_merge_of_two_heads_is_not_one_range_and_stays_in_global_memory():
    g = build_graph(get_config("deepseek-coder-v2-lite"),
                    Plan(workers=16, max_positions=256, max_steps=4, heads_per_tile=2), layers=[1])
    table = stage_table(g, 1 << 30)
    merges = [i for i, t in enumerate(g.tasks) if t.kind == Kind.ATTN_MERGE_UV]
    assert merges and all(table[i, 0] == -1 for i in merges)


def test_a_merge_in_parts_stages_its_part_of_the_heads_w_uv():
    config = get_config("deepseek-coder-v2-lite")
    g = build_graph(config, Plan(workers=132, max_positions=256, max_steps=4, merge_v_parts=2), layers=[1])
    table = stage_table(g, CAPACITY)
    kv_b = next(i for i, w in enumerate(g.weights) if w.name == "model.layers.1.self_attn.kv_b_proj.weight")
    row_bytes = config.kv_lora_rank * 2
    per_head = config.qk_nope_head_dim + config.v_head_dim
    for i, t in enumerate(g.tasks):
        if t.kind == Kind.ATTN_MERGE_UV:
            h, part = t.tile[0], t.slot
            first_row = h * per_head + config.qk_nope_head_dim + part * config.v_head_dim // 2
            assert tuple(table[i]) == (kv_b, first_row * row_bytes, config.v_head_dim // 2 * row_bytes, -1, 0)


def test_a_merge_of_latent_columns_stages_its_block_of_w_uv():
    config = get_config("deepseek-coder-v2-lite")
    g = build_graph(config, Plan(workers=132, max_positions=256, max_steps=4, merge_lat_parts=4), layers=[1])
    table = stage_table(g, CAPACITY)
    w_uv = next(i for i, w in enumerate(g.weights) if w.name == "model.layers.1.self_attn.w_uv_parts")
    block_bytes = config.v_head_dim * config.kv_lora_rank // 4 * 2
    merges = [(i, t) for i, t in enumerate(g.tasks) if t.kind == Kind.ATTN_MERGE_COLS]
    assert len(merges) == 4 * config.num_attention_heads
    for i, t in merges:
        assert tuple(table[i]) == (w_uv, (t.tile[0] * 4 + t.slot) * block_bytes, block_bytes, -1, 0)


def test_an_o_proj_tile_with_the_router_stages_its_o_proj_rows_only():
    config = get_config("deepseek-coder-v2-lite")
    g = build_graph(config, Plan(workers=132, max_positions=256, max_steps=4, router_in_o_proj=True), layers=[1])
    table = stage_table(g, CAPACITY)
    o_proj = next(i for i, w in enumerate(g.weights) if w.name == "model.layers.1.self_attn.o_proj.weight")
    tiles = [(i, t) for i, t in enumerate(g.tasks) if t.kind == Kind.O_PROJ_ROUTER]
    assert tiles and not any(t.kind == Kind.ROUTER for t in g.tasks)
    for i, t in tiles:
        r0, r1 = t.tile
        row_bytes = g.weights[o_proj].shape[1] * 2
        assert tuple(table[i]) == (o_proj, r0 * row_bytes, (r1 - r0) * row_bytes, -1, 0)


def _replay(graph, table):
    """Walks every list as the runtime does and fails where a sent tile would meet a busy stage: a tile
    sent while another is in flight, by an entry that uses the stage, or overtaken by another stage
    user before its task is reached. Returns the (sender, target, target is the sender's next entry) triples."""
    pairs = []
    for entries in graph.workers:
        pending = -1
        for position, t in enumerate(entries):
            staged = table[t, 0] >= 0
            if staged or graph.tasks[t].kind in USES_STAGE:
                assert pending in (-1, t), f"{graph.tasks[t].name} uses the stage while another tile is in flight"
                pending = -1
            ahead = int(table[t, 3])
            if ahead >= 0:
                assert not staged and graph.tasks[t].kind not in USES_STAGE, graph.tasks[t].name
                assert pending == -1, f"{graph.tasks[t].name} sends a tile while one is in flight"
                assert table[ahead, 0] >= 0 and ahead in entries[position + 1:], graph.tasks[t].name
                pending = ahead
                pairs.append((t, ahead, entries[position + 1] == ahead))
        assert pending == -1, "a sent tile's task is never reached in its list"
    return pairs


@pytest.mark.parametrize("kinds", [STAGED_KINDS, STAGEABLE_KINDS])
@pytest.mark.parametrize("policy", STAGE_AHEAD)
def test_a_tile_is_sent_ahead_only_into_a_free_stage(graph, kinds, policy):
    table = send_ahead(graph, stage_table(graph, CAPACITY, kinds=kinds), policy)
    pairs = _replay(graph, table)
    assert pairs, policy
    for sender, target, next_entry in pairs:
        s, t = graph.tasks[sender], graph.tasks[target]
        successor = next_entry and s.kind in LEAVES_STAGE_IDLE and (s.out_event, 0) in t.inputs
        if policy == "successor":
            assert successor, (s.name, t.name)
        elif policy == "next-layer":
            assert successor or t.layer != s.layer, (s.name, t.name)
        elif policy == "from-down":
            assert successor or (t.layer != s.layer and s.kind in DOWN_KINDS), (s.name, t.name)


def test_the_policies_send_more_tiles_ahead_in_order(graph):
    counts = {p: int((send_ahead(graph, stage_table(graph, CAPACITY), p)[:, 3] >= 0).sum()) for p in STAGE_AHEAD}
    assert counts["successor"] < counts["from-down"] <= counts["next-layer"] < counts["early"], counts
    # the successor policy is the runtime's rule before the planner had one: a chunk sends its merge
    table = send_ahead(graph, stage_table(graph, CAPACITY))
    assert {(graph.tasks[s].kind, graph.tasks[int(table[s, 3])].kind) for s in np.flatnonzero(table[:, 3] >= 0)} == {
        (Kind.ATTN_CHUNK, Kind.ATTN_MERGE_UV)}
    # next-layer sends the next layer's q/kv tiles (when staged) from this layer's MLP tiles
    table = send_ahead(graph, stage_table(graph, CAPACITY, kinds=STAGEABLE_KINDS), "next-layer")
    assert any(graph.tasks[s].kind == Kind.GATE_UP and graph.tasks[int(table[s, 3])].kind == Kind.RMSNORM_GEMV
               for s in np.flatnonzero(table[:, 3] >= 0))


def test_an_unknown_lookahead_is_refused(graph):
    with pytest.raises(ValueError, match="stage_ahead"):
        send_ahead(graph, stage_table(graph, CAPACITY), "always")
    with pytest.raises(ValueError, match="stage_ahead"):
        Tuning(stage_ahead="always")

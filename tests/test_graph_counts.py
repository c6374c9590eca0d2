"""Counts read off the graph of the real config agree with DESIGN.md; assignment covers every task."""

import pytest

from fleet_decode.graph import Kind, Plan, build_graph, default_plan
from fleet_decode.graph.__main__ import main as graph_cli
from fleet_decode.graph.counts import graph_counts
from fleet_decode.graph.plan import decode_plan, estimated_step_time, even_tiles, skewed_tiles
from fleet_decode.model import get_config


@pytest.fixture(scope="module")
def real():
    return get_config("deepseek-coder-v2-lite")  # the config only: the 15.7 B model is never built here


def expected_bytes(c, weight_bytes=2):
    """DESIGN.md's sum, written independently of the graph: per token, every attention and dense
    weight once, top_k routed experts and the shared experts per MoE layer, the router, lm_head,
    all the norm vectors and one embedding row."""
    d, H, L = c.hidden_size, c.num_attention_heads, c.num_hidden_layers
    dense_layers, moe_layers = c.first_k_dense_replace, L - c.first_k_dense_replace
    attention = (H * (c.qk_nope_head_dim + c.qk_rope_head_dim) * d + (c.kv_lora_rank + c.qk_rope_head_dim) * d
                 + H * (c.qk_nope_head_dim + c.v_head_dim) * c.kv_lora_rank + d * H * c.v_head_dim
                 + c.kv_lora_rank + d)  # + kv_a norm + input norm
    rope_rows = 2 * c.qk_rope_head_dim // 2  # the cos and sin rows of the current position, shared by all layers
    routed = c.num_experts_per_tok * 3 * c.moe_intermediate_size * d
    shared = 3 * c.n_shared_experts * c.moe_intermediate_size * d
    per_token = (L * (attention + d) + rope_rows + dense_layers * 3 * c.intermediate_size * d
                 + moe_layers * (routed + shared + c.n_routed_experts * d) + c.vocab_size * d + d + d)
    cache_per_position = L * (c.kv_lora_rank + c.qk_rope_head_dim)
    return per_token * weight_bytes, cache_per_position * weight_bytes


def test_real_config_bytes_per_token_match_design(real):
    graph = build_graph(real, default_plan(real, workers=132))
    counts = graph_counts(graph)
    weights, cache = expected_bytes(real)
    assert counts["weight_bytes_per_token_total"] == weights
    assert counts["cache_bytes_per_position"] == cache
    assert round(weights / 1e9, 2) == 4.90  # DESIGN.md: 4.90 GB of weights
    assert round(cache / 1e3, 1) == 31.1  # DESIGN.md: 27 x 576 x 2 = 31.1 KB per position
    per = counts["weight_bytes_per_token"]
    assert round(per["routed experts"] / 1e9, 2) == 2.70 and round(per["shared experts"] / 1e9, 2) == 0.90
    assert round(per["attention"] / 1e9, 2) == 0.74 and round(per["lm_head"] / 1e9, 2) == 0.42


def test_bytes_do_not_depend_on_tiling_or_workers(real):
    a = graph_counts(build_graph(real, default_plan(real, workers=132)))
    b = graph_counts(build_graph(real, default_plan(real, workers=7, assign="round-robin", attn_chunk=100)))
    assert a["weight_bytes_per_token_total"] == b["weight_bytes_per_token_total"]
    assert a["cache_bytes_per_position"] == b["cache_bytes_per_position"]
    assert b["workers"] == 7 and a["workers"] == 132


def test_graph_has_a_slot_per_routed_expert_and_the_step_chain(real):
    graph = build_graph(get_config("tiny"), Plan(workers=4))
    cfg = get_config("tiny")
    moe = range(cfg.first_k_dense_replace, cfg.num_hidden_layers)
    slots = {(t.layer, t.slot) for t in graph.tasks if t.kind == Kind.EXPERT_GATE_UP}
    assert slots == {(l, k) for l in moe for k in range(cfg.num_experts_per_tok)}
    embed = next(t for t in graph.tasks if t.kind == Kind.EMBED)
    assert [graph.events[e].name for e, lag in embed.inputs if lag == 1] == ["argmax"]


@pytest.mark.parametrize("policy", ["round-robin", "balanced"])
def test_assignment_places_each_task_once_in_graph_order(real, policy):
    graph = build_graph(real, default_plan(real, workers=17, assign=policy))
    placed = sorted(t for w in graph.workers for t in w)
    assert placed == list(range(len(graph.tasks)))
    assert all(w == sorted(w) for w in graph.workers)  # a worker never waits on its own later task


@pytest.mark.parametrize("total,n,align", [(2048, 18, 8), (2048, 19, 8), (100, 7, 8), (24, 9, 8), (2048, 1, 8)])
def test_even_tiles_cover_the_rows_in_aligned_tiles_that_differ_by_at_most_one_unit(total, n, align):
    cut = even_tiles(total, n, align)
    assert cut[0][0] == 0 and cut[-1][1] == total and all(a[1] == b[0] for a, b in zip(cut, cut[1:]))
    assert len(cut) == min(n, -(-total // align))
    sizes = [hi - lo for lo, hi in cut]
    assert all(lo % align == 0 for lo, _ in cut) and min(sizes) > 0
    units = -(-total // align)
    assert max(sizes) - min(sizes) <= align and max(sizes) <= -(-units // len(cut)) * align


@pytest.mark.parametrize("total,n,n_long,skew", [(1408, 22, 8, 8), (1408, 22, 7, 16), (1408, 22, 0, 8), (100, 4, 4, 8)])
def test_skewed_tiles_cover_the_rows_with_the_long_ones_first(total, n, n_long, skew):
    cut = skewed_tiles(total, n, n_long, skew)
    assert cut[0][0] == 0 and cut[-1][1] == total and all(a[1] == b[0] for a, b in zip(cut, cut[1:]))
    assert len(cut) == n and all(lo % 8 == 0 for lo, _ in cut)
    sizes = [hi - lo for lo, hi in cut]
    if 0 < n_long < n:
        assert min(sizes[:n_long]) > max(sizes[n_long:]) - 8 and sum(sizes[:n_long]) / n_long > sum(sizes[n_long:]) / (n - n_long)


def test_skewed_routed_slices_go_to_the_workers_without_a_shared_slice(real):
    """Plan.split_k_skew on the H200's 132 workers: every routed slice longer than the plain 64 rows runs on
    a worker that runs no shared slice, and every one shorter on a worker that does."""
    graph = build_graph(real, decode_plan(real, 1057, 132, split_k_skew=16, routed_pool_rows=0), layers=[0, 1, 2])
    owner = {t: w for w, tasks in enumerate(graph.workers) for t in tasks}
    with_shared = {owner[i] for i, t in enumerate(graph.tasks) if t.kind == Kind.GATE_UP_DOWN and t.layer == 1}
    routed = [(owner[i], t.tile[1] - t.tile[0]) for i, t in enumerate(graph.tasks)
              if t.kind == Kind.EXPERT_GATE_UP_DOWN and t.layer == 1]
    assert sum(rows for _, rows in routed) == real.num_experts_per_tok * real.moe_intermediate_size
    assert all(w not in with_shared for w, rows in routed if rows > 64)
    assert all(w in with_shared for w, rows in routed if rows < 64)


def test_fitted_down_tiles_give_every_worker_at_most_one_down_tile(real):
    """Plan.down_fit: 7 down matrices (6 slots and the shared experts) in 18 near-equal tiles each on 132
    workers, the same row ranges for all of them (the runtime sums identical ranges); the default cuts
    19 a matrix, the last of 32 rows, so one worker streams two."""
    def downs(**kw):
        graph = build_graph(real, default_plan(real, workers=132, **kw), layers=[0, 1, 2])
        owner = {t: w for w, tasks in enumerate(graph.workers) for t in tasks}
        tasks = [i for i, t in enumerate(graph.tasks) if t.layer == 1 and t.kind in (Kind.DOWN_ACCUM,
                                                                                     Kind.EXPERT_DOWN_ACCUM)]
        per_worker = [owner[i] for i in tasks]
        return [graph.tasks[i] for i in tasks], max(per_worker.count(w) for w in set(per_worker))
    fitted, most = downs(down_fit=True)
    assert len(fitted) == 7 * 18 and most == 1
    assert {t.tile for t in fitted if t.kind == Kind.DOWN_ACCUM} == {t.tile for t in fitted if t.slot == 0}
    assert max(t.tile[1] - t.tile[0] for t in fitted) == 120
    plain, most = downs()
    assert len(plain) == 7 * 19 and most == 2


def test_a_worker_stride_moves_whole_lists_to_other_workers(real):
    plain = build_graph(real, default_plan(real, workers=132), layers=[0, 1])
    spread = build_graph(real, default_plan(real, workers=132, worker_stride=7), layers=[0, 1])
    assert [spread.workers[(w * 7) % 132] for w in range(132)] == plain.workers
    with pytest.raises(ValueError, match="coprime"):
        default_plan(real, workers=132, worker_stride=11)


@pytest.mark.parametrize("workers", [132, 17])
def test_balanced_assignment_shortens_the_modelled_step(real, workers):
    def step_time(policy):
        return estimated_step_time(build_graph(real, default_plan(real, workers=workers, assign=policy)))
    balanced = step_time("balanced")
    assert balanced < step_time("round-robin")
    # and no schedule beats streaming every weight element once, spread evenly over the workers
    assert balanced >= graph_counts(build_graph(real, default_plan(real, workers=workers)))[
        "weight_bytes_per_token_total"] / 2 / workers


def test_counts_cli_prints_design_numbers(capsys):
    assert graph_cli(["--model", "random:deepseek-coder-v2-lite", "--workers", "132"]) == 0
    out = capsys.readouterr().out
    assert "4.903 GB" in out and "31.10 KB per context position" in out

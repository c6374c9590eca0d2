"""Counts read off the graph of the real config agree with DESIGN.md; assignment covers every task."""

import pytest

from fleet_decode.graph import Kind, Plan, build_graph, default_plan
from fleet_decode.graph.__main__ import main as graph_cli
from fleet_decode.graph.counts import graph_counts
from fleet_decode.graph.plan import estimated_step_time
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

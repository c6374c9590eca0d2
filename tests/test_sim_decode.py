"""The simulator decodes exactly what the reference decodes, whatever the workers and the schedule."""

import dataclasses
import json

import pytest
import torch

from fleet_decode.graph import Kind, build_graph
from fleet_decode.graph.plan import decode_plan, merge_lat_parts_fit, merge_v_parts_fit
from fleet_decode.sim import SCHEDULES, check_task_kinds, simulate, simulate_layer
from fleet_decode.sim.decode import sim_plan
from fleet_decode.sim.__main__ import main as sim_cli
from sim_cases import one_thread, TOKENS, case, second_config  # noqa: F401 (one_thread is a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=["tiny", "second"])
def source(request, tmp_path_factory):
    if request.param == "tiny":
        return "tiny"
    return f"random:{second_config(tmp_path_factory.mktemp('second'))}@3"


def assert_follows_reference(result, source):
    """Tokens equal to the reference's; every step's logits and every layer's hidden state within 1e-4."""
    model, _, tokens, logits, hidden = case(source)
    assert result.tokens == tokens
    assert len(result.logits) == len(result.hidden_states) == TOKENS
    for step in range(TOKENS):
        assert torch.allclose(result.logits[step], logits[step], rtol=0, atol=1e-4), f"step {step} logits"
        assert len(result.hidden_states[step]) == model.config.num_hidden_layers
        for layer, (ours, theirs) in enumerate(zip(result.hidden_states[step], hidden[step])):
            assert torch.allclose(ours, theirs, rtol=0, atol=1e-4), f"step {step} layer {layer}"
    assert result.counts["tasks_run"] == TOKENS * result.counts["tasks_per_step"]


@pytest.mark.parametrize("workers", [1, 3, 8, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_simulator_matches_reference(source, workers, schedule):
    model, ids, *_ = case(source)
    result = simulate(model, ids, TOKENS, workers=workers, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_split_k_experts_match_reference(source, workers, schedule):
    """The split-K expert tiling (slices of gate/up/down, then the partial rows summed) decodes the same."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), moe_tiles="split-k")
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert result.counts["tasks_per_kind"]["EXPERT_GATE_UP_DOWN"] > 0
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [5, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_skewed_split_k_slices_and_long_sum_tiles_match_reference(source, workers, schedule):
    """Routed slices of unequal lengths (Plan.split_k_skew, the longer ones first in the graph) and sum tiles
    of a chosen length (Plan.sum_rows) decode the same."""
    model, ids, *_ = case(source)
    # 8 tiles a stage: two shared slices, four routed slices a slot (six of them on the workers left free longer)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), moe_tiles="split-k", stage_tiles=8,
                               split_k_shared_tiles=2, split_k_rows=16, split_k_skew=8, sum_rows=16)
    graph = build_graph(model.config, plan)
    routed = [t for t in graph.tasks if t.kind == Kind.EXPERT_GATE_UP_DOWN and t.layer == 1]
    lengths = [t.tile[1] - t.tile[0] for t in routed]
    assert len(set(lengths)) > 1 and lengths == sorted(lengths, reverse=True)
    assert {t.tile[1] - t.tile[0] for t in graph.tasks if t.kind == Kind.SUM_PARTIALS} == {16}
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [4, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_dense_mlp_as_split_k_slices_matches_reference(source, workers, schedule):
    """Plan.dense_split_k: the dense layer's MLP as GATE_UP_DOWN slices over its intermediate rows and a sum,
    with no gate/up or down tile left in it."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), dense_split_k=True)
    graph = build_graph(model.config, plan)
    dense = [t for t in graph.tasks if t.layer == 0]
    slices = [t for t in dense if t.kind == Kind.GATE_UP_DOWN]
    assert len(slices) > 1 and not [t for t in dense if t.kind in (Kind.GATE_UP, Kind.DOWN_ACCUM)]
    assert sorted(t.tile for t in slices)[-1][1] == model.config.intermediate_size
    assert [t for t in dense if t.kind == Kind.SUM_PARTIALS]
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [4, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("absorb_parts", [None, 8])
def test_the_decode_plans_cut_matches_reference(source, workers, schedule, absorb_parts):
    """decode_plan as the megakernel decodes with it (tiles of 4 rows, the dense MLP and the experts as split-K
    slices, the sums in row tiles, the merge by latent columns where they split), and with the q-absorb in 8
    column blocks a head as on the real config."""
    model, ids, *_ = case(source)
    overrides = {} if absorb_parts is None else {"absorb_parts": absorb_parts}
    plan = decode_plan(model.config, len(ids) + TOKENS, workers, max_steps=TOKENS, **overrides)
    assert (plan.row_align, plan.dense_split_k, plan.moe_tiles) == (4, True, "split-k")
    graph = build_graph(model.config, plan)
    absorbs = [t for t in graph.tasks if t.kind == Kind.ROPE_Q_ABSORB and t.layer == 0]
    assert len(absorbs) == model.config.num_attention_heads * plan.absorb_parts
    assert not [t for t in graph.tasks if t.kind in (Kind.GATE_UP, Kind.DOWN_ACCUM)]
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [4, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("moe_tiles", ["split-k", "split-k-routed"])
def test_the_slices_fixed_point_sum_matches_reference(source, workers, schedule, moe_tiles):
    """Plan.split_k_sum = "fixed-point" on the decode plan's cut: every slice adds into one int64 row per layer,
    the sum tiles read and zero it; every step (each starting from the previous step's zero) decodes the same."""
    model, ids, *_ = case(source)
    plan = decode_plan(model.config, len(ids) + TOKENS, workers, max_steps=TOKENS, split_k_sum="fixed-point",
                       moe_tiles=moe_tiles)
    graph = build_graph(model.config, plan)
    assert not [t for t in graph.tasks if t.kind == Kind.SUM_PARTIALS]
    slices = [t for t in graph.tasks if t.kind in (Kind.GATE_UP_DOWN, Kind.EXPERT_GATE_UP_DOWN)]
    assert slices and {t.args for t in slices} == {(0, 1)}
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert result.counts["tasks_per_kind"]["SUM_FIXED_POINT"] > 0
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [4, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("piece_rows", [8, 16])
def test_routed_rows_handed_out_at_run_time_match_reference(source, workers, schedule, piece_rows):
    """Plan.routed_pool_rows: one EXPERT_POOL taker a worker takes pieces of every slot's rows from a counter
    (the simulator's schedule decides who takes how many: evenly, at random, or one taker all), each adding
    into the fixed-point accumulator; every split of the pieces decodes the same, and each step's counter
    grows by the pieces plus one last take a taker."""
    model, ids, *_ = case(source)
    plan = decode_plan(model.config, len(ids) + TOKENS, workers, max_steps=TOKENS, split_k_sum="fixed-point",
                       routed_pool_rows=piece_rows)
    graph = build_graph(model.config, plan)
    assert not [t for t in graph.tasks if t.kind == Kind.EXPERT_GATE_UP_DOWN]
    takers = [t for t in graph.tasks if t.kind == Kind.EXPERT_POOL and t.layer == 1]
    assert len(takers) == workers and {t.args for t in takers} == {(workers, 1)}  # local_sum on by default
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_routed_split_k_beside_shared_tiles_matches_reference(source, workers, schedule):
    """Plan.moe_tiles = "split-k-routed": the routed slots as slices summed by SUM_PARTIALS, the shared
    experts as gate/up and down tiles whose down tiles add into the sum's rows beside it."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), moe_tiles="split-k-routed")
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    kinds = result.counts["tasks_per_kind"]
    assert kinds["EXPERT_GATE_UP_DOWN"] > 0 and kinds["DOWN_ACCUM"] > 0 and "GATE_UP_DOWN" not in kinds
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_shared_experts_in_two_parts_match_reference(source, workers, schedule):
    """The shared experts' MLP cut in two over its intermediate rows (Plan.shared_parts): each part's
    gate/up and down tiles, adding beside the routed slots, decode the same."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), shared_parts=2)
    names = [t.name for t in build_graph(model.config, plan).tasks]
    assert any(".shared_down.1[" in n for n in names) and not any(".shared_down[" in n for n in names)
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("moe_tiles", ["routing-free", "shared-first"])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_shared_experts_after_the_router_match_reference(source, moe_tiles, schedule):
    """Plan.shared_after_router: the shared gate/up tiles wait on the router's logits (h_attn known to them
    only through the router tiles' release) and decode the same under every schedule."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(17, len(ids) + TOKENS, TOKENS), moe_tiles=moe_tiles, shared_after_router=True)
    graph = build_graph(model.config, plan)
    router_events = {t.out_event for t in graph.tasks if t.kind == Kind.ROUTER}
    shared = [t for t in graph.tasks if t.kind == Kind.GATE_UP and ".shared_gate_up" in t.name]
    assert shared and all(t.inputs and {e for e, _ in t.inputs} <= router_events for t in shared)
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=17)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_gate_up_over_every_worker_matches_reference(source, workers, schedule):
    """Plan.gate_up_all_workers: the routing-free gate/up stage cut over every worker, the routed tiles
    listed ahead of the shared down tiles, decodes the same."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), gate_up_all_workers=True)
    graph = build_graph(model.config, plan)
    names = [t.name for t in graph.tasks]
    first_routed = min(i for i, n in enumerate(names) if ".expert_gate_up." in n)
    layer = graph.tasks[first_routed].layer
    assert first_routed < min(i for i, t in enumerate(graph.tasks) if ".shared_down" in t.name and t.layer == layer)
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_fitted_down_tiles_and_strided_workers_match_reference(source, workers, schedule):
    """Plan.down_fit (the down stage in as many near-equal tiles as fit the workers) and Plan.worker_stride
    (the lists on other workers) decode the same."""
    model, ids, *_ = case(source)
    mlps = model.config.num_experts_per_tok + 1  # the slots' down matrices and the shared experts'
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), stage_tiles=3 * mlps, down_fit=True,
                               worker_stride=2)
    downs = [t for t in build_graph(model.config, plan).tasks if t.kind == Kind.EXPERT_DOWN_ACCUM]
    assert len({t.tile for t in downs}) == 3
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_attention_chunks_cut_by_heads_match_reference(source, workers, schedule):
    """Every chunk's heads in one task each (Plan.attn_head_groups = the model's heads): the tasks of a
    chunk write their own heads' rows of its partials, and the merge reads them as one chunk's."""
    model, ids, *_ = case(source)
    heads = model.config.num_attention_heads
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), attn_head_groups=heads)
    chunks = [t for t in build_graph(model.config, plan).tasks if t.kind == Kind.ATTN_CHUNK and t.layer == 0]
    assert {t.args for t in chunks} == {(h, h + 1) for h in range(heads)}
    assert len(chunks) == heads * len({t.slot for t in chunks})
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_merges_with_w_uv_in_parts_match_reference(source, workers, schedule):
    """Each head's merge in two tasks (Plan.merge_v_parts): both merge the head's partials, each writes
    half of its W_UV rows of attn_out. A model whose head rows do not halve into whole kernel passes
    (the second config's 12 rows: two halves of 6, passes of 8) is refused when the graph is built."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), merge_v_parts=2, heads_per_tile=1,
                               row_align=2)
    if not merge_v_parts_fit(2, model.config.v_head_dim, 1):
        with pytest.raises(ValueError, match="merge_v_parts=2"):
            build_graph(model.config, plan)
        return
    merges = [t for t in build_graph(model.config, plan).tasks if t.kind == Kind.ATTN_MERGE_UV and t.layer == 0]
    assert len(merges) == 2 * model.config.num_attention_heads and {(t.slot, t.args[1]) for t in merges} == {(0, 2), (1, 2)}
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_merges_cut_by_latent_columns_match_reference(source, workers, schedule):
    """Each head's merge in tasks of a block of latent columns each (Plan.merge_lat_parts; 2 or 3, whichever
    makes blocks of a multiple of 8): each writes one of the partial attn_out vectors the o_proj tiles add."""
    model, ids, *_ = case(source)
    parts = next(p for p in (2, 3) if merge_lat_parts_fit(p, model.config.kv_lora_rank, 1, False))
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), merge_lat_parts=parts, heads_per_tile=1)
    tasks = build_graph(model.config, plan).tasks
    merges = [t for t in tasks if t.kind == Kind.ATTN_MERGE_COLS and t.layer == 0]
    assert len(merges) == parts * model.config.num_attention_heads
    assert {(t.slot, t.args[1]) for t in merges} == {(p, parts) for p in range(parts)}
    assert not any(t.kind == Kind.ATTN_MERGE_UV for t in tasks)
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_router_in_the_o_proj_tiles_matches_reference(source, workers, schedule):
    """Plan.router_in_o_proj: the o_proj tiles of the MoE layers add their rows into the router's dot
    products, and the top-k adds their partial sums; no router tiles."""
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), router_in_o_proj=True)
    kinds = {t.kind for t in build_graph(model.config, plan).tasks}
    assert {Kind.O_PROJ_ROUTER, Kind.ROUTE_PARTS_TOPK} <= kinds and not kinds & {Kind.ROUTER, Kind.ROUTE_TOPK}
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers)
    assert_follows_reference(result, source)


def test_tokens_are_not_degenerate():
    """Guards the test above: a model that always emits one token would make agreement cheap."""
    assert len(set(case("tiny")[2])) > 1


@pytest.mark.parametrize("layer", [0, 1])
def test_single_layer_graph_matches_reference_layer(layer):
    model, ids, *_ = case("tiny")
    ours, theirs = simulate_layer(model, ids, layer, workers=3, schedule="random", seed=layer)
    assert ours.shape == theirs.shape == (model.config.hidden_size,)
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-5)
    assert theirs.abs().max() > 0


def test_every_task_kind_alone_matches_torch():
    results = check_task_kinds(case("tiny")[0], seed=1)
    assert set(results) == {k.name for k in Kind}
    for kind, r in results.items():
        assert r["max_rel"] <= 1e-5, f"{kind}: {r}"
        assert r["shape"] and all(n > 0 for n in r["shape"])


def test_cli_checks_against_reference(tmp_path):
    out = tmp_path / "sim.json"
    assert sim_cli(["--model", "tiny", "--tokens", "2", "--workers", "3", "--schedule", "reverse", "--prompt-len", "8",
                    "--check", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["check"]["tokens_equal"] and report["tokens"] == report["check"]["reference_tokens"]
    assert report["counts"]["tasks_run"] == 2 * report["counts"]["tasks_per_step"]

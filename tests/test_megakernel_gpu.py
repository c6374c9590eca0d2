"""The persistent megakernel on a GPU, with the real config (random weights, bf16) after HF's prefill of
the fixed 1,024-token prompt: M2 layers, one full step layer by layer, 32 tokens in one launch, the
determinism of the residual sums, and the watchdog on a graph that can never finish.

The megakernel is compared with fleet_decode.model.Reference, forced to the megakernel's own routing
where it can be: a routing near-tie (router scores within NEAR_TIE_SCORE) may pick other experts in any
two bf16 implementations, so a different choice is accepted only at a near-tie. The megakernel keeps
activations in fp32 between tasks (docs/task-graph.md §3); the Reference rounds them to bf16 where HF
does. Tolerances:
- one layer from the reference's input: M2's 2 %;
- the whole step on the same experts: each layer's rounding differences are amplified by the layers
  after it (random weights); the lead measured the Reference 3.4 % from HF eager at layer 26, two
  bf16 implementations that each sit ~2.4 % from exact arithmetic. STEP_REL_TOL keeps the megakernel
  no farther from the Reference than that; layers 0-3, before amplification, get EARLY_REL_TOL.
The numbers against HF eager are the pipeline's M3/M4 gates, measured by
`python -m fleet_decode.kernels.lab` (docs/megakernel.md), not asserted here.
"""
import dataclasses
import time

import pytest
import torch

from fleet_decode.graph import build_graph
from fleet_decode.graph.plan import default_plan
from fleet_decode.graph.tails import TAIL_KINDS
from fleet_decode.kernels.runtime import TENSOR_CORE_CHUNK_HEADS, Megakernel, Tuning, WatchdogTimeout
from fleet_decode.kernels.staging import STAGEABLE_KINDS
from fleet_decode.model import Reference, load_model, prompt_ids
from fleet_decode.model.reference import Route

pytestmark = pytest.mark.gpu

SOURCE = "random:deepseek-coder-v2-lite"
N_PROMPT = 1024
N_TOKENS = 32
NEAR_TIE_SCORE = 2e-3  # router probabilities this close may be ordered differently by bf16 roundings
LAYER_REL_TOL = 0.02  # M2's gate: one layer from the reference's own input
EARLY_REL_TOL = 0.01  # layers 0-3 of a whole step
STEP_REL_TOL = 0.034  # any layer of a whole step on the same experts: the Reference's own distance from HF
LOGITS_COS_MIN = 0.999  # M4's per-step gate, here against the reference on the same experts
STEP_COS_MIN = 0.99  # per step against the reference on ITS OWN routing (near-ties change experts)
NEAR_TIE_ULPS = 8  # top-2 logits this close (in bf16 ulps of the top one) may be ordered either way


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


def cos(a, b):
    return float(torch.nn.functional.cosine_similarity(a.float().flatten(), b.float().flatten(), dim=0))


def bf16_ulp(x: float) -> float:
    return 2.0 ** (torch.tensor(abs(x)).log2().floor().item() - 7)


@pytest.fixture(scope="module")
def model():
    return load_model(SOURCE, dtype=torch.bfloat16, device="cuda")


@pytest.fixture(scope="module")
def prompt(model):
    return prompt_ids(N_PROMPT, vocab_size=model.config.vocab_size)


def plan_for(model, moe_tiles, **overrides):
    """One worker per SM of this GPU, the experts cut as moe_tiles (Plan.moe_tiles)."""
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    return default_plan(model.config, workers=n_sm, moe_tiles=moe_tiles, **overrides)


@pytest.fixture(scope="module", params=["routing-free", "split-k"])
def megakernel(model, request):
    """The whole model under each expert tiling the runtime offers."""
    return Megakernel(model, plan=plan_for(model, request.param))


def forced(routes):
    return {layer: Route(torch.tensor(experts, device="cuda"), None) for layer, experts in routes.items()}


def assert_routes_differ_only_at_near_ties(ours: dict, reference_routes: dict):
    for layer, experts in ours.items():
        own = reference_routes[layer]
        if experts != own.experts.tolist():
            assert own.margin() < NEAR_TIE_SCORE, (layer, experts, own.experts.tolist(), own.margin())


@pytest.mark.parametrize("layer,moe_tiles,overrides", [
    (0, "routing-free", {}), (1, "routing-free", {}), (26, "routing-free", {}), (1, "split-k", {}), (26, "split-k", {}),
    (1, "split-k-routed", {}), (1, "split-k", {"split_k_rows": 64}), (1, "split-k", {"split_k_sum": "fixed-point"}),
    (0, "split-k", {"split_k_sum": "fixed-point", "dense_split_k": True}),
    (1, "split-k", {"split_k_sum": "fixed-point", "routed_pool_rows": 32})])
def test_one_layer_matches_the_reference(model, prompt, layer, moe_tiles, overrides):
    ours, ref = Megakernel(model, plan=plan_for(model, moe_tiles, **overrides), layers=[layer]).run_layer(prompt)
    assert torch.isfinite(ours).all()
    assert rel(ours, ref) < LAYER_REL_TOL, rel(ours, ref)


def test_one_step_matches_the_reference_layer_by_layer(model, prompt, megakernel):
    result = megakernel.decode(prompt, 1)
    routes = megakernel.routes()
    assert len(routes) == model.config.num_hidden_layers - model.config.first_k_dense_replace
    ref = Reference(model, max_positions=N_PROMPT + 1)
    first = int(ref.prefill(prompt).argmax())
    ref_logits = ref.step(first, forced_routes=forced(routes))
    assert_routes_differ_only_at_near_ties(routes, ref.routes)
    errors = [rel(a, b) for a, b in zip(result.hidden_states[0], ref.hidden_states)]
    assert len(errors) == model.config.num_hidden_layers
    assert max(errors[:4]) < EARLY_REL_TOL, errors
    assert max(errors) < STEP_REL_TOL, errors
    assert cos(result.logits[0], ref_logits) >= LOGITS_COS_MIN
    assert result.tokens[0] == int(result.logits[0].argmax())


def test_32_tokens_in_one_launch_follow_the_reference(model, prompt, megakernel):
    result = megakernel.decode(prompt, N_TOKENS)
    assert result.launches == 1 and len(result.tokens) == N_TOKENS and len(result.step_seconds) == N_TOKENS
    ref = Reference(model, max_positions=N_PROMPT + N_TOKENS + 1)
    token = int(ref.prefill(prompt).argmax())
    agree = 0
    for step in range(N_TOKENS):
        # teacher-forced on the megakernel's tokens; the routing is the reference's own (the graph keeps
        # no per-step routes), so near-ties that pick other experts lower the cosine
        logits = ref.step(token)
        assert cos(result.logits[step], logits) >= STEP_COS_MIN, step
        assert result.tokens[step] == int(result.logits[step].argmax()), step  # the device's argmax chain
        top2 = logits.topk(2).values.tolist()
        if result.tokens[step] == int(logits.argmax()):
            agree += 1
        else:  # a different greedy choice is allowed only where the reference's top two nearly tie
            assert top2[0] - top2[1] <= NEAR_TIE_ULPS * bf16_ulp(top2[0]), (step, top2)
        token = result.tokens[step]
    assert agree >= N_TOKENS // 2


def test_the_tensor_core_chunk_decodes_as_the_plain_one(prompt, megakernel):
    # The two megakernel entries differ only in the attention chunk's arithmetic (q and the probabilities in
    # two bf16 parts on the tensor cores; docs/megakernel.md part 21): the same tokens, logits within roundings.
    if not megakernel.has_tensor_core_chunk:
        pytest.skip("this build has no tensor-core chunk (AMD)")
    tuning = megakernel.tuning
    try:
        megakernel.tuning = dataclasses.replace(tuning, chunk_form="plain")
        plain = megakernel.decode(prompt, 8)
        megakernel.tuning = dataclasses.replace(tuning, chunk_form="tensor-cores")
        tensor_cores = megakernel.decode(prompt, 8)
        megakernel.tuning = dataclasses.replace(tuning, chunk_form="auto")
        auto = megakernel.decode(prompt, 2)
    finally:
        megakernel.tuning = tuning
    assert (plain.chunk_form, tensor_cores.chunk_form) == ("plain", "tensor-cores")
    # auto by the heads a chunk task carries (this fixture's plan: all 16 in one task)
    assert auto.chunk_form == ("tensor-cores" if megakernel.chunk_heads >= TENSOR_CORE_CHUNK_HEADS else "plain")
    assert tensor_cores.tokens == plain.tokens
    for a, b in zip(tensor_cores.logits, plain.logits):
        assert cos(a, b) >= 0.99999 and rel(a, b) < 1e-3, (cos(a, b), rel(a, b))


def test_decode_is_deterministic(prompt, megakernel):
    first = megakernel.decode(prompt, 4)
    second = megakernel.decode(prompt, 4)
    assert first.tokens == second.tokens
    for a, b in zip(first.logits, second.logits):
        assert torch.equal(a, b)


@pytest.mark.parametrize("stage_kib", [0, 64])
def test_staged_weights_change_no_bit_of_the_output(prompt, megakernel, stage_kib):
    # The staged copy holds the same bytes and the tasks add in the same order: same graph, so
    # bit-identical logits whether a tile is read from shared memory, from global memory, or a mix
    # (64 KiB stages the o_proj, q-absorb and router tiles but not the 128 KiB ones).
    assert (megakernel.stage_table[:, 0] >= 0).any()
    staged = megakernel.decode(prompt, 4)
    megakernel.tuning = Tuning(stage=stage_kib > 0, stage_kib=stage_kib)
    try:
        other = megakernel.decode(prompt, 4)
    finally:
        megakernel.tuning = Tuning()
    assert other.tokens == staged.tokens
    for a, b in zip(other.logits, staged.logits):
        assert torch.equal(a, b)


@pytest.mark.parametrize("lat_parts", [2, 4])
def test_the_merge_cut_by_latent_columns_follows_the_default(model, prompt, megakernel, lat_parts):
    # Plan.merge_lat_parts: each head's merge and W_UV over a block of latent columns, o_proj adding the
    # blocks' attn_out vectors. Only the order of fp32 additions differs from the one-task merge.
    default = megakernel.decode(prompt, 4)
    cut = Megakernel(model, plan=dataclasses.replace(megakernel.plan, merge_lat_parts=lat_parts, merge_v_parts=1,
                                                     heads_per_tile=1))
    assert sum(t.kind.name == "ATTN_MERGE_COLS" for t in cut.graph.tasks) == 16 * lat_parts * 27
    other = cut.decode(prompt, 4)
    assert other.tokens == default.tokens
    for a, b in zip(other.logits, default.logits):
        assert rel(a, b) < 1e-3


@pytest.mark.parametrize("policy", ["next-layer", "early"])
def test_tiles_sent_ahead_change_no_bit_of_the_output(model, prompt, megakernel, policy):
    # Where a tile's copy starts (kernels.staging.send_ahead) changes only when its bytes land, with
    # every stageable kind staged so that the next layer's q/kv tiles travel ahead too.
    staged = megakernel.decode(prompt, 4)
    ahead = Megakernel(model, plan=megakernel.plan,
                       tuning=Tuning(staged_kinds=tuple(k.name for k in STAGEABLE_KINDS), stage_ahead=policy))
    assert (ahead.stage_table[:, 3] >= 0).sum() > (megakernel.stage_table[:, 3] >= 0).sum()
    other = ahead.decode(prompt, 4)
    assert other.tokens == staged.tokens
    for a, b in zip(other.logits, staged.logits):
        assert torch.equal(a, b)


@pytest.mark.parametrize("layer", [1, 26])
def test_one_layer_with_the_router_in_the_o_proj_tiles_matches_the_reference(model, prompt, layer):
    plan = dataclasses.replace(plan_for(model, "routing-free"), router_in_o_proj=True)
    mk = Megakernel(model, plan=plan, layers=[layer])
    assert any(t.kind.name == "O_PROJ_ROUTER" for t in mk.graph.tasks)
    ours, ref = mk.run_layer(prompt)
    assert torch.isfinite(ours).all()
    assert rel(ours, ref) < LAYER_REL_TOL, rel(ours, ref)


def test_the_router_in_the_o_proj_tiles_decodes_as_the_router_tiles_do(model, prompt, megakernel):
    # the same logits up to the order of the router's fp32 sums: the same tokens, logits within a hair
    tiles = megakernel.decode(prompt, 4)
    plan = dataclasses.replace(megakernel.plan, router_in_o_proj=True)
    fused = Megakernel(model, plan=plan).decode(prompt, 4)
    assert fused.tokens == tiles.tokens
    for a, b in zip(fused.logits, tiles.logits):
        assert cos(a, b) >= STEP_COS_MIN


@pytest.mark.parametrize("rows", [32, 64])
def test_split_k_slices_decode_as_the_default_tiling(model, prompt, rows):
    # 64-row slices hold twice the stage's down rows: the second half goes through the stage after the first
    # (hip/tasks/gate_up_down.cu), the rows added in the same order as 32-row slices add theirs
    default = Megakernel(model, plan=plan_for(model, "routing-free")).decode(prompt, 4)
    sliced = Megakernel(model, plan=plan_for(model, "split-k", split_k_rows=rows)).decode(prompt, 4)
    assert sliced.tokens == default.tokens
    for a, b in zip(sliced.logits, default.logits):
        assert cos(a, b) >= STEP_COS_MIN


def test_split_k_slices_through_the_stage_match_the_global_memory_path(model, prompt):
    # the same slices with the stage off (Tuning.stage): the down rows stream from global memory, in the
    # same order, so the same logits to the bit
    plan = plan_for(model, "split-k", split_k_rows=64)
    staged = Megakernel(model, plan=plan).decode(prompt, 2)
    unstaged = Megakernel(model, plan=plan, tuning=Tuning(stage=False)).decode(prompt, 2)
    assert staged.tokens == unstaged.tokens
    for a, b in zip(staged.logits, unstaged.logits):
        assert torch.equal(a, b)


def test_the_fixed_point_sum_decodes_as_the_partial_rows_and_is_deterministic(model, prompt):
    # Plan.split_k_sum = "fixed-point": every slice adds into its layer's int64 row in any order, the sum tiles
    # zero it for the next step, the launch zeroes it for step 0: two decodes agree to the bit, and with the
    # rows' fixed order up to the sum's last rounding. The sum in one tile run by the last slice (a tail)
    # converts each element the same way: the same bits again.
    options = dict(split_k_rows=64, dense_split_k=True)
    rows = Megakernel(model, plan=plan_for(model, "split-k", **options)).decode(prompt, 4)
    fixed = Megakernel(model, plan=plan_for(model, "split-k", split_k_sum="fixed-point", **options))
    first, second = fixed.decode(prompt, 4), fixed.decode(prompt, 4)
    tail = Megakernel(model, plan=plan_for(model, "split-k", split_k_sum="fixed-point",
                                           sum_rows=model.config.hidden_size, **options),
                      tuning=Tuning(tail_kinds=("SUM_FIXED_POINT",))).decode(prompt, 4)
    assert first.tokens == second.tokens == tail.tokens == rows.tokens
    for a, b, c, d in zip(first.logits, second.logits, tail.logits, rows.logits):
        assert torch.equal(a, b) and torch.equal(a, c)
        assert cos(a, d) >= LOGITS_COS_MIN


def test_routed_rows_handed_out_at_run_time_decode_as_the_static_slices(model, prompt):
    # Plan.routed_pool_rows on the pool entry (megakernel_pool.cu): pieces of 64 rows are the static slices'
    # row ranges (1,408 rows a slot in 22 slices of 64), each rounded to fixed point alone, so whichever worker
    # takes which, the accumulator and the logits are the static slices' to the bit; 16-row pieces round
    # other partials, so only the tokens agree, and two decodes with them agree to the bit, as do their pieces
    # added one by one (Plan.pool_local_sum off) instead of summed per taker first.
    options = dict(split_k_rows=64, dense_split_k=True, split_k_sum="fixed-point")
    static = Megakernel(model, plan=plan_for(model, "split-k", **options)).decode(prompt, 4)
    pool = Megakernel(model, plan=plan_for(model, "split-k", routed_pool_rows=64, **options))
    assert pool.has_pools
    same_rows = pool.decode(prompt, 4)
    finer = Megakernel(model, plan=plan_for(model, "split-k", routed_pool_rows=16, **options))
    first, second = finer.decode(prompt, 4), finer.decode(prompt, 4)
    piecewise = Megakernel(model, plan=plan_for(model, "split-k", routed_pool_rows=16, pool_local_sum=False,
                                                **options)).decode(prompt, 4)
    # and with the sum in one tile run by the last taker to finish (the "pool 32 sum tail" form): the same bits
    tail = Megakernel(model, plan=plan_for(model, "split-k", routed_pool_rows=16, sum_rows=model.config.hidden_size,
                                           **options), tuning=Tuning(tail_kinds=("SUM_FIXED_POINT",))).decode(prompt, 4)
    assert same_rows.tokens == first.tokens == second.tokens == piecewise.tokens == tail.tokens == static.tokens
    for a, b, c, d, e, f in zip(same_rows.logits, static.logits, first.logits, second.logits, piecewise.logits,
                                tail.logits):
        assert torch.equal(a, b) and torch.equal(c, d) and torch.equal(c, e) and torch.equal(c, f)
        assert cos(c, b) >= LOGITS_COS_MIN


def test_routed_split_k_beside_shared_tiles_decodes_as_the_default_tiling(model, prompt):
    # Plan.moe_tiles = "split-k-routed": the same experts, their rows summed in another order
    default = Megakernel(model, plan=plan_for(model, "routing-free")).decode(prompt, 4)
    routed = Megakernel(model, plan=plan_for(model, "split-k-routed")).decode(prompt, 4)
    assert routed.tokens == default.tokens
    for a, b in zip(routed.logits, default.logits):
        assert cos(a, b) >= STEP_COS_MIN


def test_merges_with_w_uv_in_parts_change_no_bit_of_the_output(model, prompt, megakernel):
    # Plan.merge_v_parts: each part merges the same partials in the same order and computes its rows
    # of W_UV as the whole head's task does: the same logits to the bit.
    whole = megakernel.decode(prompt, 3)
    parts = Megakernel(model, plan=dataclasses.replace(megakernel.plan, merge_v_parts=2)).decode(prompt, 3)
    assert parts.tokens == whole.tokens
    for a, b in zip(parts.logits, whole.logits):
        assert torch.equal(a, b)


def test_tails_change_no_bit_of_the_output_and_a_stop_still_ends_the_launch(model, prompt, megakernel):
    # Tuning.tail_kinds: the top-k and the argmax run by the last router / lm_head tile to arrive,
    # the same task functions on the same inputs: the same logits to the bit. The stop is the argmax
    # tail's to record.
    plain = megakernel.decode(prompt, 4)
    tailed = Megakernel(model, plan=megakernel.plan, tuning=Tuning(tail_kinds=TAIL_KINDS))
    assert len([t for w in tailed.graph.workers for t in w]) < len(tailed.graph.tasks)
    out = tailed.decode(prompt, 4)
    assert out.tokens == plain.tokens
    for a, b in zip(out.logits, plain.logits):
        assert torch.equal(a, b)
    stop = plain.tokens[1]
    tailed.prefill(prompt)
    stopped = tailed.generate(N_PROMPT, 4, stop_ids=[stop])
    assert stopped.stopped and stopped.tokens == plain.tokens[:plain.tokens.index(stop) + 1]


def test_a_stop_id_ends_the_launch_after_its_step_and_tokens_stream_while_it_runs(prompt, megakernel):
    full = megakernel.decode(prompt, 8)
    stop = full.tokens[3]
    first_at = full.tokens.index(stop)
    seen = []
    megakernel.prefill(prompt)
    stopped = megakernel.generate(N_PROMPT, 8, stop_ids=[stop], on_token=lambda i, t: seen.append((i, t)))
    assert stopped.stopped and stopped.tokens == full.tokens[:first_at + 1]
    assert seen == list(enumerate(stopped.tokens))
    # the step after the stop never ran: its argmax never stamped its end (stamps are zeroed per launch)
    assert first_at + 1 >= 8 or int(megakernel.step_ticks[first_at + 2]) == 0


def test_a_second_launch_continues_the_first_seamlessly(prompt, megakernel):
    whole = megakernel.decode(prompt, 8)
    megakernel.prefill(prompt)
    head = megakernel.generate(N_PROMPT, 5)
    tail = megakernel.generate(N_PROMPT + 5, 3, start_token=head.tokens[-1])
    assert head.tokens + tail.tokens == whole.tokens


def test_watchdog_stops_a_graph_that_cannot_finish_and_the_next_launch_works(model, prompt, megakernel):
    broken = build_graph(model.config, megakernel.plan, layers=[1])
    victim = broken.task_index("L1.q_absorb[0]")
    broken.tasks[victim].inputs.append((broken.event_index("L1.o_proj"), 0))  # o_proj needs q_absorb: a cycle
    started = time.perf_counter()
    bad = Megakernel(model, graph=broken)
    with pytest.raises(WatchdogTimeout) as caught:
        bad.run_layer(prompt, timeout_s=0.5)
    # a hang would never return; the bound is 20x the watchdog's 0.5 s plus one prefill
    assert time.perf_counter() - started < 10
    record = caught.value.record
    # every task downstream of the cycle waits too; whichever waited longest first is reported
    assert record["event"] >= 0 and record["counter"] < record["target"]
    assert broken.tasks[record["task"]].name in str(caught.value)
    assert broken.events[record["event"]].name in str(caught.value)
    assert broken.events[record["event"]].layer == 1
    counters = bad.counters.tolist()
    for name in ("L1.q_absorb", "L1.o_proj", "L1.out"):  # the cycle never completed
        event = broken.event_index(name)
        assert counters[event] < broken.events[event].triggers, name
    ours, ref = Megakernel(model, layers=[1]).run_layer(prompt)
    assert rel(ours, ref) < LAYER_REL_TOL

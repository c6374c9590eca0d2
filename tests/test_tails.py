"""Tails (fleet_decode.graph.tails): the top-k and the argmax run by the last of their input's
signallers, in the simulator exactly as the megakernel runs them; the runtime's arrival table."""

import dataclasses

import numpy as np
import pytest

from fleet_decode.graph import Kind, build_graph
from fleet_decode.graph.plan import decode_plan
from fleet_decode.graph.tails import TAIL_KINDS, tails, without_tails
from fleet_decode.kernels.runtime import ADD_ORDER_WORDS, Tuning, add_order
from fleet_decode.model import get_config
from fleet_decode.sim import SCHEDULES, SimRace, simulate
from fleet_decode.sim.decode import sim_plan
from sim_cases import PROMPT, TOKENS, case, one_thread, second_config  # noqa: F401 (one_thread is a fixture)
from test_sim_decode import assert_follows_reference

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def real_graph():
    """The H200's graph of the real config (132 workers, the bench's 1,024 + 32 decode)."""
    config = get_config("deepseek-coder-v2-lite")
    return build_graph(config, decode_plan(config, 1024 + 32, 132, split_k_sum="rows"))


def test_each_tail_is_its_kind_after_the_signallers_of_its_input(real_graph):
    g = real_graph
    tail_of = tails(g, TAIL_KINDS)
    kinds = sorted(g.tasks[t].kind.name for t in tail_of)
    assert kinds == ["ARGMAX"] + ["ROUTE_TOPK"] * 26  # one top-k per MoE layer, one argmax
    for tail, producers in tail_of.items():
        (event, lag), = g.tasks[tail].inputs
        assert lag == 0 and producers == [i for i, t in enumerate(g.tasks) if t.out_event == event]
        want = Kind.LM_HEAD if g.tasks[tail].kind == Kind.ARGMAX else Kind.ROUTER
        assert {g.tasks[p].kind for p in producers} == {want} and len(producers) > 1
    assert tails(g, ("ROUTE_TOPK",)).keys() == {t for t in tail_of if g.tasks[t].kind == Kind.ROUTE_TOPK}
    assert tails(g, ()) == {}


def test_the_workers_lists_leave_out_the_tails_and_nothing_else(real_graph):
    g = real_graph
    tail_of = tails(g, TAIL_KINDS)
    trimmed = without_tails(g, tail_of)
    listed = [t for tasks in trimmed.workers for t in tasks]
    assert sorted(listed + list(tail_of)) == list(range(len(g.tasks)))
    assert trimmed.tasks is g.tasks and len(trimmed.workers) == len(g.workers)
    assert sum(map(len, g.workers)) == len(g.tasks)  # the original is untouched


def test_what_cannot_be_a_tail_is_refused(real_graph):
    with pytest.raises(ValueError, match="cannot run as tails"):
        tails(real_graph, ("ROUTER",))
    with pytest.raises(ValueError, match="cannot run as tails"):
        Tuning(tail_kinds=("ATTN_MERGE_UV",))
    g = dataclasses.replace(real_graph, tasks=[dataclasses.replace(t, inputs=list(t.inputs)) for t in real_graph.tasks])
    topk = next(t for t in g.tasks if t.kind == Kind.ROUTE_TOPK)
    topk.inputs.append((topk.inputs[0][0] - 1, 0))
    with pytest.raises(ValueError, match="exactly one event"):
        tails(g, ("ROUTE_TOPK",))


def test_the_arrival_table_counts_each_tails_signallers(real_graph):
    g = real_graph
    plain, n_plain, scratch, row = add_order(g)
    tail_of = tails(g, TAIL_KINDS)
    order, n_groups, scratch_t, row_t = add_order(g, tail_of)
    assert order.shape == (len(g.tasks), ADD_ORDER_WORDS) and (scratch_t, row_t) == (scratch, row)
    assert n_groups == n_plain + len(tail_of)
    adders = plain[:, 0] >= 0
    assert np.array_equal(order[adders, :4], plain[adders, :4]) and (order[adders, 4] == -1).all()
    counters = set()
    for tail, producers in tail_of.items():
        rows = order[producers]
        assert (rows[:, 4] == tail).all() and (rows[:, 3] == -1).all() and (rows[:, 2] == len(producers)).all()
        assert list(rows[:, 1]) == list(range(len(producers)))
        assert len(set(rows[:, 0])) == 1 and rows[0, 0] >= n_plain
        counters.add(int(rows[0, 0]))
        assert (order[tail] == -1).all()  # the tail itself counts nowhere
    assert len(counters) == len(tail_of)  # a counter per tail
    others = [i for i in range(len(g.tasks)) if not adders[i] and not any(i in p for p in tail_of.values())]
    assert (order[others] == -1).all()


@pytest.fixture(scope="module", params=["tiny", "second"])
def source(request, tmp_path_factory):
    if request.param == "tiny":
        return "tiny"
    return f"random:{second_config(tmp_path_factory.mktemp('second'))}@3"


@pytest.mark.parametrize("row_align", [8, 2])  # in 2s the router has several tiles, and so its top-k signallers
@pytest.mark.parametrize("workers", [1, 3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_tails_decode_what_the_reference_decodes(source, row_align, workers, schedule):
    model, ids, *_ = case(source)
    plan = dataclasses.replace(sim_plan(workers, len(ids) + TOKENS, TOKENS), row_align=row_align)
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers, tail_kinds=TAIL_KINDS)
    assert_follows_reference(result, source)


def fixed_point_plan(model, workers, **overrides):
    """The decode plan with the slices' fixed-point sum in one tile a layer, so that it can run as a tail."""
    return decode_plan(model.config, PROMPT + TOKENS, workers, max_steps=TOKENS, split_k_sum="fixed-point",
                       sum_rows=model.config.hidden_size, **overrides)


@pytest.mark.parametrize("workers", [3, 17])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("pool_rows", [0, 8])
def test_the_fixed_point_sum_as_a_tail_decodes_what_the_reference_decodes(source, workers, schedule, pool_rows):
    """SUM_FIXED_POINT run by the last split-K slice (or pool taker) to arrive: the next step's slices still
    find the accumulator zeroed by it (through the step's chain), with every other tail as well."""
    model, ids, *_ = case(source)
    plan = fixed_point_plan(model, workers, routed_pool_rows=pool_rows)
    graph = build_graph(model.config, plan)
    sums = [t for t in tails(graph, TAIL_KINDS) if graph.tasks[t].kind == Kind.SUM_FIXED_POINT]
    assert len(sums) == model.config.num_hidden_layers  # the dense layer's too
    result = simulate(model, ids, TOKENS, plan=plan, schedule=schedule, seed=workers, tail_kinds=TAIL_KINDS)
    assert_follows_reference(result, source)


def test_a_stage_after_the_slices_cut_into_several_tiles_cannot_be_tails():
    """Each slice counts itself for one tail: sum tiles of fewer rows than the layer's are refused as tails."""
    model, *_ = case("tiny")
    g = build_graph(model.config, decode_plan(model.config, PROMPT + TOKENS, 5, max_steps=TOKENS,
                                              split_k_sum="fixed-point", sum_rows=16))
    with pytest.raises(ValueError, match="already signals another tail"):
        tails(g, ("SUM_FIXED_POINT",))


@pytest.mark.parametrize("dropped", ["ROUTE_TOPK", "ARGMAX", "SUM_FIXED_POINT"])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_tail_run_before_all_its_signallers_is_reported_as_a_race(monkeypatch, dropped, schedule):
    """A tail ordered by only some of its signallers' arrivals reads what the others write without
    the ordering: the simulator gives a tail the knowledge of the arrivals alone, so it reports the
    race whatever order the schedule happens to run the signallers in."""
    from fleet_decode.sim import decode

    model, ids, *_ = case("tiny")
    real = decode.tails

    def missing_the_last_signaller(graph, kinds):
        tail_of = real(graph, kinds)
        return {t: p[:-1] if graph.tasks[t].kind == Kind[dropped] else p for t, p in tail_of.items()}

    monkeypatch.setattr(decode, "tails", missing_the_last_signaller)
    # rows in twos: the tiny router's 8 experts in 4 tiles (in 8s they are one, and nothing is left)
    plan = dataclasses.replace(sim_plan(3, len(ids) + TOKENS, TOKENS), row_align=2)
    if dropped == "SUM_FIXED_POINT":
        plan = fixed_point_plan(model, 3)
    with pytest.raises(SimRace, match="before it was written"):
        simulate(model, ids, TOKENS, plan=plan, schedule=schedule, tail_kinds=TAIL_KINDS)

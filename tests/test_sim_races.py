"""A graph with a missing dependency is reported as a race, and one with a cycle as a deadlock,
under every schedule, including those that happen to run the tasks in a safe order."""

import copy
import dataclasses

import pytest

from fleet_decode.graph import build_graph
from fleet_decode.graph.graph import Event
from fleet_decode.sim import SCHEDULES, SimDeadlock, SimRace, simulate
from fleet_decode.sim.decode import sim_plan
from sim_cases import one_thread, case  # noqa: F401 (one_thread is a fixture)

PROMPT, TOKENS = 8, 2

# (task, the event one of its inputs waits on): one edge per kind of dependency in the graph
EDGES = [
    ("embed", "argmax"),  # lag 1: the next step's token
    ("L0.q_proj[0]", "embed"),
    ("L0.kv_a_proj[0]", "embed"),
    ("L0.q_absorb[0]", "L0.q_proj"),
    ("L0.cache_append", "L0.kv_a_proj"),
    ("L0.attn_chunk[0]", "L0.q_absorb"),
    ("L0.attn_merge[0]", "L0.attn_chunk"),
    ("L0.o_proj[1]", "L0.attn_merge"),
    ("L0.mlp_gate_up[0]", "L0.o_proj"),
    ("L0.mlp_down[2]", "L0.mlp_gate_up"),
    ("L1.q_proj[0]", "L0.out"),
    ("L1.router[0]", "L1.o_proj"),
    ("L1.route_topk", "L1.router"),
    ("L1.shared_gate_up[0]", "L1.o_proj"),
    ("L1.shared_down[0]", "L1.shared_gate_up"),
    ("L1.expert_gate_up.1[0]", "L1.route_topk"),
    ("L1.expert_down.0[1]", "L1.expert_gate_up.0"),
    ("lm_head[3]", "L2.out"),
    ("argmax", "lm_head"),
]

# the same for the split-K expert tiling's kinds (Plan.moe_tiles = "split-k")
SPLIT_K_EDGES = [
    ("L1.shared_slice[0]", "L1.o_proj"),
    ("L1.expert_slice.1[0]", "L1.route_topk"),
    ("L1.sum_slices[1]", "L1.moe_slices"),
    ("L2.q_proj[0]", "L1.out"),
]

# the shared experts in two parts (Plan.shared_parts = 2): each part's down waits on its own gate/up
SHARED_PARTS_EDGES = [
    ("L1.shared_gate_up.1[0]", "L1.o_proj"),
    ("L1.shared_down.1[0]", "L1.shared_gate_up.1"),
]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model_and_ids():
    model, ids, *_ = case("tiny")
    return model, ids[:PROMPT]


def graph_for(model, workers, moe_tiles="routing-free", **overrides):
    """The tiny graph on `workers` with the plan's fields overridden; a merge cut into parts gets one head a
    tile (its condition), any other two."""
    cut_merge = overrides.get("merge_v_parts", 1) > 1 or overrides.get("merge_lat_parts", 1) > 1
    plan = dataclasses.replace(sim_plan(workers, PROMPT + TOKENS, TOKENS), moe_tiles=moe_tiles,
                               heads_per_tile=1 if cut_merge else 2, **overrides)
    return build_graph(model.config, plan)


def without_edge(graph, task_name, event_name):
    graph = copy.deepcopy(graph)
    task, event = graph.tasks[graph.task_index(task_name)], graph.event_index(event_name)
    kept = [(e, lag) for e, lag in task.inputs if e != event]
    assert len(kept) == len(task.inputs) - 1, f"{task_name} does not wait on {event_name}"
    task.inputs = kept
    return graph


def test_the_intact_graph_runs_clean(model_and_ids):
    model, ids = model_and_ids
    for schedule in SCHEDULES:
        assert len(simulate(model, ids, TOKENS, graph=graph_for(model, 3), schedule=schedule).tokens) == TOKENS


@pytest.mark.parametrize("task_name,event_name", EDGES)
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_removed_edge_is_reported_as_a_race(model_and_ids, task_name, event_name, schedule):
    model, ids = model_and_ids
    for workers in (1, 3):
        broken = without_edge(graph_for(model, workers), task_name, event_name)
        with pytest.raises(SimRace, match="before it was written") as err:
            simulate(model, ids, TOKENS, graph=broken, schedule=schedule, seed=workers)
        # the report names a task that lost its ordering: the one we broke, or its dependents
        assert "task " in str(err.value)


@pytest.mark.parametrize("task_name,event_name", SPLIT_K_EDGES)
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_removed_split_k_edge_is_reported_as_a_race(model_and_ids, task_name, event_name, schedule):
    model, ids = model_and_ids
    assert len(simulate(model, ids, TOKENS, graph=graph_for(model, 3, "split-k"), schedule=schedule).tokens) == TOKENS
    broken = without_edge(graph_for(model, 3, "split-k"), task_name, event_name)
    with pytest.raises(SimRace, match="before it was written"):
        simulate(model, ids, TOKENS, graph=broken, schedule=schedule, seed=3)


# chunks cut by heads (Plan.attn_head_groups = 2): each head group's task waits on the absorb and the cache
HEAD_GROUP_EDGES = [
    ("L1.attn_chunk[0.h1]", "L1.q_absorb"),
    ("L1.attn_chunk[2.h1]", "L1.q_absorb"),  # the chunk holding the decoded positions (the append counts there)
    ("L1.attn_merge[1]", "L1.attn_chunk"),
]
# each head's merge in two tasks (Plan.merge_v_parts = 2): both wait on the chunks; o_proj on both
MERGE_PART_EDGES = [
    ("L1.attn_merge[1.v1]", "L1.attn_chunk"),
    ("L1.o_proj[0]", "L1.attn_merge"),
]
# each head's merge cut by latent columns (Plan.merge_lat_parts = 2): each block waits on the chunks; o_proj
# (which adds the blocks' attn_out vectors) on every block
MERGE_COLS_EDGES = [
    ("L1.attn_merge[1.c1]", "L1.attn_chunk"),
    ("L1.o_proj[0]", "L1.attn_merge"),
]
# the router's dot products in the o_proj tiles (Plan.router_in_o_proj): the top-k waits on all of them
ROUTER_IN_O_PROJ_EDGES = [
    ("L1.route_topk", "L1.o_proj"),
    ("L1.o_proj[1]", "L1.attn_merge"),
]
# the routed slots as split-K slices beside the shared experts' tiles (Plan.moe_tiles = "split-k-routed"):
# the shared down tiles (in the sum's rows) wait on the shared gate/up, the sum on the slices
SPLIT_K_ROUTED_EDGES = [
    ("L1.expert_slice.1[0]", "L1.route_topk"),
    ("L1.shared_down[1]", "L1.shared_gate_up"),
    ("L1.sum_slices[1]", "L1.moe_slices"),
    ("L2.q_proj[0]", "L1.out"),
]
# the cache append on its own event (Plan.append_signals_absorb off): the chunks wait on both events
APPEND_EVENT_EDGES = [
    ("L0.attn_chunk[2]", "L0.cache_append"),  # the chunk holding the decoded positions
    ("L1.attn_chunk[0]", "L1.q_absorb"),
]
# the dense layer's MLP as split-K slices (Plan.dense_split_k, decoding's default): a slice waits on o_proj,
# a sum tile on every slice, the next layer on the sum
DENSE_SPLIT_K_EDGES = [
    ("L0.mlp_slice[1]", "L0.o_proj"),
    ("L0.sum_slices[1]", "L0.mlp_slices"),
    ("L1.q_proj[0]", "L0.out"),
]
# the slices' fixed-point sum (Plan.split_k_sum): a sum tile reads the accumulator only after every slice
# added into it; the next layer waits on the sum tiles. (That next step's slices add only after this step's
# sum tiles zeroed the accumulator is test_sim_memory's: the graph orders it through the whole step chain.)
FIXED_POINT_EDGES = [
    ("L1.shared_slice[0]", "L1.o_proj"),
    ("L1.expert_slice.1[0]", "L1.route_topk"),
    ("L1.sum_slices[1]", "L1.moe_slices"),
    ("L2.q_proj[0]", "L1.out"),
    ("L0.sum_slices[0]", "L0.mlp_slices"),
]
FIXED_POINT = {"moe_tiles": "split-k", "split_k_sum": "fixed-point", "dense_split_k": True}
# the routed rows handed out at run time (Plan.routed_pool_rows): a taker waits on the top-k, the sum on every
# taker
POOL_EDGES = [
    ("L1.expert_pool[1]", "L1.route_topk"),
    ("L1.sum_slices[0]", "L1.moe_slices"),
]
POOL = {**FIXED_POINT, "routed_pool_rows": 8}
# (plan overrides, task, the event it waits on) for the plan options' own tasks
OPTION_EDGES = [({"shared_parts": 2}, *edge) for edge in SHARED_PARTS_EDGES] + \
    [({"attn_head_groups": 2}, *edge) for edge in HEAD_GROUP_EDGES] + \
    [({"merge_v_parts": 2}, *edge) for edge in MERGE_PART_EDGES] + \
    [({"merge_lat_parts": 2}, *edge) for edge in MERGE_COLS_EDGES] + \
    [({"router_in_o_proj": True}, *edge) for edge in ROUTER_IN_O_PROJ_EDGES] + \
    [({"moe_tiles": "split-k-routed"}, *edge) for edge in SPLIT_K_ROUTED_EDGES] + \
    [({"append_signals_absorb": False}, *edge) for edge in APPEND_EVENT_EDGES] + \
    [({"dense_split_k": True}, *edge) for edge in DENSE_SPLIT_K_EDGES] + \
    [(FIXED_POINT, *edge) for edge in FIXED_POINT_EDGES] + \
    [(POOL, *edge) for edge in POOL_EDGES]


@pytest.mark.parametrize("overrides,task_name,event_name", OPTION_EDGES)
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_removed_edge_of_a_plan_option_is_reported_as_a_race(model_and_ids, overrides, task_name, event_name,
                                                                 schedule):
    model, ids = model_and_ids
    intact = graph_for(model, 3, **overrides)
    assert len(simulate(model, ids, TOKENS, graph=intact, schedule=schedule).tokens) == TOKENS
    with pytest.raises(SimRace, match="before it was written"):
        simulate(model, ids, TOKENS, graph=without_edge(intact, task_name, event_name), schedule=schedule, seed=3)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_cache_append_that_does_not_count_on_the_absorb_event_is_a_race(model_and_ids, schedule):
    """The chunks wait for one event, which the cache append counts on beside the q-absorb tiles: an
    append that signals an event of its own instead leaves the chunk holding the decoded position unordered."""
    model, ids = model_and_ids
    graph = copy.deepcopy(graph_for(model, 3))
    append = graph.tasks[graph.task_index("L0.cache_append")]
    assert graph.events[append.out_event].name == "L0.q_absorb"
    graph.events[append.out_event].triggers -= 1
    graph.events.append(Event("L0.cache_append_alone", triggers=1, layer=0))
    append.out_event = len(graph.events) - 1
    with pytest.raises(SimRace, match="before it was written"):
        simulate(model, ids, TOKENS, graph=graph, schedule=schedule, seed=3)


def test_the_race_report_names_the_reader_and_the_region(model_and_ids):
    model, ids = model_and_ids
    broken = without_edge(graph_for(model, 1), "L0.o_proj[1]", "L0.attn_merge")
    with pytest.raises(SimRace, match=r"task L0\.o_proj\[1\] read L0\.attn_out\[0:\d+\] before it was written: "
                                      r"its writer L0\.attn_merge\[0\]"):
        simulate(model, ids, TOKENS, graph=broken)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("workers", [1, 3, 8])
def test_a_cycle_is_reported_as_a_deadlock_naming_it(model_and_ids, schedule, workers):
    model, ids = model_and_ids
    graph = graph_for(model, workers)
    # q_proj[0] now also waits for o_proj, which (through attention) waits for q_proj[0]
    graph.tasks[graph.task_index("L0.q_proj[0]")].inputs.append((graph.event_index("L0.o_proj"), 0))
    with pytest.raises(SimDeadlock) as err:
        simulate(model, ids, TOKENS, graph=graph, schedule=schedule, seed=workers)
    message = str(err.value)
    assert "L0.q_proj[0]" in err.value.cycle
    assert "cycle: " in message and "waits on event L0.o_proj" in message
    assert all(name in message for name in err.value.cycle)
    assert any(task == "L0.q_proj[0]" and event == "L0.o_proj" and counter < target
               for task, event, counter, target in err.value.waiting)

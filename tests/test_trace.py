"""CPU checks of the megakernel trace's host side (fleet_decode.kernels.trace): ticks to nanoseconds,
and the summary's stages follow the graph's dependency chain on a synthetic schedule."""
import numpy as np
import pytest

from fleet_decode.graph import Plan, build_graph
from fleet_decode.graph.format import Kind
from fleet_decode.kernels.trace import (RATE_BIN_US, SM_SHIFT, block_sms, compare_libraries, summarise, task_bytes,
                                        times_ns)
from fleet_decode.model import get_config


def test_ticks_become_nanoseconds_from_the_first_mark():
    raw = np.array([[[500, 700, 900], [0, 0, 0]], [[1100, 1300, 1700], [0, 0, 0]]], dtype=np.int64)
    ns = times_ns(raw, ticks_per_second=1e8)  # AMD's 100 MHz real-time clock: 10 ns a tick
    assert ns[0, 0].tolist() == [0.0, 2000.0, 4000.0] and ns[1, 0, 2] == 12000.0


def _schedule(graph, steps, run_ns, wake_ns=0.0, gap_ns=0.0):
    """Greedy replay: each task is reached gap_ns after its worker's previous task, and starts wake_ns
    after its lag-0 inputs have fired and it was reached."""
    owner = {t: w for w, tasks in enumerate(graph.workers) for t in tasks}
    times = np.zeros((steps, len(graph.tasks), 3))
    free = np.zeros(len(graph.workers))
    for s in range(steps):
        fired = np.zeros(len(graph.events))
        for i, t in enumerate(graph.tasks):
            w = owner[i]
            reached = free[w] + gap_ns
            ready = max([reached, *(fired[e] for e, lag in t.inputs if lag == 0)]) + wake_ns
            done = ready + run_ns(t)
            times[s, i] = (reached, ready, done)
            free[w] = done
            fired[t.out_event] = max(fired[t.out_event], done)
    return times


def test_summary_stages_follow_the_dependency_chain():
    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=4),
                        layers=[0, 1, 2])
    times = _schedule(graph, 3, lambda t: 5000.0 if t.kind == Kind.ROUTE_TOPK else 1000.0)
    s = summarise(graph, times, range(1, 3))
    stages = s["moe_layer_stages"]
    order = list(stages)
    for before, after in [("q_proj", "q_absorb"), ("q_absorb", "attn_chunk"), ("attn_chunk", "attn_merge"),
                          ("attn_merge", "o_proj"), ("o_proj", "router"), ("router", "route_topk"),
                          ("route_topk", "expert_gate_up.0"),
                          ("expert_gate_up.0", "out")]:
        assert order.index(before) < order.index(after), (before, after)
        assert stages[after]["first_ready_us"] >= stages[before]["fired_us"] - 1e-9 or after == "out"
    # the top-k's 5 us run sits between the router tiles firing and the routed experts becoming ready
    assert stages["expert_gate_up.0"]["first_ready_us"] - stages["router"]["fired_us"] == pytest.approx(5.0)
    assert stages["out"]["fired_us"] == pytest.approx(s["moe_layer_us_mean"])
    assert sum(k["busy_share"] for k in s["kinds"].values()) == pytest.approx(1.0)
    topk = s["kinds"]["ROUTE_TOPK"]
    assert topk["tasks_per_step"] == 2 and topk["run_us_mean"] == pytest.approx(5.0)
    assert 0 < s["busy_share_of_workers"] < 1


def test_the_routed_slices_ends_are_read_from_the_top_k_firing():
    """The layer's last routed slice made to end 3 us later: the last end moves by 3 us, the first and the
    median stay; the ends are counted from the top-k's firing; a routing-free plan has no routed slices."""
    config = get_config("deepseek-coder-v2-lite")
    graph = build_graph(config, Plan(workers=16, max_positions=128, max_steps=4, moe_tiles="split-k"), layers=[0, 1, 2])
    times = _schedule(graph, 3, lambda t: 1000.0)
    even = summarise(graph, times, range(1, 3))["routed_slice_ends_us"]
    topk = {t.layer: t.out_event for t in graph.tasks if t.kind == Kind.ROUTE_TOPK}
    firsts = []
    for layer, event in topk.items():
        idx = [i for i, t in enumerate(graph.tasks) if t.kind == Kind.EXPERT_GATE_UP_DOWN and t.layer == layer]
        for step in (1, 2):
            fired = max(times[step, i, 2] for i, t in enumerate(graph.tasks) if t.out_event == event)
            firsts.append(min(times[step, idx, 2]) - fired)
        times[:, idx[int(np.argmax(times[1, idx, 2]))], 2] += 3000.0
    assert even["first"] == pytest.approx(np.mean(firsts) / 1e3)
    late = summarise(graph, times, range(1, 3))["routed_slice_ends_us"]
    assert 0 < even["first"] <= even["median"] <= even["last"]
    assert late["last"] == pytest.approx(even["last"] + 3.0)
    assert (late["first"], late["median"]) == pytest.approx((even["first"], even["median"]))
    routing_free = build_graph(config, Plan(workers=16, max_positions=128, max_steps=4, moe_tiles="routing-free"),
                               layers=[0, 1, 2])
    assert summarise(routing_free, _schedule(routing_free, 3, lambda t: 1000.0), range(1, 3))["routed_slice_ends_us"] is None


def test_the_rate_profile_spreads_each_tasks_bytes_over_its_run():
    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=4),
                        layers=[0, 1, 2])
    run_ns = 2 * RATE_BIN_US * 1e3  # every task runs two bins
    times = _schedule(graph, 3, lambda t: run_ns)
    s = summarise(graph, times, range(1, 3))
    rates = s["moe_layer_rates"]
    assert [r["from_us"] for r in rates] == [k * RATE_BIN_US for k in range(len(rates))]
    # every byte of the MoE layers' tasks is in the profile once: per layer and step on average
    moe = [t for t in graph.tasks if t.layer in (1, 2)]
    per_layer = sum(task_bytes(t, graph) for t in moe) / 2
    assert sum(r["tb_per_s"] * 1e12 * RATE_BIN_US * 1e-6 for r in rates) == pytest.approx(per_layer, rel=1e-9)
    # and every run once: busy workers x bin length sums to the tasks' runs
    assert sum(r["busy_workers"] for r in rates) * RATE_BIN_US == pytest.approx(len(moe) / 2 * run_ns / 1e3)
    assert all(r["busy_workers"] <= len(graph.workers) + 1e-9 for r in rates)
    expert = next(t for t in graph.tasks if t.kind == Kind.EXPERT_GATE_UP)
    assert task_bytes(expert, graph) == 2 * 2 * (expert.tile[1] - expert.tile[0]) * 2048 + 2 * 2048  # gate, up, norm


def test_wake_and_gap_are_the_runtime_overheads_put_into_the_schedule():
    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=4),
                        layers=[0, 1])
    times = _schedule(graph, 3, lambda t: 1000.0, wake_ns=300.0, gap_ns=120.0)
    kinds = summarise(graph, times, range(1, 3))["kinds"]
    for name, k in kinds.items():
        assert k["wake_us_mean"] == pytest.approx(0.3), name
        # a kind whose tasks each open their worker's list has no gap
        assert k["gap_us_mean"] is None or k["gap_us_mean"] == pytest.approx(0.12), name
    assert kinds["ATTN_MERGE_UV"]["gap_us_mean"] == pytest.approx(0.12)


def test_one_trace_file_per_named_library():
    from fleet_decode.kernels.trace import _named

    assert _named("t.json", "") == "t.json"
    assert _named("out/t.json", "lookahead") == "out/t-lookahead.json"
    assert _named("trace", "a") == "trace-a"
    # a variant's name becomes one plain file name
    assert _named("out/t.json", "both:stage_ahead=packed + attn_chunk=16") == "out/t-both_stage_ahead_packed_attn_chunk_16.json"


def test_each_traced_run_is_named_by_its_library_and_variant():
    from fleet_decode.kernels.trace import run_name

    assert run_name("", "", 1) == ""  # one run: no name, one file as before
    assert run_name("main", "stage_ahead=packed", 1) == "main"  # one variant: the library names it
    assert run_name("", "", 2) == "default" and run_name("", "stage_ahead=packed", 2) == "stage_ahead=packed"
    assert run_name("mma", "", 2) == "mma:default" and run_name("mma", "tails", 2) == "mma:tails"


def test_an_unknown_variant_is_refused_before_the_model_loads(capsys):
    from fleet_decode.kernels import trace

    with pytest.raises(SystemExit):
        trace.main(["--variant", "default", "--variant", "no_such_field=3"])
    assert "no_such_field" in capsys.readouterr().err


def test_a_library_without_a_path_is_refused(capsys):
    from fleet_decode.kernels import trace

    with pytest.raises(SystemExit):
        trace.main(["--library", "only-a-name"])
    assert "NAME=PATH" in capsys.readouterr().err


def test_the_chain_view_reads_the_stages_and_the_staged_kinds():
    from fleet_decode.kernels.trace import chain_view

    s = {"moe_layer_stages": {"route_topk": {"first_ready_us": 50.0, "fired_us": 53.0},
                              "out": {"first_ready_us": 60.0, "fired_us": 95.0}},
         "kinds": {"RMSNORM_GEMV": {"staged_tasks": 300, "resident_before_ready_share": 0.9},
                   "ATTN_MERGE_UV": {"staged_tasks": 100, "resident_before_ready_share": 0.2},
                   "ATTN_CHUNK": {"staged_tasks": 0, "resident_before_ready_share": None}}}
    view = chain_view(s)
    assert view["chain_to_topk_us"] == 53.0 and view["expert_window_us"] == 42.0
    assert view["chain_resident_share"] == pytest.approx((300 * 0.9 + 100 * 0.2) / 400)
    assert chain_view({"moe_layer_stages": {}, "kinds": {}}) == {
        "chain_to_topk_us": None, "expert_window_us": None, "chain_resident_share": None}


def test_a_tail_has_neither_wake_nor_gap():
    """A tail (graph.tails) is run by its last signaller with no wait and from no list of its own."""
    from fleet_decode.graph.tails import tails, without_tails

    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=4),
                        layers=[0, 1])
    times = _schedule(graph, 3, lambda t: 1000.0, wake_ns=300.0, gap_ns=120.0)
    trimmed = without_tails(graph, tails(graph, ("ROUTE_TOPK",)))
    kinds = summarise(trimmed, times, range(1, 3))["kinds"]
    assert kinds["ROUTE_TOPK"]["wake_us_mean"] is None and kinds["ROUTE_TOPK"]["gap_us_mean"] is None
    assert kinds["ROUTE_TOPK"]["run_us_mean"] == pytest.approx(1.0)
    assert kinds["ROUTER"]["wake_us_mean"] == pytest.approx(0.3)


def test_the_block_to_sm_map_is_read_from_a_build_that_records_it():
    graph = build_graph(get_config("tiny"), Plan(workers=4, max_positions=64, max_steps=2))
    words = np.zeros(len(graph.tasks), dtype=np.int64)
    assert block_sms(graph, words) is None  # a main build records no SM
    sm_of_block = [6, 0, 3, 1]
    for block, tasks in enumerate(graph.workers):
        words[tasks] = ((sm_of_block[block] + 1) << SM_SHIFT) | 1  # the resident flag stays in the low bits
    assert block_sms(graph, words) == sm_of_block
    words[graph.workers[2][0]] = (5 + 1) << SM_SHIFT
    with pytest.raises(ValueError, match="block 2"):
        block_sms(graph, words)


def test_traces_of_several_libraries_are_compared_kind_by_kind():
    def summary(chunk_us, topk_us, out_us, step_us):
        return {"kinds": {"ATTN_CHUNK": {"run_us_mean": chunk_us}, "ROUTE_TOPK": {"run_us_mean": topk_us}},
                "moe_layer_stages": {"out": {"fired_us": out_us}}, "step_us_median": step_us,
                "untraced_p50_us": step_us - 20}

    table = compare_libraries({"main": summary(5.8, 3.2, 71.8, 2056.0), "c4g": summary(5.37, 4.29, 73.5, 2103.2)})
    lines = {line.split()[0]: line.split()[1:] for line in table.splitlines() if line.strip()}
    assert lines["per"][-2:] == ["main", "c4g"]
    assert lines["ATTN_CHUNK"] == ["5.80", "5.37", "(-7%)"]
    assert lines["ROUTE_TOPK"] == ["3.20", "4.29", "(+34%)"]
    assert lines["out"] == ["71.80", "73.50", "(+2%)"]
    # a kind one library's trace lacks is shown as missing, not as a zero
    table = compare_libraries({"main": summary(5.8, 3.2, 71.8, 2056.0),
                               "x": {**summary(5.0, 3.0, 70.0, 2000.0), "kinds": {"ATTN_CHUNK": {"run_us_mean": 5.0}}}})
    assert next(line for line in table.splitlines() if line.startswith("ROUTE_TOPK")).split()[1:] == ["3.20", "-"]


def test_traced_runs_compare_their_weights_resident_and_their_chain():
    def summary(absorb_share, absorb_tasks=3456):
        return {"kinds": {"ROPE_Q_ABSORB": {"run_us_mean": 2.3, "staged_tasks": absorb_tasks,
                                            "resident_before_ready_share": absorb_share},
                          "ATTN_CHUNK": {"run_us_mean": 5.7, "staged_tasks": 0, "resident_before_ready_share": None}},
                "moe_layer_stages": {"route_topk": {"fired_us": 36.4}, "out": {"fired_us": 71.8}},
                "step_us_median": 2056.0, "untraced_p50_us": 2033.0}

    table = compare_libraries({"default": summary(0.067), "stage_ahead=packed": summary(0.95)})
    rows = [line.split() for line in table.splitlines()]
    assert ["resident", "before", "ready", "%"] in rows
    absorb = next(r for r in rows if r[0] == "ROPE_Q_ABSORB" and len(r) == 4 and r[1] == "6.70")
    assert absorb == ["ROPE_Q_ABSORB", "6.70", "95.00", "(+1318%)"]
    assert next(r for r in rows if r[0] == "chain" and r[1] != "to") == ["chain", "6.70", "95.00", "(+1318%)"]
    assert not any(r[0] == "ATTN_CHUNK" and r[1] == "-" for r in rows)  # an unstaged kind has no resident row
    assert next(r for r in rows if r[:4] == ["chain", "to", "the", "top-k"])[5:] == ["36.40", "36.40", "(+0%)"]

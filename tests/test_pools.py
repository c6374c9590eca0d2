"""CPU checks of the megakernel's pools (fleet_decode.kernels.pools): one pool per MoE layer holding its
routed gate/up then down tiles, each task in exactly one pool, and the deadlock checks refuse a pool
whose order is not topological or a worker that would wait for the pool before reaching it."""
import copy

import numpy as np
import pytest

from fleet_decode.graph import build_graph, decode_plan
from fleet_decode.graph.format import Kind
from fleet_decode.kernels.pools import ROUTED_KINDS, check_pools, pool_tables
from fleet_decode.kernels.runtime import Tuning
from fleet_decode.model import get_config


@pytest.fixture(scope="module")
def graph():
    config = get_config("deepseek-coder-v2-lite")
    return build_graph(config, decode_plan(config, 256 + 4, 132, max_steps=4), layers=[0, 1, 2])


def test_one_pool_per_moe_layer_gate_up_before_down(graph):
    pool_of, offsets, members = pool_tables(graph)
    assert len(offsets) - 1 == 2  # layers 1 and 2; layer 0 is dense
    assert sorted(members.tolist()) == [i for i, t in enumerate(graph.tasks) if t.kind in ROUTED_KINDS]
    for p, layer in enumerate((1, 2)):
        order = members[offsets[p]:offsets[p + 1]].tolist()
        kinds = [graph.tasks[t].kind for t in order]
        assert kinds == sorted(kinds, key=ROUTED_KINDS.index)  # every gate/up tile before any down tile
        assert {graph.tasks[t].layer for t in order} == {layer}
        assert all(pool_of[t] == p for t in order)
        assert order == sorted(order)  # each kind in graph order: slot by slot
    assert (pool_of[[i for i, t in enumerate(graph.tasks) if t.kind not in ROUTED_KINDS]] == -1).all()


def test_a_pool_out_of_topological_order_is_refused(graph):
    pool_of, offsets, members = pool_tables(graph)
    swapped = members.copy()
    swapped[offsets[0]:offsets[1]] = members[offsets[0]:offsets[1]][::-1]  # down tiles first
    with pytest.raises(ValueError, match="comes after it in the pool"):
        check_pools(graph, pool_of, offsets, swapped)


def test_a_worker_waiting_for_the_pool_before_reaching_it_is_refused(graph):
    pool_of, offsets, members = pool_tables(graph)
    # worker w gets, before its first task of layer 1's pool, a task of layer 2 (which needs layer 1's
    # output, so the pool's down tiles): it would wait there while holding a place in the pool
    w = next(w for w, tasks in enumerate(graph.workers) if any(pool_of[t] == 0 for t in tasks))
    later = next(i for i, t in enumerate(graph.tasks) if t.layer == 2 and t.kind == Kind.RMSNORM_GEMV)
    moved = copy.copy(graph)
    moved.workers = [[t for t in tasks if t != later] for tasks in graph.workers]
    moved.workers[w].insert(0, later)
    with pytest.raises(ValueError, match="waits for the pool"):
        check_pools(moved, pool_of, offsets, members)


def test_the_pool_is_a_tuning_choice():
    assert Tuning(pool="routed").pool == "routed"
    with pytest.raises(ValueError, match="not one of"):
        Tuning(pool="everything")
    with pytest.raises(ValueError, match="unknown pool"):
        pool_tables(None, "everything")


def test_a_tiling_without_routed_tiles_has_no_pool():
    config = get_config("deepseek-coder-v2-lite")
    split = build_graph(config, decode_plan(config, 260, 132, max_steps=4, moe_tiles="split-k"), layers=[0, 1])
    pool_of, offsets, members = pool_tables(split)
    assert len(offsets) == 1 and members.size == 0 and (pool_of == -1).all()

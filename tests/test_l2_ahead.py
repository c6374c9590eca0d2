"""CPU checks of the megakernel's L2-ahead table (fleet_decode.kernels.l2_ahead): for "next-chain" each
layer's gate/up tiles carry the next layer's attention weights, for "shared" each MoE layer's attention
chunks carry its shared experts; every byte once, in aligned pieces spread evenly, and nothing else
carries anything."""
import numpy as np
import pytest

from fleet_decode.graph import Plan, build_graph
from fleet_decode.graph.format import Kind
from fleet_decode.kernels.l2_ahead import (CARRIER_KINDS, HELD_KINDS, RANGES, SHARED_KINDS, WORDS, ahead_table,
                                          held_ranges)
from fleet_decode.model import get_config


@pytest.fixture(scope="module")
def graph():
    return build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=132, max_positions=256, max_steps=4),
                       layers=[0, 1, 2])


def _pieces(table, i):
    return [tuple(int(v) for v in table[i, 3 * k:3 * k + 3]) for k in range(RANGES) if table[i, 3 * k] >= 0]


def _assert_carried_once(graph, table, layer, following, expected_ranges):
    """The pieces layer `layer` carries tile `expected_ranges` (weights of layer `following`): no gap, no overlap."""
    carried = sorted(p for i, t in enumerate(graph.tasks) if t.layer == layer for p in _pieces(table, i))
    assert carried, layer
    covered: dict[int, list[tuple[int, int]]] = {}
    for slot, offset, nbytes in carried:
        assert offset % 16 == 0 and nbytes % 16 == 0 and nbytes > 0
        assert graph.weights[slot].name.startswith(f"model.layers.{following}."), graph.weights[slot].name
        covered.setdefault(slot, []).append((offset, offset + nbytes))
    expected: dict[int, list[tuple[int, int]]] = {}
    for slot, begin, end in expected_ranges:
        expected.setdefault(slot, []).append((begin, end))
    for slot, spans in covered.items():  # pieces tile the merged ranges without gap or overlap
        merged = []
        for begin, end in sorted(spans):
            if merged and merged[-1][1] == begin:
                merged[-1] = (merged[-1][0], end)
            else:
                assert not merged or begin > merged[-1][1], "pieces overlap"
                merged.append((begin, end))
        assert merged == sorted(expected[slot]), graph.weights[slot].name
    assert covered.keys() == expected.keys()


def test_each_layer_carries_the_next_layers_chain_weights_once(graph):
    table = ahead_table(graph)
    assert table.shape == (len(graph.tasks), WORDS)
    layers = [0, 1, 2]
    for k, layer in enumerate(layers):
        following = layers[(k + 1) % len(layers)]  # the last layer carries the first's, for the next step
        _assert_carried_once(graph, table, layer, following, held_ranges(graph, following))


def test_each_moe_layers_chunks_carry_its_shared_experts_once(graph):
    table = ahead_table(graph, hold="shared")
    carriers = [i for i in range(len(graph.tasks)) if table[i, 0] >= 0]
    assert {graph.tasks[i].kind for i in carriers} == {Kind.ATTN_CHUNK}
    assert {graph.tasks[i].layer for i in carriers} == {1, 2}  # layer 0 is dense: its MLP is not held
    for layer in (1, 2):
        ranges = held_ranges(graph, layer, SHARED_KINDS)
        assert {graph.weights[s].name.split(".")[-3] for s, _, _ in ranges} == {"shared_experts"}
        _assert_carried_once(graph, table, layer, layer, ranges)
    with pytest.raises(ValueError, match="unknown L2 hold"):
        ahead_table(graph, hold="everything")


def test_only_gate_up_tiles_carry_and_evenly(graph):
    table = ahead_table(graph)
    carriers = [i for i in range(len(graph.tasks)) if table[i, 0] >= 0]
    assert {graph.tasks[i].kind for i in carriers} <= set(CARRIER_KINDS)
    for layer in (0, 1, 2):
        loads = [sum(p[2] for p in _pieces(table, i)) for i in carriers if graph.tasks[i].layer == layer]
        assert max(loads) <= 2 * min(loads), (layer, min(loads), max(loads))


def test_the_held_ranges_are_the_chains_matrices(graph):
    names = {graph.weights[slot].name.split(".")[-2] for slot, _, _ in held_ranges(graph, 1)}
    assert {"q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"} <= names
    assert not any(t.kind in CARRIER_KINDS for t in graph.tasks if t.kind in HELD_KINDS)
    mlp = [graph.weights[w].name for t in graph.tasks if t.kind == Kind.EXPERT_GATE_UP for w in t.weights]
    held = {graph.weights[slot].name for slot, _, _ in held_ranges(graph, 1)}
    assert not held & set(mlp)


def test_misaligned_weights_are_left_out(graph):
    table = ahead_table(graph, weight_addresses=[8] * len(graph.weights))  # every weight 8 bytes off
    assert (table[:, 0] < 0).all()

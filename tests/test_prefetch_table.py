"""CPU checks of the megakernel's prefetch table (fleet_decode.kernels.prefetch): every range stays
inside its weight or cache buffer (the device prefetches exactly these bytes), a GEMV stage's tiles
cover their matrix once, and only routed-expert tasks depend on the router."""
import numpy as np
import pytest

from fleet_decode.graph import Plan, build_graph
from fleet_decode.graph.format import Kind
from fleet_decode.kernels.prefetch import DEVICE_BYTES, RANGES, ROUTE_WORDS, WORDS, prefetch_table
from fleet_decode.model import get_config


@pytest.fixture(scope="module")
def graph_and_tables():
    config = get_config("deepseek-coder-v2-lite")
    graph = build_graph(config, Plan(workers=16, max_positions=256, max_steps=4), layers=[0, 1])
    return graph, *prefetch_table(graph)


def _extent(graph, source, routed):
    if source >= 0:
        w = graph.weights[source]
        return int(np.prod(w.shape[1:] if routed else w.shape)) * DEVICE_BYTES[w.dtype]
    b = graph.buffers[-2 - source]
    return b.numel * DEVICE_BYTES[b.dtype]


def test_every_range_lies_inside_its_source(graph_and_tables):
    graph, ranges, routes = graph_and_tables
    assert ranges.shape == (len(graph.tasks), RANGES, WORDS) and routes.shape == (len(graph.tasks), ROUTE_WORDS)
    used = 0
    for i in range(len(graph.tasks)):
        for source, begin, nbytes, _ in ranges[i]:
            if source == -1:
                continue
            used += 1
            assert nbytes > 0 and begin >= 0
            assert begin + nbytes <= _extent(graph, int(source), routes[i, 0] >= 0), graph.tasks[i].name
    assert used > len(graph.tasks) // 2


def test_a_gemv_stage_prefetches_its_matrix_exactly_once(graph_and_tables):
    graph, ranges, _ = graph_and_tables
    q_w = graph.weights.index(next(w for w in graph.weights if w.name == "model.layers.1.self_attn.q_proj.weight"))
    tiles = [i for i, t in enumerate(graph.tasks) if t.name.startswith("L1.q_proj[")]
    spans = sorted((int(r[1]), int(r[1] + r[2])) for i in tiles for r in ranges[i] if r[0] == q_w)
    assert len(spans) == len(tiles)
    assert spans[0][0] == 0 and spans[-1][1] == _extent(graph, q_w, False)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # contiguous, no overlap
    t = graph.tasks[tiles[1]]
    hidden = graph.constants.hidden
    assert spans[1] == (t.tile[0] * hidden * 2, t.tile[1] * hidden * 2)


def test_only_routed_expert_tasks_wait_for_the_router(graph_and_tables):
    graph, ranges, routes = graph_and_tables
    router = next(t for t in graph.tasks if t.kind == Kind.ROUTE_TOPK and t.layer == 1)
    for i, t in enumerate(graph.tasks):
        if t.kind in (Kind.EXPERT_GATE_UP, Kind.EXPERT_DOWN_ACCUM):
            assert routes[i].tolist()[:2] == [router.buffers[1], t.slot]
            assert routes[i, 3] == router.out_event
            w = graph.weights[t.weights[-1]]
            assert routes[i, 2] == int(np.prod(w.shape[1:])) * 2  # one expert's bytes
            assert all(r[0] == t.weights[-1] for r in ranges[i] if r[0] != -1)  # no static range mixed in
        else:
            assert (routes[i] == -1).all(), t.name


def test_attention_chunks_prefetch_their_cache_rows(graph_and_tables):
    graph, ranges, _ = graph_and_tables
    c = graph.constants
    chunk = next(i for i, t in enumerate(graph.tasks) if t.kind == Kind.ATTN_CHUNK and t.tile[0] > 0)
    r0, r1 = graph.tasks[chunk].tile
    got = {int(-2 - r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in ranges[chunk] if r[0] <= -2}
    ckv, kpe = graph.tasks[chunk].buffers[2:4]
    assert got[ckv] == (r0 * c.kv_rank * 2, (r1 - r0) * c.kv_rank * 2, c.kv_rank * 2)
    assert got[kpe] == (r0 * c.qk_rope * 2, (r1 - r0) * c.qk_rope * 2, c.qk_rope * 2)

"""The encoding: round trips, rejects malformed arrays clearly, and matches the committed C header."""

import copy
from pathlib import Path

import numpy as np
import pytest

from fleet_decode.graph import EncodedGraph, GraphFormatError, Kind, Plan, build_graph, decode_graph
from fleet_decode.graph.c_header import render_c_header
from fleet_decode.graph.format import HEADER, TASK
from fleet_decode.model import get_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graph():
    return build_graph(get_config("tiny"), Plan(workers=3, stage_tiles=4, attn_chunk=8, max_positions=24, max_steps=4))


def test_round_trip_gives_the_same_graph(graph):
    encoded = graph.encode()
    assert decode_graph(encoded) == graph
    assert decode_graph(EncodedGraph.from_blob(encoded.blob(), encoded.names)) == graph
    # every array is int32 and the blob is exactly header + sections
    blob = encoded.blob()
    assert blob.dtype == np.int32 and blob.size == int(encoded.header[HEADER["TOTAL_WORDS"]])


def test_layer_graph_round_trips_and_has_no_head():
    g = build_graph(get_config("tiny"), Plan(workers=2), layers=[1])
    assert decode_graph(g.encode()) == g
    assert {t.layer for t in g.tasks} == {1}
    assert not g.constants.has_head and g.constants.first_layer == 1
    with pytest.raises(ValueError, match="consecutive"):
        build_graph(get_config("tiny"), Plan(workers=2), layers=[0, 2])


def _broken(graph, edit):
    encoded = copy.deepcopy(graph.encode())
    edit(encoded)
    return encoded


def test_rejects_an_unknown_kind(graph):
    enc = _broken(graph, lambda e: e.tasks.__setitem__((5, TASK["KIND"]), 99))
    with pytest.raises(GraphFormatError, match=r"task 5 \(.*\) KIND: 99 is not a valid Kind"):
        decode_graph(enc)


def test_rejects_an_event_index_out_of_range(graph):
    n_events = len(graph.events)
    task = next(i for i, t in enumerate(graph.tasks) if t.inputs)
    enc = _broken(graph, lambda e: e.tasks.__setitem__((task, TASK["IN0_EVENT"]), n_events))
    with pytest.raises(GraphFormatError, match=rf"waits on event index {n_events}, out of range \[0, {n_events}\)"):
        decode_graph(enc)
    enc = _broken(graph, lambda e: e.tasks.__setitem__((task, TASK["OUT_EVENT"]), -7))
    with pytest.raises(GraphFormatError, match="OUT_EVENT -7 out of range"):
        decode_graph(enc)


def test_rejects_lists_longer_than_declared(graph):
    enc = _broken(graph, lambda e: setattr(e, "tasks", np.concatenate([e.tasks, e.tasks[:1]])))
    with pytest.raises(GraphFormatError, match=rf"tasks array holds {len(graph.tasks) + 1} records but the header declares {len(graph.tasks)}"):
        decode_graph(enc)
    enc = _broken(graph, lambda e: setattr(e, "worker_tasks", np.append(e.worker_tasks, np.int32(0))))
    with pytest.raises(GraphFormatError, match="worker_tasks holds .* entries but worker_offsets declares"):
        decode_graph(enc)
    blob = graph.encode().blob()
    with pytest.raises(GraphFormatError, match="but its header declares"):
        EncodedGraph.from_blob(np.append(blob, np.int32(0)))


def test_rejects_inconsistent_records(graph):
    first = next(i for i, t in enumerate(graph.tasks) if t.out_event >= 0)
    event = graph.tasks[first].out_event
    enc = _broken(graph, lambda e: e.events.__setitem__((event, 0), e.events[event, 0] + 1))
    with pytest.raises(GraphFormatError, match="triggers per step but"):
        decode_graph(enc)
    enc = _broken(graph, lambda e: e.worker_tasks.__setitem__(0, e.worker_tasks[1]))
    with pytest.raises(GraphFormatError, match="exactly once"):
        decode_graph(enc)
    argmax = next(i for i, t in enumerate(graph.tasks) if t.kind == Kind.ARGMAX)
    enc = _broken(graph, lambda e: e.tasks.__setitem__((argmax, TASK["BUF5"]), 0))
    with pytest.raises(GraphFormatError, match="BUF5 is unused by ARGMAX"):
        decode_graph(enc)
    enc = _broken(graph, lambda e: e.header.__setitem__(HEADER["MAGIC"], 0))
    with pytest.raises(GraphFormatError, match="bad magic"):
        decode_graph(enc)


def test_committed_c_header_is_the_generated_one():
    committed = (ROOT / "hip/runtime/graph_format.h").read_text()
    assert committed == render_c_header(), "regenerate: python -m fleet_decode.graph --c-header hip/runtime/graph_format.h"


def test_spec_document_names_every_kind_and_field():
    doc = (ROOT / "docs/task-graph.md").read_text()
    from fleet_decode.graph import format as fmt
    names = [k.name for k in fmt.Kind] + list(fmt.HEADER) + list(fmt.TASK) + list(fmt.EVENT) + list(fmt.BUFFER)
    missing = [n for n in names + list(fmt.WEIGHT) if f"`{n}`" not in doc]
    assert not missing, f"docs/task-graph.md does not describe {missing}"


def test_a_band_of_rows_is_a_view_and_a_band_of_columns_a_contiguous_copy():
    import torch

    from fleet_decode.graph.derived import cols, derived, rows

    w = torch.arange(24.0).reshape(4, 6)
    params = {"m.weight": w}
    top = derived(rows("m.weight", 1, 3), (2, 6), params, None)
    assert torch.equal(top, w[1:3]) and top.data_ptr() == w[1:3].data_ptr()
    right = derived(cols("m.weight", 2, 6), (4, 4), params, None)
    assert torch.equal(right, w[:, 2:6]) and right.is_contiguous() and right.data_ptr() != w.data_ptr()
    assert derived("m.weight", (4, 6), params, None) is None


def test_w_uv_in_column_blocks_holds_each_heads_w_uv_columns_contiguously():
    import torch
    from types import SimpleNamespace

    from fleet_decode.graph.derived import W_UV_PARTS, derived

    heads, nope, v, rank, parts = 3, 4, 2, 8, 4
    kv_b = torch.arange(heads * (nope + v) * rank, dtype=torch.float32).reshape(heads * (nope + v), rank)
    config = SimpleNamespace(num_attention_heads=heads, qk_nope_head_dim=nope, v_head_dim=v, kv_lora_rank=rank)
    blocks = derived("model.layers.0." + W_UV_PARTS, (heads * parts * v, rank // parts),
                     {"model.layers.0.self_attn.kv_b_proj.weight": kv_b}, config)
    cols = rank // parts
    for h in range(heads):
        w_uv = kv_b[h * (nope + v) + nope:(h + 1) * (nope + v)]  # [v, rank]
        for p in range(parts):
            first = (h * parts + p) * v
            assert torch.equal(blocks[first:first + v], w_uv[:, p * cols:(p + 1) * cols])


def test_a_fixed_point_graph_round_trips_and_its_dtypes_are_checked():
    """Plan.split_k_sum = "fixed-point": every slice adds into its layer's one I64 row, which the sum tiles read;
    a record that points a fixed-point slice at F32 rows, or a row-writing slice at the I64 row, is refused."""
    from fleet_decode.graph.format import DType
    from fleet_decode.graph.plan import decode_plan
    config = get_config("tiny")
    g = build_graph(config, decode_plan(config, 24, 5, max_steps=2, split_k_sum="fixed-point", routed_pool_rows=0))
    assert decode_graph(g.encode()) == g
    acc = g.buffer_index("L1.moe_acc")
    assert (g.buffers[acc].dtype, g.buffers[acc].rows) == (DType.I64, 1)
    sums = [t for t in g.tasks if t.kind == Kind.SUM_FIXED_POINT and t.layer == 1]
    assert sums and {t.buffers[0] for t in sums} == {acc} and not [t for t in g.tasks if t.kind == Kind.SUM_PARTIALS]
    first_slice = next(i for i, t in enumerate(g.tasks) if t.kind == Kind.EXPERT_GATE_UP_DOWN)
    assert g.tasks[first_slice].buffers[3] == acc and g.tasks[first_slice].args == (0, 1)
    broken = copy.deepcopy(g)
    broken.buffers[acc].dtype = DType.F32
    with pytest.raises(GraphFormatError, match="a fixed-point sum must be I64"):
        decode_graph(broken.encode())
    enc = _broken(g, lambda e: e.tasks.__setitem__((first_slice, TASK["ARG1"]), 0))
    with pytest.raises(GraphFormatError, match="partial rows must be F32"):
        decode_graph(enc)
    enc = _broken(g, lambda e: e.tasks.__setitem__((first_slice, TASK["ARG1"]), 2))
    with pytest.raises(GraphFormatError, match="fixed_point must be 0 or 1"):
        decode_graph(enc)

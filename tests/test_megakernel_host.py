"""CPU checks of the megakernel's host side: the add-order table that makes the residual sums
deterministic, the decode plan's cache and chunks, the refusals of graphs the compiled runtime
cannot run, the launch arguments' struct against the runtime's, and the sweep's refusal of unknown
variants."""
import ctypes
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fleet_decode.graph import Plan, build_graph, decode_plan
from fleet_decode.graph.format import ACCUMULATES, KERNEL_LIMITS, Kind
from fleet_decode.graph.plan import absorb_parts_fit, merge_v_parts_fit
from fleet_decode.kernels import lab
from fleet_decode.kernels.runtime import VIEW, VIEW_BYTES, LaunchArgs, MegakernelError, _check_graph, add_order, task_views

MAX_ATTN_CHUNK = KERNEL_LIMITS["MAX_ATTN_CHUNK"]
RUNTIME = Path(__file__).resolve().parents[1] / "hip" / "runtime" / "megakernel.cu"
from fleet_decode.model import get_config


@pytest.fixture(scope="module")
def lite_graph():
    config = get_config("deepseek-coder-v2-lite")
    return build_graph(config, Plan(workers=16, max_positions=256, max_steps=4), layers=[0, 1, 2])


def test_several_adders_of_one_row_range_share_a_counter_and_scratch(lite_graph):
    order, n_groups, n_scratch, row = add_order(lite_graph)
    config = get_config("deepseek-coder-v2-lite")
    assert row == config.hidden_size
    adders = [i for i, t in enumerate(lite_graph.tasks) if t.kind in ACCUMULATES]
    moe = [i for i in adders if lite_graph.tasks[i].layer >= config.first_k_dense_replace]
    dense = [i for i in adders if lite_graph.tasks[i].layer < config.first_k_dense_replace]
    assert (order[dense] == -1).all()  # one adder per row range in the dense layer: it adds in place
    assert (order[[i for i in range(len(lite_graph.tasks)) if i not in set(adders)]] == -1).all()
    group_size = config.num_experts_per_tok + 1  # the shared experts and every routed slot
    assert set(order[moe, 2]) == {group_size}
    assert n_groups == len(np.unique(order[moe, 0]))
    moe_layers = {lite_graph.tasks[i].layer for i in moe}
    assert n_scratch == len(moe_layers) * group_size * row  # one row per rank and summed buffer
    for group in range(n_groups):
        members = np.flatnonzero(order[:, 0] == group)
        tasks = [lite_graph.tasks[i] for i in members]
        assert len({t.tile for t in tasks}) == 1  # one row range per group
        assert order[members, 1].tolist() == list(range(len(members)))  # ranks follow the graph's order
        assert (np.diff(order[members, 3]) == row).all()  # rank r's row follows rank r-1's
    rows_used = {(int(o), lite_graph.tasks[i].tile) for i, o in zip(moe, order[moe, 3])}
    assert len(rows_used) == len(moe)  # no two adders share a scratch row over the same rows


@pytest.mark.parametrize("positions, groups, chunk",
                         [(288, 4, 16), (1056, 4, 32), (1057, 4, 48), (4128, 2, MAX_ATTN_CHUNK),
                          (8224, 1, MAX_ATTN_CHUNK)])
def test_the_decode_plan_sizes_the_cache_and_cuts_it_into_one_round_of_chunk_tasks(positions, groups, chunk):
    config = get_config("deepseek-coder-v2-lite")
    plan = decode_plan(config, positions, workers=132)
    assert positions <= plan.max_positions < positions + 32 and plan.max_positions % 32 == 0
    assert (plan.attn_head_groups, plan.attn_chunk) == (groups, chunk)
    if groups > 1 or chunk < MAX_ATTN_CHUNK:  # every chunk task of a layer runs at once
        assert -(-plan.max_positions // plan.attn_chunk) * plan.attn_head_groups <= 132
    # too few workers for one round even with the longest chunks: the longest chunks, one group
    few = decode_plan(config, positions, workers=4)
    assert (few.attn_head_groups, few.attn_chunk) == (1, MAX_ATTN_CHUNK)
    # an override of one is kept and the other chosen to fit
    assert decode_plan(config, positions, workers=132, attn_head_groups=1).attn_head_groups == 1
    assert decode_plan(config, 1057, workers=132, attn_chunk=32).attn_head_groups == 2


def test_the_decode_plan_spreads_the_lists_by_a_stride_coprime_with_the_workers():
    from fleet_decode.graph.plan import decode_worker_stride

    config = get_config("deepseek-coder-v2-lite")
    assert decode_plan(config, 1056, workers=132).worker_stride == 67  # what sweep 47 measured best
    assert decode_plan(config, 1056, workers=132, worker_stride=1).worker_stride == 1
    for workers in range(1, 300):  # every count gets a valid plan: coprime strides, or none
        stride = decode_worker_stride(workers)
        assert stride == 1 or (math.gcd(stride, workers) == 1 and stride == workers // 2 + 1)
        Plan(workers=workers, worker_stride=stride)


def test_the_decode_plan_cuts_the_merge_by_latent_columns_else_in_two_parts():
    config = get_config("deepseek-coder-v2-lite")  # 512 latent columns: four blocks of 128
    plan = decode_plan(config, 1056, workers=132)
    assert (plan.merge_lat_parts, plan.merge_v_parts) == (4, 1)
    # an override of either is kept; the two-part merge (128 W_UV rows a head: two of 64) where asked for
    two_parts = decode_plan(config, 1056, workers=132, merge_v_parts=2)
    assert (two_parts.merge_lat_parts, two_parts.merge_v_parts) == (1, 2)
    assert decode_plan(config, 1056, workers=132, merge_lat_parts=1).merge_v_parts == 2
    assert decode_plan(config, 1056, workers=132, merge_lat_parts=2).merge_v_parts == 1
    for other in ({"heads_per_tile": 2}, {"router_in_o_proj": True}):  # column blocks need one head, no router
        assert decode_plan(config, 1056, workers=132, **other).merge_lat_parts == 1, other
    assert decode_plan(config, 1056, workers=132, heads_per_tile=2).merge_v_parts == 1  # parts need one head
    odd = SimpleNamespace(num_attention_heads=16, v_head_dim=24, kv_lora_rank=500,  # neither splits evenly
                          max_position_embeddings=config.max_position_embeddings, hidden_size=config.hidden_size)
    odd_plan = decode_plan(odd, 1057, workers=132)
    assert (odd_plan.merge_lat_parts, odd_plan.merge_v_parts) == (1, 1)
    for plan in (decode_plan(config, 1056, workers=132), decode_plan(config, 1056, workers=132, merge_lat_parts=1)):
        build_graph(config, plan, layers=[0, 1])  # graphs the builder accepts
    with pytest.raises(ValueError, match="merge_lat_parts"):
        build_graph(config, Plan(workers=132, max_positions=256, merge_lat_parts=3, heads_per_tile=1), layers=[1])


def test_the_decode_plan_cuts_the_experts_into_split_k_slices_one_routed_slice_a_worker():
    config = get_config("deepseek-coder-v2-lite")
    plan = decode_plan(config, 1056, workers=132, routed_pool_rows=0)  # static slices, whatever the sum's form
    assert (plan.moe_tiles, plan.split_k_rows, plan.split_k_shared_tiles) == ("split-k", 64, 88)
    graph = build_graph(config, plan, layers=[1])
    routed = [i for i, t in enumerate(graph.tasks) if t.kind == Kind.EXPERT_GATE_UP_DOWN]
    shared = [i for i, t in enumerate(graph.tasks) if t.kind == Kind.GATE_UP_DOWN]
    assert len(routed) == 6 * 22 and {b - a for a, b in (graph.tasks[i].tile for i in routed)} == {64}
    assert len(shared) == 88 and {b - a for a, b in (graph.tasks[i].tile for i in shared)} == {32}
    owners = sorted(w for w, tasks in enumerate(graph.workers) for i in set(tasks) & set(routed))
    assert owners == list(range(132))  # every worker streams one routed slice
    assert decode_plan(config, 1056, workers=132, moe_tiles="routing-free").moe_tiles == "routing-free"
    assert decode_plan(config, 1056, workers=132, split_k_rows=32).split_k_rows == 32


def test_the_decode_plans_sum_form_follows_its_constants_and_runs_one_tile_as_a_tail(monkeypatch):
    """DECODE_SPLIT_K_SUM, DECODE_ROUTED_POOL_ROWS and DECODE_SUM_IN_ONE_TILE pick the sum's form (part 26);
    a fixed-point sum in one tile a layer runs as a tail of the slices by default, and a variant's tuning
    is set on that default (runtime.on_default_tuning)."""
    from fleet_decode.graph import plan as plan_module
    from fleet_decode.graph.tails import tails
    from fleet_decode.kernels.runtime import Tuning, default_tuning, on_default_tuning

    config = get_config("deepseek-coder-v2-lite")
    monkeypatch.setattr(plan_module, "DECODE_SPLIT_K_SUM", "rows")
    monkeypatch.setattr(plan_module, "DECODE_SUM_IN_ONE_TILE", True)  # read only with the fixed-point sum
    rows = decode_plan(config, 1056, workers=132)
    assert (rows.split_k_sum, rows.routed_pool_rows, rows.sum_rows) == ("rows", 0, plan_module.DECODE_SUM_ROWS)
    assert default_tuning(rows, config) == Tuning()
    monkeypatch.setattr(plan_module, "DECODE_SPLIT_K_SUM", "fixed-point")
    monkeypatch.setattr(plan_module, "DECODE_ROUTED_POOL_ROWS", 32)
    monkeypatch.setattr(plan_module, "DECODE_SUM_IN_ONE_TILE", True)
    plan = decode_plan(config, 1056, workers=132)
    assert (plan.split_k_sum, plan.routed_pool_rows, plan.sum_rows) == ("fixed-point", 32, config.hidden_size)
    tuning = default_tuning(plan, config)
    assert tuning.tail_kinds == ("SUM_FIXED_POINT",)
    graph = build_graph(config, plan, layers=[0, 1, 2])
    tail_of = tails(graph, tuning.tail_kinds)  # one sum a layer, each after its slices (and the pool's takers)
    assert sorted(graph.tasks[t].layer for t in tail_of) == [0, 1, 2]
    assert {graph.tasks[t].kind for t in tail_of} == {Kind.SUM_FIXED_POINT}
    assert on_default_tuning(Tuning(stage=False), plan, config) == Tuning(stage=False, tail_kinds=("SUM_FIXED_POINT",))
    rows = decode_plan(config, 1056, workers=132, split_k_sum="rows")  # an override of the form keeps it whole
    assert (rows.routed_pool_rows, rows.sum_rows) == (0, 64) and default_tuning(rows, config) == Tuning()
    monkeypatch.setattr(plan_module, "DECODE_SUM_IN_ONE_TILE", False)
    assert decode_plan(config, 1056, workers=132).sum_rows == 64
    assert default_tuning(decode_plan(config, 1056, workers=132), config) == Tuning()


def test_the_decode_plan_cuts_heads_only_into_groups_that_divide_them():
    real = get_config("deepseek-coder-v2-lite")
    for heads, groups in ((3, 1), (6, 2), (16, 4)):  # what decode_plan reads of a config
        config = SimpleNamespace(num_attention_heads=heads, v_head_dim=real.v_head_dim,
                                 max_position_embeddings=real.max_position_embeddings, hidden_size=real.hidden_size)
        assert decode_plan(config, 1057, workers=132).attn_head_groups == groups


def test_one_absorb_check_serves_the_plan_and_the_runtime():
    """decode_plan cuts the q-absorb in 8 blocks only where the kernel can run them, by the same
    absorb_parts_fit that kernels.runtime refuses graphs with."""
    config = get_config("deepseek-coder-v2-lite")  # 512 latent columns: 8 blocks of 64
    assert absorb_parts_fit(8, 512) and absorb_parts_fit(64, 512) and absorb_parts_fit(1, 8)
    assert not absorb_parts_fit(3, 512)  # blocks of 170.67 columns
    assert not absorb_parts_fit(128, 512)  # blocks of 4 columns: not a 16-byte piece
    assert not absorb_parts_fit(1, 8 * 8 * KERNEL_LIMITS["RUNTIME_THREADS"])  # more than 8 columns a thread
    assert not absorb_parts_fit(8, 0)
    assert decode_plan(config, 1056, workers=132).absorb_parts == 8
    odd = SimpleNamespace(num_attention_heads=16, v_head_dim=128, kv_lora_rank=96,  # 8 blocks of 12 columns
                          max_position_embeddings=config.max_position_embeddings, hidden_size=config.hidden_size)
    assert decode_plan(odd, 1057, workers=132).absorb_parts == Plan.absorb_parts
    graph = build_graph(config, Plan(workers=132, max_positions=256, max_steps=2, absorb_parts=8), layers=[1])
    _check_graph(graph, 132, 48 * 1024)  # runnable
    for t in graph.tasks:
        if t.kind == Kind.ROPE_Q_ABSORB:
            t.args = (128, *t.args[1:])  # what absorb_parts_fit refuses, in a graph the builder would not make
    with pytest.raises(MegakernelError, match="column blocks"):
        _check_graph(graph, 132, 48 * 1024)


def test_merge_parts_are_checked_against_the_kernels_w_uv_pass_not_the_tiles_row_align():
    """A head's W_UV rows split into merge_v_parts of whole 8-row passes of the kernel, whatever the
    plan's row_align (4 on the decode plans)."""
    rows_per_pass = KERNEL_LIMITS["WUV_ROWS_PER_PASS"]
    assert merge_v_parts_fit(2, 128, 1) and merge_v_parts_fit(16, 128, 1)
    assert not merge_v_parts_fit(32, 128, 1)  # 4-row parts: half a pass
    assert not merge_v_parts_fit(2, 128, 2)  # parts need one head a tile
    config = get_config("deepseek-coder-v2-lite")
    with pytest.raises(ValueError, match=f"multiple of {rows_per_pass}"):
        build_graph(config, Plan(workers=132, max_positions=256, max_steps=2, row_align=4, merge_v_parts=32),
                    layers=[1])


def test_overlapping_unequal_adder_ranges_are_refused():
    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=2),
                        layers=[1])
    down = next(t for t in graph.tasks if t.kind == Kind.EXPERT_DOWN_ACCUM)
    down.tile = (down.tile[0], down.tile[1] + 8)
    with pytest.raises(MegakernelError, match="overlap"):
        add_order(graph)


def test_graphs_the_runtime_cannot_run_are_refused():
    config = get_config("deepseek-coder-v2-lite")
    scratch = 48 * 1024  # what the built library's fd_megakernel_scratch_bytes() reports
    dense_layer = build_graph(config, Plan(workers=4, max_positions=128, max_steps=2), layers=[0])
    _check_graph(dense_layer, 4, scratch)  # runnable
    with pytest.raises(MegakernelError, match="SMs"):
        _check_graph(build_graph(config, Plan(workers=8, max_positions=128, max_steps=2), layers=[0]), 4, scratch)
    with pytest.raises(MegakernelError, match="positions"):
        _check_graph(build_graph(config, Plan(workers=4, attn_chunk=128, max_positions=256, max_steps=2),
                                 layers=[0]), 4, scratch)
    with pytest.raises(MegakernelError, match="shared-memory scratch"):  # the dense MLP's 10944 activations
        _check_graph(dense_layer, 4, scratch_bytes=32 * 1024)
    with pytest.raises(MegakernelError, match="compiled for"):
        _check_graph(build_graph(get_config("tiny"), Plan(workers=4, max_positions=64, max_steps=2)), 4, scratch)


def test_the_sweep_names_an_unknown_variant_and_the_known_ones(capsys):
    with pytest.raises(SystemExit) as stop:  # refused before any model is loaded or GPU touched
        lab.main(["--sweep", "--variants", "attn_chunk=32,no such variant"])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "'no such variant' is neither a known variant nor FIELD=VALUE" in error
    assert all(name in error for name in lab.speed_variants(1024, 32))


def test_a_variant_is_named_or_composed_of_known_variants_and_field_settings():
    known = lab.speed_variants(1024, 32)
    assert lab.variant_named("stage off", known) is known["stage off"]
    v = lab.variant_named("tails + worker_stride=7 + down_fit=true + stage_kib=64", known)
    assert v.plan == {"worker_stride": 7, "down_fit": True}
    assert v.tuning.tail_kinds == known["tails"].tuning.tail_kinds and v.tuning.stage_kib == 64
    assert lab.variant_named("moe split-k + tail_kinds=ROUTE_TOPK", known).tuning.tail_kinds == ("ROUTE_TOPK",)
    for bad in ("down_fit=maybe", "worker_stride=seven", "no_such_field=1", "tails + nonsense"):
        with pytest.raises(ValueError):
            lab.variant_named(bad, known)


def test_a_megakernels_tuning_keeps_the_fields_its_tables_were_built_from():
    """The sweep once set tails and staged kinds on a Megakernel built without them, and timed the default:
    such fields can only be given when it is built."""
    from fleet_decode.kernels.runtime import Megakernel, Tuning

    mk = Megakernel.__new__(Megakernel)
    mk._tuning = Tuning()
    mk.tuning = Tuning(stage=False, stage_kib=64)  # launch-time fields change freely
    for built in (dict(tail_kinds=("ROUTE_TOPK",)), dict(staged_kinds=("ROUTER",))):
        with pytest.raises(MegakernelError, match=next(iter(built))):
            mk.tuning = Tuning(**built)
    assert mk.tuning == Tuning(stage=False, stage_kib=64)


def test_the_chunk_form_is_the_tensor_cores_where_a_chunk_task_carries_many_heads():
    from fleet_decode.kernels.runtime import TENSOR_CORE_CHUNK_HEADS, Tuning, chunk_form

    config = get_config("deepseek-coder-v2-lite")

    def heads_a_task(context):
        plan = decode_plan(config, context, 132)
        return config.num_attention_heads // plan.attn_head_groups

    # the decode plan's 4 head groups up to ~2,120 positions (timed: plain faster), then 2 and 1 (tensor cores)
    assert chunk_form("auto", heads_a_task(1024 + 32), True) == "plain"
    assert chunk_form("auto", heads_a_task(2048 + 32), True) == "plain"
    assert chunk_form("auto", heads_a_task(2176 + 32), True) == "tensor-cores"
    assert chunk_form("auto", heads_a_task(4096 + 32), True) == "tensor-cores"
    assert chunk_form("auto", TENSOR_CORE_CHUNK_HEADS - 1, True) == "plain"
    assert chunk_form("auto", 16, False) == "plain"  # an AMD build: one entry
    assert chunk_form("plain", 16, True) == "plain" and chunk_form("tensor-cores", 1, True) == "tensor-cores"
    with pytest.raises(MegakernelError, match="no tensor-core chunk"):
        chunk_form("tensor-cores", 16, False)
    with pytest.raises(ValueError, match="chunk_form 'mma'"):
        Tuning(chunk_form="mma")
    assert lab.variant_named("chunk_form=tensor-cores", lab.speed_variants(1024, 32)).tuning.chunk_form == "tensor-cores"


def test_the_sweep_refuses_a_library_without_a_path(capsys):
    with pytest.raises(SystemExit) as stop:  # before any model is loaded
        lab.main(["--sweep", "--variants", "stage off", "--library", "lookahead"])
    assert stop.value.code == 2 and "NAME=PATH" in capsys.readouterr().err


def test_a_sweep_times_a_library_with_the_variants_picked_for_it(monkeypatch, capsys):
    timed = []
    monkeypatch.setattr(lab, "sweep", lambda model, prompt, tokens, variants, **kw: timed.append(dict(variants)) or {})
    monkeypatch.setattr(lab, "print_sweep", lambda result: None)
    lab.main(["--sweep", "--variants", "tails,moe split-k,default@new", "--library", "new=/x.so"])
    lab.main(["--sweep", "--variants", "tails", "--library", "new=/x.so"])
    picked, every = timed
    assert list(picked) == ["default", "tails", "moe split-k", "default@new"] and picked["default@new"].library == "/x.so"
    assert list(every) == ["default", "tails", "default@new", "tails@new"]
    with pytest.raises(SystemExit):
        lab.main(["--sweep", "--variants", "default@old", "--library", "new=/x.so"])
    assert "default@old" in capsys.readouterr().err


def test_a_sweep_can_time_this_trees_library_again_as_its_control(monkeypatch, capsys):
    """--same: the default variant on the default library once more, under another name, so that the sweep
    shows the spread of one binary beside the builds it compares (part 19: builds of one source differ by 2-5 %)."""
    timed = []
    monkeypatch.setattr(lab, "sweep", lambda model, prompt, tokens, variants, **kw: timed.append(dict(variants)) or {})
    monkeypatch.setattr(lab, "print_sweep", lambda result: None)
    monkeypatch.setattr(lab.library, "device_arch", lambda: "sm_90a")
    monkeypatch.setenv("FLEET_DECODE_KERNELS", "/main.so")
    lab.main(["--sweep", "--same", "--variants", "default@new", "--library", "new=/x.so"])
    (variants,) = timed
    assert list(variants) == ["default", "default@new", "default@same"]
    assert variants["default@same"].library == "/main.so" and variants["default"].library is None
    assert variants["default@same"].plan == variants["default"].plan
    with pytest.raises(SystemExit):
        lab.main(["--sweep", "--same", "--library", "same=/x.so"])
    assert "--same" in capsys.readouterr().err


_CTYPES = {"const int*": ctypes.c_void_p, "void* const*": ctypes.c_void_p, "const void* const*": ctypes.c_void_p,
           "int*": ctypes.c_void_p, "float*": ctypes.c_void_p, "unsigned long long*": ctypes.c_void_p,
           "const long long*": ctypes.c_void_p, "const float*": ctypes.c_void_p, "const void*": ctypes.c_void_p,
           "double": ctypes.c_double,
           "int": ctypes.c_int, "float": ctypes.c_float, "unsigned int": ctypes.c_uint}


def test_the_launch_struct_mirrors_the_runtime_field_by_field():
    """The C struct is parsed from the source, so a field added, moved or retyped on one side only fails here
    (the library's fd_megakernel_args_bytes() catches a stale binary on the GPU host)."""
    source = RUNTIME.read_text()
    body = re.search(r"struct fd_launch_args \{(.*?)\n\};", source, re.S).group(1)
    fields = re.findall(r"^\s*((?:const )?[a-z ]+?\**(?: const\*)?)\s*(\w+);", body, re.M)
    assert [name for _, name in fields] == [name for name, _ in LaunchArgs._fields_]
    for (ctype, name), (_, mirrored) in zip(fields, LaunchArgs._fields_):
        assert _CTYPES[ctype.strip()] is mirrored, name


def test_the_task_view_mirrors_the_runtime_field_by_field():
    """runtime.VIEW is fd_task_view's layout (the runtime copies it as bytes): the same fields in the same
    order, pointers as 8 bytes, and 16-byte pieces (the library's fd_megakernel_view_bytes() checks the
    size on the GPU host)."""
    body = re.search(r"struct __align__\(16\) fd_task_view \{(.*?)\n\};", RUNTIME.read_text(), re.S).group(1)
    declared = []
    for ctype, names in re.findall(r"^\s*((?:const )?\w+\**)\s+([^;]+);", body, re.M):
        for name in names.split(","):
            declared.append((name.strip().split("[")[0], "*" in ctype))
    assert [n for n, _ in declared] == list(VIEW.names)
    for name, pointer in declared:
        assert (VIEW[name].base == np.uint64) == pointer, name
    assert VIEW_BYTES % 16 == 0 and VIEW_BYTES >= VIEW.itemsize


def test_task_views_hold_each_task_s_addresses_and_fields():
    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=2),
                        layers=[0, 1])
    encoded = graph.encode()
    buffers = [(1 << 40) + 256 * k for k in range(len(graph.buffers))]
    weights = [(1 << 41) + 512 * k for k in range(len(graph.weights))]
    views = task_views(graph, encoded.tasks, buffers, weights)
    assert views.shape == (len(graph.tasks), VIEW_BYTES)
    fields = views[:, :VIEW.itemsize].copy().view(VIEW).reshape(-1)
    for i, t in enumerate(graph.tasks):
        v = fields[i]
        assert list(v["buf"][:len(t.buffers)]) == [buffers[b] for b in t.buffers] and not v["buf"][len(t.buffers):].any()
        assert list(v["wt"][:len(t.weights)]) == [weights[w] for w in t.weights] and not v["wt"][len(t.weights):].any()
        assert list(v["wt_slot"][:len(t.weights)]) == list(t.weights) and (v["wt_slot"][len(t.weights):] == -1).all()
        assert (int(v["b0"]), int(v["b1"]), int(v["slot"])) == (*t.tile, t.slot)
        assert list(v["arg"][:len(t.args)]) == list(t.args)
        if t.kind in (Kind.DOWN_ACCUM, Kind.O_PROJ_RESIDUAL):
            assert v["act_len"] == graph.buffers[t.buffers[0]].numel > 0
        else:
            assert v["act_len"] == 0


def test_tpc_pairs_places_a_heavy_list_beside_a_light_one():
    """The lab's placement (kernels.lab.tpc_pairs): the same lists, blocks 2k and 2k + 1 holding the
    k-th heaviest and the k-th lightest, so that every pair streams about as much as every other."""
    graph = build_graph(get_config("deepseek-coder-v2-lite"), Plan(workers=16, max_positions=128, max_steps=2),
                        layers=[0, 1, 2])
    before = sorted(map(tuple, graph.workers))
    cost = lambda tasks: sum(graph.tasks[i].cost for i in tasks)  # noqa: E731
    spread_before = [cost(graph.workers[2 * k]) + cost(graph.workers[2 * k + 1]) for k in range(8)]
    placed = lab.tpc_pairs(graph)
    assert sorted(map(tuple, placed.workers)) == before
    costs = [cost(tasks) for tasks in placed.workers]
    assert costs[0] == max(costs) and costs[1] == min(costs)
    pairs = [costs[2 * k] + costs[2 * k + 1] for k in range(8)]
    assert max(pairs) - min(pairs) <= max(spread_before) - min(spread_before)


def test_a_sweep_launches_its_variants_in_rounds_and_drops_one_that_fails():
    order, rounds = [], []

    def runner(name, fail_at=None):
        def run():
            order.append(name)
            if len([n for n in order if n == name]) == fail_at:
                raise RuntimeError("watchdog")
            return f"{name}{len(order)}"
        return run

    results, errors = lab.interleaved_launches(
        {"default": runner("default"), "a": runner("a", fail_at=2), "b": runner("b")}, 3,
        after_round=lambda r, e: rounds.append({k: len(v) for k, v in r.items()}))
    assert order == ["default", "a", "b", "default", "a", "b", "default", "b"]  # drift falls on all alike
    assert errors == {"a": "RuntimeError: watchdog"}
    assert [len(results[k]) for k in ("default", "a", "b")] == [3, 1, 3]
    assert rounds == [{"default": 1, "a": 1, "b": 1}, {"default": 2, "a": 1, "b": 2}, {"default": 3, "a": 1, "b": 3}]


def test_a_whole_sweep_runs_on_stand_ins_and_writes_every_round(monkeypatch, tmp_path):
    """lab.sweep end to end on the CPU: the model, the GPU's SM count and the Megakernel stood in for, so
    the build phase, the rounds, the rows and the file written after each round are exercised."""
    import json
    from types import SimpleNamespace as NS

    import torch

    from fleet_decode.kernels.runtime import DecodeResult, Tuning

    config = get_config("tiny")
    built = []

    class FakeMegakernel:
        def __init__(self, model, plan, graph=None, lib=None, tuning=Tuning()):
            if plan.down_fit:
                raise RuntimeError("no room")  # a variant that fails while it is built
            self.graph, self.tuning, self.launches = graph or build_graph(config, plan), tuning, 0
            built.append(self)

        def prefill(self, prompt):
            pass

        def generate(self, n_prompt, n_tokens):
            self.launches += 1
            slow = 2.0 if self.tuning.stage is False else 1.0
            return DecodeResult(tokens=[1] * n_tokens, logits=[torch.zeros(4)] * n_tokens, hidden_states=[],
                                step_seconds=[slow * 1e-3 * (1 + 0.01 * self.launches)] * n_tokens)

    monkeypatch.setattr(lab, "Megakernel", FakeMegakernel)
    monkeypatch.setattr("fleet_decode.model.load_model", lambda *a, **k: NS(config=config))
    monkeypatch.setattr(lab.torch.cuda, "get_device_properties", lambda i: NS(multi_processor_count=8))
    known = lab.speed_variants(64, 4)
    variants = {name: lab.variant_named(name, known) for name in ("default", "stage off", "down_fit=true")}
    out = tmp_path / "sweep.json"
    result = lab.sweep("tiny", 64, 4, variants, launches=2, out=str(out))
    rows = result["variants"]
    assert rows["down_fit=true"] == {"error": "RuntimeError: no room"}
    assert len(built) == 1  # default and stage off share one graph (stage is a launch-time field)
    assert rows["stage off"]["p50_ms"] == pytest.approx(2 * rows["default"]["p50_ms"], rel=0.05)
    assert rows["default"]["same_tokens_as_default"] and rows["stage off"]["max_abs_logit_diff_vs_default"] == 0
    assert json.loads(out.read_text())["variants"]["stage off"]["p50_ms_per_launch"] == \
        rows["stage off"]["p50_ms_per_launch"]


def test_a_variant_that_re_places_the_lists_gives_its_graph_to_the_sweep_and_the_trace():
    config = get_config("deepseek-coder-v2-lite")
    plan = Plan(workers=16, max_positions=128, max_steps=2)
    known = lab.speed_variants(1024, 32)
    assert lab.variant_graph(config, plan, known["default"]) is None  # the Megakernel builds the plan's own
    plain = build_graph(config, plan)
    for name in ("tpc pairs", "tpc pairs experts", "tpc pairs + merge_v_parts=2"):
        graph = lab.variant_graph(config, plan, lab.variant_named(name, known))
        assert sorted(map(tuple, graph.workers)) == sorted(map(tuple, plain.workers))
        assert graph.workers != plain.workers

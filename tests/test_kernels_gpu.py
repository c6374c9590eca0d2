"""M1 on a GPU: every task kernel alone at the real shapes matches its torch reference, the
kernels are deterministic, and a launcher given bad arguments raises instead of running."""
import pytest
import torch

from fleet_decode.graph.format import Kind
from fleet_decode.kernels.checks import check_all
from fleet_decode.kernels.library import KernelError, load

pytestmark = pytest.mark.gpu

F32_ROWS = {kind.name for kind in Kind} | {"GATE_UP:dense"}  # the simulator's M1 rows, plus a second width
ROWS = F32_ROWS | {row + ":bf16" for row in F32_ROWS}


@pytest.fixture(scope="module")
def lib():
    return load()


@pytest.fixture(scope="module")
def results(lib):
    return check_all(seed=1, lib=lib, activations=(torch.float32, torch.bfloat16))


def test_every_task_kernel_matches_its_reference(results):
    assert set(results) == ROWS
    failed = {kind: r for kind, r in results.items() if not r["passed"]}
    assert not failed
    for kind, r in results.items():
        assert r["written"] and r["max_rel"] <= r["tol"], kind
        # a top-k runs in one launch sequence with the tiles before it: its time is in their row
        assert r["us"] > 0 or kind.startswith(("ROUTE_TOPK", "ROUTE_PARTS_TOPK")), kind


def test_kernels_are_deterministic(lib, results):
    # Not the atomic adds (DOWN_ACCUM, EXPERT_DOWN_ACCUM), whose order of additions varies by design.
    again = check_all(seed=1, lib=lib, kinds=["LM_HEAD", "ATTN_CHUNK", "ROUTER", "GATE_UP"],
                      activations=(torch.float32, torch.bfloat16))
    assert again and not any("DOWN_ACCUM" in kind for kind in again)
    for kind, r in again.items():
        assert r["max_abs"] == results[kind]["max_abs"], kind


def test_bad_launch_arguments_raise(lib):
    x = torch.randn(2048, device="cuda").bfloat16()
    W = torch.randn(16, 2048, device="cuda").bfloat16()
    out = torch.empty(16, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(KernelError):
        lib.rmsnorm_gemv(x, None, 1e-6, W, out, rows_per_tile=0)
    with pytest.raises(TypeError):
        lib.rmsnorm_gemv(x.float(), None, 1e-6, W, out, rows_per_tile=16)

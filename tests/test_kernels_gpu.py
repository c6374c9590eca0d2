"""M1 on a GPU: every task kernel alone at the real shapes matches its torch reference, the
kernels are deterministic, and a launcher given bad arguments raises instead of running."""
import pytest
import torch

from fleet_decode.kernels.check import check_all
from fleet_decode.kernels.library import KernelError, load

pytestmark = pytest.mark.gpu

BF16_KINDS = {"embed", "rmsnorm_gemv", "rope_cache", "q_absorb", "rope_q_absorb", "attention_chunk", "attention_merge",
              "attention_merge_uv", "wuv_oproj", "router_topk", "router_tiles", "expert_gate_up", "expert_gate_up:shared",
              "expert_gate_up:dense", "expert_down", "expert_down:dense", "lm_head", "argmax"}
KINDS = BF16_KINDS | {kind + ":f32" for kind in BF16_KINDS - {"q_absorb", "attention_merge", "argmax"}} \
    | {"down_accum:f32"}


@pytest.fixture(scope="module")
def lib():
    return load()


@pytest.fixture(scope="module")
def results(lib):
    return check_all(seed=1, lib=lib)


def test_every_task_kernel_matches_its_reference(results):
    assert set(results) == KINDS
    failed = {kind: r for kind, r in results.items() if not r["passed"]}
    assert not failed
    for kind, r in results.items():
        assert r["written"] and r["max_rel"] <= r["tol"], kind
        assert r["us"] > 0, kind


def test_kernels_are_deterministic(lib, results):
    # Every kind but the atomic adds (down_accum), whose order of additions varies by design.
    again = check_all(seed=1, lib=lib, kinds=["expert_down", "lm_head", "attention_chunk", "router_topk", "router_tiles"])
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

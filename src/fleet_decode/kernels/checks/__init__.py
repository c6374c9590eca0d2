"""M1 on the device: every task kind the graph emits, its kernel alone at the real shapes against an
fp64 reference, plus its time. Rows are named after the kinds (fleet_decode.task_kinds), as the
simulator's M1 names them.

    python -m fleet_decode.kernels.checks [--lib PATH] [--seed 0] [--out kernels.json] [--kinds A,B] [--bf16]

harness: inputs, poison, errors, timing; references: the fp64 answers; per_kind: one check per kind.
"""
import contextlib
import math
from dataclasses import asdict

import torch

from fleet_decode.kernels.checks import per_kind  # noqa: F401  (registers the checks)
from fleet_decode.kernels.checks.harness import Grid, Inputs, Result, Shapes
from fleet_decode.task_kinds import REGISTRY, missing

__all__ = ["Shapes", "check_all"]


def device_checks() -> dict:
    """{check function: the kinds it covers}, in the graph's kind order, each function once."""
    assert not missing("check_on_device"), f"kinds without a device check: {missing('check_on_device')}"
    checks: dict = {}
    for kind, entry in REGISTRY.items():
        checks.setdefault(entry.check_on_device, []).append(kind)
    return checks


def check_all(seed: int = 0, device: str = "cuda", lib=None, kinds: list[str] | None = None,
              shapes: Shapes | None = None, activations=(torch.float32,)) -> dict[str, dict]:
    """Runs every kind's check at each activation type; returns {row: Result fields}. `kinds` keeps
    the checks whose kinds' names contain one of the given strings."""
    if lib is None:
        from fleet_decode.kernels.library import load
        lib = load()
    s = shapes or Shapes()
    on_gpu = torch.device(device).type == "cuda"
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count if on_gpu else 8
    grid = Grid(n_sm, lib.warp_size)
    checks = [(fn, covered, dtype) for fn, covered in device_checks().items() for dtype in activations]
    results: dict[str, dict] = {}
    with torch.cuda.device(device) if on_gpu else contextlib.nullcontext():
        for number, (fn, covered, dtype) in enumerate(checks):
            if kinds and not any(part in kind.name for kind in covered for part in kinds):
                continue
            rnd = Inputs(seed * len(checks) + number, device)  # the same inputs whichever kinds run
            try:
                out = fn(lib, s, rnd, grid, dtype)
            except Exception as exc:  # record it and go on: one broken kind must not hide the others
                out = [Result(kind.name, math.inf, math.inf, 0.0, False, "", 0.0, 0, 0.0, False,
                              note=f"{type(exc).__name__}: {exc}") for kind in covered]
            for r in out if isinstance(out, list) else [out]:
                results[r.kind] = asdict(r)
            if on_gpu:
                torch.cuda.empty_cache()
    return results

"""One registry keyed by the task graph's Kind: what each kind computes on the simulator, how M1
checks the simulator's kernel, and how M1 checks the device's kernel.

Each side registers its own functions with the decorators below where it defines them
(fleet_decode.sim.kinds, fleet_decode.sim.kind_check, fleet_decode.kernels.checks.per_kind), so
the GPU side never imports the simulator, and every M1 row on every backend is named after the kind
it checks (`Kind.name`, plus a `:variant` suffix where one kind is checked at several shapes or
activation types). tests/test_task_kinds.py fails while a kind lacks any of the three.
"""
from dataclasses import dataclass
from typing import Callable

from fleet_decode.graph.format import Kind


@dataclass
class TaskKindEntry:
    simulate: Callable | None = None  # (TaskContext) -> None: one task on the simulator's memory
    check_on_simulator: Callable | None = None  # (SimCheck) -> {max_abs, max_rel, shape}
    check_on_device: Callable | None = None  # (kernels, shapes, inputs, grid, dtype) -> Result | [Result]


REGISTRY: dict[Kind, TaskKindEntry] = {kind: TaskKindEntry() for kind in Kind}


def _register(field: str, kinds: tuple[Kind, ...]):
    def decorate(fn):
        for kind in kinds:
            if getattr(REGISTRY[kind], field) is not None:
                raise ValueError(f"{kind.name} already has a {field}: {getattr(REGISTRY[kind], field).__name__}")
            setattr(REGISTRY[kind], field, fn)
        return fn
    return decorate


def simulates(kind: Kind):
    return _register("simulate", (kind,))


def checks_on_simulator(kind: Kind):
    return _register("check_on_simulator", (kind,))


def checks_on_device(*kinds: Kind):
    """One device check may cover several kinds that one launcher runs back to back (the router's
    tiles and its top-k; the lm_head tiles and their argmax): it returns one Result per kind."""
    return _register("check_on_device", kinds)


def missing(field: str) -> list[str]:
    return [kind.name for kind, entry in REGISTRY.items() if getattr(entry, field) is None]

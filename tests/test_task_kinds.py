"""The task-kind registry: every kind the graph emits has a simulator kernel, a simulator check and a
device check, registered under its Kind, and a kind cannot be registered twice."""
import pytest

import fleet_decode.kernels.checks  # noqa: F401  (registers the device checks)
import fleet_decode.sim  # noqa: F401  (registers the simulator's kernels and checks)
from fleet_decode.graph.format import Kind
from fleet_decode.task_kinds import REGISTRY, checks_on_device, missing, simulates


@pytest.mark.parametrize("field", ["simulate", "check_on_simulator", "check_on_device"])
def test_every_kind_is_registered(field):
    assert set(REGISTRY) == set(Kind)
    assert missing(field) == []


def test_a_kind_registered_twice_is_refused():
    with pytest.raises(ValueError, match="EMBED already has a simulate"):
        simulates(Kind.EMBED)(lambda ctx: None)
    with pytest.raises(ValueError, match="ROUTE_TOPK already has a check_on_device"):
        checks_on_device(Kind.ROUTE_TOPK)(lambda *a: None)


def test_the_gpu_side_does_not_import_the_simulator():
    import subprocess
    import sys

    code = ("import sys, fleet_decode.kernels.checks, fleet_decode.task_kinds; "
            "print(sorted(m for m in sys.modules if m.startswith('fleet_decode.sim')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""A backend whose module or call is missing fails with one line saying what is missing."""
import types

import pytest

from fleet_decode.pipeline import backends


def test_missing_backend_module_is_named(monkeypatch):
    monkeypatch.setitem(backends.MODULES, "gpu", "fleet_decode.no_such_decoder")
    with pytest.raises(SystemExit, match=r"^error: backend 'gpu' needs fleet_decode.no_such_decoder, "
                                         r"which is not importable here"):
        backends.get({"backend": "gpu", "arch": "sm_90a", "compiler": "nvcc"})


def test_missing_backend_call_is_named():
    module = types.ModuleType("fake_decoder")
    backend = backends.Backend("gpu", module, workers=8, schedule="round-robin", seed=0, arch="gfx942",
                               compiler="hipcc")
    with pytest.raises(SystemExit, match=r"^error: backend 'gpu': fake_decoder.simulate_layer is missing$"):
        backend.layer(model=None, prompt=[1], layer=0)

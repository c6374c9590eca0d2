"""A backend whose module or call is missing fails with one line saying what is missing."""
import pytest

from fleet_decode.pipeline import backends


def test_missing_backend_module_is_named(monkeypatch):
    monkeypatch.setattr(backends, "MEGAKERNEL", "fleet_decode.no_such_megakernel")
    backend = backends.get({"backend": "gpu", "arch": "sm_90a"})
    with pytest.raises(SystemExit, match=r"^error: backend 'gpu' needs fleet_decode.no_such_megakernel, "
                                         r"which is not importable here"):
        backend.decode(model=None, prompt=[1], n_tokens=1)


def test_missing_backend_call_is_named(monkeypatch):
    monkeypatch.setattr(backends, "SIM", "fleet_decode.pipeline.evidence")  # a module without the call
    backend = backends.get({"backend": "sim"})
    with pytest.raises(SystemExit, match=r"^error: backend 'sim': fleet_decode.pipeline.evidence.simulate_layer "
                                         r"is missing$"):
        backend.layer(model=None, prompt=[1], layer=0)

"""Backends: a missing module or call is named in one line; the bench sees the decoder through the
bench protocol (prefill token first, step times in ms)."""
import pytest

from fleet_decode.model import hf_decode, load_model, prompt_ids
from fleet_decode.pipeline import backends


def test_missing_backend_module_is_named(monkeypatch):
    monkeypatch.setitem(backends.MODULES, "gpu", "fleet_decode.no_such_megakernel")
    backend = backends.get({"backend": "gpu", "arch": "sm_90a", "compiler": "nvcc"})
    with pytest.raises(SystemExit, match=r"^error: backend 'gpu' needs fleet_decode.no_such_megakernel, "
                                         r"which is not importable here"):
        backend.decode(model=None, prompt=[1], n_tokens=1)


def test_missing_backend_call_is_named(monkeypatch):
    monkeypatch.setitem(backends.MODULES, "sim", "fleet_decode.pipeline.evidence")  # lacks the call
    with pytest.raises(SystemExit, match=r"^error: backend 'sim': fleet_decode.pipeline.evidence.simulate_layer "
                                         r"is missing$"):
        backends.get({"backend": "sim"}).layer(model=None, prompt=[1], layer=0)


def test_bench_contender_puts_the_prefill_token_first():
    model = load_model("tiny")
    prompt = prompt_ids(16, vocab_size=model.config.vocab_size)
    run = backends.get({"backend": "sim", "workers": 2}).bench_contender(model).decode(prompt, 3)
    assert run.tokens == hf_decode(model, prompt, 4)[0]  # the simulator agrees with HF on the tiny model
    assert run.step_ms is None and run.seconds > 0  # the simulator has no per-step device clock

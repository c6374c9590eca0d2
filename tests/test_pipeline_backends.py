"""Backends: the simulator and the megakernel behind one protocol, chosen by the host's parameters;
a missing module is named in one line; the bench sees the decoder through the bench protocol
(prefill token first, step times in ms)."""
import sys

import pytest
import torch

from fleet_decode.model import hf_decode, load_model, prompt_ids
from fleet_decode.pipeline import backends


def test_parameters_choose_the_backend_and_only_the_simulator_takes_a_schedule():
    sim = backends.get({"backend": "sim", "workers": 3, "schedule": "random", "seed": 5})
    assert isinstance(sim, backends.CpuSimulator) and (sim.workers, sim.schedule, sim.seed) == (3, "random", 5)
    gpu = backends.get({"backend": "gpu", "arch": "gfx942", "compiler": "hipcc", "workers": 3, "seed": 5})
    assert isinstance(gpu, backends.GpuMegakernel) and (gpu.arch, gpu.compiler) == ("gfx942", "hipcc")
    assert not {"workers", "schedule", "seed"} & set(vars(gpu))
    for backend in (sim, gpu):
        assert isinstance(backend, backends.DecoderBackend)
    assert (sim.name, gpu.name) == ("sim", "gpu")


def test_missing_backend_module_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "fleet_decode.kernels.runtime", None)  # None: "not importable"
    backend = backends.get({"backend": "gpu", "arch": "sm_90a", "compiler": "nvcc"})
    with pytest.raises(SystemExit, match=r"^error: backend 'gpu' needs fleet_decode.kernels.runtime, "
                                         r"which is not importable here"):
        backend.decode(model=None, prompt=[1], n_tokens=1)


def test_simulator_check_rows_are_the_graph_kinds():
    from fleet_decode.graph.format import Kind

    rows = backends.get({"backend": "sim"}).check_task_kinds(load_model("tiny"))
    assert set(rows) == {kind.name for kind in Kind}
    assert all(row["max_rel"] < 1e-4 for row in rows.values()), rows


def test_bench_contender_is_the_decoder_and_puts_the_prefill_token_first():
    model = load_model("tiny")
    prompt = prompt_ids(16, vocab_size=model.config.vocab_size)
    contender = backends.BenchContender(model)
    run = contender.decode(prompt, 3)
    assert run.tokens == hf_decode(model, prompt, 4)[0]  # the simulator agrees with HF on the tiny model
    assert len(run.step_ms) == 3 and all(ms > 0 for ms in run.step_ms) and run.launches == 1
    again = contender.decode(prompt, 3)
    assert again.tokens == run.tokens and len(contender.decoders) == 1  # one decoder per context, reused


def test_gpu_check_rows_reach_the_pipeline_as_numbers(monkeypatch):
    """The pipeline's M1 converts every field but the shape with float(): names and notes must go."""
    from fleet_decode.kernels import checks

    fake = {"EMBED": {"kind": "EMBED", "max_abs": 0.0, "max_rel": 0.0, "tol": 0.0, "passed": True, "shape": "2048",
                      "us": 1.5, "bytes": 4096, "gbps": 2.7, "written": True, "note": "exact copy"}}
    seen = {}
    monkeypatch.setattr(checks, "check_all", lambda seed, device: seen.update(seed=seed, device=device) or fake)
    out = backends.GpuMegakernel().check_task_kinds(torch.nn.Linear(1, 1))
    assert seen == {"seed": backends.M1_INPUT_SEED, "device": "cpu"}
    assert set(out) == {"EMBED"} and "kind" not in out["EMBED"] and "note" not in out["EMBED"]
    assert out["EMBED"]["shape"] == "2048"
    assert all(isinstance(float(v), float) for k, v in out["EMBED"].items() if k != "shape")

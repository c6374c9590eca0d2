"""The one place milestones reach the decoder under test: the CPU simulator or the GPU megakernel,
two classes behind one protocol (`DecoderBackend`), chosen by the host's `backend` parameter.

The decoder's code is imported only when a milestone calls it, so a host without a GPU toolchain
can still run the simulator, and a missing module stops the milestone with one line naming it.

Decode alignment the milestones rely on: `decode(model, prompt, n)` runs HF's prefill, then n decode
steps; step i feeds the previous token (step 0 feeds the prefill's argmax) and yields
.tokens[i] = argmax(.logits[i]) and .hidden_states[i] (one tensor per layer; the megakernel keeps
the last step's only). That is index i + 1 of fleet_decode.model.hf_decode, whose index 0 is the
prefill.
"""
import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from fleet_decode.pipeline.evidence import require

# M1 draws its random inputs from this seed on every backend, so the rows of two hosts compare.
M1_INPUT_SEED = 0


@runtime_checkable
class DecoderBackend(Protocol):
    name: str  # what the evidence records as metrics.backend

    def build(self) -> dict: ...

    def check_task_kinds(self, model) -> dict[str, dict]:
        """M1: {task kind: {max_abs, max_rel, shape, ...}}, keyed by the graph's Kind names."""

    def layer(self, model, prompt, layer: int) -> tuple:
        """M2: (the layer's output, the reference's) for one decode step after the prompt."""

    def decode(self, model, prompt, n_tokens: int): ...


@dataclass
class CpuSimulator:
    """The encoded task graph run on the CPU by simulated workers, interleaved by a seeded schedule."""

    workers: int = 8
    schedule: str = "round-robin"
    seed: int = 0
    name = "sim"

    @staticmethod
    def _sim():
        return require("fleet_decode.sim", "backend 'sim'")

    def build(self) -> dict:
        return {"backend": self.name, "built": False, "simulator": self._sim().__file__}

    def check_task_kinds(self, model) -> dict[str, dict]:
        return self._sim().check_task_kinds(model, seed=M1_INPUT_SEED)

    def layer(self, model, prompt, layer: int):
        return self._sim().simulate_layer(model, prompt, layer, workers=self.workers, schedule=self.schedule,
                                          seed=self.seed)

    def decode(self, model, prompt, n_tokens: int):
        return self._sim().simulate(model, prompt, n_tokens, workers=self.workers, schedule=self.schedule,
                                    seed=self.seed)


@dataclass
class GpuMegakernel:
    """The persistent megakernel: one worker per SM/CU, the device's own interleaving."""

    arch: str | None = None  # default: the GPU's own
    compiler: str | None = None  # default: nvcc / hipcc on PATH
    name = "gpu"

    @staticmethod
    def _runtime():
        return require("fleet_decode.kernels.runtime", "backend 'gpu'")

    def build(self) -> dict:
        """Compiles hip/ for the arch and returns the build record (compiler, flags, sha256s, registers)."""
        library = require("fleet_decode.kernels.library", "backend 'gpu'")
        kernels_build = require("fleet_decode.kernels.build", "backend 'gpu'")
        arch = self.arch or library.device_arch()
        if self.compiler:
            os.environ["NVCC" if arch.startswith("sm_") else "HIPCC"] = self.compiler
        return kernels_build.build(arch, library.default_library_path(arch).parent)

    def check_task_kinds(self, model) -> dict[str, dict]:
        """Every task kernel alone at the real shapes; per kind its numbers (flags as 0/1) and shape."""
        checks = require("fleet_decode.kernels.checks", "backend 'gpu'")
        results = checks.check_all(seed=M1_INPUT_SEED, device=str(next(model.parameters()).device))
        return {kind: {k: v for k, v in r.items() if k == "shape" or not isinstance(v, str)}
                for kind, r in results.items()}

    def layer(self, model, prompt, layer: int):
        return self._runtime().simulate_layer(model, prompt, layer)

    def decode(self, model, prompt, n_tokens: int):
        return self._runtime().simulate(model, prompt, n_tokens)


def get(params: dict) -> DecoderBackend:
    if params["backend"] == "gpu":
        return GpuMegakernel(params.get("arch"), params.get("compiler"))
    return CpuSimulator(params.get("workers", 8), params.get("schedule", "round-robin"), params.get("seed", 0))


@dataclass
class BenchRun:
    tokens: list[int]
    step_ms: list[float] | None
    seconds: float
    launches: int | None
    chunk_forms: list[str] | None = None  # per launch: the attention chunk's form (runtime.Tuning.chunk_form)


class BenchContender:
    """The decoder as fleet_decode.bench.run_bench times it (the protocol of docs/bench.md):
    `decode(prompt_ids, n_steps)` with the prefill's token first and device step times in ms. It is
    the decoder people use (fleet_decode.Decoder), built once per prompt length with a cache of just
    that decode's rows, so every run of a length reuses one graph, weights table and set of buffers."""

    label = "persistent megakernel"

    def __init__(self, model):
        self.model, self.decoders = model, {}

    def decode(self, prompt_ids, n_steps: int) -> BenchRun:
        decoder_api = require("fleet_decode.decoder", "bench")
        ids = [int(i) for i in prompt_ids]
        context = len(ids) + n_steps + 1
        if context not in self.decoders:
            device = next(self.model.parameters()).device.type
            self.decoders[context] = decoder_api.Decoder.load(self.model, device=device, max_context=context)
        out = self.decoders[context].generate(ids, max_new_tokens=n_steps + 1, stop=())
        steps = out.decode_seconds
        return BenchRun([int(t) for t in out.tokens], [s * 1e3 for s in steps],
                        out.published_seconds[-1] - out.published_seconds[0], out.launches, out.chunk_forms)

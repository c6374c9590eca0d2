"""The one place milestones reach the decoder under test.

backend "sim": the CPU simulator running the encoded task graph (fleet_decode.sim).
backend "gpu": the persistent megakernel (fleet_decode.kernels.runtime), which offers the same
calls plus `build(arch, compiler)`. A missing module or function stops the milestone with one line
naming it.

Decode alignment the milestones rely on: `simulate(model, prompt, n)` runs HF's prefill, then n
decode steps; step i feeds the previous token (step 0 feeds the prefill's argmax) and yields
.tokens[i] = argmax(.logits[i]) and .hidden_states[i] (one tensor per layer; the megakernel keeps
the last step's only). That is index i + 1 of fleet_decode.model.hf_decode, whose index 0 is the
prefill.
"""
from dataclasses import dataclass

from fleet_decode.pipeline.evidence import require

MODULES = {"sim": "fleet_decode.sim", "gpu": "fleet_decode.kernels.runtime"}


@dataclass
class Backend:
    name: str
    workers: int
    schedule: str
    seed: int
    arch: str | None
    compiler: str | None

    def _call(self, function: str):
        module = require(MODULES[self.name], f"backend {self.name!r}")
        fn = getattr(module, function, None)
        if fn is None:
            raise SystemExit(f"error: backend {self.name!r}: {module.__name__}.{function} is missing")
        return fn

    def build(self) -> dict:
        """Builds the kernels (gpu) and returns the build record; the simulator has nothing to build."""
        if self.name == "sim":
            return {"backend": "sim", "built": False,
                    "simulator": require(MODULES["sim"], "backend 'sim'").__file__}
        return self._call("build")(arch=self.arch, compiler=self.compiler)

    def check_task_kinds(self, model) -> dict:
        """{kind: {max_abs, max_rel, shape, ...}}; the gpu check also gives each kind's tol and passed."""
        return self._call("check_task_kinds")(model, seed=self.seed)

    def layer(self, model, prompt, layer: int):
        return self._call("simulate_layer")(model, prompt, layer, workers=self.workers,
                                            schedule=self.schedule, seed=self.seed)

    def decode(self, model, prompt, n_tokens: int):
        return self._call("simulate")(model, prompt, n_tokens, workers=self.workers,
                                      schedule=self.schedule, seed=self.seed)

    def bench_contender(self, model) -> "BenchContender":
        return BenchContender(self, model)


@dataclass
class BenchRun:
    tokens: list[int]
    step_ms: list[float] | None
    seconds: float
    launches: int | None


class BenchContender:
    """The decoder as fleet_decode.bench.run_bench times it (the protocol of docs/bench.md):
    `decode(prompt_ids, n_steps)` with the prefill's token first and device step times in ms."""

    label = "persistent megakernel"

    def __init__(self, backend: Backend, model):
        self.backend, self.model, self.first_tokens = backend, model, {}

    def decode(self, prompt_ids, n_steps: int) -> BenchRun:
        result = self.backend.decode(self.model, prompt_ids, n_steps)
        key = tuple(prompt_ids)
        if key not in self.first_tokens:  # the prefill's greedy token, which the decode was fed
            hf_decode = require("fleet_decode.model", "bench").hf_decode
            self.first_tokens[key] = hf_decode(self.model, list(prompt_ids), 1)[0][0]
        steps = getattr(result, "step_seconds", None)
        return BenchRun([self.first_tokens[key], *map(int, result.tokens)],
                        [s * 1e3 for s in steps] if steps else None, result.seconds,
                        getattr(result, "launches", None))


def get(params: dict) -> Backend:
    return Backend(params["backend"], params.get("workers", 8), params.get("schedule", "round-robin"),
                   params.get("seed", 0), params.get("arch"), params.get("compiler"))

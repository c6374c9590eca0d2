"""The one place milestones reach the decoder under test.

backend "sim": the CPU simulator running the encoded task graph (fleet_decode.sim).
backend "gpu": the persistent megakernel (fleet_decode.kernels.megakernel), which offers the same
calls plus `build(arch, compiler) -> {compiler, flags, sha256, registers, spills, ...}` and
`bench_contender(hf_model)` -> an object with the bench protocol of docs/bench.md (`decode`).
Either fails with one line naming the missing module or function.

Decode alignment the milestones rely on: `simulate(model, prompt, n)` runs HF's prefill, then n
decode steps; step i feeds the previous token (step 0 feeds the prefill's argmax) and yields
.tokens[i] = argmax(.logits[i]) and .hidden_states[i] (one tensor per layer). That is index i + 1
of fleet_decode.model.hf_decode, whose index 0 is the prefill.
"""
from dataclasses import dataclass

from fleet_decode.pipeline.evidence import require

MODULES = {"sim": "fleet_decode.sim", "gpu": "fleet_decode.kernels.megakernel"}


@dataclass
class Backend:
    name: str
    module: object
    workers: int
    schedule: str
    seed: int
    arch: str | None
    compiler: str | None

    def _call(self, name):
        fn = getattr(self.module, name, None)
        if fn is None:
            raise SystemExit(f"error: backend {self.name!r}: {self.module.__name__}.{name} is missing")
        return fn

    def build(self) -> dict:
        """Builds the kernels (gpu) and returns the build record; the simulator has nothing to build."""
        if self.name == "sim":
            return {"backend": "sim", "built": False, "module": self.module.__file__}
        return self._call("build")(arch=self.arch, compiler=self.compiler)

    def bench_contender(self, model):
        """What fleet_decode.bench.run_bench times as `megakernel` (gpu only)."""
        return self._call("bench_contender")(model)

    def check_task_kinds(self, model) -> dict:
        return self._call("check_task_kinds")(model, seed=self.seed)

    def layer(self, model, prompt, layer: int):
        return self._call("simulate_layer")(model, prompt, layer, workers=self.workers,
                                            schedule=self.schedule, seed=self.seed)

    def decode(self, model, prompt, n_tokens: int):
        return self._call("simulate")(model, prompt, n_tokens, workers=self.workers,
                                      schedule=self.schedule, seed=self.seed)


def get(params: dict) -> Backend:
    name = params["backend"]
    module = require(MODULES[name], f"backend {name!r}")
    return Backend(name, module, params.get("workers", 8), params.get("schedule", "round-robin"),
                   params.get("seed", 0), params.get("arch"), params.get("compiler"))

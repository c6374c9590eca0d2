"""The one place milestones reach the decoder under test.

backend "sim": the CPU simulator running the encoded task graph (fleet_decode.sim).
backend "gpu": the kernels built for the host's arch (fleet_decode.kernels.build), each task kernel
checked alone (fleet_decode.kernels.check), and the persistent megakernel
(fleet_decode.kernels.megakernel), which offers the simulator's `simulate_layer` and `simulate` plus
`bench_contender(hf_model)`: an object with the bench protocol of docs/bench.md (`decode`).
A missing module or function stops the milestone with one line naming it; each is imported only
when a milestone needs it, so M0 runs before the megakernel exists.

Decode alignment the milestones rely on: `simulate(model, prompt, n)` runs HF's prefill, then n
decode steps; step i feeds the previous token (step 0 feeds the prefill's argmax) and yields
.tokens[i] = argmax(.logits[i]) and .hidden_states[i] (one tensor per layer). That is index i + 1
of fleet_decode.model.hf_decode, whose index 0 is the prefill.
"""
from dataclasses import dataclass

from fleet_decode.pipeline.evidence import require

SIM, MEGAKERNEL = "fleet_decode.sim", "fleet_decode.kernels.megakernel"


@dataclass
class Backend:
    name: str
    workers: int
    schedule: str
    seed: int
    arch: str | None

    def _call(self, module: str, function: str):
        fn = getattr(require(module, f"backend {self.name!r}"), function, None)
        if fn is None:
            raise SystemExit(f"error: backend {self.name!r}: {module}.{function} is missing")
        return fn

    def build(self) -> dict:
        """Builds the kernels (gpu) and returns the build record; the simulator has nothing to build."""
        if self.name == "sim":
            return {"backend": "sim", "built": False, "simulator": require(SIM, "backend 'sim'").__file__}
        return self._call("fleet_decode.kernels.build", "build")(self.arch)

    def check_task_kinds(self, model) -> dict:
        """{kind: {max_abs, max_rel, shape, ...}}; the gpu check also gives each kind's tol and passed."""
        if self.name == "sim":
            return self._call(SIM, "check_task_kinds")(model, seed=self.seed)
        return self._call("fleet_decode.kernels.check", "check_all")(seed=self.seed, device="cuda")

    def layer(self, model, prompt, layer: int):
        return self._call(self._decoder, "simulate_layer")(model, prompt, layer, workers=self.workers,
                                                            schedule=self.schedule, seed=self.seed)

    def decode(self, model, prompt, n_tokens: int):
        return self._call(self._decoder, "simulate")(model, prompt, n_tokens, workers=self.workers,
                                                      schedule=self.schedule, seed=self.seed)

    def bench_contender(self, model):
        """What fleet_decode.bench.run_bench times as `megakernel` (gpu only)."""
        return self._call(MEGAKERNEL, "bench_contender")(model)

    @property
    def _decoder(self) -> str:
        return SIM if self.name == "sim" else MEGAKERNEL


def get(params: dict) -> Backend:
    return Backend(params["backend"], params.get("workers", 8), params.get("schedule", "round-robin"),
                   params.get("seed", 0), params.get("arch"))

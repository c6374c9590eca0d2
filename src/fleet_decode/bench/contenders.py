"""The step-wise contenders of the benchmark: each prefills with HF (untimed), then decodes greedily
one step at a time, keeping the next token on the device so that timing adds no host sync.

A contender answers `unavailable(device)` with a reason (or None), is `prepare`d once per context
size, `start`ed once per run, `step`ped once per token, and lists its greedy `tokens()` at the end.
The megakernel is not step-wise (one launch decodes every token): run.py drives it through the
protocol in docs/bench.md.
"""

from __future__ import annotations

import torch

from fleet_decode.bench.static_step import StaticStep
from fleet_decode.model import Reference
from fleet_decode.model.reference import _cache_kwarg, hf_forward


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _ids(ids, device) -> torch.Tensor:
    return torch.as_tensor(ids, device=device).view(1, -1)


class HFEager:
    """Stock HF eager forward, one token at a time, with HF's DynamicCache."""

    name, label = "hf_eager", "HF eager (DynamicCache)"
    host_launches_per_token = None  # one launch per kernel

    def __init__(self, model):
        self.model = model

    def unavailable(self, device) -> str | None:
        return None

    def prepare(self, max_positions: int) -> None:
        pass

    @torch.no_grad()
    def start(self, ids) -> None:
        out, self.cache = hf_forward(self.model, _ids(ids, self.model.device))
        self.generated = [out.logits[:, -1].argmax(-1, keepdim=True)]

    @torch.no_grad()
    def step(self) -> None:
        out, _ = hf_forward(self.model, self.generated[-1], self.cache)
        self.generated.append(out.logits[:, -1].argmax(-1, keepdim=True))

    def tokens(self) -> list[int]:
        return torch.cat(self.generated).flatten().tolist()

    def finish(self) -> None:
        self.cache = None


class ReferenceEager:
    """fleet_decode.model.Reference.step as written (fp32 products, host-side expert loop)."""

    name, label = "reference_eager", "reference step, eager"
    host_launches_per_token = None

    def __init__(self, model):
        self.model = model

    def unavailable(self, device) -> str | None:
        return None

    def prepare(self, max_positions: int) -> None:
        self.reference = Reference(self.model, max_positions=max_positions)

    def start(self, ids) -> None:
        self.generated = [int(self.reference.prefill(ids).argmax())]

    def step(self) -> None:
        self.generated.append(int(self.reference.step(self.generated[-1]).argmax()))

    def tokens(self) -> list[int]:
        return list(self.generated)

    def finish(self) -> None:
        self.reference = None


class ReferenceGraph:
    """The reference step made capturable (static_step.py), captured in one CUDA graph, replayed."""

    name, label = "reference_graph", "reference step, one CUDA graph per token"
    host_launches_per_token = 1

    def __init__(self, model):
        self.model = model
        self.static: StaticStep | None = None

    def unavailable(self, device) -> str | None:
        return None if device.type == "cuda" else "CUDA graphs need a CUDA device"

    def prepare(self, max_positions: int) -> None:
        self.static = None  # free the previous graph's pool and cache first
        self.static = StaticStep(self.model, max_positions)

    def start(self, ids) -> None:
        self.static.prefill(ids)

    def step(self) -> None:
        self.static.replay()

    def tokens(self) -> list[int]:
        return self.static.tokens()

    def details(self) -> dict:
        return {"experts": self.static.experts, "capture_fallback": self.static.capture_error,
                "max_positions": self.static.max_positions}

    def extra_bytes(self, context: int, routed_bytes: int) -> dict:
        return self.static.extra_bytes_per_token(context, routed_bytes)

    def finish(self) -> None:
        self.static = None


class HFStaticCompiled:
    """HF's forward with a StaticCache under torch.compile; prefill eager, decode compiled.

    Routed experts go through HF's grouped_mm experts implementation while this contender runs
    (the eager one loops over experts with data-dependent shapes, which breaks the graph); the
    model's own implementation is restored afterwards."""

    name = "hf_static_compile"
    host_launches_per_token = None

    def __init__(self, model, max_positions: int, mode: str = "reduce-overhead"):
        self.model, self.mode, self.max_positions = model, mode, max_positions
        self.label = f"HF StaticCache + torch.compile ({mode})"
        self.compiled = None
        self.experts_implementation = self._saved_experts = None

    def unavailable(self, device) -> str | None:
        return None

    def prepare(self, max_positions: int) -> None:
        if self.compiled is not None:
            return  # one cache of the largest size for every length: one compilation
        from transformers import StaticCache

        model = self.model
        self._saved_experts = getattr(model.config, "_experts_implementation", None)
        if hasattr(model, "set_experts_implementation"):
            model.set_experts_implementation("grouped_mm")
        self.experts_implementation = getattr(model.config, "_experts_implementation", None)
        self.cache = StaticCache(config=model.config, max_cache_len=self.max_positions)
        self.cache_kwarg = _cache_kwarg(model)
        self.compiled = torch.compile(self._decode, mode=self.mode)

    def _decode(self, token, position):
        out = self.model(input_ids=token, position_ids=position, use_cache=True, **{self.cache_kwarg: self.cache})
        return out.logits[:, -1].argmax(-1, keepdim=True), position + 1

    @torch.no_grad()
    def start(self, ids) -> None:
        self.cache.reset()
        device = self.model.device
        positions = torch.arange(len(ids), device=device).view(1, -1)
        out = self.model(input_ids=_ids(ids, device), position_ids=positions, use_cache=True,
                         **{self.cache_kwarg: self.cache})
        self.generated = [out.logits[:, -1].argmax(-1, keepdim=True)]
        self.position = torch.tensor([[len(ids)]], device=device)

    @torch.no_grad()
    def step(self) -> None:
        token, position = self.compiled(self.generated[-1], self.position)
        # cudagraph trees reuse output memory on the next replay: keep copies
        self.generated.append(token.clone())
        self.position = position.clone()

    def tokens(self) -> list[int]:
        return torch.cat(self.generated).flatten().tolist()

    def details(self) -> dict:
        return {"mode": self.mode, "experts_implementation": self.experts_implementation,
                "max_cache_len": self.max_positions}

    def finish(self) -> None:
        if self._saved_experts and hasattr(self.model, "set_experts_implementation"):
            self.model.set_experts_implementation(self._saved_experts)
        self.compiled = self.cache = None

"""TEST STAND-IN for fleet_decode.sim (see ../sitecustomize.py): decodes with the pure-torch
Reference instead of a simulated task graph, with the simulator's call signatures. It exercises the
pipeline's plumbing only; it proves nothing about the megakernel's graph."""
import time
from dataclasses import dataclass

import torch

from fleet_decode.model import Reference

STAND_IN = True


@dataclass
class SimResult:
    tokens: list
    logits: list
    hidden_states: list
    counts: dict
    seconds: float


def simulate(hf_model, prompt_ids, n_tokens, workers=8, schedule="round-robin", seed=0):
    start = time.perf_counter()
    reference = Reference(hf_model)
    logits = reference.prefill(prompt_ids)
    tokens, all_logits, hidden = [], [], []
    for _ in range(n_tokens):
        logits = reference.step(int(logits.argmax()))
        tokens.append(int(logits.argmax()))
        all_logits.append(logits)
        hidden.append([h.clone() for h in reference.hidden_states])
    return SimResult(tokens, all_logits, hidden, {"stand_in": 1}, time.perf_counter() - start)


def simulate_layer(hf_model, prompt_ids, layer, workers=8, schedule="round-robin", seed=0):
    reference = Reference(hf_model)
    token = int(reference.prefill(prompt_ids).argmax())
    reference.step(token)
    out = reference.hidden_states[layer].clone()
    return out, out.clone()


def check_task_kinds(hf_model, seed=0):
    x = torch.randn(hf_model.config.hidden_size, generator=torch.Generator().manual_seed(seed))
    return {"stand_in_identity": {"max_abs": float((x - x.clone()).abs().max()), "max_rel": 0.0,
                                  "shape": list(x.shape)}}

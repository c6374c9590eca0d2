"""bench: milliseconds per decode token (P50/P95 over steps >= 2), tokens/s, weight bytes read per
token (counted from the model's tensors in their dtype, plus the MLA cache, and as the task graph
counts them in bf16),
achieved bandwidth against a measured copy bandwidth (the floor), and baselines timed in the
same run: the pure-torch reference decode and HF eager. On a sim host the simulator is not timed
(its speed means nothing); only the CPU baselines are, and the evidence says so.

  PYTHONPATH=src python3 remote/bench.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4}' --out /tmp/bench.json
"""
import statistics
import time

import torch

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require


def synchronize():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def weight_bytes_per_token(model) -> int:
    """Bytes of weights one decode token reads: every tensor once, routed experts at top_k/E, and
    a single row of the embedding."""
    cfg = model.config
    total = 0
    for name, p in model.named_parameters():
        nbytes = p.numel() * p.element_size()
        if "embed_tokens" in name:
            nbytes = p.shape[-1] * p.element_size()
        elif ".mlp.experts." in name:
            nbytes = nbytes * cfg.num_experts_per_tok // cfg.n_routed_experts
        total += nbytes
    return total


def copy_bandwidth(device: str, nbytes: int) -> float:
    """Bytes per second of a device copy, counting read + write."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    synchronize()
    start = time.perf_counter()
    for _ in range(5):
        dst.copy_(src)
    synchronize()
    return 2 * nbytes * 5 / (time.perf_counter() - start)


def step_summary(seconds: list[float], bytes_per_token: int) -> dict:
    steady = seconds[1:] if len(seconds) > 1 else seconds  # step 1 carries warm-up
    p50 = statistics.median(steady)
    p95 = statistics.quantiles(steady, n=20)[-1] if len(steady) > 1 else steady[0]
    return {"ms_per_token": [s * 1e3 for s in seconds], "p50_ms": p50 * 1e3, "p95_ms": p95 * 1e3,
            "tokens_per_s": 1 / p50, "achieved_bytes_per_s": bytes_per_token / p50}


args = milestone_args(__doc__).parse_args()
with Milestone("bench", "bench", "bench/bench.json", args) as m:
    model_api = require("fleet_decode.model", "bench")
    backend = backends.get(m.params)
    model = m.load_model()
    device = m.device()
    prompt = m.prompt(model)
    n = m.params["decode_tokens"]
    # Plus the MLA cache each step reads: (kv_lora_rank + rope dims) per layer per position, at the
    # mean context of the timed steps.
    cfg = model.config
    cache_bytes = (cfg.num_hidden_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * model.dtype.itemsize
                   * (len(prompt) + n / 2))
    bytes_per_token = weight_bytes_per_token(model) + int(cache_bytes)
    bandwidth = copy_bandwidth(device, 1 << (30 if device == "cuda" else 28))
    floor_ms = bytes_per_token / bandwidth * 1e3

    reference = model_api.Reference(model)
    token = int(reference.prefill(prompt).argmax())
    ref_seconds = []
    for _ in range(n):
        synchronize()
        start = time.perf_counter()
        token = int(reference.step(token).argmax())
        synchronize()
        ref_seconds.append(time.perf_counter() - start)

    # HF eager, step by step with its own cache (as hf_decode runs it), so it is timed like ours.
    hf_forward = require("fleet_decode.model.reference", "bench (HF eager baseline)").hf_forward
    with torch.no_grad():
        out, cache = hf_forward(model, torch.tensor([prompt], device=device))
        token = int(out.logits[0, -1].argmax())
        hf_seconds = []
        for _ in range(n):
            synchronize()
            start = time.perf_counter()
            out, cache = hf_forward(model, torch.tensor([[token]], device=device), cache)
            token = int(out.logits[0, -1].argmax())
            synchronize()
            hf_seconds.append(time.perf_counter() - start)

    runs = {"reference": step_summary(ref_seconds, bytes_per_token),
            "hf_eager": step_summary(hf_seconds, bytes_per_token)}
    if backend.name == "gpu":
        ours = backend.decode(model, prompt, n)
        per_step = list(getattr(ours, "step_seconds", None) or [ours.seconds / n] * n)
        runs["megakernel"] = step_summary(per_step, bytes_per_token)
        runs["megakernel"]["launches"] = getattr(ours, "launches", None)
    else:
        ours = backend.decode(model, prompt, 1)  # not timed: only for the graph's counts
    counts = getattr(ours, "counts", None) or {}
    timed = "megakernel" if backend.name == "gpu" else "reference"
    m.metrics.update(  # the headline numbers are those of `timed`; every run's are under `runs`
        backend=backend.name, device=device, decode_tokens=n, bytes_per_token=bytes_per_token,
        cache_bytes_per_token=int(cache_bytes),
        p50_ms=runs[timed]["p50_ms"], p95_ms=runs[timed]["p95_ms"],
        tokens_per_s=runs[timed]["tokens_per_s"], hf_eager_p50_ms=runs["hf_eager"]["p50_ms"],
        copy_bandwidth_bytes_per_s=bandwidth, floor_ms=floor_ms, timed=timed, runs=runs,
        percent_of_floor=100 * floor_ms / runs[timed]["p50_ms"],
        graph_weight_bytes_per_token_bf16=counts.get("weight_bytes_per_token_total"),
        graph_cache_bytes_per_position_bf16=counts.get("cache_bytes_per_position"),
        graph_tasks_per_step=counts.get("tasks_per_step"),
        note=None if backend.name == "gpu" else
        "sim host: the simulator is not timed; these are CPU timings of the reference and HF eager",
    )
    m.gate("decode_steps_timed", len(ref_seconds), "==", n)

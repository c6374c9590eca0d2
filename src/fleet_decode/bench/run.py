"""run_bench: every contender decodes the same greedy tokens after the same HF prefill, in one
process, at each prompt length; the result is one JSON-serialisable dict (schema in docs/bench.md).

    from fleet_decode.bench import run_bench
    result = run_bench(model, prompt_lengths=(256, 1024, 4096), decode_tokens=32, runs=5)

What one token must read comes from the task graph (fleet_decode.graph: every weight once, the
chosen experts only, plus the MLA cache at the context length); the floor is those bytes over the
device-to-device copy bandwidth measured in this same run. Every contender is judged against the
same minimal bytes, whatever it actually moves (a contender that reads more says how much more
under `extra_bytes_per_token`, where that is known).
"""

from __future__ import annotations

import platform
import statistics
import subprocess
import time
from dataclasses import dataclass

import torch

from fleet_decode.bench.contenders import HFEager, HFStaticCompiled, ReferenceEager, ReferenceGraph, first_line
from fleet_decode.bench.results import BASELINE, derive, headline  # noqa: F401  (headline: this module's API)
from fleet_decode.bench.timing import (STEADY_FROM_STEP, StepClock, clock_name, copy_bandwidth, device_ops,
                                       latency_summary, synchronize)
from fleet_decode.model import config_sha256, prompt_ids
from fleet_decode.model.reference import hf_forward

SCHEMA = "fleet-decode-bench/1"
BASELINES_SCHEMA = "fleet-decode-baselines/1"  # run_bench(floor=False): timings with no floor, for combine()
STEP_CONTENDERS = ("hf_eager", "reference_eager", "reference_graph", "hf_static_compile")
PROFILED_STEPS = 3


@dataclass
class Settings:
    prompt_lengths: tuple[int, ...]
    decode_tokens: int
    runs: int
    device: torch.device
    deadline: float | None  # perf_counter time after which no new measurement starts


def environment(device: torch.device) -> dict:
    import transformers

    env = {"device": str(device), "torch": torch.__version__, "transformers": transformers.__version__,
           "python": platform.python_version(), "host": platform.node(), "clock": clock_name(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env |= {"gpu": props.name, "multiprocessors": props.multi_processor_count,
                "memory_bytes": props.total_memory, "cuda": torch.version.cuda,
                "capability": f"{props.major}.{props.minor}", "clocks": gpu_clocks()}
    else:
        env["cpu"] = platform.processor() or platform.machine()
    return env


def gpu_clocks() -> dict | str:
    """Current and maximum SM/memory clocks as nvidia-smi reads them (read-only query)."""
    fields = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "driver_version")
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"unreadable: {first_line(err)}"
    return dict(zip(fields, (v.strip() for v in out.splitlines()[0].split(","))))


def bytes_per_token(config, workers: int, element_size: int) -> dict:
    """The minimal decode's reads, from the task graph's own accounting."""
    from fleet_decode.graph import build_graph, default_plan
    from fleet_decode.graph.counts import graph_counts

    counts = graph_counts(build_graph(config, default_plan(config, workers)), weight_bytes=element_size)
    return {"weights": counts["weight_bytes_per_token_total"], "weights_by_category": counts["weight_bytes_per_token"],
            "cache_per_position": counts["cache_bytes_per_position"], "bytes_per_element": element_size,
            "source": f"fleet_decode.graph counts ({workers} workers)"}


def routed_expert_bytes(config, element_size: int) -> int:
    """The routed experts' weights one token reads (its top-k experts' gate, up and down in every MoE
    layer), from the model config alone: the baselines' extra-byte accounting needs it without the task
    graph, whose changes must not stale them. tests/test_bench.py holds it to the graph's own count."""
    moe_layers = config.num_hidden_layers - config.first_k_dense_replace  # model.sources refuses moe_layer_freq != 1
    return (moe_layers * config.num_experts_per_tok * 3 * config.hidden_size * config.moe_intermediate_size
            * element_size)


def floors(reads: dict, bandwidth: dict, prompt_lengths, decode_tokens: int) -> dict:
    """Per prompt length: the mean context, the bytes one token must read there and their floor."""
    lengths = {}
    for length in prompt_lengths:
        context = mean_context(length, decode_tokens)
        total = reads["weights"] + reads["cache_per_position"] * context
        lengths[str(length)] = {"context_positions": context, "bytes_per_token": total,
                                "floor_ms": total / bandwidth["bytes_per_s"] * 1e3}
    return lengths


def mean_context(prompt_length: int, decode_tokens: int) -> float:
    """Mean number of cached positions attended over the steady steps (step i attends L + i + 1)."""
    return statistics.fmean(prompt_length + i + 1 for i in range(STEADY_FROM_STEP, decode_tokens))


def step_contenders(model, names, max_positions: int, compile_mode: str):
    makers = {"hf_eager": lambda: HFEager(model), "reference_eager": lambda: ReferenceEager(model),
              "reference_graph": lambda: ReferenceGraph(model),
              "hf_static_compile": lambda: HFStaticCompiled(model, max_positions, compile_mode)}
    unknown = set(names) - set(makers)
    if unknown:
        raise ValueError(f"unknown contenders {sorted(unknown)} (known: {', '.join(makers)})")
    return [makers[name]() for name in names]


# ----------------------------------------------------------------------------- measuring

def measure_steps(contender, ids, settings: Settings) -> dict:
    n = settings.decode_tokens
    contender.prepare(len(ids) + n + 1)
    contender.start(ids)  # warm-up run (compilation, graph pools, BLAS heuristics), not timed
    for _ in range(STEADY_FROM_STEP + 1):
        contender.step()
    synchronize(settings.device)
    runs_ms, runs_tokens = [], []
    for _ in range(settings.runs):
        contender.start(ids)
        synchronize(settings.device)
        clock = StepClock(settings.device)
        clock.mark()
        for _ in range(n):
            contender.step()
            clock.mark()
        runs_ms.append(clock.step_ms())
        runs_tokens.append(contender.tokens())
    entry = timed_runs(runs_ms, runs_tokens)
    contender.start(ids)
    for _ in range(STEADY_FROM_STEP):
        contender.step()
    ops = device_ops(lambda: [contender.step() for _ in range(PROFILED_STEPS)], settings.device)
    entry |= launches(ops, PROFILED_STEPS, "torch.profiler over steady steps")
    entry["host_launches_per_token"] = contender.host_launches_per_token
    if hasattr(contender, "details"):
        entry["details"] = contender.details()
    return entry


def timed_runs(runs_ms: list[list[float]], runs_tokens: list[list[int]]) -> dict:
    """Every run's step times, their statistics, and the first run's tokens (all runs should agree)."""
    return {"step_ms": runs_ms, **latency_summary(runs_ms), "tokens": runs_tokens[0],
            "runs_agree": all(t == runs_tokens[0] for t in runs_tokens)}


def launches(ops: dict | None, steps: int, method: str) -> dict:
    if ops is None:
        return {"launches_per_token": None, "launches_method": "no GPU: kernel launches are not counted on a CPU"}
    return {"launches_per_token": (ops["kernels"] + ops["copies_and_memsets"]) / steps,
            "kernels_per_token": ops["kernels"] / steps, "launches_method": method}


def measure_megakernel(megakernel, model, ids, settings: Settings) -> dict:
    """The protocol of docs/bench.md: decode(prompt_ids, n_steps) runs HF's prefill and n_steps
    decode steps, and returns .tokens (prefill's token first) and .step_ms or .seconds (decode
    only), optionally .launches."""
    n = settings.decode_tokens
    megakernel.decode(ids, n)  # warm-up
    runs_ms, runs_tokens, per_step = [], [], True
    for _ in range(settings.runs):
        result = megakernel.decode(ids, n)
        step_ms = getattr(result, "step_ms", None)
        if step_ms is None:
            per_step = False
            step_ms = [result.seconds * 1e3 / n] * n
        if len(step_ms) != n:
            raise ValueError(f"megakernel returned {len(step_ms)} step times for {n} steps")
        runs_ms.append([float(ms) for ms in step_ms])
        runs_tokens.append([int(t) for t in result.tokens])
    entry = timed_runs(runs_ms, runs_tokens) | {"per_step_timing": per_step}
    if getattr(result, "chunk_forms", None):  # which megakernel entry the last run's launches ran (Tuning.chunk_form)
        entry["chunk_form"] = "+".join(sorted(set(result.chunk_forms)))
    reported = getattr(result, "launches", None)
    if reported is not None:
        entry |= {"launches_per_token": reported / n, "launches_method": "reported by the megakernel"}
    else:
        with torch.no_grad():
            decode_ops = device_ops(lambda: megakernel.decode(ids, n), settings.device)
            prefill_ops = device_ops(lambda: hf_forward(model, torch.as_tensor(ids, device=model.device).view(1, -1)),
                                     settings.device)
        if decode_ops is not None:
            decode_ops = {k: decode_ops[k] - prefill_ops[k] for k in decode_ops}
        entry |= launches(decode_ops, n, "torch.profiler over one decode() minus one HF prefill")
    entry["host_launches_per_token"] = reported / n if reported is not None else None
    return entry


# ----------------------------------------------------------------------------- the run

def run_bench(model, prompt_lengths=(256, 1024, 4096), decode_tokens: int = 32, runs: int = 5, megakernel=None,
              device=None, contenders=STEP_CONTENDERS, compile_mode: str = "reduce-overhead",
              model_source: str | None = None, time_budget_s: float | None = None, on_progress=None,
              floor: bool = True) -> dict:
    """Time every contender at every prompt length; see the module docstring and docs/bench.md.

    time_budget_s: no new (contender, length) measurement starts past it; those left are recorded
    as skipped. on_progress(result) is called after each measurement (to write partial JSON).
    floor=False: the timings alone (schema BASELINES_SCHEMA), without the task graph's bytes or the
    copy bandwidth, so that nothing of the decoder is read; combine() puts them beside a run that has
    the floor (the pipeline's baselines rule, which must not go stale when the decoder changes)."""
    if decode_tokens <= STEADY_FROM_STEP:
        raise ValueError(f"decode_tokens must exceed {STEADY_FROM_STEP}: statistics use steps >= {STEADY_FROM_STEP}")
    started = time.perf_counter()
    device = torch.device(device) if device is not None else model.device
    settings = Settings(tuple(prompt_lengths), decode_tokens, runs, device,
                        started + time_budget_s if time_budget_s else None)
    config = model.config
    result = {
        "schema": SCHEMA if floor else BASELINES_SCHEMA, "environment": environment(device),
        "model": {"source": model_source, "config_sha256": config_sha256(config),
                  "dtype": str(model.dtype).removeprefix("torch."), "layers": config.num_hidden_layers,
                  "experts_implementation": getattr(config, "_experts_implementation", None)},
        "prompt_lengths": list(settings.prompt_lengths), "decode_tokens": decode_tokens, "runs": runs,
        "steady_from_step": STEADY_FROM_STEP, "contenders": {}, "baseline": BASELINE,
    }
    if floor:
        workers = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
        reads = bytes_per_token(config, workers, model.dtype.itemsize)
        bandwidth = copy_bandwidth(device)
        result |= {"bytes": reads, "copy_bandwidth": bandwidth,
                   "lengths": floors(reads, bandwidth, settings.prompt_lengths, decode_tokens)}
        routed = reads["weights_by_category"]["routed experts"]
    else:
        routed = routed_expert_bytes(config, model.dtype.itemsize)

    def progress():
        if on_progress:
            derive(result)
            on_progress(result)

    max_positions = max(settings.prompt_lengths) + decode_tokens + 1
    entries = ([("megakernel", megakernel)] if megakernel is not None else []) + \
        [(c.name, c) for c in step_contenders(model, contenders, max_positions, compile_mode)]
    for name, contender in entries:
        record = result["contenders"][name] = {"label": getattr(contender, "label", name), "lengths": {}}
        reason = contender.unavailable(device) if hasattr(contender, "unavailable") else None
        if reason:
            record |= {"status": "unavailable", "reason": reason}
            continue
        try:
            failed = None
            for length in settings.prompt_lengths:
                if failed:  # a contender that fails once (e.g. compilation) is not retried at every length
                    record["lengths"][str(length)] = {"status": "unavailable", "reason": failed, "not_retried": True}
                    continue
                # what a partial file says if the process is killed during this measurement
                record["lengths"][str(length)] = {"status": "unfinished",
                                                  "reason": "the process ended during this measurement"}
                progress()
                entry = record["lengths"][str(length)] = measure_one(name, contender, model, length, settings, routed)
                failed = entry["reason"] if entry["status"] == "unavailable" else None
                progress()
        finally:
            if hasattr(contender, "finish"):
                contender.finish()
        measured = [e for e in record["lengths"].values() if "p50_ms" in e]
        failures = [e["reason"] for e in record["lengths"].values() if "p50_ms" not in e]
        record["status"] = "ok" if measured else "unavailable"
        if failures and not measured:
            record["reason"] = failures[0]
        progress()

    derive(result)
    result["seconds"] = time.perf_counter() - started
    return result


def measure_one(name, contender, model, length, settings: Settings, routed_bytes: int) -> dict:
    if settings.deadline is not None and time.perf_counter() > settings.deadline:
        return {"status": "skipped", "reason": "the run's time budget was spent before it started"}
    ids = prompt_ids(length, vocab_size=model.config.vocab_size)
    began = time.perf_counter()
    try:
        if name == "megakernel":
            entry = measure_megakernel(contender, model, ids, settings)
        else:
            entry = measure_steps(contender, ids, settings)
    except Exception as err:  # a contender that fails is recorded, never allowed to end the run
        return {"status": "unavailable", "reason": first_line(err)}
    entry["status"] = "ok"
    entry["wall_s"] = time.perf_counter() - began  # setup, compilation and every run included
    if hasattr(contender, "extra_bytes"):
        context = mean_context(length, settings.decode_tokens)
        entry["extra_bytes_per_token"] = contender.extra_bytes(round(context), routed_bytes)
    return entry

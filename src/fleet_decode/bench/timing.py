"""How the benchmark measures: per-step clocks, latency statistics, kernel counts, copy bandwidth.

On a GPU every step is bracketed by CUDA events (device time, read once after the run); on the
CPU by perf_counter. Statistics skip the first two steps of every run (0-based step >= 2), which
carry warm-up: allocator growth, cuBLAS heuristics, the first replay of a graph.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

STEADY_FROM_STEP = 2  # 0-based: statistics use steps 2, 3, ... of every run


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepClock:
    """Marks the boundaries between decode steps; `step_ms()` gives each step's duration.

    CUDA events are recorded on the current stream without a host sync, so timing does not change
    what is timed; perf_counter on the CPU needs none either (CPU work is synchronous)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.marks: list = []

    def mark(self) -> None:
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def step_ms(self) -> list[float]:
        if self.device.type == "cuda":
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


def clock_name(device: torch.device) -> str:
    return "cuda_events" if device.type == "cuda" else "perf_counter"


def latency_summary(runs_step_ms: list[list[float]]) -> dict:
    """P50/P95/mean over the steady steps of all runs pooled, and tokens/s at the P50."""
    steady = [ms for run in runs_step_ms for ms in run[STEADY_FROM_STEP:]]
    if not steady:
        raise ValueError(f"no steady steps: every run needs more than {STEADY_FROM_STEP} decode steps")
    p50, p95 = np.percentile(steady, [50, 95]).tolist()
    return {"p50_ms": p50, "p95_ms": p95, "mean_ms": statistics.fmean(steady), "min_ms": min(steady),
            "steady_steps": len(steady), "tokens_per_s": 1e3 / p50}


def device_ops(run_steps, device: torch.device) -> dict | None:
    """Kernels (and copies/memsets) the device executed while `run_steps()` ran, from torch.profiler.

    Kernels inside a replayed CUDA graph are counted one by one, as the GPU executes them; a graph
    launch itself is one host call, so the two numbers say different things and both are kept
    where they differ (see the contenders' `host_launches_per_token`)."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_steps()
        synchronize(device)
    names = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
    copies = sum(n.startswith(("Memcpy", "Memset")) for n in names)
    return {"kernels": len(names) - copies, "copies_and_memsets": copies}


def copy_bandwidth(device: torch.device, nbytes: int | None = None, repeats: int = 10) -> dict:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written: median of `repeats`
    timed copies after a warm-up, on random data (never zeros). This is the floor's denominator."""
    nbytes = nbytes or (1 << 30 if device.type == "cuda" else 1 << 26)
    src = torch.rand(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    samples = []
    for _ in range(repeats):
        clock = StepClock(device)
        synchronize(device)
        clock.mark()
        dst.copy_(src)
        clock.mark()
        samples += clock.step_ms()
    median_ms = statistics.median(samples)
    del src, dst
    return {"bytes_copied": nbytes, "bytes_moved": 2 * nbytes, "samples_ms": samples,
            "median_ms": median_ms, "bytes_per_s": 2 * nbytes / (median_ms * 1e-3)}

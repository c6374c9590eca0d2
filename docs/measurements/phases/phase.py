"""Lab only: per kind and phase, mean microseconds of thread 0 between FD_PHASE marks. Apply
phase-marks-16a9556.patch (part 16: also the one-warp top-k's and the down tiles' marks; not yet run),
phase-marks-9472313.patch (the host views' kernels, with marks also in the q/kv, router, top-k and expert
gate/up tasks; phase-marks-e2bd5a0.patch is part 14's, phase-marks.patch part 7's) to a copy of hip/ (cd COPY && patch -p1 < phase-marks-e2bd5a0.patch), build it
(python -m fleet_decode.kernels.build --hip-dir COPY/hip --out COPY/lib), then on the GPU host:
    PYTHONPATH=src python docs/measurements/phases/phase.py COPY/lib/libfleet_kernels.so
The marks cost time themselves (their atomics): compare phases within one run, not across builds."""
import ctypes
import os
import sys

import numpy as np
import torch

from fleet_decode.graph import decode_plan
from fleet_decode.graph.format import Kind
from fleet_decode.kernels import library
from fleet_decode.kernels.runtime import Megakernel
from fleet_decode.model import load_model, prompt_ids

lib = library.load(sys.argv[1])
model = load_model("random:deepseek-coder-v2-lite", dtype=torch.bfloat16, device="cuda")
N_PROMPT = int(os.environ.get("PHASE_PROMPT", 1024))  # the prompt's positions (PHASE_PROMPT=4096: part 19)
prompt = prompt_ids(N_PROMPT, vocab_size=model.config.vocab_size)
n_sm = torch.cuda.get_device_properties(0).multi_processor_count
from fleet_decode.kernels import staging

DEFAULT_KINDS = staging.STAGED_KINDS


def read():
    sums, counts = np.zeros((32, 8), np.uint64), np.zeros(32, np.uint64)
    assert lib.lib.fd_phase_read(sums.ctypes.data_as(ctypes.c_void_p), counts.ctypes.data_as(ctypes.c_void_p)) == 0
    return sums.astype(np.float64), counts.astype(np.float64)


SHOW = (Kind.RMSNORM_GEMV, Kind.ROPE_Q_ABSORB, Kind.ATTN_CHUNK, Kind.ATTN_MERGE_UV, Kind.ATTN_MERGE_COLS,
        Kind.O_PROJ_RESIDUAL, Kind.ROUTER, Kind.ROUTE_TOPK, Kind.EXPERT_GATE_UP, Kind.DOWN_ACCUM,
        Kind.EXPERT_DOWN_ACCUM, Kind.EXPERT_GATE_UP_DOWN, Kind.GATE_UP_DOWN, Kind.SUM_PARTIALS)
# The default staging only; PHASE_ALL=1 also times the staged-kind sets of part 7.
CONFIGS = ([], [Kind.O_PROJ_RESIDUAL], [Kind.O_PROJ_RESIDUAL, Kind.ROUTER], [Kind.RMSNORM_GEMV], []) \
    if os.environ.get("PHASE_ALL") == "1" else ([],)
for excluded in CONFIGS:
    staging.STAGED_KINDS = tuple(k for k in DEFAULT_KINDS if k not in excluded)
    mk = Megakernel(model, plan=decode_plan(model.config, N_PROMPT + 32 + 1, n_sm), lib=lib)
    mk.prefill(prompt)
    mk.generate(N_PROMPT, 32)
    s0, c0 = read()
    p50 = []
    for _ in range(3):
        run = mk.generate(N_PROMPT, 32)
        p50.append(np.median(run.step_seconds[2:]) * 1e3)
    torch.cuda.synchronize()
    s1, c1 = read()
    sums, counts = s1 - s0, c1 - c0
    print(f"== not staged: {[k.name for k in excluded]}; P50 step ms per launch {['%.3f' % p for p in p50]}")
    print(f"{'kind':20s} {'tasks':>7s} " + " ".join(f"{'p' + str(k):>6s}" for k in range(8)) + "   total")
    for kind in SHOW:
        n = counts[int(kind)]
        us = sums[int(kind)] / max(n, 1) / 1e3
        print(f"{kind.name:20s} {int(n):7d} " + " ".join(f"{u:6.2f}" for u in us) + f"  {us.sum():6.2f}")
    del mk
    torch.cuda.empty_cache()

"""Lab only: where a task's wake goes, from a raw trace of a build with docs/measurements/phases/wake-marks.patch
(its REACHED word holds the tick at which thread 0's wait ended). Per kind, medians over MoE layers 2.. of
one step: input fired (the last signaller's DONE) -> wait ended, and wait ended -> READY (the barrier after
the wait). On a normal build's raw trace the first column is fired -> reached instead.

    PYTHONPATH=src python docs/measurements/wake/wake_split.py docs/measurements/wake/trace86-wake-marks-raw.npz
"""
import collections
import sys

import numpy as np

from fleet_decode.graph import build_graph, decode_plan
from fleet_decode.model import get_config

REACHED, READY, DONE = 0, 1, 2
STEP = 2

config = get_config("deepseek-coder-v2-lite")
graph = build_graph(config, decode_plan(config, 1024 + 32, 132))  # kernels.trace's default graph
ticks = np.load(sys.argv[1])["raw"].astype(np.float64) / 1000  # ns -> us
assert ticks.shape[1] == len(graph.tasks), "the trace is of another graph"
fired = {e: max(ticks[STEP, p, DONE] for p in ps) for e, ps in enumerate(graph.signalers()) if ps}
rows = collections.defaultdict(list)
for i, t in enumerate(graph.tasks):
    if t.layer < 2:
        continue
    last_input = max(fired[e] for e, lag in t.inputs if lag == 0)
    rows[t.kind.name].append((ticks[STEP, i, REACHED] - last_input, ticks[STEP, i, READY] - ticks[STEP, i, REACHED]))
print(f"{'kind':20s} {'tasks':>6s} {'fired->mark':>12s} {'mark->ready':>12s} (medians, us)")
for kind, v in rows.items():
    v = np.array(v)
    print(f"{kind:20s} {len(v):6d} {np.median(v[:, 0]):12.2f} {np.median(v[:, 1]):12.2f}")

"""Lab only: where a MoE layer's q/kv tiles start, read from a trace's raw words (kernels.trace --raw): each
tile's ready and done, when its worker reached it, and the task that worker ran before it.

    PYTHONPATH=src python docs/measurements/window/qkv_reach.py \\
        docs/measurements/window/trace105-default-split-k-raw.npz docs/measurements/megakernel-h200-trace105-default-split-k.json

Part 17 of docs/megakernel.md reads trace 105 with it: under the split-K default every q/kv tile's worker
ran a sum tile just before, which ends when the layer's output fires, so the tiles are reached only then."""
import argparse
import json

import numpy as np

from fleet_decode.graph import Kind, build_graph
from fleet_decode.graph.plan import Plan  # noqa: F401 (the summary's plan is its repr)
from fleet_decode.model import get_config


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", help="the trace's raw words (.npz, kernels.trace --raw)")
    parser.add_argument("summary", help="the same trace's summary (.json), for its plan")
    parser.add_argument("--model", default="deepseek-coder-v2-lite")
    parser.add_argument("--layer", type=int, default=10)
    parser.add_argument("--step", type=int, default=2)
    args = parser.parse_args()
    graph = build_graph(get_config(args.model), eval(json.load(open(args.summary))["plan"]))
    t = np.load(args.raw)["raw"][..., :3].astype(float) / 1e3  # reached, ready, done: us
    out_event = next(i for i, e in enumerate(graph.events) if e.name == f"L{args.layer - 1}.out")
    start = max(t[args.step, i, 2] for i, task in enumerate(graph.tasks) if task.out_event == out_event)
    before = {i: (lst[k - 1] if k else None) for lst in graph.workers for k, i in enumerate(lst)}
    rows = []
    for i, task in enumerate(graph.tasks):
        if task.layer == args.layer and task.kind == Kind.RMSNORM_GEMV:
            reached, ready, done = t[args.step, i] - start
            prev = before[i]
            rows.append((ready, done, reached, graph.tasks[prev].name if prev is not None else "-",
                         t[args.step, prev, 2] - start if prev is not None else float("nan")))
    rows.sort()
    print(f"step {args.step}, layer {args.layer}: q/kv tiles (us from L{args.layer - 1}.out): ready, done, reached, "
          f"the worker's task before, its done")
    for row in rows[::max(1, len(rows) // 12)]:
        print("%6.2f %6.2f %6.2f  %-28s %6.2f" % row)
    runs = [done - ready for ready, done, *_ in rows]
    print(f"first ready {rows[0][0]:.2f}, last done {max(r[1] for r in rows):.2f}, median run {np.median(runs):.2f}, "
          f"reached after the layer's input: {sum(r[2] > 0 for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()

"""Lab only: the expert window of a MoE layer read from a trace's raw words (kernels.trace --raw), per
worker: what it runs between the layer's top-k firing and its output firing, and how busy the workers are.

    PYTHONPATH=src python docs/measurements/window/window_split.py \\
        docs/measurements/window/trace97-topk-shuffles-raw.npz docs/measurements/megakernel-h200-trace97-topk-shuffles.json
    ... --layer 10 --step 2      # one layer's per-worker timeline (us from the previous layer's output)

The graph is rebuilt on the CPU from the summary's plan (the trace's own), so task i of the raw words is
task i of that graph. Part 16 of docs/megakernel.md reads trace 97 with it."""
import argparse
import json

import numpy as np

from fleet_decode.graph import Kind, build_graph
from fleet_decode.graph.plan import Plan  # noqa: F401 (the summary's plan is its repr)
from fleet_decode.model import get_config

WINDOW_KINDS = (Kind.GATE_UP, Kind.EXPERT_GATE_UP, Kind.DOWN_ACCUM, Kind.EXPERT_DOWN_ACCUM, Kind.ROUTER, Kind.ROUTE_TOPK,
                Kind.GATE_UP_DOWN, Kind.EXPERT_GATE_UP_DOWN, Kind.SUM_PARTIALS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", help="the trace's raw words (.npz, kernels.trace --raw)")
    parser.add_argument("summary", help="the same trace's summary (.json), for its plan")
    parser.add_argument("--model", default="deepseek-coder-v2-lite")
    parser.add_argument("--layer", type=int, help="print this MoE layer's per-worker timeline")
    parser.add_argument("--step", type=int, default=2, help="the traced step for --layer")
    args = parser.parse_args()
    cfg = get_config(args.model)
    plan = eval(json.load(open(args.summary))["plan"])  # the repr of a Plan dataclass
    graph = build_graph(cfg, plan)
    raw = np.load(args.raw)["raw"]
    if raw.shape[1] != len(graph.tasks):
        raise SystemExit(f"{args.raw}: {raw.shape[1]} tasks, the plan's graph has {len(graph.tasks)}")
    t = raw[..., :3].astype(float) / 1e3  # reached, ready, done: us on the launch's clock
    owner = {i: w for w, tasks in enumerate(graph.workers) for i in tasks}
    event = {e.name: i for i, e in enumerate(graph.events)}
    by_event: dict[int, list[int]] = {}
    for i, task in enumerate(graph.tasks):
        by_event.setdefault(task.out_event, []).append(i)

    def fired(step, name):
        return t[step, by_event[event[name]], 2].max()

    moe_layers = [layer for layer in range(1, cfg.num_hidden_layers - 1) if f"L{layer}.route_topk" in event]
    windows, busy_shares = [], []
    for step in range(1, raw.shape[0]):
        for layer in moe_layers:
            t0, t1 = fired(step, f"L{layer}.route_topk"), fired(step, f"L{layer}.out")
            busy = 0.0
            for i, task in enumerate(graph.tasks):
                if task.layer in (layer, layer + 1):
                    busy += max(0.0, min(t[step, i, 2], t1) - max(t[step, i, 1], t0))
            windows.append(t1 - t0)
            busy_shares.append(busy / plan.workers / (t1 - t0))
    print(f"expert window (top-k fired -> out fired), MoE layers {moe_layers[0]}-{moe_layers[-1]}, steps "
          f"1-{raw.shape[0] - 1}: {np.mean(windows):.1f} us, workers busy {100 * np.mean(busy_shares):.1f} % of it")
    if args.layer is None:
        return
    step, layer = args.step, args.layer
    start = fired(step, f"L{layer - 1}.out")
    lines: dict[int, list[tuple]] = {}
    for i, task in enumerate(graph.tasks):
        if task.layer == layer and task.kind in WINDOW_KINDS:
            reached, ready, done = t[step, i] - start
            lines.setdefault(owner[i], []).append((ready, f"{task.name.split('.', 1)[1]} {reached:.1f}>{ready:.1f}>{done:.1f}"))
    print(f"step {step}, layer {layer}: per worker, each window task's reached > ready > done (us from L{layer - 1}.out)")
    for worker in sorted(lines, key=lambda w: min(r for r, _ in lines[w])):
        print(f"{worker:4d}  " + "   ".join(text for _, text in sorted(lines[worker])))


if __name__ == "__main__":
    main()

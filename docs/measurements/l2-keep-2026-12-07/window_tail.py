"""Per-worker timelines of a MoE layer's expert window, from a trace's raw words (kernels.trace --raw):
when each worker's routed slice became ready and ended, relative to the layer's top-k firing, split by
whether the worker also ran a shared slice that layer. Runs on the laptop: the graph is rebuilt from the
decode plan (the default variant; 132 workers).

    python docs/measurements/l2-keep-2026-12-07/window_tail.py RAW.npz [--prompt 1024] [--tokens 32] [--workers 132]
        [--plan split_k_skew=8]   # the variant's Plan fields, where it is not the default
"""

import argparse

import numpy as np

from fleet_decode.graph import build_graph, decode_plan
from fleet_decode.graph.format import Kind
from fleet_decode.model.sources import get_config

READY, DONE = 1, 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw")
    p.add_argument("--prompt", type=int, default=1024)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--workers", type=int, default=132)
    p.add_argument("--plan", action="append", default=[], metavar="FIELD=INT", help="a Plan field of the traced variant")
    args = p.parse_args()
    raw = np.load(args.raw)["raw"]
    config = get_config("deepseek-coder-v2-lite")
    graph = build_graph(config, decode_plan(config, args.prompt + args.tokens, args.workers,
                                                **{k: int(v) for k, v in (f.split("=") for f in args.plan)}))
    assert raw.shape[1] == len(graph.tasks), (raw.shape, len(graph.tasks))
    ticks = raw[..., :3].astype(np.float64)
    t = (ticks - ticks[ticks > 0].min()) / 1e3  # us
    worker_of = np.empty(len(graph.tasks), int)
    for w, lst in enumerate(graph.workers):
        worker_of[lst] = w
    names = {e.name: i for i, e in enumerate(graph.events)}
    by_layer_kind = {}
    for i, tk in enumerate(graph.tasks):
        by_layer_kind.setdefault((tk.layer, Kind(tk.kind).name), []).append(i)
    rows = []
    for step in (2, 3):
        for layer in range(1, config.num_hidden_layers):
            topk = by_layer_kind.get((layer, "ROUTE_TOPK"))
            routed = by_layer_kind.get((layer, "EXPERT_GATE_UP_DOWN"))
            shared = by_layer_kind.get((layer, "GATE_UP_DOWN"), [])
            sums = by_layer_kind.get((layer, "SUM_PARTIALS"), [])
            if not topk or not routed:
                continue
            t0 = t[step, topk, DONE].max()
            shared_done = {worker_of[i]: t[step, i, DONE] - t0 for i in shared}
            for i in routed:
                w = worker_of[i]
                rows.append((step, layer, w, w in shared_done, shared_done.get(w, np.nan),
                             t[step, i, READY] - t0, t[step, i, DONE] - t0, t[step, i, DONE] - t[step, i, READY]))
            rows.append((step, layer, -1, False, np.nan, t[step, sums, READY].min() - t0,
                         t[step, sums, DONE].max() - t0, np.nan))
    a = np.array(rows, dtype=float)
    sl, sm = a[a[:, 2] >= 0], a[a[:, 2] < 0]
    print(f"{len(sl)} routed slices over {len(sm)} layer-steps; times in us from the layer's top-k firing")
    for label, m in (("with a shared slice", sl[:, 3] == 1), ("routed only", sl[:, 3] == 0)):
        s = sl[m]
        print(f"{label:>20}: {len(s) / len(sm):5.1f} a layer; routed ready {np.mean(s[:, 5]):6.2f}, "
              f"run {np.mean(s[:, 7]):6.2f} (p10 {np.percentile(s[:, 7], 10):.2f}, p90 {np.percentile(s[:, 7], 90):.2f}), "
              f"end {np.mean(s[:, 6]):6.2f} (p10 {np.percentile(s[:, 6], 10):.2f}, p90 {np.percentile(s[:, 6], 90):.2f})"
              + (f"; shared done {np.nanmean(s[:, 4]):6.2f}" if label.startswith("with") else ""))
    ends = [np.sort(sl[(sl[:, 0] == st) & (sl[:, 1] == ly), 6]) for st, ly in sm[:, :2]]
    q = np.mean([[e[int(f * (len(e) - 1))] for f in (0, 0.25, 0.5, 0.75, 0.9, 1.0)] for e in ends], axis=0)
    print("routed slice ends per layer, mean over layers: min/p25/p50/p75/p90/max " + " / ".join(f"{x:.2f}" for x in q))
    print(f"sum tiles: first ready {np.mean(sm[:, 5]):.2f}, last done {np.mean(sm[:, 6]):.2f}")
    # which workers end last, on average over layer-steps (rank of end among the layer's slices)
    rank = np.zeros(len(graph.workers))
    for st, ly in sm[:, :2]:
        s = sl[(sl[:, 0] == st) & (sl[:, 1] == ly)]
        order = np.argsort(np.argsort(s[:, 6]))
        rank[s[:, 2].astype(int)] += order / (len(s) - 1) / len(sm)
    worst = np.argsort(rank)[-10:][::-1]
    print("workers ending latest on average (mean rank 0..1):", ", ".join(f"{w}:{rank[w]:.2f}" for w in worst))


if __name__ == "__main__":
    main()

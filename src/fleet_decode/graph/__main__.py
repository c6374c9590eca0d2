"""Counts of the decode task graph, read off the graph itself; also writes the C header of the encoding.

    python -m fleet_decode.graph --model random:deepseek-coder-v2-lite --workers 132
    python -m fleet_decode.graph --model tiny --workers 8 --json counts.json
    python -m fleet_decode.graph --c-header hip/runtime/graph_format.h

Only the config is read (random:/hf: sources are never instantiated), so the real config is cheap.
"""

import argparse
import json
import sys
from pathlib import Path

from fleet_decode.graph.build import build_graph
from fleet_decode.graph.c_header import render_c_header
from fleet_decode.graph.counts import graph_counts
from fleet_decode.graph.plan import ASSIGNMENTS, default_plan


def config_of(source: str):
    """The config of a model source, without building the model."""
    from fleet_decode.model import get_config

    if source.startswith("random:"):
        return get_config(source.removeprefix("random:").rsplit("@", 1)[0])
    if source.startswith("hf:"):
        return get_config(str(Path(source.removeprefix("hf:")) / "config.json"))
    return get_config(source)


def _size(n_bytes):
    unit, scale = next((u, f) for u, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1)) if n_bytes >= f or f == 1)
    return f"{n_bytes / scale:.3f} {unit}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="tiny | random:<name-or-config.json> | hf:<dir>")
    ap.add_argument("--workers", type=int, default=132)
    ap.add_argument("--assign", choices=ASSIGNMENTS, default="balanced")
    ap.add_argument("--max-positions", type=int, default=None)
    ap.add_argument("--weight-bytes", type=int, default=2, help="bytes per weight element (2 = bf16)")
    ap.add_argument("--json", type=Path, help="also write the counts here")
    ap.add_argument("--c-header", type=Path, help="write the C header of the encoding here and exit")
    args = ap.parse_args(argv)
    if args.c_header:
        args.c_header.write_text(render_c_header())
        print(f"wrote {args.c_header}")
        return 0
    config = config_of(args.model)
    overrides = {"assign": args.assign}
    if args.max_positions:
        overrides["max_positions"] = args.max_positions
    graph = build_graph(config, default_plan(config, args.workers, **overrides))
    counts = graph_counts(graph, args.weight_bytes)
    print(f"model {args.model}: {counts['tasks_per_step']} tasks, {counts['events_per_step']} events per step, "
          f"{args.workers} workers ({args.assign}: {counts['tasks_per_worker']['min']}-"
          f"{counts['tasks_per_worker']['max']} tasks each)")
    print("tasks per layer (-1 = embed/head): " + ", ".join(f"{k}:{v}" for k, v in counts["tasks_per_layer"].items()))
    print("events per layer: " + ", ".join(f"{k}:{v}" for k, v in counts["events_per_layer"].items()))
    print("tasks per kind: " + ", ".join(f"{k}:{v}" for k, v in counts["tasks_per_kind"].items()))
    for cat, n in counts["weight_bytes_per_token"].items():
        print(f"  {cat:>15}: {_size(n)}")
    print(f"weights per token: {_size(counts['weight_bytes_per_token_total'])} "
          f"+ MLA cache {counts['cache_bytes_per_position'] / 1e3:.2f} KB per context position "
          f"({args.weight_bytes} bytes per element)")
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, **counts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark decode: contenders x prompt lengths, P50/P95 ms per token, against the floor.

    python -m fleet_decode.bench --model random:deepseek-coder-v2-lite --dtype bf16 --device cuda \\
        --prompt-lengths 256,1024 --tokens 32 --runs 3 --json out.json
    python -m fleet_decode.bench --model tiny --device cpu --prompt-lengths 16,32 --tokens 4 --runs 2 \\
        --contenders hf_eager,reference_eager

The JSON (written again after every measurement, so a killed run leaves what it had) is the
run_bench dict documented in docs/bench.md; --plots DIR also writes the report's three PNGs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from fleet_decode.bench.run import BASELINE, STEP_CONTENDERS, run_bench

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _number(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(result: dict) -> Table:
    env = result["environment"]
    bandwidth = result["copy_bandwidth"]["bytes_per_s"] / 1e12
    title = (f"{result['model']['source']} {result['model']['dtype']} on {env.get('gpu', env['device'])}: "
             f"{result['decode_tokens']} tokens x {result['runs']} runs, P50/P95 over steps >= {result['steady_from_step']}; "
             f"copy {bandwidth:.2f} TB/s")
    grid = Table(title=title)
    for column in ("contender", "prompt", "P50 ms", "P95 ms", "tok/s", "launches/tok", "TB/s", "% of floor",
                   f"x {BASELINE}", "floor ms"):
        grid.add_column(column, justify="left" if column == "contender" else "right")
    for name, record in result["contenders"].items():
        if not record["lengths"]:
            grid.add_row(name, "all", f"[yellow]{record['status']}: {record.get('reason', '')}[/]")
            continue
        for length, entry in record["lengths"].items():
            floor = result["lengths"][length]["floor_ms"]
            if "p50_ms" not in entry:
                grid.add_row(name, length, f"[yellow]{entry['status']}: {entry['reason']}[/]")
                continue
            grid.add_row(name, length, _number(entry["p50_ms"], ".3f"), _number(entry["p95_ms"], ".3f"),
                         _number(entry["tokens_per_s"], ".1f"), _number(entry.get("launches_per_token"), ".0f"),
                         _number(entry["achieved_tb_s"], ".3f"), _number(entry["percent_of_floor"], ".1f"),
                         _number(entry.get("speedup_vs_hf_eager"), ".2f"), f"{floor:.3f}")
    return grid


def write_json(path: Path, result: dict) -> None:
    """Atomically, so that a reader (or a kill) never sees half a file."""
    partial = path.with_suffix(path.suffix + ".tmp")
    partial.write_text(json.dumps(result, indent=1))
    os.replace(partial, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="tiny | random:<config>[@seed] | hf:<dir>")
    parser.add_argument("--dtype", choices=DTYPES, default=None, help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--prompt-lengths", default="256,1024,4096", help="comma-separated prompt lengths")
    parser.add_argument("--tokens", type=int, default=32, help="decode steps timed per run")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per contender and length")
    parser.add_argument("--contenders", default=",".join(STEP_CONTENDERS), help="comma-separated step-wise contenders")
    parser.add_argument("--compile-mode", default="reduce-overhead",
                        help="torch.compile mode for hf_static_compile (e.g. max-autotune-no-cudagraphs)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds after which no new measurement starts (the rest is recorded as skipped)")
    parser.add_argument("--json", type=Path, help="write the result here (rewritten after every measurement)")
    parser.add_argument("--plots", type=Path, help="write latency.png, bandwidth.png and context.png here")
    args = parser.parse_args(argv)

    from fleet_decode.model import load_model

    dtype = DTYPES[args.dtype or ("bf16" if args.device.startswith("cuda") else "fp32")]
    model = load_model(args.model, dtype=dtype, device=args.device)
    reported = set()

    def progress(partial: dict) -> None:
        """One line per finished measurement (so a killed run's log says how far it got), and the
        partial JSON."""
        for name, record in partial["contenders"].items():
            for length, entry in record["lengths"].items():
                if entry["status"] != "unfinished" and (name, length) not in reported:
                    reported.add((name, length))
                    print(f"{name} @ {length}: {entry['status']} "
                          f"{entry.get('p50_ms', entry.get('reason'))} (wall {entry.get('wall_s', 0):.1f} s)", flush=True)
        if args.json:
            write_json(args.json, partial | {"partial": True})

    result = run_bench(model, prompt_lengths=[int(x) for x in args.prompt_lengths.split(",")],
                       decode_tokens=args.tokens, runs=args.runs, device=args.device,
                       contenders=[c for c in args.contenders.split(",") if c], compile_mode=args.compile_mode,
                       model_source=args.model, time_budget_s=args.time_budget, on_progress=progress)
    if args.json:
        write_json(args.json, result)
    if args.plots:
        from fleet_decode.report import plots

        args.plots.mkdir(parents=True, exist_ok=True)
        for name, draw in (("latency", plots.latency_png), ("bandwidth", plots.bandwidth_png),
                           ("context", plots.context_png)):
            (args.plots / f"{name}.png").write_bytes(draw(result))
    Console(width=200).print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

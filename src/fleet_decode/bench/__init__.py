"""The benchmark: the megakernel against HF eager, the reference step in a CUDA graph and HF under
torch.compile, side by side in one process, against the floor of reading the bytes once.

    from fleet_decode.bench import run_bench
    from fleet_decode.report import plots
    result = run_bench(model, prompt_lengths=(256, 1024), decode_tokens=32, runs=3)
    png = plots.latency_png(result)

CLI: python -m fleet_decode.bench --help. What is measured and how: docs/bench.md.
"""

from fleet_decode.bench.run import SCHEMA, STEP_CONTENDERS, headline, run_bench

__all__ = ["SCHEMA", "STEP_CONTENDERS", "headline", "run_bench"]

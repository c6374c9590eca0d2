"""The benchmark: the megakernel against HF eager, the reference step in a CUDA graph and HF under
torch.compile, against the floor of reading the bytes once.

    from fleet_decode.bench import run_bench
    from fleet_decode.report import plots
    result = run_bench(model, prompt_lengths=(256, 1024), decode_tokens=32, runs=3)
    png = plots.latency_png(result)

CLI: python -m fleet_decode.bench --help. What is measured and how: docs/bench.md. The timing
(fleet_decode.bench.run) imports torch when first used; fleet_decode.bench.results (what a result
says, and combine) does not, so the report reads results without it.
"""

_FROM_RUN = {"SCHEMA", "BASELINES_SCHEMA", "STEP_CONTENDERS", "run_bench"}
_FROM_RESULTS = {"headline", "combine", "Mismatch"}

__all__ = sorted(_FROM_RUN | _FROM_RESULTS)


def __getattr__(name):
    if name in _FROM_RUN:
        from fleet_decode.bench import run
        return getattr(run, name)
    if name in _FROM_RESULTS:
        from fleet_decode.bench import results
        return getattr(results, name)
    raise AttributeError(f"module 'fleet_decode.bench' has no attribute {name!r}")

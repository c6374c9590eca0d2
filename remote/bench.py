"""bench: every contender (the megakernel on a GPU host; HF eager and the reference step, in CUDA
graphs and under torch.compile where they work) decodes the same greedy tokens after the same HF
prefill, timed in one process by fleet_decode.bench.run_bench (what is measured: docs/bench.md).
The evidence leads with bench.headline() — P50/P95 ms per token over steps >= 2, tokens/s, bytes
per token, achieved TB/s and % of the floor, HF eager's P50 — and keeps the whole result under
metrics.bench. On a sim host the simulator is not timed (its speed means nothing): only the CPU
baselines are, and the evidence says so.

  PYTHONPATH=src python3 remote/bench.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "bench_runs": 2}' --out /tmp/bench.json
"""
from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

# On a CPU, CUDA graphs are unavailable and torch.compile would dominate a short run.
CPU_CONTENDERS = ("hf_eager", "reference_eager")

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("bench"), args) as m:
    bench = require("fleet_decode.bench", "bench")
    backend = backends.get(m.params)
    model = m.load_model()
    on_gpu = backend.name == "gpu"
    lengths = m.params.get("bench_prompt_lengths") or [m.params["prompt_tokens"]]
    m.progress(f"timing {', '.join(bench.STEP_CONTENDERS if on_gpu else CPU_CONTENDERS)} at prompt lengths {lengths}")
    result = bench.run_bench(
        model, prompt_lengths=tuple(lengths), decode_tokens=m.params["decode_tokens"],
        runs=m.params.get("bench_runs", 3), device=m.device(), model_source=m.params["model"],
        time_budget_s=m.params.get("bench_time_budget_s"),
        megakernel=backends.BenchContender(model) if on_gpu else None,
        contenders=bench.STEP_CONTENDERS if on_gpu else CPU_CONTENDERS)
    headline = bench.headline(result, prompt_length=m.params["prompt_tokens"])
    timed = result["contenders"][headline["timed"]]["lengths"][str(headline["prompt_length"])]
    m.metrics.update(headline, backend=backend.name, bench=result, note=None if on_gpu else
                     "sim host: the simulator is not timed; these are CPU timings of the baselines")
    if on_gpu:
        m.gate("megakernel_timed", headline["timed"], "==", "megakernel")
    m.gate("runs_agree", timed["runs_agree"], "==", True)

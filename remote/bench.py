"""bench: the megakernel decodes greedy tokens after HF's prefill, timed by fleet_decode.bench.run_bench
at each prompt length, against the floor of reading the bytes once (what is measured: docs/bench.md).
The torch contenders it is compared with are timed by the baselines rule (remote/baselines.py), which
does not go stale when the decoder changes; the report puts both in one table (bench.combine).
The evidence leads with bench.headline() (P50/P95 ms per token over steps >= 2, tokens/s, bytes per
token, achieved TB/s and % of the floor) and keeps the whole result under metrics.bench. On a sim
host the simulator is not timed (its speed means nothing): the evidence holds the floor alone, and
says so.

  PYTHONPATH=src python3 remote/bench.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "bench_runs": 2}' --out /tmp/bench.json
"""
from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("bench"), args) as m:
    bench = require("fleet_decode.bench", "bench")
    backend = backends.get(m.params)
    model = m.load_model()
    on_gpu = backend.name == "gpu"
    lengths = m.params.get("bench_prompt_lengths") or [m.params["prompt_tokens"]]
    m.progress(f"timing the megakernel at prompt lengths {lengths}" if on_gpu else
               "sim host: the floor only (the simulator is not timed)")
    result = bench.run_bench(
        model, prompt_lengths=tuple(lengths), decode_tokens=m.params["decode_tokens"],
        runs=m.params.get("bench_runs", 3), device=m.device(), model_source=m.params["model"],
        time_budget_s=m.params.get("bench_time_budget_s"),
        megakernel=backends.BenchContender(model) if on_gpu else None, contenders=())
    if on_gpu:
        headline = bench.headline(result, prompt_length=m.params["prompt_tokens"], prefer=("megakernel",))
        timed = result["contenders"]["megakernel"]["lengths"][str(headline["prompt_length"])]
        m.metrics.update(headline, backend=backend.name, bench=result)
        m.gate("megakernel_timed", headline["timed"], "==", "megakernel")
        m.gate("runs_agree", timed["runs_agree"], "==", True)
    else:
        m.metrics.update(backend=backend.name, bench=result, note="sim host: the simulator is not timed; the floor "
                         "is recorded for the baselines (bench/baselines.json) to be read against")

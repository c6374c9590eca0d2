"""baselines: the torch contenders the megakernel is compared with (HF eager, the reference step eager
and in a CUDA graph, HF with a static cache under torch.compile; on a CPU host HF eager and the
reference eager), timed by fleet_decode.bench.run_bench(floor=False) after the same HF prefill at the
same prompt lengths as the bench rule. It reads nothing of the decoder (no hip/, no task graph), so a
kernel change does not rerun its minutes of timing; the report combines it with bench/bench.json
(bench.combine: the floor, the ratios and the token agreement are derived there).

  PYTHONPATH=src python3 remote/baselines.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "bench_runs": 2}' --out /tmp/baselines.json
"""
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

# On a CPU, CUDA graphs are unavailable and torch.compile would dominate a short run.
CPU_CONTENDERS = ("hf_eager", "reference_eager")

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("baselines"), args) as m:
    bench = require("fleet_decode.bench", "baselines")
    model = m.load_model()
    contenders = bench.STEP_CONTENDERS if m.device() == "cuda" else CPU_CONTENDERS
    lengths = m.params.get("bench_prompt_lengths") or [m.params["prompt_tokens"]]
    m.progress(f"timing {', '.join(contenders)} at prompt lengths {lengths}")
    result = bench.run_bench(
        model, prompt_lengths=tuple(lengths), decode_tokens=m.params["decode_tokens"],
        runs=m.params.get("bench_runs", 3), device=m.device(), model_source=m.params["model"],
        time_budget_s=m.params.get("bench_time_budget_s"), contenders=contenders, floor=False)
    eager = result["contenders"]["hf_eager"]["lengths"].get(str(m.params["prompt_tokens"]), {})
    m.metrics.update(timed=list(contenders), hf_eager_p50_ms=eager.get("p50_ms"), baselines=result)
    # HF eager is what every ratio of the report is taken against
    m.gate("hf_eager_timed", "p50_ms" in eager, "==", True)
    m.gate("runs_agree", eager.get("runs_agree"), "==", True)

"""M1 kernels: every task kind alone vs a torch reference at the model's shapes (max abs/rel error;
on a GPU host also each kind's own tolerance, time and bandwidth, from fleet_decode.kernels.checks).

  PYTHONPATH=src python3 remote/m1_kernels.py --host cpu --params '{"backend": "sim", "model": "tiny", "gates": {"rel_err_max": 1e-4}}' --out /tmp/kernels.json
"""
from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args
from fleet_decode.pipeline.milestones import envelope

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m1"), args) as m:
    backend = backends.get(m.params)
    model = m.load_model()
    kinds = backend.check_task_kinds(model)
    m.metrics["backend"] = backend.name
    m.metrics["kernels"] = kinds
    m.gate("task_kinds_checked", len(kinds), ">", 0)
    for kind, r in kinds.items():
        # The GPU check knows each kind's tolerance (bf16 or fp32 activations); the simulator's
        # fp32 results are held to the config's bound.
        m.gate(f"{kind}.max_rel", float(r["max_rel"]), "<=", r.get("tol", m.params["gates"]["rel_err_max"]))
        if "passed" in r:  # also: every output written, and the kind's own extra checks
            m.gate(f"{kind}.passed", r["passed"], "==", True)

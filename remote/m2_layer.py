"""M2 layer: one decode step of one layer (0 dense, 1 MoE) through the decoder vs the reference.

  PYTHONPATH=src python3 remote/m2_layer.py --layer 1 --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "gates": {"rel_err_max": 1e-4}}' --out /tmp/layer_1.json
"""
import torch

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

parser = milestone_args(__doc__)
parser.add_argument("--layer", type=int, required=True)
args = parser.parse_args()
with Milestone(*envelope("m2", layer=args.layer), args) as m:
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    out, ref = (torch.as_tensor(t).float() for t in backend.layer(model, prompt, args.layer))
    rel = require("fleet_decode.model.compare", "M2").relative_error(out, ref)
    m.metrics.update(backend=backend.name, layer=args.layer, rel_err=rel,
                     max_abs=float((out - ref).abs().max()), shape=list(out.shape))
    m.gate("rel_err", rel, "<=", m.params["gates"]["rel_err_max"])

"""M4 e2e: greedy tokens after HF prefill of the fixed prompt, through the decoder in one run, vs
HF greedy (decode step i feeds the token before it; step 0 feeds the prefill's argmax, so it is
HF's step i + 1). Logits cosine per step up to the first divergence (inputs are identical until then);
near-ties (HF top-2 margin below the gate's bound) are listed, and a divergence passes only at one.

  PYTHONPATH=src python3 remote/m4_e2e.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "gates": {"logits_cosine_min": 0.99999, "near_tie_margin": 1e-3}}' --out /tmp/e2e.json
"""
import torch

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require

args = milestone_args(__doc__).parse_args()
with Milestone("m4", "M4", "m4/e2e.json", args) as m:
    model_api = require("fleet_decode.model", "M4")
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    n = m.params["decode_tokens"]
    ours = backend.decode(model, prompt, n)
    # HF's index 0 is its prefill; decode step i of ours is HF's index i + 1.
    hf_tokens, hf_logits = (x[1:] for x in model_api.hf_decode(model, prompt, n + 1)[:2])
    tokens, hf_tokens = [int(t) for t in ours.tokens], [int(t) for t in hf_tokens]
    gates = m.params["gates"]
    margins = [float(torch.topk(torch.as_tensor(l).float().flatten(), 2).values.diff().abs())
               for l in hf_logits]
    near_ties = [step for step, margin in enumerate(margins) if margin < gates["near_tie_margin"]]
    divergence = next((i for i, (a, b) in enumerate(zip(tokens, hf_tokens)) if a != b), None)
    compared = n if divergence is None else divergence + 1
    cosines = [float(torch.nn.functional.cosine_similarity(
        torch.as_tensor(a).float().flatten(), torch.as_tensor(b).float().flatten(), dim=0))
        for a, b in zip(ours.logits[:compared], hf_logits[:compared])]
    m.metrics.update(backend=backend.name, tokens=tokens, hf_tokens=hf_tokens, logits_cosine=cosines,
                     hf_top2_margin=margins, near_ties=near_ties, first_divergence=divergence,
                     seconds=getattr(ours, "seconds", None))
    m.gate("tokens_generated", len(tokens), "==", n)
    m.gate("diverges_only_at_near_tie", divergence is None or divergence in near_ties, "==", True)
    m.gate("min_logits_cosine", min(cosines), ">=", gates["logits_cosine_min"])

"""M4 e2e: greedy tokens after HF prefill of the fixed prompt, through the decoder in one run, vs
HF greedy (decode step i feeds the token before it; step 0 feeds the prefill's argmax, so it is
HF's index i + 1). Logits are compared per step against HF teacher-forced on our own tokens, so
every step is compared on identical inputs. Near-ties (HF top-2 margin below the gate's bound) are
listed; a token that differs from HF's argmax passes only at one.

  PYTHONPATH=src python3 remote/m4_e2e.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "gates": {"logits_cosine_min": 0.99999, "near_tie_margin": 1e-3}}' --out /tmp/e2e.json
"""
import torch

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m4"), args) as m:
    model_api = require("fleet_decode.model", "M4")
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    n = m.params["decode_tokens"]
    ours = backend.decode(model, prompt, n)
    tokens = [int(t) for t in ours.tokens]
    hf_free = model_api.hf_decode(model, prompt, n + 1)[0]
    hf_tokens = hf_free[1:]
    forced = [hf_free[0], *tokens]
    hf_logits = [torch.as_tensor(l).float().flatten()
                 for l in model_api.hf_decode(model, prompt, n + 1, forced_tokens=forced)[1][1:]]
    gates = m.params["gates"]
    top2 = [torch.topk(l, 2).values for l in hf_logits]
    margins = [float(v[0] - v[1]) for v in top2]
    near_ties = [step for step, margin in enumerate(margins) if margin < gates["near_tie_margin"]]
    disagreements = [step for step, (t, l) in enumerate(zip(tokens, hf_logits)) if t != int(l.argmax())]
    divergence = next((i for i, (a, b) in enumerate(zip(tokens, hf_tokens)) if a != b), None)
    cosines = [float(torch.nn.functional.cosine_similarity(torch.as_tensor(a).float().flatten(), b, dim=0))
               for a, b in zip(ours.logits, hf_logits)]
    m.metrics.update(backend=backend.name, tokens=tokens, hf_greedy_tokens=hf_tokens,
                     first_divergence_from_hf_greedy=divergence, logits_cosine_teacher_forced=cosines,
                     min_logits_cosine=min(cosines), hf_top2_margin=margins, near_ties=near_ties,
                     argmax_disagreements=disagreements, seconds=getattr(ours, "seconds", None))
    m.gate("tokens_generated", len(tokens), "==", n)
    m.gate("argmax_disagrees_only_at_near_ties", set(disagreements) <= set(near_ties), "==", True)
    m.gate("min_logits_cosine", min(cosines), ">=", gates["logits_cosine_min"])

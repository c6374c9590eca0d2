"""M3 step: one decode step through every layer of the decoder vs HF eager: per-layer relative
error of the hidden state, logits cosine, same next token.

  PYTHONPATH=src python3 remote/m3_layers.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "gates": {"rel_err_max": 1e-4, "logits_cosine_min": 0.99999}}' --out /tmp/layers.json
"""
import torch

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope


args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m3"), args) as m:
    model_api = require("fleet_decode.model", "M3")
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    ours = backend.decode(model, prompt, 1)
    # HF's index 0 is its prefill; index 1 is the decode step that ours[0] is compared with.
    hf_tokens, hf_logits, hf_hidden = model_api.hf_decode(model, prompt, 2)[:3]
    gates = m.params["gates"]
    rel_errs = []
    for layer, (h, ref) in enumerate(zip(ours.hidden_states[0], hf_hidden[1])):
        h, ref = torch.as_tensor(h).float().flatten(), torch.as_tensor(ref).float().flatten()
        rel_errs.append(float((h - ref).norm() / ref.norm().clamp_min(1e-30)))
        m.gate(f"layer_{layer}.rel_err", rel_errs[-1], "<=", gates["rel_err_max"])
    logits, ref_logits = (torch.as_tensor(x).float().flatten() for x in (ours.logits[0], hf_logits[1]))
    cosine = float(torch.nn.functional.cosine_similarity(logits, ref_logits, dim=0))
    m.metrics.update(backend=backend.name, layer_rel_err=rel_errs, logits_cosine=cosine,
                     next_token=int(ours.tokens[0]), hf_next_token=hf_tokens[1])
    m.gate("layers_compared", len(rel_errs), "==", model.config.num_hidden_layers)
    m.gate("logits_cosine", cosine, ">=", gates["logits_cosine_min"])
    m.gate("same_next_token", int(ours.tokens[0]), "==", hf_tokens[1])

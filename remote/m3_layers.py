"""M3 step: one decode step through every layer of the decoder vs exact arithmetic (fp32 math on
the same weights and prefill cache, fleet_decode.model.compare.exact_decode): each layer's relative
error of the hidden state, logits cosine, same next token. HF eager's own distance to exact is
reported beside, never gated (on random weights its bf16 error exceeds any useful gate).

  PYTHONPATH=src python3 remote/m3_layers.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "gates": {"exact_layer_rel_err_max": 5e-3, "exact_logits_cosine_min": 0.99999}}' --out /tmp/layers.json
"""
from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope


args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m3"), args) as m:
    model_api = require("fleet_decode.model", "M3")
    compare = require("fleet_decode.model.compare", "M3")
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    m.progress(f"decoding one step through {backend.name}")
    ours = backend.decode(model, prompt, 1)
    m.progress("exact arithmetic (fp32 twin)")
    exact = compare.exact_decode(model, prompt, 1)
    m.progress("HF eager, reported beside")
    # HF's index 0 is its prefill; index 1 is the decode step that ours[0] and exact[0] are.
    hf_tokens, hf_logits, hf_hidden = model_api.hf_decode(model, prompt, 2)[:3]
    gates = m.params["gates"]
    rel_errs = compare.layer_errors(ours.hidden_states[0], exact.hidden[0])
    for layer, error in enumerate(rel_errs):
        m.gate(f"layer_{layer}.rel_err_vs_exact", error, "<=", gates["exact_layer_rel_err_max"])
    cosine = compare.cosine(exact.logits[0], ours.logits[0])
    hf_errs = compare.layer_errors(hf_hidden[1], exact.hidden[0])
    m.metrics.update(backend=backend.name, layer_rel_err_vs_exact=rel_errs, worst_rel_err_vs_exact=max(rel_errs),
                     logits_cosine_vs_exact=cosine, next_token=int(ours.tokens[0]), exact_next_token=exact.tokens[0],
                     hf_layer_rel_err_vs_exact=hf_errs, hf_worst_rel_err_vs_exact=max(hf_errs),
                     hf_logits_cosine_vs_exact=compare.cosine(exact.logits[0], hf_logits[1]),
                     hf_next_token=hf_tokens[1], hf_same_next_token_as_exact=hf_tokens[1] == exact.tokens[0])
    m.gate("layers_compared", len(rel_errs), "==", model.config.num_hidden_layers)
    m.gate("logits_cosine_vs_exact", cosine, ">=", gates["exact_logits_cosine_min"])
    m.gate("same_next_token_as_exact", int(ours.tokens[0]), "==", exact.tokens[0])
    m.progress(f"worst layer {max(rel_errs):.3%} from exact (HF eager {max(hf_errs):.3%}), logits cosine {cosine:.7f}")

"""M4 e2e: free-running greedy tokens after HF prefill of the fixed prompt, through the decoder in
one run, vs exact arithmetic (fleet_decode.model.compare.exact_decode) fed the decoder's own tokens:
up to the first split that is the exact greedy decoder, and after it every step is still judged on
identical inputs. A split is allowed only where the exact top-2 margin is below the spacing of the
decoder's logit dtype at that logit's magnitude (listed with its margin). HF eager's greedy tokens
and its distance to exact (fed the same tokens) are reported beside, never gated.

  PYTHONPATH=src python3 remote/m4_e2e.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "gates": {}}' --out /tmp/e2e.json
"""
from dataclasses import asdict

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("m4"), args) as m:
    model_api = require("fleet_decode.model", "M4")
    compare = require("fleet_decode.model.compare", "M4")
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    n = m.params["decode_tokens"]
    m.progress(f"decoding {n} tokens through {backend.name}")
    ours = backend.decode(model, prompt, n)
    tokens = [int(t) for t in ours.tokens]
    m.progress("exact arithmetic fed the decoder's tokens (fp32 twin)")
    exact = compare.exact_decode(model, prompt, n, fed=tokens)
    splits = compare.token_splits(tokens, exact, model.dtype)
    m.progress("HF eager, free-running and fed the same tokens, reported beside")
    hf_free = model_api.hf_decode(model, prompt, n + 1)[0]
    hf_fed = model_api.hf_decode(model, prompt, n + 1, forced_tokens=[hf_free[0], *tokens])[1][1:]
    hf_agrees = [int(l.argmax()) == e for l, e in zip(hf_fed, exact.tokens)]
    margins = [float(v[0] - v[1]) for v in (l.topk(2).values for l in exact.logits)]
    m.metrics.update(
        backend=backend.name, tokens=tokens, exact_tokens=exact.tokens, exact_top2_margin=margins,
        splits=[asdict(s) for s in splits], logit_dtype=str(model.dtype).removeprefix("torch."),
        logits_cosine_vs_exact=[compare.cosine(e, o) for e, o in zip(exact.logits, ours.logits)],
        hf_greedy_tokens=hf_free[1:], hf_tokens_identical_to_ours=sum(a == b for a, b in zip(hf_free[1:], tokens)),
        hf_argmax_agrees_with_exact=sum(hf_agrees), hf_argmax_splits_from_exact=[s for s, ok in enumerate(hf_agrees) if not ok],
        hf_min_logits_cosine_vs_exact=min(compare.cosine(e, h) for e, h in zip(exact.logits, hf_fed)),
        seconds=getattr(ours, "seconds", None))
    m.metrics["min_logits_cosine_vs_exact"] = min(m.metrics["logits_cosine_vs_exact"])
    m.gate("tokens_generated", len(tokens), "==", n)
    m.gate("splits_from_exact_beyond_near_ties", sum(not s.allowed for s in splits), "==", 0)
    m.progress(f"{n - len(splits)}/{n} tokens as exact, {len(splits)} split(s) "
               f"({sum(not s.allowed for s in splits)} not at a near-tie); HF eager agrees with exact {sum(hf_agrees)}/{n}")

"""generate: the decoder people use (fleet_decode.Decoder, built once) decodes `generate_tokens` new
tokens after HF prefill of the fixed prompt, in as many chained launches as that takes, the tokens
handed to the host as they are made. Judged as M4 is: against exact arithmetic fed the decoder's own
tokens, a split allowed only where the exact top-2 margin is below the logit dtype's spacing. Beside
it, on a GPU: the per-token P50 over the whole generation against one launch of `decode_tokens` at the
prompt's context (the bench's statistics, both on the decoder's own megakernel and graph: the weights
are uploaded once), and the delay from each token's step end on the device to the host having it.
On every backend: bad requests are refused in one line and the same decoder then decodes the same
tokens again; seeded sampling repeats per seed.

  PYTHONPATH=src python3 remote/generate.py --host cpu --params '{"backend": "sim", "model": "tiny", "prompt_tokens": 64, "decode_tokens": 4, "generate_tokens": 8, "gates": {}}' --out /tmp/generate.json
"""
import statistics
import time
from dataclasses import asdict

from fleet_decode.pipeline import backends
from fleet_decode.pipeline.evidence import Milestone, milestone_args, require
from fleet_decode.pipeline.milestones import envelope

SAMPLED = dict(temperature=0.8, top_p=0.95)  # a typical sampling request
REPEAT_TOKENS = 16  # tokens decoded again after the refused requests, and per sampled request
P50_RATIO_MAX = 1.05  # the generation's P50 against one launch at the prompt's context


def latency(step_seconds) -> dict:
    """The bench's statistics (fleet_decode.bench.timing: P50/P95 over the steady steps) of step times."""
    from fleet_decode.bench.timing import latency_summary

    return latency_summary([[s * 1e3 for s in step_seconds]])


def refused_requests(decoder, prompt, vocab, context):
    """Every bad request raises InvalidInput before anything runs: {request: its one-line message}."""
    from fleet_decode.sampling import InvalidInput

    bad = {
        "token id = vocab": dict(prompt=[vocab], max_new_tokens=4),
        "empty prompt": dict(prompt=[], max_new_tokens=4),
        "prompt + new tokens beyond the context": dict(prompt=prompt, max_new_tokens=context),
        "temperature < 0": dict(prompt=prompt, max_new_tokens=4, temperature=-1.0),
        "top-p = 0": dict(prompt=prompt, max_new_tokens=4, temperature=1.0, top_p=0.0),
        "top-p > 1": dict(prompt=prompt, max_new_tokens=4, temperature=1.0, top_p=1.5),
        "top-k = 0": dict(prompt=prompt, max_new_tokens=4, temperature=1.0, top_k=0),
    }
    out = {}
    for name, request in bad.items():
        try:
            decoder.generate(**request)
            out[name] = None  # accepted: the gate below fails
        except InvalidInput as error:
            out[name] = str(error)
    return out


def print_delays_ms(megakernel, prompt, first_token, n_steps):
    """One launch through the decoder's megakernel with a host callback per token: per token, the
    host's time of the callback after the launch call minus the device's time of the token's step
    end after the launch start (an upper bound: the launch call's own latency is included)."""
    megakernel.prefill(prompt)
    seen = []
    started = time.perf_counter()
    megakernel.generate(len(prompt), n_steps, start_token=first_token,
                        on_token=lambda step, token: seen.append(time.perf_counter() - started))
    ticks = megakernel.step_ticks[: n_steps + 1].tolist()
    rate = megakernel.lib.fd_megakernel_ticks_per_second()
    return [(host - (tick - ticks[0]) / rate) * 1e3 for host, tick in zip(seen, ticks[1:])]


args = milestone_args(__doc__).parse_args()
with Milestone(*envelope("generate"), args) as m:
    decoder_api = require("fleet_decode.decoder", "generate")
    compare = require("fleet_decode.model.compare", "generate")
    backend = backends.get(m.params)
    model = m.load_model()
    prompt = m.prompt(model)
    n_new = m.params.get("generate_tokens", 100)
    on_gpu = backend.name == "gpu"
    decoder = decoder_api.Decoder.load(model, device=m.device(), max_context=len(prompt) + n_new)
    m.progress(f"generating {n_new} tokens after {len(prompt)} prompt tokens through {backend.name}")
    streamed = []
    gen = decoder.generate(prompt, n_new, stop=(), on_token=lambda i, t: streamed.append(t))
    decoded = gen.tokens[1:]  # tokens[0] is the prefill's
    m.progress(f"{len(gen.tokens)} tokens in {gen.launches} launches; exact arithmetic fed the same tokens")
    exact = compare.exact_decode(model, prompt, len(decoded), fed=decoded)
    splits = compare.token_splits(decoded, exact, model.dtype)
    m.metrics.update(
        backend=backend.name, tokens_generated=len(gen.tokens), launches=gen.launches, tokens=gen.tokens,
        streamed_as_made=streamed == gen.tokens, tokens_checked=len(decoded),
        tokens_as_exact=len(decoded) - len(splits), splits=[asdict(s) for s in splits],
        logit_dtype=str(model.dtype).removeprefix("torch."), timed=on_gpu)
    del exact

    m.progress("bad requests, then the same decoder again")
    vocab = model.config.vocab_size
    refused = refused_requests(decoder, prompt, vocab, decoder.context_limit)
    repeat = min(REPEAT_TOKENS, n_new)
    again = decoder.generate(prompt, repeat, stop=())
    m.metrics.update(refused=refused, same_tokens_after_refusals=again.tokens == gen.tokens[:repeat])

    m.progress(f"sampling {SAMPLED}: seeds 1, 1 and 2")
    draws = [decoder.generate(prompt, repeat, stop=(), seed=seed, **SAMPLED).tokens for seed in (1, 1, 2)]
    m.metrics.update(sampled=SAMPLED, sampled_tokens=draws, sampled_same_seed_identical=draws[0] == draws[1],
                     sampled_seeds_differ=draws[0] != draws[2])

    if on_gpu:
        m.progress(f"one launch of {m.params['decode_tokens']} tokens at the prompt's context, and print delays")
        one = decoder.engine.decode(prompt, m.params["decode_tokens"])  # the weights the decoder uploaded
        generation, one_launch = latency(gen.decode_seconds), latency(one.step_seconds)
        p50, one_p50 = generation["p50_ms"], one_launch["p50_ms"]
        delays = print_delays_ms(decoder.engine, prompt, gen.tokens[0], m.params["decode_tokens"])
        m.metrics.update(p50_ms=p50, p95_ms=generation["p95_ms"],
                         one_launch_p50_ms=one_p50, p50_vs_one_launch=p50 / one_p50,
                         print_delay_ms_median=statistics.median(delays), print_delay_ms_max=max(delays),
                         summary=gen.summary())
        m.gate("p50_vs_one_launch", p50 / one_p50, "<=", P50_RATIO_MAX)

    m.gate("tokens_generated", len(gen.tokens), "==", n_new)
    m.gate("splits_from_exact_beyond_near_ties", sum(not s.allowed for s in splits), "==", 0)
    m.gate("bad_requests_refused", sum(v is not None for v in refused.values()), "==", len(refused))
    m.gate("same_tokens_after_refusals", m.metrics["same_tokens_after_refusals"], "==", True)
    m.gate("sampled_same_seed_identical", draws[0] == draws[1], "==", True)
    m.progress(f"{len(decoded) - len(splits)}/{len(decoded)} tokens as exact, {len(splits)} split(s) "
               f"({sum(not s.allowed for s in splits)} not at a near-tie)")

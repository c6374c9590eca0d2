"""Greedy decode through the CPU simulator of the megakernel runtime.

    python -m fleet_decode.sim --model tiny --tokens 8 --workers 8 --schedule random --seed 1
    python -m fleet_decode.sim --model tiny --tokens 8 --workers 3 --check --json sim.json

The prompt is the first --prompt-len ids of the committed prompt (folded into the model's vocab);
HF runs the prefill, the simulator the --tokens decode steps. --check also runs the reference decode
and reports whether the tokens agree and the largest logit difference.
"""

import argparse
import json
import sys
from pathlib import Path

import torch

from fleet_decode.cli import OneLineParser, positive_int, quiet_broken_pipe
from fleet_decode.model import Reference, load_model, prompt_ids
from fleet_decode.model.sources import ModelSourceError
from fleet_decode.sim.decode import simulate
from fleet_decode.sim.runtime import SCHEDULES


@torch.no_grad()
def reference_decode(model, ids, n_tokens):
    """The reference's greedy tokens and logits for the same steps the simulator runs."""
    ref = Reference(model, max_positions=len(ids) + n_tokens)
    token = int(ref.prefill(ids).argmax())
    tokens, logits = [], []
    for _ in range(n_tokens):
        logits.append(ref.step(token))
        token = int(logits[-1].argmax())
        tokens.append(token)
    return tokens, logits


@quiet_broken_pipe
def main(argv=None):
    ap = OneLineParser(prog="python -m fleet_decode.sim", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="tiny | random:<name-or-config.json>[@seed] | hf:<dir>")
    ap.add_argument("--tokens", type=positive_int, default=8)
    ap.add_argument("--workers", type=positive_int, default=8)
    ap.add_argument("--schedule", choices=SCHEDULES, default="round-robin")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt-len", type=positive_int, default=32)
    ap.add_argument("--check", action="store_true", help="compare with the reference decode")
    ap.add_argument("--json", type=Path, help="write tokens, counts and timings here")
    args = ap.parse_args(argv)
    try:
        model = load_model(args.model)
    except ModelSourceError as error:
        ap.error(f"--model {error}")
    ids = prompt_ids(args.prompt_len, vocab_size=model.config.vocab_size)
    result = simulate(model, ids, args.tokens, workers=args.workers, schedule=args.schedule, seed=args.seed)
    print(f"tokens: {result.tokens}")
    print(f"{result.counts['tasks_run']} tasks run ({result.counts['tasks_per_step']} per step) on {args.workers} "
          f"workers, schedule {args.schedule}, seed {args.seed}: {result.seconds:.2f} s")
    report = {"model": args.model, "prompt_len": args.prompt_len, "workers": args.workers, "tokens": result.tokens,
              "seconds": result.seconds, "counts": result.counts}
    status = 0
    if args.check:
        ref_tokens, ref_logits = reference_decode(model, ids, args.tokens)
        diff = max(float((a - b).abs().max()) for a, b in zip(result.logits, ref_logits))
        same = ref_tokens == result.tokens
        print(f"reference tokens {'agree' if same else 'DIFFER: ' + str(ref_tokens)}; max |logit diff| {diff:.3g}")
        report["check"] = {"reference_tokens": ref_tokens, "tokens_equal": same, "max_abs_logit_diff": diff}
        status = 0 if same else 1
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())

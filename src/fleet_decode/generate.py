"""Generate text with the megakernel (on a GPU) or its simulator (on the CPU), streamed as it is produced.

    fleet-decode generate --model hf:/data/DeepSeek-Coder-V2-Lite-Base --prompt "def quicksort(" --max-new-tokens 200
    fleet-decode generate --model tiny --device cpu --prompt-ids 1,2,3 --max-new-tokens 32 --temperature 0.8 --seed 7
    fleet-decode generate --model random:deepseek-coder-v2-lite --prompt-ids 5,6,7 --max-new-tokens 1000 --top-k 40

Text (or, without a tokenizer, token ids) goes to stdout as each token is produced; then, on stderr,
ms/token, tokens/s, GB/s and the share of the bandwidth floor (bytes per token from the task graph
over --bandwidth-tbs, by default the H200's measured 4.18 TB/s). A bad request (ids outside the
vocab, an empty prompt, a prompt + new tokens beyond the context, temperature < 0, top-p outside
(0, 1], top-k < 1, no GPU for --device cuda) is one line on stderr and exit code 2.
"""

import argparse
import json
import sys

import torch
import transformers

from fleet_decode.decoder import DEFAULT_BANDWIDTH_TBS, Decoder, TextStream, check_request
from fleet_decode.model import ModelSourceError, get_config
from fleet_decode.sampling import InvalidInput, Sampling


class _OneLineParser(argparse.ArgumentParser):
    """Usage mistakes as one line and exit code 2, like every other bad request."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


def _ids(text: str) -> list[int]:
    try:
        return [int(i) for i in text.split(",") if i.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of token ids: {text!r}") from None


def source_config(source: str):
    """The config of a model source, without its weights."""
    if source.startswith("hf:"):
        return get_config(source[len("hf:"):])
    if source.startswith("random:"):
        return get_config(source[len("random:"):].partition("@")[0])
    return get_config(source)


def parser() -> argparse.ArgumentParser:
    ap = _OneLineParser(prog="fleet-decode generate", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="hf:<dir> | random:<config>[@seed] | tiny")
    prompt = ap.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text (needs a tokenizer: an hf: checkpoint's, or --tokenizer)")
    prompt.add_argument("--prompt-ids", type=_ids, help="prompt token ids, comma-separated")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy")
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--top-p", type=float)
    ap.add_argument("--seed", type=int, default=0, help="the sampling seed: same seed, same tokens")
    ap.add_argument("--stop", type=_ids, help="token ids that end the generation (default: the model's EOS)")
    ap.add_argument("--max-context", type=int,
                    help="cache positions to allocate (default: prompt + new tokens, rounded up to 64)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tokenizer", help="a directory with a tokenizer (default: the hf: checkpoint's own)")
    ap.add_argument("--max-steps", type=int, help="decode steps per launch (default: the plan's)")
    ap.add_argument("--bandwidth-tbs", type=float, default=DEFAULT_BANDWIDTH_TBS,
                    help=f"memory bandwidth for the floor, TB/s (default {DEFAULT_BANDWIDTH_TBS}: the H200's measured copy)")
    ap.add_argument("--json", help="also write the tokens, text and per-token seconds here")
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    transformers.utils.logging.disable_progress_bar()  # stderr is for the summary and errors
    try:
        # what can be refused from the config alone is refused before any model is loaded
        Sampling(args.temperature, args.top_k, args.top_p, args.seed)
        if args.prompt_ids is not None:
            config = source_config(args.model)
            check_request(config, args.max_context or config.max_position_embeddings, args.prompt_ids,
                          args.max_new_tokens, args.stop or ())
        decoder = Decoder.load(args.model, device=args.device, max_context=args.max_context, tokenizer=args.tokenizer,
                               max_steps=args.max_steps)
        stream = TextStream(decoder.tokenizer) if decoder.tokenizer is not None else None

        def show(index, token):
            piece = stream.push(token) if stream else f"{' ' if index else ''}{token}"
            print(piece, end="", flush=True)

        result = decoder.generate(args.prompt if args.prompt is not None else args.prompt_ids, args.max_new_tokens,
                                  temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                                  stop=args.stop, on_token=show)
    except (InvalidInput, ModelSourceError) as error:
        print(f"fleet-decode generate: {error}", file=sys.stderr)
        return 2
    print(stream.flush() if stream else "", flush=True)
    print(("stopped at a stop id; " if result.stopped else "") + result.summary(args.bandwidth_tbs), file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "device": args.device, "prompt_ids": result.prompt_ids,
                       "tokens": result.tokens, "text": result.text, "token_seconds": result.token_seconds,
                       "published_seconds": result.published_seconds, "stopped": result.stopped, "launches": result.launches,
                       "bytes_per_token": result.bytes_per_token}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

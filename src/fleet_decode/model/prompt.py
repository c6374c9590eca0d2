"""The fixed decode prompt: 1,024 committed token ids, the same on every host and every run.

    from fleet_decode.model import prompt_ids
    ids = prompt_ids(1024)                    # the full prompt (real vocab)
    ids = prompt_ids(64, vocab_size=1024)     # a CPU-sized prefix for a small-vocab model
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

PROMPT_LENGTH = 1024


@cache
def _committed_ids() -> tuple[int, ...]:
    text = (resources.files("fleet_decode.model") / "data" / "prompt_1024.json").read_text()
    return tuple(json.loads(text)["ids"])


def prompt_ids(n: int = PROMPT_LENGTH, vocab_size: int | None = None) -> list[int]:
    """The first n ids of the committed prompt, folded into [0, vocab_size) for a smaller vocab.

    Past 1,024 the prompt repeats (for the context-scaling runs at 4,096 positions)."""
    if n < 1:
        raise ValueError(f"prompt length must be at least 1, got {n}")
    ids = _committed_ids()
    prefix = [ids[i % len(ids)] for i in range(n)]
    return [i % vocab_size for i in prefix] if vocab_size else prefix

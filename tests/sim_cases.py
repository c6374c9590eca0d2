"""Models and reference decodes shared by the simulator tests (kept small: a few tokens, short prompts)."""

import json
from functools import cache
from importlib import resources

import pytest
import torch

from fleet_decode.model import Reference, load_model, prompt_ids

PROMPT = 12
TOKENS = 4


def second_config(directory):
    """A config unlike tiny: 4 layers, 16 experts top-4, one shared expert, plain RoPE (no YaRN)."""
    raw = json.loads((resources.files("fleet_decode.model") / "configs" / "tiny.json").read_text())
    raw.update(num_hidden_layers=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1, hidden_size=96,
               num_attention_heads=3, num_key_value_heads=3, kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=4,
               v_head_dim=12, intermediate_size=160, moe_intermediate_size=40, vocab_size=700, rope_scaling=None)
    path = directory / "config.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def one_thread():
    """The simulator runs hundreds of tile-sized ops; on a shared 2-core machine torch's intra-op
    threads only contend (10x slower), so these tests run them on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@cache
def case(source):
    """(model, prompt ids, reference tokens, logits and per-layer hidden states for TOKENS steps)."""
    model = load_model(source)
    ids = prompt_ids(PROMPT, vocab_size=model.config.vocab_size)
    ref = Reference(model, max_positions=PROMPT + TOKENS)
    with torch.no_grad():
        token = int(ref.prefill(ids).argmax())
        tokens, logits, hidden = [], [], []
        for _ in range(TOKENS):
            logits.append(ref.step(token))
            hidden.append([h.clone() for h in ref.hidden_states])
            token = int(logits[-1].argmax())
            tokens.append(token)
    return model, ids, tokens, logits, hidden

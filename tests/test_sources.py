"""Model sources: named configs, the hf: checkpoint loader and its errors."""

import json

import pytest
import torch

from fleet_decode.model import ModelSourceError, config_sha256, get_config, load_model, prompt_ids


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ckpt")
    model = load_model("tiny")
    model.save_pretrained(directory)
    return model, directory


def _logits(model):
    ids = torch.tensor([prompt_ids(16, vocab_size=model.config.vocab_size)])
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_hf_round_trip_is_bit_identical(tiny_checkpoint):
    model, directory = tiny_checkpoint
    loaded = load_model(f"hf:{directory}")
    assert torch.equal(_logits(model), _logits(loaded))


def test_hf_missing_directory(tmp_path):
    with pytest.raises(ModelSourceError, match=r"no-such-dir: no such checkpoint directory"):
        load_model(f"hf:{tmp_path / 'no-such-dir'}")


def test_hf_other_architecture(tiny_checkpoint, tmp_path):
    _, directory = tiny_checkpoint
    config = json.loads((directory / "config.json").read_text())
    config["model_type"] = "llama"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelSourceError, match=r"config\.json: model_type is 'llama'"):
        load_model(f"hf:{tmp_path}")


def test_hf_truncated_safetensors(tiny_checkpoint, tmp_path):
    _, directory = tiny_checkpoint
    for item in directory.iterdir():
        data = item.read_bytes()
        if item.suffix == ".safetensors":
            data = data[: len(data) - 1000]
        (tmp_path / item.name).write_bytes(data)
    with pytest.raises(ModelSourceError, match=r"model\.safetensors: truncated safetensors file \(expected \d+ bytes, found \d+\)"):
        load_model(f"hf:{tmp_path}")


def test_errors_are_one_line(tmp_path):
    for source in (f"hf:{tmp_path}/x", "random:", "random:tiny@x", "random:nope", "bogus"):
        with pytest.raises(ModelSourceError) as info:
            load_model(source)
        assert "\n" not in str(info.value)


def test_named_configs():
    real = get_config("deepseek-coder-v2-lite")
    assert (real.hidden_size, real.num_hidden_layers, real.n_routed_experts, real.num_experts_per_tok) == (2048, 27, 64, 6)
    assert (real.kv_lora_rank, real.qk_nope_head_dim, real.qk_rope_head_dim, real.v_head_dim) == (512, 128, 64, 128)
    assert real.rope_parameters["factor"] == 40 and real.rope_parameters["rope_type"] == "yarn"
    tiny = get_config("tiny")
    assert tiny.num_hidden_layers >= 3 and tiny.first_k_dense_replace == 1
    assert tiny.n_routed_experts >= 8 and tiny.num_experts_per_tok < tiny.n_routed_experts
    assert tiny.n_shared_experts == 2 and tiny.q_lora_rank is None
    assert config_sha256(real) != config_sha256(tiny)
    assert config_sha256(real) == config_sha256(get_config("deepseek-coder-v2-lite"))

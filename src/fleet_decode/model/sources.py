"""Model sources: where a DeepseekV2 model's config and weights come from.

    from fleet_decode.model import load_model
    model = load_model("tiny")                                        # small CPU model
    model = load_model("random:deepseek-coder-v2-lite@0", dtype=torch.bfloat16, device="cuda")
    model = load_model("hf:/data/DeepSeek-Coder-V2-Lite-Base")        # a local checkpoint

`tiny` and `random:` draw their weights from a fixed seed on the target device, so every host
builds bit-identical models without downloading anything; `hf:` reads a safetensors checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import struct
from importlib import resources
from pathlib import Path

import torch
from transformers import AutoConfig, DeepseekV2Config, DeepseekV2ForCausalLM

NAMED_CONFIGS = ("deepseek-coder-v2-lite", "tiny")
DEFAULT_SEED = 0


class ModelSourceError(ValueError):
    """A model source that cannot be loaded; the message is one line naming the culprit."""


def _named_config_path(name: str) -> Path:
    return Path(str(resources.files("fleet_decode.model") / "configs" / f"{name}.json"))


def get_config(name_or_path: str) -> DeepseekV2Config:
    """A named config (`deepseek-coder-v2-lite`, `tiny`) or a path to a config.json."""
    path = _named_config_path(name_or_path) if name_or_path in NAMED_CONFIGS else Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ModelSourceError(
            f"{name_or_path}: no such config (named configs: {', '.join(NAMED_CONFIGS)}, or a path to config.json)"
        )
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ModelSourceError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(raw, dict):
        raise ModelSourceError(f"{path}: not a config (a JSON object)")
    _check_architecture(raw, path)
    try:
        config = AutoConfig.from_pretrained(str(path))
    except Exception as err:  # transformers and huggingface_hub raise many kinds for a bad field
        reason = " ".join(str(err).split())
        raise ModelSourceError(f"{path}: transformers refuses this config ({reason})") from None
    try:
        _check_supported(config, path)
    except TypeError as err:  # a field of the wrong type that transformers let through
        raise ModelSourceError(f"{path}: unsupported config ({err})") from None
    return config


def _check_architecture(raw: dict, path: Path) -> None:
    if raw.get("model_type") != "deepseek_v2":
        raise ModelSourceError(
            f"{path}: model_type is {raw.get('model_type')!r}, fleet-decode decodes only 'deepseek_v2' models"
        )


def _check_supported(config: DeepseekV2Config, path) -> None:
    # The reference and the kernels implement exactly what DeepSeek-Coder-V2-Lite uses; anything
    # else is refused here rather than decoded wrongly later.
    problems = []
    if config.q_lora_rank is not None:
        problems.append("q_lora_rank must be null (full q_proj)")
    if config.topk_method != "greedy":
        problems.append(f"topk_method {config.topk_method!r} (only 'greedy')")
    if config.n_routed_experts and config.num_experts_per_tok >= config.n_routed_experts:
        problems.append("num_experts_per_tok must be below n_routed_experts")
    if config.first_k_dense_replace < 1 or config.first_k_dense_replace >= config.num_hidden_layers:
        problems.append("first_k_dense_replace must leave at least one dense and one MoE layer")
    if getattr(config, "moe_layer_freq", 1) != 1:
        problems.append("moe_layer_freq must be 1")
    if problems:
        raise ModelSourceError(f"{path}: unsupported config: {'; '.join(problems)}")


def config_sha256(config: DeepseekV2Config) -> str:
    """A hash of the config's content, independent of key order and of the file it came from."""
    payload = json.dumps(config.to_diff_dict(), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def load_model(source: str, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> DeepseekV2ForCausalLM:
    """A DeepseekV2ForCausalLM in eval mode from `tiny`, `random:<config>[@seed]` or `hf:<dir>`."""
    if source == "tiny":
        return _random_model(get_config("tiny"), DEFAULT_SEED, dtype, device)
    if source.startswith("random:"):
        spec = source[len("random:"):]
        name, _, seed = spec.partition("@")
        if not name:
            raise ModelSourceError(f"{source}: random: needs a config name or path, e.g. random:deepseek-coder-v2-lite@0")
        try:
            seed_value = int(seed) if seed else DEFAULT_SEED
        except ValueError:
            raise ModelSourceError(f"{source}: seed {seed!r} is not an integer") from None
        return _random_model(get_config(name), seed_value, dtype, device)
    if source.startswith("hf:"):
        return _hf_model(Path(source[len("hf:"):]), dtype, device)
    raise ModelSourceError(f"{source}: unknown model source (use tiny, random:<config>[@seed] or hf:<dir>)")


def _random_model(config: DeepseekV2Config, seed: int, dtype, device) -> DeepseekV2ForCausalLM:
    with torch.device(device):
        model = DeepseekV2ForCausalLM._from_config(config, dtype=dtype)
    fill_random_weights_(model, seed)
    return model.eval()


@torch.no_grad()
def fill_random_weights_(model: DeepseekV2ForCausalLM, seed: int) -> None:
    """Seeded weights drawn on the model's device: N(0, initializer_range) for every matrix, ones
    for every norm. The draw order is the parameters' names in sorted order, so the result depends
    only on (config, seed, device kind), never on how HF happened to initialise the module."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    std = model.config.initializer_range
    for name, param in sorted(model.named_parameters()):
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        else:
            param.normal_(0.0, std, generator=generator)
        # transformers >= 5.24 keeps the router in fp32 whatever the model's dtype: its values must
        # still be the model dtype's, as a real checkpoint's are, so that HF, the reference and the
        # megakernel (which stores bf16) all decode the same weights
        if param.dtype != model.dtype:
            param.copy_(param.to(model.dtype))


def _hf_model(directory: Path, dtype, device) -> DeepseekV2ForCausalLM:
    if not directory.is_dir():
        raise ModelSourceError(f"hf:{directory}: no such checkpoint directory")
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise ModelSourceError(f"{config_file}: missing (an hf: checkpoint needs config.json)")
    get_config(str(config_file))
    shards = sorted(directory.glob("*.safetensors"))
    if not shards:
        raise ModelSourceError(f"hf:{directory}: no *.safetensors weights in the checkpoint")
    for shard in shards:
        check_safetensors_complete(shard)
    # loaded on the CPU, then moved: device_map would need accelerate, which the GPU host lacks
    model = DeepseekV2ForCausalLM.from_pretrained(str(directory), dtype=dtype)
    return model.to(device).eval()


def check_safetensors_complete(path: Path) -> None:
    """Refuse a truncated or corrupt safetensors file before torch touches it.

    The format is an 8-byte little-endian header length, a JSON header whose data_offsets say
    where each tensor ends, then the data: the file must be at least as long as the last offset."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ModelSourceError(f"{path}: truncated safetensors file ({size} bytes, no header)")
        (header_len,) = struct.unpack("<Q", head)
        if 8 + header_len > size:
            raise ModelSourceError(f"{path}: truncated safetensors file (header says {header_len} bytes, file has {size})")
        try:
            header = json.loads(handle.read(header_len))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ModelSourceError(f"{path}: corrupt safetensors header") from None
    data_end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    expected = 8 + header_len + data_end
    if size < expected:
        raise ModelSourceError(f"{path}: truncated safetensors file (expected {expected} bytes, found {size})")

"""Model sources, the fixed prompt, and the pure-torch reference decode step."""

from .prompt import PROMPT_LENGTH, prompt_ids
from .reference import ModelWeights, Reference, Route, hf_decode, model_weights, softmax_scale
from .sources import NAMED_CONFIGS, ModelSourceError, config_sha256, get_config, load_model

__all__ = [
    "NAMED_CONFIGS", "PROMPT_LENGTH", "ModelSourceError", "ModelWeights", "Reference", "Route", "config_sha256",
    "get_config", "hf_decode", "load_model", "model_weights", "prompt_ids", "softmax_scale",
]

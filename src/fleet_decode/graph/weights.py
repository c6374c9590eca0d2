"""The tensors behind a graph's weight slots, for the simulator and the megakernel alike."""

import torch

from fleet_decode.graph.derived import derived
from fleet_decode.model.reference import rope_table


def weight_table(model, graph) -> list[torch.Tensor]:
    """The tensors of the graph's weight slots: HF parameters by name, the host-computed rope tables and
    the weights the graph keeps in a layout of its own (fleet_decode.graph.derived)."""
    params = dict(model.named_parameters())
    rotary = model.model.rotary_emb
    cos, sin = rope_table(rotary.inv_freq, float(rotary.attention_scaling), torch.arange(graph.constants.max_positions, device=rotary.inv_freq.device))
    host = {"rope.cos": cos, "rope.sin": sin}
    for w in graph.weights:
        tensor = derived(w.name, w.shape, params, model.config)
        if tensor is not None:
            host[w.name] = tensor
    missing = [w.name for w in graph.weights if w.name not in params and w.name not in host]
    if missing:
        raise KeyError(f"the model has no parameter(s) {missing[:3]} that the graph reads")
    return [host[w.name] if w.name in host else params[w.name].detach() for w in graph.weights]

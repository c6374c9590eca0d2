"""The reference decode step: DeepSeek-V2 batch-1 decode in plain torch, the math the kernels do.

    from fleet_decode.model import load_model, prompt_ids, Reference
    model = load_model("tiny")
    ref = Reference(model)
    logits = ref.prefill(prompt_ids(64, vocab_size=model.config.vocab_size))
    for _ in range(8):
        logits = ref.step(int(logits.argmax()))

It reads the HF model's weights (no copies) and keeps its own compressed MLA cache: per layer and
position only c_kv (the normalised kv latent, kv_lora_rank wide) and k_pe (the roped shared key,
qk_rope_head_dim wide). Attention is absorbed (q_lat = W_UK·q_nope, out = W_UV·Σ p·c_kv), so keys
and values are never expanded. Every product accumulates in fp32; results are rounded to the
model's dtype at the points where HF's DeepseekV2 rounds them (outputs of linears and norms, the
residual stream), so a bf16 reference tracks HF eager and an fp32 one matches it to rounding.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DeepseekV2Config, DeepseekV2ForCausalLM
from transformers.models.deepseek_v2.modeling_deepseek_v2 import yarn_apply_mscale


# ----------------------------------------------------------------------------- pure functions

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF's order: normalise in fp32, round to x's dtype, then scale (rounding again)."""
    normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x·Wᵀ accumulated in fp32, returned in fp32 (callers round where HF does)."""
    return x.float() @ weight.float().T


def softmax_scale(config: DeepseekV2Config) -> float:
    """192^-0.5 · mscale² for YaRN configs (DeepSeek-V2's attention temperature correction), by
    transformers' own formula, which the task graph's constant also comes from."""
    return yarn_apply_mscale(config.rope_parameters or {}, (config.qk_nope_head_dim + config.qk_rope_head_dim) ** -0.5)


def rope_table(inv_freq: torch.Tensor, attention_scaling: float, positions: torch.Tensor):
    """(cos, sin) [len(positions), rope_dim/2] with YaRN's attention scaling folded in, as HF does."""
    freqs = positions.float()[:, None] * inv_freq.float()[None, :]
    return torch.cos(freqs) * attention_scaling, torch.sin(freqs) * attention_scaling


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs (x[2i], x[2i+1]) — HF's DeepseekV2 treats them as complex numbers."""
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def mla_attention(q_lat, q_pe, ckv, kpe, scale: float) -> torch.Tensor:
    """Absorbed MLA for one query: q_lat [H, kv_lora], q_pe [H, rope], ckv [T, kv_lora],
    kpe [T, rope] → out_lat [H, kv_lora] = Σ_t softmax_t(scale·(q_lat·c_t + q_pe·k_t)) · c_t."""
    scores = scale * (q_lat.float() @ ckv.float().T + q_pe.float() @ kpe.float().T)
    return torch.softmax(scores, dim=-1) @ ckv.float()


def route(logits: torch.Tensor, top_k: int, scaling: float = 1.0):
    """Greedy softmax routing from the router's fp32 logits (linear(x, router)): (weights [top_k] fp32,
    expert indices [top_k] ascending, all scores), no renormalisation."""
    scores = torch.softmax(logits, dim=-1)
    indices = torch.topk(scores, top_k).indices.sort().values
    return scores[indices] * scaling, indices, scores


def mlp(x: torch.Tensor, w_gate, w_up, w_down) -> torch.Tensor:
    """SwiGLU MLP; returns fp32. HF stores gate, up and SiLU(gate)·up in the model dtype, and those
    roundings are most of the bf16 difference between the two, so they are mirrored here."""
    dtype = x.dtype
    gate, up = linear(x, w_gate).to(dtype), linear(x, w_up).to(dtype)
    activated = (F.silu(gate.float()).to(dtype).float() * up.float()).to(dtype)
    return linear(activated, w_down)


# ----------------------------------------------------------------------------- weights

@dataclass
class LayerWeights:
    input_norm: torch.Tensor
    post_attention_norm: torch.Tensor
    q_proj: torch.Tensor          # [H·(nope+rope), hidden]
    kv_a_proj: torch.Tensor       # [kv_lora + rope, hidden]
    kv_a_norm: torch.Tensor       # [kv_lora]
    w_uk: torch.Tensor            # [H, nope, kv_lora] — a view of kv_b_proj
    w_uv: torch.Tensor            # [H, v, kv_lora]   — a view of kv_b_proj
    o_proj: torch.Tensor          # [hidden, H·v]
    dense: tuple | None           # (gate, up, down) on dense layers
    router: torch.Tensor | None   # [E, hidden]
    experts_gate_up: torch.Tensor | None  # [E, 2·I, hidden], gate rows first
    experts_down: torch.Tensor | None     # [E, hidden, I]
    shared: tuple | None          # (gate, up, down) of the shared experts


@dataclass
class Route:
    """One MoE layer's routing at one position: chosen experts (ascending) and all router scores."""
    experts: torch.Tensor
    scores: torch.Tensor

    def margin(self) -> float:
        """Score gap between the last chosen expert and the best unchosen one: a near-tie when small."""
        ordered = self.scores.sort(descending=True).values
        k = len(self.experts)
        return float(ordered[k - 1] - ordered[k])


@dataclass
class ModelWeights:
    embed: torch.Tensor
    layers: list[LayerWeights]
    final_norm: torch.Tensor
    lm_head: torch.Tensor


def model_weights(model: DeepseekV2ForCausalLM) -> ModelWeights:
    config = model.config
    heads, nope, v_dim = config.num_attention_heads, config.qk_nope_head_dim, config.v_head_dim
    layers = []
    for layer in model.model.layers:
        attn, ff = layer.self_attn, layer.mlp
        kv_b = attn.kv_b_proj.weight.view(heads, nope + v_dim, config.kv_lora_rank)
        moe = hasattr(ff, "experts")
        layers.append(LayerWeights(
            input_norm=layer.input_layernorm.weight,
            post_attention_norm=layer.post_attention_layernorm.weight,
            q_proj=attn.q_proj.weight,
            kv_a_proj=attn.kv_a_proj_with_mqa.weight,
            kv_a_norm=attn.kv_a_layernorm.weight,
            w_uk=kv_b[:, :nope],
            w_uv=kv_b[:, nope:],
            o_proj=attn.o_proj.weight,
            dense=None if moe else (ff.gate_proj.weight, ff.up_proj.weight, ff.down_proj.weight),
            router=ff.gate.weight if moe else None,
            experts_gate_up=ff.experts.gate_up_proj if moe else None,
            experts_down=ff.experts.down_proj if moe else None,
            shared=(ff.shared_experts.gate_proj.weight, ff.shared_experts.up_proj.weight,
                    ff.shared_experts.down_proj.weight) if moe else None,
        ))
    return ModelWeights(model.model.embed_tokens.weight, layers, model.model.norm.weight, model.lm_head.weight)


# ----------------------------------------------------------------------------- HF plumbing

def _cache_kwarg(model) -> str:
    # transformers renamed past_key_values to cache in 5.2x; the GPU host runs 5.17.
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def hf_forward(model, ids: torch.Tensor, cache=None, **kwargs):
    """One HF forward with a DynamicCache; returns (output, cache)."""
    from transformers import DynamicCache

    if cache is None:
        cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, use_cache=True, **{_cache_kwarg(model): cache}, **kwargs)
    return out, cache


def _cache_layer(cache, layer: int):
    """(c_kv [T, kv_lora], k_pe [T, rope]) of one layer of HF's DynamicCache."""
    entry = cache.layers[layer]
    return entry.keys[0, 0], entry.values[0, 0]


class LayerOutputs:
    """Captures, at the last position of an HF forward, each decoder layer's output and each MoE
    layer's routing (router scores and chosen experts).

    HF's output_hidden_states replaces the last layer's output by its final-normed version, so
    hooks are the one way to see every layer the way the reference does."""

    def __init__(self, model):
        self.outputs: list[torch.Tensor] = []
        self.routes: dict[int, Route] = {}
        self._handles = [layer.register_forward_hook(self._record) for layer in model.model.layers]
        for index, layer in enumerate(model.model.layers):
            if hasattr(layer.mlp, "gate"):
                hook = lambda module, args, output, index=index: self._record_route(index, output)
                self._handles.append(layer.mlp.gate.register_forward_hook(hook))

    def _record(self, module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        self.outputs.append(hidden[0, -1].float())

    def _record_route(self, layer: int, output):
        router_logits, _, indices = output
        self.routes[layer] = Route(indices[-1].sort().values, torch.softmax(router_logits[-1].float(), -1))

    def take(self):
        taken = self.outputs, self.routes
        self.outputs, self.routes = [], {}
        return taken

    def close(self):
        for handle in self._handles:
            handle.remove()


@torch.no_grad()
def hf_decode(model, ids, n_tokens: int, forced_tokens: list[int] | None = None):
    """HF eager greedy decode with HF's own cache — the ground truth everything is compared with.

    Returns (tokens, logits, hidden, routes): tokens[i] = argmax(logits[i]); logits[0] comes from
    the prefill and logits[i] from feeding tokens[i-1]; hidden[i] lists each decoder layer's
    output (fp32, [hidden]) for that same forward, at its last position, and routes[i] maps each
    MoE layer to HF's routing there. With forced_tokens, those are fed instead of the argmax
    (teacher forcing), and returned as the tokens."""
    device = model.device
    inputs = torch.as_tensor(ids, device=device).view(1, -1)
    tokens, logits, hidden, routes = [], [], [], []
    cache, layer_outputs = None, LayerOutputs(model)
    try:
        for _ in range(n_tokens):
            out, cache = hf_forward(model, inputs, cache)
            logits.append(out.logits[0, -1].float())
            step_hidden, step_routes = layer_outputs.take()
            hidden.append(step_hidden)
            routes.append(step_routes)
            tokens.append(int(logits[-1].argmax()) if forced_tokens is None else forced_tokens[len(tokens)])
            inputs = torch.tensor([[tokens[-1]]], device=device)
    finally:
        layer_outputs.close()
    return tokens, logits, hidden, routes


# ----------------------------------------------------------------------------- the reference

class Reference:
    """Batch-1 decode over HF's weights with a compressed MLA cache of its own."""

    def __init__(self, model: DeepseekV2ForCausalLM, max_positions: int | None = None,
                 cache_dtype: torch.dtype | None = None, dtype: torch.dtype | None = None):
        """cache_dtype: what the compressed cache stores (default the model's dtype, as HF's cache
        does); the rows this reference appends are rounded to it. dtype: what the residual stream and
        every rounded intermediate are held in (default the model's dtype). float32 on a bf16 model
        is exact arithmetic on its weights, with no fp32 copy of them: every product already
        upcasts its weight on the fly (`linear`), and the upcast of a bf16 number is exact."""
        self.model = model
        self.config = config = model.config
        self.weights = model_weights(model)
        self.scale = softmax_scale(config)
        self.eps = config.rms_norm_eps
        self.dtype = dtype or self.weights.embed.dtype
        self.device = self.weights.embed.device
        self.cache_dtype = cache_dtype or self.dtype
        rotary = model.model.rotary_emb
        self.inv_freq, self.attention_scaling = rotary.inv_freq, float(rotary.attention_scaling)
        self.max_positions = max_positions or 4096 + 64
        shape = (config.num_hidden_layers, self.max_positions)
        self.ckv = torch.zeros(*shape, config.kv_lora_rank, dtype=self.cache_dtype, device=self.device)
        self.kpe = torch.zeros(*shape, config.qk_rope_head_dim, dtype=self.cache_dtype, device=self.device)
        self.pos = 0
        self.hidden_states: list[torch.Tensor] = []
        self.routes: dict[int, Route] = {}

    @torch.no_grad()
    def prefill(self, ids) -> torch.Tensor:
        """HF's prefill over ids; copies its compressed cache in and returns the last logits (fp32)."""
        ids = torch.as_tensor(ids, device=self.device).view(1, -1)
        n = ids.shape[1]
        if n + 1 > self.max_positions:
            raise ValueError(f"prompt of {n} tokens does not fit a cache of {self.max_positions} positions")
        layer_outputs = LayerOutputs(self.model)
        try:
            out, cache = hf_forward(self.model, ids)
        finally:
            layer_outputs.close()
        for layer in range(self.config.num_hidden_layers):
            ckv, kpe = _cache_layer(cache, layer)
            self.ckv[layer, :n] = ckv
            self.kpe[layer, :n] = kpe
        self.pos = n
        self.hidden_states, self.routes = layer_outputs.take()
        return out.logits[0, -1].float()

    @torch.no_grad()
    def step(self, token: int, forced_routes: dict[int, Route] | None = None) -> torch.Tensor:
        """Decode one token at position self.pos; returns the next logits (fp32 [vocab]).

        forced_routes (layer → Route, e.g. HF's) replaces the reference's own choice of experts in
        those layers, so that a routing near-tie, where any two roundings may pick differently,
        can be told apart from an arithmetic error. self.routes keeps the reference's own choice."""
        if self.pos >= self.max_positions:
            raise ValueError(f"cache full ({self.max_positions} positions)")
        w, dtype = self.weights, self.dtype
        cos, sin = rope_table(self.inv_freq, self.attention_scaling, torch.tensor([self.pos], device=self.device))
        x = w.embed[token].to(dtype)
        self.hidden_states, self.routes = [], {}
        forced_routes = forced_routes or {}
        for index, layer in enumerate(w.layers):
            x = x + self._attention(index, layer, rms_norm(x, layer.input_norm, self.eps), cos[0], sin[0])
            h = rms_norm(x, layer.post_attention_norm, self.eps)
            x = x + self._feed_forward(index, layer, h, forced_routes.get(index))
            self.hidden_states.append(x.float())
        self.pos += 1
        # HF's lm_head stores logits in the model dtype, and greedy argmax breaks exact ties by the
        # lowest index: rounding the same way keeps the reference's greedy tokens comparable.
        return linear(rms_norm(x, w.final_norm, self.eps), w.lm_head).to(dtype).float()

    def _attention(self, index: int, layer: LayerWeights, h, cos, sin) -> torch.Tensor:
        config, dtype, pos = self.config, self.dtype, self.pos
        heads, nope, kv_rank = config.num_attention_heads, config.qk_nope_head_dim, config.kv_lora_rank
        q = linear(h, layer.q_proj).to(dtype).view(heads, -1)
        q_nope, q_pe = q[:, :nope], rope(q[:, nope:], cos, sin)
        kv = linear(h, layer.kv_a_proj).to(dtype)
        self.ckv[index, pos] = rms_norm(kv[:kv_rank], layer.kv_a_norm, self.eps).to(self.cache_dtype)
        self.kpe[index, pos] = rope(kv[kv_rank:], cos, sin).to(self.cache_dtype)
        q_lat = torch.einsum("hd,hdc->hc", q_nope.float(), layer.w_uk.float())
        out_lat = mla_attention(q_lat, q_pe, self.ckv[index, : pos + 1], self.kpe[index, : pos + 1], self.scale)
        per_head = torch.einsum("hc,hvc->hv", out_lat, layer.w_uv.float()).to(dtype)
        return linear(per_head.flatten(), layer.o_proj).to(dtype)

    def _feed_forward(self, index: int, layer: LayerWeights, h, forced: Route | None) -> torch.Tensor:
        if layer.dense is not None:
            return mlp(h, *layer.dense).to(self.dtype)
        config = self.config
        _, own, scores = route(linear(h, layer.router), config.num_experts_per_tok)
        self.routes[index] = Route(own, scores)
        experts = own if forced is None else forced.experts.to(own.device)
        weights = scores[experts] * config.routed_scaling_factor
        inter = config.moe_intermediate_size
        routed = torch.zeros(config.hidden_size, device=h.device)
        for weight, expert in zip(weights, experts.tolist()):
            gate_up = layer.experts_gate_up[expert]
            # HF rounds each expert's output, and its weighted copy, to the model dtype
            expert_out = mlp(h, gate_up[:inter], gate_up[inter:], layer.experts_down[expert]).to(self.dtype)
            routed += (weight * expert_out.float()).to(self.dtype).float()
        return routed.to(self.dtype) + mlp(h, *layer.shared).to(self.dtype)

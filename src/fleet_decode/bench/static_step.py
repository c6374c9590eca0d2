"""The reference decode step rewritten to be captured in ONE CUDA graph and replayed per token.

    from fleet_decode.bench.static_step import StaticStep
    step = StaticStep(model, max_positions=1024 + 33)   # captures its graph on a GPU
    step.prefill(prompt_ids(1024))                      # HF prefill, cache copied in
    for _ in range(32):
        step.replay()                                   # next token lands in step.token, on the device
    tokens = step.tokens()

What changes against fleet_decode.model.Reference.step, and why:
- State lives in device tensors (the token, the position, the MLA cache, a token history) and the
  step updates them in place, so a replay needs no host input and makes no host sync.
- Attention runs over the whole cache (max_positions rows) with the positions past the current
  one masked out: static shapes. It reads (max_positions - context) extra cache rows per step;
  `extra_bytes_per_token` counts them.
- Routed experts are chosen on the device. With torch's grouped GEMM (`grouped_mm`) the top-k
  experts' weights are read in place through per-expert row offsets: no extra bytes. Where
  grouped_mm is missing or refuses the dtype (it wants bf16 on CUDA), the chosen experts' weights
  are gathered into a buffer by index and multiplied there (`gather`): every routed byte is then
  read, written and read again, and `extra_bytes_per_token` says so.
- Products run in the model dtype through the BLAS (fp32 accumulation inside; outputs rounded to
  the dtype where HF rounds them), not on fp32 upcasts of the weights as Reference does for
  exactness: an upcast would triple the bytes this baseline moves.
On a CPU the same step runs eagerly (no graph), which is how the tests check it against Reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fleet_decode.model.reference import Reference, rms_norm, rope, rope_table

EXPERT_MODES = ("grouped_mm", "gather")


def _grouped_mm(x, weight_t, offsets):
    grouped = getattr(F, "grouped_mm", None) or torch._grouped_mm
    return grouped(x, weight_t, offs=offsets)


class StaticStep:
    """Batch-1 greedy decode whose step has static shapes and no host syncs (capturable)."""

    def __init__(self, model, max_positions: int, capture: bool | None = None, experts: str | None = None):
        self.reference = ref = Reference(model, max_positions=max_positions)
        self.config, self.weights, self.dtype, self.device = ref.config, ref.weights, ref.dtype, ref.device
        self.max_positions = max_positions
        positions = torch.arange(max_positions, device=self.device)
        self.cos, self.sin = rope_table(ref.inv_freq, ref.attention_scaling, positions)
        self.positions = positions
        self.token = torch.zeros(1, dtype=torch.long, device=self.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=self.device)
        self.history = torch.zeros(max_positions, dtype=torch.long, device=self.device)
        self.prompt_length = 0
        self.experts = experts or self._choose_expert_mode()
        self.graph = None
        self.capture_error = None
        if capture if capture is not None else self.device.type == "cuda":
            try:
                self._capture()
            except RuntimeError as err:
                if self.experts != "grouped_mm":
                    raise
                # grouped_mm ran eagerly but would not capture: fall back, and say so
                self.capture_error = f"grouped_mm: {str(err).splitlines()[0]}"
                self.experts = "gather"
                self._capture()

    # ------------------------------------------------------------------ running

    @torch.no_grad()
    def prefill(self, ids) -> None:
        """HF's prefill (through Reference, which copies HF's cache in); the first greedy token is
        left in self.token, at position len(ids)."""
        logits = self.reference.prefill(ids)
        self.prompt_length = len(ids)
        self.token.copy_(logits.argmax().view(1))
        self.pos.fill_(self.prompt_length)

    def replay(self) -> None:
        """One decode step: consumes self.token, leaves the next one there."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self.step()

    def tokens(self) -> list[int]:
        """The greedy tokens so far: the one from the prefill, then one per step."""
        end = int(self.pos)
        return self.history[self.prompt_length: end].tolist() + [int(self.token)]

    def extra_bytes_per_token(self, context: int, routed_bytes: int) -> dict:
        """Bytes this step reads beyond the minimal decode at `context` positions."""
        c = self.config
        cache_row = c.num_hidden_layers * (c.kv_lora_rank + c.qk_rope_head_dim) * self.weights.embed.element_size()
        extra = {"masked_cache_rows": (self.max_positions - context) * cache_row}
        if self.experts == "gather":
            extra["gathered_expert_copy"] = 2 * routed_bytes  # written once, read again
        return extra

    # ------------------------------------------------------------------ the step

    @torch.no_grad()
    def step(self) -> None:
        w, eps = self.weights, self.config.rms_norm_eps
        pos = self.pos
        cos, sin = self.cos.index_select(0, pos)[0], self.sin.index_select(0, pos)[0]
        visible = self.positions <= pos
        x = w.embed.index_select(0, self.token)[0]
        for index, layer in enumerate(w.layers):
            x = x + self._attention(index, layer, rms_norm(x, layer.input_norm, eps), cos, sin, visible)
            h = rms_norm(x, layer.post_attention_norm, eps)
            x = x + (self._mlp(h, *layer.dense) if layer.dense is not None else self._moe(layer, h))
        logits = F.linear(rms_norm(x, w.final_norm, eps), w.lm_head)
        self.history.index_copy_(0, pos, self.token)
        self.token.copy_(logits.argmax().view(1))
        pos.add_(1)

    def _attention(self, index, layer, h, cos, sin, visible):
        c, dtype, ref = self.config, self.dtype, self.reference
        heads, nope, rank = c.num_attention_heads, c.qk_nope_head_dim, c.kv_lora_rank
        q = F.linear(h, layer.q_proj).view(heads, -1)
        q_nope, q_pe = q[:, :nope], rope(q[:, nope:], cos, sin)
        kv = F.linear(h, layer.kv_a_proj)
        ckv, kpe = ref.ckv[index], ref.kpe[index]
        ckv.index_copy_(0, self.pos, rms_norm(kv[:rank], layer.kv_a_norm, self.config.rms_norm_eps).view(1, -1))
        kpe.index_copy_(0, self.pos, rope(kv[rank:], cos, sin).view(1, -1))
        q_lat = torch.bmm(q_nope.unsqueeze(1), layer.w_uk).squeeze(1)           # [H, rank]
        scores = (q_lat @ ckv.T).float() + (q_pe @ kpe.T).float()               # [H, P]
        scores = (scores * ref.scale).masked_fill(~visible, float("-inf"))
        out_lat = torch.softmax(scores, dim=-1).to(dtype) @ ckv                  # [H, rank]
        per_head = torch.bmm(out_lat.unsqueeze(1), layer.w_uv.transpose(1, 2)).squeeze(1)
        return F.linear(per_head.flatten(), layer.o_proj)

    def _mlp(self, h, w_gate, w_up, w_down):
        return F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)

    def _moe(self, layer, h):
        c = self.config
        k, inter, n_experts = c.num_experts_per_tok, c.moe_intermediate_size, c.n_routed_experts
        scores = torch.softmax(F.linear(h, layer.router).float(), dim=-1)
        chosen = torch.topk(scores, k).indices.sort().values       # grouped_mm wants rows sorted by expert
        weights = scores.index_select(0, chosen) * c.routed_scaling_factor
        rows = h.expand(k, -1).contiguous()
        if self.experts == "grouped_mm":
            per_expert = torch.zeros(n_experts, dtype=torch.int32, device=h.device)
            per_expert.scatter_add_(0, chosen, torch.ones(k, dtype=torch.int32, device=h.device))
            offsets = per_expert.cumsum(0, dtype=torch.int32)
            gate_up = _grouped_mm(rows, layer.experts_gate_up.transpose(-2, -1), offsets)
            activated = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
            out = _grouped_mm(activated, layer.experts_down.transpose(-2, -1), offsets)
        else:
            gate_up = torch.bmm(layer.experts_gate_up.index_select(0, chosen), rows.unsqueeze(-1)).squeeze(-1)
            activated = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
            out = torch.bmm(layer.experts_down.index_select(0, chosen), activated.unsqueeze(-1)).squeeze(-1)
        routed = (weights[:, None] * out.float()).to(self.dtype).float().sum(0).to(self.dtype)
        return routed + self._mlp(h, *layer.shared)

    # ------------------------------------------------------------------ setup

    @torch.no_grad()
    def _choose_expert_mode(self) -> str:
        """grouped_mm if it runs here on these weights and agrees with the gather path, else gather."""
        layer = next((l for l in self.weights.layers if l.router is not None), None)
        if layer is None:
            return "gather"
        generator = torch.Generator(device=self.device).manual_seed(0)
        h = torch.randn(self.config.hidden_size, generator=generator, device=self.device).to(self.dtype)
        self.experts = "gather"
        expected = self._moe(layer, h).float()
        try:
            self.experts = "grouped_mm"
            got = self._moe(layer, h).float()
        except (RuntimeError, NotImplementedError, AttributeError):
            return "gather"
        close = (got - expected).norm() <= 2e-2 * expected.norm()
        return "grouped_mm" if bool(close) else "gather"

    def _capture(self) -> None:
        """Warm up on a side stream (as CUDA graphs require), then capture one step. The warm-up
        and the capture write cache rows 0..2 and move pos; prefill() overwrites all of it."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self.step()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()
        torch.cuda.synchronize()

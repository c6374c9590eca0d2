"""The decoder people use: a model loaded once, then generate() of any length, greedy or sampled.

    from fleet_decode import Decoder
    decoder = Decoder.load("hf:/data/DeepSeek-Coder-V2-Lite-Base", device="cuda")
    out = decoder.generate("def quicksort(", max_new_tokens=200, temperature=0.7, top_p=0.95, seed=1)
    out.text, out.tokens, out.token_seconds, out.stopped

On a GPU the decode steps run in the persistent megakernel (fleet_decode.kernels.runtime), on the CPU
in its simulator (fleet_decode.sim): the same encoded task graph either way, built once with the
weights and buffers and reused by every call. Hugging Face runs the prefill; its last logits give
the first new token, and each launch of at most plan.max_steps decode steps continues from the
previous one's last position and token, so a generation has any length up to the context. Every
request is checked before anything runs; a bad one raises InvalidInput (a ValueError) with a
one-line message, and the decoder stays usable.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from fleet_decode.bench.timing import STEADY_FROM_STEP, latency_summary
from fleet_decode.graph import Plan, build_graph
from fleet_decode.graph.counts import graph_counts
from fleet_decode.model import Reference, load_model
from fleet_decode.sampling import InvalidInput, Sampling, sample

CONTEXT_ROUNDING = 32  # cache rows are allocated in multiples of this (graph.plan.CACHE_ROUNDING)
CPU_MAX_STEPS = 64  # decode steps per simulator launch, as the device runtime's default plan
DEFAULT_BANDWIDTH_TBS = 4.18  # the H200's measured copy bandwidth (read + write), DESIGN.md


@dataclass
class Generation:
    prompt_ids: list[int]
    tokens: list[int]  # the new tokens; tokens[0] comes from the prefill's logits; a stop id is kept
    text: str | None  # the new tokens as text, where the decoder has a tokenizer
    token_seconds: list[float]  # per new token: the prefill for tokens[0], then each decode step
    stopped: bool  # ended at a stop id before max_new_tokens
    launches: int  # decode launches (each at most plan.max_steps steps)
    bytes_per_token: float  # weights plus the cache rows read, at the generation's mean context
    sampling: Sampling = field(default_factory=Sampling)
    published_seconds: list[float] = field(default_factory=list)  # per token: when the host had it, from the call
    chunk_forms: list[str] = field(default_factory=list)  # per GPU launch: the attention chunk's form it ran

    @property
    def decode_seconds(self) -> list[float]:
        return self.token_seconds[1:]

    def summary(self, bandwidth_tbs: float = DEFAULT_BANDWIDTH_TBS) -> str:
        """gpt-fast's closing lines: ms/token, tokens/s, GB/s and the share of the bandwidth floor."""
        steps = self.decode_seconds
        prefill = f"prefill {len(self.prompt_ids)} tokens {self.token_seconds[0] * 1e3:.1f} ms"
        if not steps:
            return f"{prefill}; no decode steps"
        per_token = sum(steps) / len(steps)
        p50 = ""
        if len(steps) > STEADY_FROM_STEP:  # the bench's statistic: P50 over the steady steps
            p50 = f" (P50 {latency_summary([[s * 1e3 for s in steps]])['p50_ms']:.3f})"
        floor = self.bytes_per_token / (bandwidth_tbs * 1e12)
        return (f"{prefill}; {len(steps)} decode steps in {self.launches} launch(es): {per_token * 1e3:.3f} ms/token"
                f"{p50}, {1 / per_token:.2f} tokens/s, "
                f"{self.bytes_per_token / per_token / 1e9:.2f} GB/s, {100 * floor / per_token:.3g} % of the "
                f"{floor * 1e3:.3g} ms floor ({self.bytes_per_token / 1e9:.4g} GB/token at {bandwidth_tbs} TB/s)")


def round_up(n: int, multiple: int = CONTEXT_ROUNDING) -> int:
    return -(-n // multiple) * multiple


def cache_rows(context: int) -> int:
    """Cache rows a context of `context` positions (prompt + new tokens) needs: every position but the
    last, whose token is returned and never fed back (rounded up)."""
    return round_up(context - 1)


def load_tokenizer(directory):
    """The checkpoint's own tokenizer (AutoTokenizer, local files only), or None if it has none."""
    from transformers import AutoTokenizer

    directory = Path(directory)
    if not any((directory / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        return None
    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def check_request(config, context_limit: int, ids: list[int], max_new_tokens: int, stop=()) -> None:
    """Raises InvalidInput for a request the model cannot decode; needs only the model's config."""
    vocab = config.vocab_size
    if not ids:
        raise InvalidInput("the prompt is empty: give at least one token")
    bad = [i for i in ids if not 0 <= i < vocab]
    if bad:
        raise InvalidInput(f"prompt token id {bad[0]} is outside the vocabulary [0, {vocab})")
    if max_new_tokens < 1:
        raise InvalidInput(f"max new tokens must be >= 1, got {max_new_tokens}")
    if len(ids) + max_new_tokens > context_limit:
        raise InvalidInput(f"{len(ids)} prompt + {max_new_tokens} new tokens exceed the context of "
                           f"{context_limit} positions")
    bad = [i for i in stop if not 0 <= i < vocab]
    if bad:
        raise InvalidInput(f"stop id {bad[0]} is outside the vocabulary [0, {vocab})")


class TextStream:
    """Decodes tokens incrementally: each push returns only the text that is final so far, so a
    character split over several tokens (multi-byte UTF-8) prints once whole."""

    def __init__(self, tokenizer):
        self.tokenizer, self.tokens, self.printed = tokenizer, [], 0

    def push(self, token: int) -> str:
        self.tokens.append(token)
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if text.endswith("\ufffd"):  # an incomplete character: wait for its next bytes
            return ""
        new, self.printed = text[self.printed:], len(text)
        return new

    def flush(self) -> str:
        """The rest, once no more tokens come: bytes that never completed a character print as U+FFFD."""
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        new, self.printed = text[self.printed:], len(text)
        return new


class Decoder:
    """A model, its task graph, weights and buffers, on the GPU (megakernel) or the CPU (simulator)."""

    def __init__(self, model, device: str, tokenizer=None, max_context: int | None = None,
                 max_steps: int | None = None, workers: int | None = None, schedule: str = "round-robin"):
        self.model, self.config, self.device, self.tokenizer = model, model.config, device, tokenizer
        self.context_limit = max_context or self.config.max_position_embeddings
        self.fixed_context = max_context is not None
        self.max_steps, self.workers, self.schedule = max_steps, workers, schedule
        self.eos = self._eos_ids()
        self.graph = self._engine = None
        if self.fixed_context:
            self._build(cache_rows(max_context))

    @classmethod
    def load(cls, source, device: str = "cuda", max_context: int | None = None, tokenizer=None,
             dtype: torch.dtype | None = None, **options) -> "Decoder":
        """source: `hf:<dir>`, `random:<config>[@seed]`, `tiny`, or a loaded DeepseekV2ForCausalLM.
        tokenizer: a directory to take one from (default: an hf: checkpoint's own). options:
        max_steps (decode steps per launch), workers and schedule (simulator)."""
        if device not in ("cuda", "cpu"):
            raise InvalidInput(f"device must be cuda or cpu, got {device!r}")
        if device == "cuda" and not torch.cuda.is_available():
            raise InvalidInput("device cuda: no GPU here (use --device cpu to run the simulator)")
        if max_context is not None and max_context < 2:
            raise InvalidInput(f"max context must be >= 2 positions, got {max_context}")
        if isinstance(source, str):
            dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float32)
            model = load_model(source, dtype=dtype, device=device)
            if tokenizer is None and source.startswith("hf:"):
                tokenizer = source[len("hf:"):]
        else:
            model = source
            on = next(model.parameters()).device.type
            if on != device:
                raise InvalidInput(f"the model is on {on}, asked to decode on {device}: load it there "
                                   f"(or pass device={on!r})")
        if tokenizer is not None and not hasattr(tokenizer, "decode"):
            directory = tokenizer
            tokenizer = load_tokenizer(directory)
            if tokenizer is None and not (isinstance(source, str) and source.startswith("hf:")):
                raise InvalidInput(f"{directory}: no tokenizer files (tokenizer.json / tokenizer_config.json)")
        return cls(model, device, tokenizer, max_context, **options)

    # ------------------------------------------------------------------ requests
    def _eos_ids(self) -> tuple[int, ...]:
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        eos = self.config.eos_token_id if eos is None else eos
        return tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (int(eos),))

    def encode(self, prompt) -> list[int]:
        """Token ids of a prompt given as text (needs a tokenizer) or as ids."""
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise InvalidInput("a text prompt needs a tokenizer: give token ids, or a tokenizer directory")
            return list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
        return [int(i) for i in prompt]

    def check(self, ids: list[int], max_new_tokens: int, stop) -> None:
        check_request(self.config, self.context_limit, ids, max_new_tokens, stop)

    # ------------------------------------------------------------------ graph and engine
    def _plan(self, positions: int) -> Plan:
        if self.device == "cuda":
            from fleet_decode.graph.plan import decode_plan  # the megakernel's tiling for this context

            n_sm = torch.cuda.get_device_properties(0).multi_processor_count
            plan = decode_plan(self.config, positions, self.workers or n_sm)
            return plan if self.max_steps is None else replace(plan, max_steps=self.max_steps)
        # The simulator's time goes to per-task bookkeeping, so the fewest, largest tasks: one worker,
        # one tile per stage, all heads in one merge, one attention chunk.
        return Plan(workers=self.workers or 1, stage_tiles=1, heads_per_tile=self.config.num_attention_heads,
                    absorb_parts=1, attn_chunk=positions, max_positions=positions,
                    max_steps=self.max_steps or CPU_MAX_STEPS)

    def _build(self, positions: int) -> None:
        self.plan = self._plan(positions)
        self.graph = build_graph(self.config, self.plan)
        if self.device == "cuda":
            from fleet_decode.kernels.runtime import Megakernel

            self._engine = Megakernel(self.model, plan=self.plan, graph=self.graph)
        else:
            self._engine = _SimEngine(self.model, self.graph, self.schedule)

    @property
    def engine(self):
        """What runs the decode launches, built for the current context: the Megakernel (weights on
        the device) on a GPU, the simulator's engine on the CPU; None until a context is built."""
        return self._engine

    def _ensure_context(self, positions: int) -> None:
        if self.graph is None or self.graph.constants.max_positions < positions - 1:
            self._build(cache_rows(positions))  # grown only when a request needs more rows than built

    def bytes_per_token(self, mean_context: float) -> float:
        counts = graph_counts(self.graph, weight_bytes=self.model.dtype.itemsize)
        return counts["weight_bytes_per_token_total"] + counts["cache_bytes_per_position"] * mean_context

    # ------------------------------------------------------------------ generate
    @torch.no_grad()
    def generate(self, prompt, max_new_tokens: int, temperature: float = 0.0, top_k: int | None = None,
                 top_p: float | None = None, seed: int | None = None, stop=None, on_token=None,
                 timeout_s: float = 10.0) -> Generation:
        """prompt: text or token ids. stop: token ids that end the generation (kept as its last token);
        None: the model's EOS. on_token(index, token) is called as each new token is produced."""
        sampling = Sampling(temperature, top_k, top_p, 0 if seed is None else seed)
        ids = self.encode(prompt)
        stop = self.eos if stop is None else tuple(int(s) for s in stop)
        self.check(ids, max_new_tokens, stop)
        self._ensure_context(len(ids) + max_new_tokens)
        if not sampling.greedy and "sampling" not in inspect.signature(self._engine.generate).parameters:
            raise InvalidInput("this runtime decodes greedily only: sample with --device cpu, or temperature 0")
        n = len(ids)
        options = {} if sampling.greedy else {"sampling": sampling}

        started = time.perf_counter()
        ref = Reference(self.model, max_positions=n + 1)
        first = sample(ref.prefill(ids), sampling, position=n)
        self._engine.fill_cache(ref, n)
        del ref
        tokens, seconds = [first], [time.perf_counter() - started]
        published_seconds = [seconds[0]]
        if on_token:
            on_token(0, first)
        launches, stopped, chunk_forms = 0, first in stop, []
        while not stopped and len(tokens) < max_new_tokens:
            steps = min(max_new_tokens - len(tokens), self.graph.constants.max_steps)

            def published(index, token, base=len(tokens)):
                published_seconds.append(time.perf_counter() - started)
                if on_token:
                    on_token(base + index, token)

            result = self._engine.generate(n + len(tokens) - 1, steps, start_token=tokens[-1], stop_ids=stop,
                                           on_token=published, timeout_s=timeout_s, **options)
            launches += 1
            if getattr(result, "chunk_form", None):  # the megakernel's (runtime.Tuning.chunk_form); not the simulator's
                chunk_forms.append(result.chunk_form)
            tokens += result.tokens
            seconds += result.step_seconds
            stopped = result.stopped
        text = self.tokenizer.decode(tokens, skip_special_tokens=True) if self.tokenizer is not None else None
        mean_context = n + (len(tokens) - 1) / 2
        return Generation(ids, tokens, text, seconds, stopped, launches, self.bytes_per_token(mean_context), sampling,
                          published_seconds, chunk_forms)


@dataclass
class SimDecodeResult:
    tokens: list[int]
    step_seconds: list[float]
    stopped: bool


class _SimEngine:
    """The megakernel's launch interface on the CPU simulator: one Simulator per launch over weights
    built once; the MLA cache rows carry from launch to launch."""

    def __init__(self, model, graph, schedule):
        from fleet_decode.graph.weights import weight_table
        from fleet_decode.sim.decode import make_simulator

        self.model, self.graph, self.schedule = model, graph, schedule
        self.encoded = graph.encode()
        self.weights = weight_table(model, graph)
        make_simulator(model, graph, 0, schedule, 0)  # checks the graph's softmax scale against the model's
        c = graph.constants
        self.cache_buffers = [graph.buffer_index(f"L{l}.{name}") for l in range(c.n_layers) for name in ("ckv", "kpe")]
        self.cache = {b: None for b in self.cache_buffers}

    def fill_cache(self, ref: Reference, n_prompt: int):
        c = self.graph.constants
        for layer in range(c.n_layers):
            for name, rows in ((f"L{layer}.ckv", ref.ckv[layer]), (f"L{layer}.kpe", ref.kpe[layer])):
                buf = self.graph.buffers[self.graph.buffer_index(name)]
                cache = torch.zeros(buf.numel, dtype=self.model.dtype)
                cache[:n_prompt * buf.cols] = rows[:n_prompt].reshape(-1)
                self.cache[self.graph.buffer_index(name)] = cache

    def generate(self, pos0, n_steps, start_token, stop_ids=(), on_token=None, timeout_s=None,
                 sampling=None) -> SimDecodeResult:
        from fleet_decode.graph.format import Kind
        from fleet_decode.sim.runtime import Simulator

        g = self.graph
        sim = Simulator(self.encoded, self.weights, self.model.dtype, pos0, self.schedule, 0, sampling, stop_ids)
        tokens_buf = g.buffer_index("tokens")
        sim.memory.host_write(tokens_buf, 0, torch.tensor([start_token], dtype=torch.int32))
        for b in self.cache_buffers:
            sim.memory.host_write(b, 0, self.cache[b][:pos0 * g.buffers[b].cols])
        tokens, seconds, last = [], [], [time.perf_counter()]

        def published(task, step):
            if g.tasks[task].kind == Kind.ARGMAX:
                now = time.perf_counter()
                tokens.append(int(sim.memory.data[tokens_buf][step + 1]))
                seconds.append(now - last[0])
                last[0] = now
                if on_token:
                    on_token(step, tokens[-1])

        sim.after_task = published
        sim.run(n_steps)
        for b in self.cache_buffers:
            self.cache[b] = sim.memory.data[b]
        return SimDecodeResult(tokens, seconds, sim.stopped_at is not None)

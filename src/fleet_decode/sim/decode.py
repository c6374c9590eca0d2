"""Decode through the simulator: HF prefill fills the MLA cache, then the encoded graph runs N steps.

    from fleet_decode.model import load_model, prompt_ids
    from fleet_decode.sim import simulate
    model = load_model("tiny")
    result = simulate(model, prompt_ids(16, vocab_size=1024), n_tokens=4, workers=3, schedule="random")
    result.tokens, result.logits[0], result.hidden_states[0][-1]

Step s is fed token t_s (t_0 = argmax of the prefill logits) at position len(prompt) + s and yields
logits[s] and t_{s+1} = tokens[s]: in hf_decode's terms, tokens[s] is its tokens[s + 1].
"""

import math
import time
from dataclasses import dataclass, field

import torch

from fleet_decode.graph.build import build_graph
from fleet_decode.graph.counts import graph_counts
from fleet_decode.graph.format import Kind
from fleet_decode.graph.plan import Plan
from fleet_decode.graph.tails import tails
from fleet_decode.graph.weights import weight_table
from fleet_decode.model.reference import Reference, softmax_scale
from fleet_decode.sim.runtime import Simulator


@dataclass
class SimResult:
    tokens: list[int]
    logits: list[torch.Tensor]  # fp32 [vocab] per step
    hidden_states: list[list[torch.Tensor]]  # per step, each decoder layer's output (fp32 [hidden])
    counts: dict = field(default_factory=dict)
    seconds: float = 0.0


def sim_plan(workers: int, max_positions: int, max_steps: int, assign="balanced") -> Plan:
    """Tiles small enough that every stage has several (so interleavings matter), independent of the
    worker count, so that runs with different worker counts execute the same graph."""
    return Plan(workers=workers, stage_tiles=4, heads_per_tile=2, attn_chunk=max(1, math.ceil(max_positions / 3)),
                max_positions=max_positions, max_steps=max_steps, assign=assign)


def make_simulator(model, graph, pos0, schedule, seed, tail_kinds=()) -> Simulator:
    """A simulator of the encoded graph over the model's weights, with nothing written yet; the tasks of
    tail_kinds run as tails (fleet_decode.graph.tails), as the megakernel's Tuning.tail_kinds runs them."""
    scale = softmax_scale(model.config)
    if not math.isclose(graph.constants.attn_scale, scale, rel_tol=1e-6):
        raise ValueError(f"graph's softmax scale {graph.constants.attn_scale} differs from the reference's {scale}")
    return Simulator(graph.encode(), weight_table(model, graph), model.dtype, pos0, schedule, seed,
                     tail_of=tails(graph, tail_kinds))


def _fill_cache(sim, ref, n_prompt, layers):
    g = sim.graph
    for layer in layers:
        for name, cache in ((f"L{layer}.ckv", ref.ckv), (f"L{layer}.kpe", ref.kpe)):
            sim.memory.host_write(g.buffer_index(name), 0, cache[layer, :n_prompt])


@torch.no_grad()
def simulate(hf_model, prompt_ids, n_tokens: int, workers=8, schedule="round-robin", seed=0, plan=None,
             graph=None, tail_kinds=()) -> SimResult:
    """n_tokens greedy decode steps of the whole model through the simulator. A given graph (e.g. one a
    test has broken on purpose) is run as it is, with its own worker lists; otherwise one is built from
    plan (whose worker count then wins over `workers`), by default sim_plan(workers, ...). The tasks of
    tail_kinds run as tails (fleet_decode.graph.tails)."""
    started = time.perf_counter()
    config, n_prompt = hf_model.config, len(prompt_ids)
    if graph is None:
        graph = build_graph(config, plan or sim_plan(workers, n_prompt + n_tokens, n_tokens))
    c = graph.constants
    if n_prompt + n_tokens > c.max_positions or n_tokens > c.max_steps:
        raise ValueError(f"{n_prompt} prompt + {n_tokens} decoded positions exceed the graph's cache of "
                         f"{c.max_positions} positions or its {c.max_steps} steps")
    ref = Reference(hf_model, max_positions=n_prompt + 1)
    first = int(ref.prefill(prompt_ids).argmax())
    sim = make_simulator(hf_model, graph, n_prompt, schedule, seed, tail_kinds)
    tokens_buf = graph.buffer_index("tokens")
    sim.memory.host_write(tokens_buf, 0, torch.tensor([first], dtype=torch.int32))
    _fill_cache(sim, ref, n_prompt, range(c.n_layers))

    hidden = [graph.buffer_index(f"h.{l + 1}") for l in range(c.n_layers)]
    hidden_states = []

    def snapshot(task, step):
        # After argmax every buffer of this step is final: the next step starts from its token.
        if graph.tasks[task].kind == Kind.ARGMAX:
            hidden_states.append([sim.memory.data[b].float().clone() for b in hidden])

    sim.after_task = snapshot
    sim.run(n_tokens)
    logits = sim.memory.data[graph.buffer_index("logits")].view(c.max_steps, c.vocab)
    counts = {**graph_counts(graph), **sim.stats, "steps": n_tokens, "schedule": schedule, "seed": seed}
    return SimResult(
        tokens=[int(t) for t in sim.memory.data[tokens_buf][1:n_tokens + 1]],
        logits=[logits[s].float().clone() for s in range(n_tokens)],
        hidden_states=hidden_states,
        counts=counts,
        seconds=time.perf_counter() - started,
    )


@torch.no_grad()
def simulate_layer(hf_model, prompt_ids, layer: int, workers=8, schedule="round-robin", seed=0, plan=None):
    """One decode step of one decoder layer through the simulator (milestone M2), after the prefill of
    prompt_ids and fed the prefill's greedy token; returns (sim_out, ref_out), that layer's output
    hidden state from the simulator and from the reference's own step (fp32 [hidden])."""
    n_prompt = len(prompt_ids)
    ref = Reference(hf_model, max_positions=n_prompt + 1)
    token = int(ref.prefill(prompt_ids).argmax())
    ref.step(token)
    x_in = ref.weights.embed[token].float() if layer == 0 else ref.hidden_states[layer - 1]
    graph = build_graph(hf_model.config, plan or sim_plan(workers, n_prompt + 1, 1), layers=[layer])
    sim = make_simulator(hf_model, graph, n_prompt, schedule, seed)
    sim.memory.host_write(graph.buffer_index(f"h.{layer}"), 0, x_in)
    _fill_cache(sim, ref, n_prompt, [layer])
    sim.run(1)
    return sim.memory.data[graph.buffer_index(f"h.{layer + 1}")].float().clone(), ref.hidden_states[layer].clone()

"""Counts read off a built graph: tasks and events per step and per layer, bytes streamed per token."""

from collections import Counter

from fleet_decode.graph.format import Kind
from fleet_decode.graph.plan import estimated_step_time
from fleet_decode.graph.reads import cache_elements, weight_reads

# DESIGN.md's categories of weight bytes, by the Hugging Face parameter name.
CATEGORIES = (
    ("routed experts", ("mlp.experts.",)),
    ("shared experts", ("mlp.shared_experts.",)),
    ("router", ("mlp.gate.weight",)),
    ("dense mlp", ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")),
    ("attention", ("self_attn.", "input_layernorm", "rope.")),
    ("lm_head", ("lm_head", "model.norm")),
    ("embedding", ("embed_tokens",)),
    ("norms", ("post_attention_layernorm",)),
)


def category(weight_name: str) -> str:
    return next(cat for cat, keys in CATEGORIES if any(k in weight_name for k in keys))


def weight_elements(graph) -> dict[str, int]:
    """Distinct weight elements one step streams, per category: each (weight, expert slot, rows) once, so a
    norm vector read by every tile counts once and each routed slot counts one expert."""
    seen = {r for t in graph.tasks for r in weight_reads(t, graph)}
    per = Counter()
    for r in seen:
        per[category(graph.weights[r.weight].name)] += r.elements
    return dict(per)


def cache_elements_per_position(graph) -> float:
    """MLA-cache elements one step streams per position of context (chunks tile max_positions exactly)."""
    return sum(cache_elements(t, graph) for t in graph.tasks) / graph.constants.max_positions


def graph_counts(graph, weight_bytes: int = 2) -> dict:
    per_layer = Counter(t.layer for t in graph.tasks)
    per_kind = Counter(Kind(t.kind).name for t in graph.tasks)
    weights = weight_elements(graph)
    per_worker = [len(w) for w in graph.workers]
    cost = [sum(graph.tasks[i].cost for i in w) for w in graph.workers]
    return {
        "tasks_per_step": len(graph.tasks),
        "events_per_step": len(graph.events),
        "buffers": len(graph.buffers),
        "weight_slots": len(graph.weights),
        "tasks_per_layer": {str(k): v for k, v in sorted(per_layer.items())},
        "events_per_layer": {str(k): v for k, v in sorted(Counter(e.layer for e in graph.events).items())},
        "tasks_per_kind": dict(sorted(per_kind.items())),
        "workers": len(graph.workers),
        "tasks_per_worker": {"min": min(per_worker), "max": max(per_worker)},
        "elements_per_worker": {"min": min(cost), "max": max(cost)},
        "weight_bytes_per_token": {k: v * weight_bytes for k, v in sorted(weights.items())},
        "weight_bytes_per_token_total": sum(weights.values()) * weight_bytes,
        "cache_bytes_per_position": cache_elements_per_position(graph) * weight_bytes,
        "modelled_step_elements": estimated_step_time(graph),  # per-worker critical path of the cost model
    }

"""Where a megakernel step's time goes: one traced launch (every task's wall clock when
reached, ready and done; hip/runtime/megakernel.cu `trace`), summarised per task kind and per
stage of a layer.

    PYTHONPATH=src python3 -m fleet_decode.kernels.trace --out trace.json     # on a GPU host
    python3 -m fleet_decode.kernels.trace --library a=A.so --library b=B.so --out t.json  # t-a.json, t-b.json
    python3 -m fleet_decode.kernels.trace --variant "tails + down_fit=true" --out t.json
    python3 -m fleet_decode.kernels.trace --variant default --variant "stage_ahead=packed" --out t.json  # side by side

Per stage the summary gives, averaged over the MoE layers and the steady steps: when the stage's
first task could start (inputs ready) and when its last task signalled, both relative to the
layer's input event; the gaps between those are the chain's round trips and its slowest tiles.
"""

import argparse
import json
import re
import sys
from dataclasses import replace

import numpy as np

from fleet_decode.graph.format import Kind
from fleet_decode.graph.plan import MOE_TILINGS
from fleet_decode.graph.reads import cache_elements, pool_share, weight_reads
from fleet_decode.kernels.runtime import TRACE_WORDS
from fleet_decode.kernels.staging import DEVICE_BYTES

REACHED, READY, DONE, RESIDENT = 0, 1, 2, 3  # fd_trace_word
STAGED_LANDED, STAGED_LATE = 1, 2  # the RESIDENT word of a staged task (0: not staged)
# A lab build with docs/next/smid.patch also writes the task's SM + 1 into the RESIDENT word from this bit on.
SM_SHIFT = 8


def block_sms(graph, words: np.ndarray) -> list[int] | None:
    """Per block (worker list), the SM it ran on, from one step's RESIDENT words [tasks] of a build that
    records it (None: not recorded). Raises ValueError if a block's tasks name two SMs."""
    sm = words.astype(np.int64) >> SM_SHIFT
    if not sm.any():
        return None
    out = []
    for block, tasks in enumerate(graph.workers):
        if not tasks:
            out.append(-1)  # a block with nothing to run
            continue
        seen = {int(sm[i]) - 1 for i in tasks}
        if len(seen) != 1:
            raise ValueError(f"block {block}'s tasks ran on SMs {sorted(seen)}: a persistent block stays on one")
        out.append(seen.pop())
    return out


def times_ns(raw: np.ndarray, ticks_per_second: float) -> np.ndarray:
    """raw trace [steps, tasks, TRACE_WORDS] -> its three wall-clock marks [steps, tasks, 3] in ns from
    the launch's first mark (a task not run this launch keeps its zeros, which no summary reads: every
    task runs once per step)."""
    ticks = raw[..., :3].astype(np.float64)
    return (ticks - ticks[ticks > 0].min()) * (1e9 / ticks_per_second)


def _stage(event_name: str) -> str:
    return re.sub(r"^L\d+\.", "", event_name)


def summarise(graph, times: np.ndarray, steps, resident: np.ndarray | None = None) -> dict:
    """Per kind and per layer stage, from aligned times [steps, tasks, 3] (ns); with the raw trace's
    RESIDENT words [steps, tasks], per kind the share of staged tasks whose weights had landed in
    shared memory by the time their inputs were ready."""
    tasks, events = graph.tasks, graph.events
    steps = list(steps)
    t = times[steps]
    run = t[..., DONE] - t[..., READY]
    wait = t[..., READY] - t[..., REACHED]
    step_ns = np.array([t[i, :, DONE].max() - t[i, :, REACHED].min() for i in range(len(steps))])
    by_event: dict[int, list[int]] = {}
    for i, tk in enumerate(tasks):
        by_event.setdefault(tk.out_event, []).append(i)

    def per_event(mark, reduce):  # [steps, events]: reduce over each event's tasks' mark (NaN: no task)
        return np.stack([reduce(t[:, by_event[e], mark], axis=1) if e in by_event else np.full(len(steps), np.nan)
                         for e in range(len(events))], axis=1)

    fire, first_ready = per_event(DONE, np.max), per_event(READY, np.min)
    wake, gap = _wake_and_gap(graph, t, fire)

    def mean_us(values):  # NaN where undefined; None if it is nowhere defined
        return float(np.nanmean(values) / 1e3) if np.isfinite(values).any() else None

    kinds = {}
    for kind in sorted({tk.kind for tk in tasks}):
        idx = [i for i, tk in enumerate(tasks) if tk.kind == kind]
        kinds[Kind(kind).name] = {
            "tasks_per_step": len(idx), "run_us_mean": float(run[:, idx].mean() / 1e3),
            "run_us_max": float(run[:, idx].max(axis=1).mean() / 1e3),
            "wait_us_mean": float(wait[:, idx].mean() / 1e3),
            "wake_us_mean": mean_us(wake[:, idx]), "gap_us_mean": mean_us(gap[:, idx]),
            "busy_share": float(run[:, idx].sum() / run.sum()),
        }
        if resident is not None:
            words = resident[steps][:, idx]
            staged = int(np.isin(words, (STAGED_LANDED, STAGED_LATE)).sum())
            kinds[Kind(kind).name]["staged_tasks"] = staged
            kinds[Kind(kind).name]["resident_before_ready_share"] = \
                float((words == STAGED_LANDED).sum() / staged) if staged else None
    names = [ev.name for ev in events]
    index = {n: i for i, n in enumerate(names)}
    c = graph.constants
    stages: dict[str, dict[str, list[float]]] = {}
    layer_ns = []
    for layer in range(c.first_layer, c.first_layer + c.n_layers):
        if f"L{layer}.route_topk" not in index:
            continue  # the dense layer has other stages
        start = index["embed"] if layer == 0 else index.get(f"L{layer - 1}.out")
        if start is None:
            continue
        t0 = fire[:, start]
        layer_ns.append(fire[:, index[f"L{layer}.out"]] - t0)
        for e, ev in enumerate(events):
            if ev.layer != layer or e not in by_event:
                continue
            s = stages.setdefault(_stage(ev.name), {"ready": [], "fired": []})
            s["ready"].append(first_ready[:, e] - t0)
            s["fired"].append(fire[:, e] - t0)
    rates = rate_profile(graph, t, fire, index)
    slice_ends = routed_slice_ends(graph, t, fire, index)
    stage_rows = {name: {"first_ready_us": float(np.mean(v["ready"]) / 1e3), "fired_us": float(np.mean(v["fired"]) / 1e3)}
                  for name, v in stages.items()}
    stage_rows = dict(sorted(stage_rows.items(), key=lambda kv: kv[1]["fired_us"]))
    workers = len(graph.workers)
    return {
        "steps": steps, "step_us_median": float(np.median(step_ns) / 1e3),
        "moe_layer_us_mean": float(np.mean(layer_ns) / 1e3) if layer_ns else None,
        "busy_share_of_workers": float(run.sum(axis=1).mean() / (workers * step_ns.mean())),
        "kinds": kinds, "moe_layer_stages": stage_rows, "moe_layer_rates": rates,
        "routed_slice_ends_us": slice_ends,
    }


def routed_slice_ends(graph, t: np.ndarray, fire: np.ndarray, index: dict[str, int]) -> dict | None:
    """When a MoE layer's routed split-K slices (or its pool's takers) end, from its top-k's firing (us; the first, the median and
    the last of the layer's slices, each averaged over the layers and steps). The layer's sum waits for the
    last: its distance from the median is the window's tail that no worker fills (docs/megakernel.md
    part 25). None for a plan without routed slices."""
    by_layer: dict[int, list[int]] = {}
    for i, tk in enumerate(graph.tasks):
        if tk.kind in (Kind.EXPERT_GATE_UP_DOWN, Kind.EXPERT_POOL):
            by_layer.setdefault(tk.layer, []).append(i)
    rows = []
    for layer, idx in by_layer.items():
        topk = index.get(f"L{layer}.route_topk")
        if topk is None:
            continue
        ends = t[:, idx, DONE] - fire[:, topk][:, None]  # [steps, slices]
        rows.append(np.stack([ends.min(axis=1), np.median(ends, axis=1), ends.max(axis=1)], axis=1))
    if not rows:
        return None
    first, median, last = np.concatenate(rows).mean(axis=0) / 1e3
    return {"first": float(first), "median": float(median), "last": float(last)}


RATE_BIN_US = 3.0


def task_bytes(task, graph) -> int:
    """Bytes of weights (as the device keeps them) and of full cache rows the task streams."""
    weights = sum(r.elements * DEVICE_BYTES[graph.weights[r.weight].dtype] for r in weight_reads(task, graph))
    return weights // pool_share(task) + 2 * cache_elements(task, graph)


def rate_profile(graph, t: np.ndarray, fire: np.ndarray, index: dict[str, int]) -> list[dict]:
    """An MoE layer's memory rate over time, from the traced times t [steps, tasks, 3] (ns) and the
    events' fire times: per RATE_BIN_US bin after the layer's input fired, the bytes the layer's tasks
    stream (each task's bytes spread evenly over its run, ready to done) in TB/s, and how many workers
    run a task, averaged over the MoE layers and steps. A staged task's weights are counted in its run,
    though its stage copy read them before: the chain's few MB look later than they were read."""
    c = graph.constants
    n_bins = 0
    sums, busy, layers = np.zeros(256), np.zeros(256), 0
    moved = np.array([task_bytes(tk, graph) for tk in graph.tasks], dtype=np.float64)
    by_layer: dict[int, list[int]] = {}
    for i, tk in enumerate(graph.tasks):
        by_layer.setdefault(tk.layer, []).append(i)
    for layer in range(max(c.first_layer, 1), c.first_layer + c.n_layers):
        if f"L{layer}.route_topk" not in index or f"L{layer - 1}.out" not in index:
            continue
        members = by_layer.get(layer, [])
        for step in range(t.shape[0]):
            t0 = fire[step, index[f"L{layer - 1}.out"]]
            for i in members:
                a, b = (t[step, i, READY] - t0) / 1e3 / RATE_BIN_US, (t[step, i, DONE] - t0) / 1e3 / RATE_BIN_US
                if not b > a or a < 0:
                    continue
                for k in range(int(a), min(int(np.ceil(b)), len(sums))):
                    overlap = min(b, k + 1) - max(a, k)
                    sums[k] += moved[i] * overlap / (b - a)
                    busy[k] += overlap
                    n_bins = max(n_bins, k + 1)
            layers += 1
    if not layers:
        return []
    scale = 1.0 / (layers * RATE_BIN_US * 1e-6)  # bytes per bin -> bytes per second
    return [{"from_us": k * RATE_BIN_US, "tb_per_s": float(sums[k] * scale / 1e12), "busy_workers": float(busy[k] / layers)}
            for k in range(n_bins)]


def _wake_and_gap(graph, t: np.ndarray, fire: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step and task [steps, tasks] (ns, NaN where undefined), from the times t and each event's
    fire time [steps, events] (its tasks' last DONE): the wake, from the later of the task being
    reached and its last same-step input firing to its inputs being ready, i.e. what a satisfied wait
    and its barrier cost; and the gap, from the worker's previous task's DONE to this task being
    reached (the runtime's bookkeeping between two tasks)."""
    steps, n_tasks = t.shape[0], t.shape[1]
    wake = np.full((steps, n_tasks), np.nan)
    listed = {i for tasks in graph.workers for i in tasks}
    for i, tk in enumerate(graph.tasks):
        if i not in listed:
            continue  # a tail (graph.tails): run by its last signaller, with no wait of its own
        same_step = [e for e, lag in tk.inputs if lag == 0]
        inputs = fire[:, same_step].max(axis=1) if same_step else np.full(steps, -np.inf)
        wake[:, i] = t[:, i, READY] - np.maximum(t[:, i, REACHED], inputs)
    gap = np.full((steps, n_tasks), np.nan)
    for tasks in graph.workers:
        if len(tasks) > 1:
            gap[:, tasks[1:]] = t[:, tasks[1:], REACHED] - t[:, tasks[:-1], DONE]
    return wake, gap


# The kinds of the chain from a layer's input to its top-k whose weights the runtime stages.
CHAIN_KINDS = ("RMSNORM_GEMV", "ROPE_Q_ABSORB", "ATTN_MERGE_UV", "ATTN_MERGE_COLS", "O_PROJ_RESIDUAL", "ROUTER",
               "O_PROJ_ROUTER")


def chain_view(s: dict) -> dict:
    """What issue 12 asks of a trace, from a summary (also a stored one): the MoE layer's chain from
    its input to the top-k firing, the expert window after it, and the share of the chain's staged
    tasks whose weights had landed before their inputs were ready (None where the summary lacks it)."""
    stages = s["moe_layer_stages"]
    topk = stages.get("route_topk", {}).get("fired_us")
    out = stages.get("out", {}).get("fired_us")
    kinds = [s["kinds"][k] for k in CHAIN_KINDS if k in s["kinds"] and s["kinds"][k].get("staged_tasks")]
    staged = sum(k["staged_tasks"] for k in kinds)
    landed = sum(k["staged_tasks"] * k["resident_before_ready_share"] for k in kinds)
    return {"chain_to_topk_us": topk, "expert_window_us": out - topk if topk is not None and out is not None else None,
            "chain_resident_share": landed / staged if staged else None}


def print_summary(s: dict):
    print(f"step {s['step_us_median']:.1f} us (median of steps {s['steps'][0]}..{s['steps'][-1]}); MoE layer "
          f"{s['moe_layer_us_mean']:.1f} us; workers busy {100 * s['busy_share_of_workers']:.1f} % of the time")
    print(f"{'kind':22s} {'tasks':>6s} {'run us':>8s} {'max us':>8s} {'wait us':>8s} {'wake us':>8s} {'gap us':>7s} "
          f"{'busy %':>7s} {'resident %':>10s}")
    for kind, r in s["kinds"].items():
        share = r.get("resident_before_ready_share")
        resident = f"{100 * share:10.1f}" if share is not None else f"{'-':>10s}"
        wake, gap = r.get("wake_us_mean"), r.get("gap_us_mean")
        print(f"{kind:22s} {r['tasks_per_step']:6d} {r['run_us_mean']:8.2f} {r['run_us_max']:8.2f} "
              f"{r['wait_us_mean']:8.2f} " + (f"{wake:8.2f} " if wake is not None else f"{'-':>8s} ")
              + (f"{gap:7.2f} " if gap is not None else f"{'-':>7s} ") + f"{100 * r['busy_share']:7.1f} {resident}")
    print(f"{'MoE layer stage':28s} {'first ready us':>14s} {'fired us':>9s}")
    for name, r in s["moe_layer_stages"].items():
        print(f"{name:28s} {r['first_ready_us']:14.2f} {r['fired_us']:9.2f}")
    rates = s.get("moe_layer_rates") or []
    if rates:
        print(f"MoE layer, memory rate (TB/s) and busy workers per {RATE_BIN_US:g} us from its input:")
        for row in rates:
            if row["busy_workers"] >= 0.5:
                print(f"  {row['from_us']:5.0f} us {row['tb_per_s']:6.2f} TB/s {row['busy_workers']:6.1f} workers")
    ends = s.get("routed_slice_ends_us")
    if ends:
        print(f"MoE layer: routed slices end {ends['first']:.1f} / {ends['median']:.1f} / {ends['last']:.1f} us after "
              f"the top-k (first / median / last)")
    view = chain_view(s)
    if view["chain_to_topk_us"] is not None:
        resident = view["chain_resident_share"]
        print(f"MoE layer: chain to the top-k {view['chain_to_topk_us']:.1f} us, expert window "
              f"{view['expert_window_us']:.1f} us; chain tasks with weights resident before their inputs: "
              + (f"{100 * resident:.1f} %" if resident is not None else "-"))


def library_specs(parser, specs) -> dict[str, str]:
    """--library NAME=PATH arguments (repeatable; the lab's sweep takes them too) -> {name: path}."""
    out = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            parser.error(f"--library wants NAME=PATH, got {spec!r}")
        out[name] = path
    return out


def main(argv=None) -> int:
    import torch

    from fleet_decode.bench.timing import latency_summary
    from fleet_decode.graph import decode_plan
    from fleet_decode.graph.tails import TAIL_KINDS
    from fleet_decode.kernels import library
    from fleet_decode.kernels.runtime import Megakernel, on_default_tuning
    from fleet_decode.model import load_model, prompt_ids

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="random:deepseek-coder-v2-lite")
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--no-stage", action="store_true", help="read every weight from global memory (Tuning.stage)")
    parser.add_argument("--tails", action="store_true",
                        help="the top-k and the argmax run by the last tile before them (Tuning.tail_kinds)")
    parser.add_argument("--moe-tiles", choices=MOE_TILINGS, help="how the expert tiles are cut (Plan.moe_tiles)")
    parser.add_argument("--shared-parts", type=int, help="the shared experts' MLP in this many parts (Plan.shared_parts)")
    parser.add_argument("--attn-head-groups", type=int, help="each attention chunk's heads in this many tasks "
                                                              "(Plan.attn_head_groups)")
    parser.add_argument("--router-in-o-proj", action="store_true",
                        help="the o_proj tiles compute the router's dot products (Plan.router_in_o_proj)")
    parser.add_argument("--merge-v-parts", type=int,
                        help="each head's W_UV rows in this many merge tasks (Plan.merge_v_parts)")
    parser.add_argument("--variant", action="append",
                        help="a sweep variant (kernels.lab: a known name or parts joined by ' + ', each a name or "
                             "FIELD=VALUE), before the flags above; repeatable: each traced in this process and "
                             "compared side by side (with --library: every variant on every library)")
    parser.add_argument("--library", action="append", metavar="NAME=PATH",
                        help="trace with this build of the kernels (repeatable: one model load, one trace per "
                             "library, written to OUT with -NAME before its suffix)")
    parser.add_argument("--out", help="write the summary as JSON here")
    parser.add_argument("--raw", help="write the raw trace (numpy .npz) here")
    args = parser.parse_args(argv)
    libraries = library_specs(parser, args.library) or {"": None}  # none named: this GPU's build
    from fleet_decode.kernels.lab import Variant, speed_variants, variant_graph, variant_named

    known = speed_variants(args.prompt, args.tokens)
    variants = {}  # refused before the model loads
    for text in args.variant or [None]:
        try:
            variants[text or ""] = variant_named(text, known) if text else Variant()
        except (ValueError, TypeError) as err:
            parser.error(str(err))
    model = load_model(args.model, dtype=torch.bfloat16, device="cuda")
    prompt = prompt_ids(args.prompt, vocab_size=model.config.vocab_size)
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    # the flags above, on top of every variant
    flag_plan = {k: v for k, v in (("moe_tiles", args.moe_tiles), ("shared_parts", args.shared_parts),
                                   ("attn_head_groups", args.attn_head_groups), ("merge_v_parts", args.merge_v_parts),
                                   ("router_in_o_proj", args.router_in_o_proj)) if v}
    flag_tuning = {}
    if args.no_stage:
        flag_tuning["stage"] = False
    if args.tails:
        flag_tuning["tail_kinds"] = TAIL_KINDS
    runs = [(run_name(lib, text, len(variants)), path, variant)
            for lib, path in libraries.items() for text, variant in variants.items()]
    summaries = {}
    for name, path, variant in runs:
        plan = decode_plan(model.config, args.prompt + args.tokens, n_sm, **{**variant.plan, **flag_plan})
        tuning = replace(on_default_tuning(variant.tuning, plan, model.config), **flag_tuning)
        mk = Megakernel(model, plan=plan, graph=variant_graph(model.config, plan, variant),
                        lib=library.load(path) if path else None, tuning=tuning)
        mk.prefill(prompt)
        plain = mk.generate(args.prompt, args.tokens)
        trace = torch.zeros(args.tokens, len(mk.graph.tasks), TRACE_WORDS, dtype=torch.int64, device="cuda")
        traced = mk.generate(args.prompt, args.tokens, trace=trace)
        raw = trace.cpu().numpy()
        summary = summarise(mk.graph, times_ns(raw, mk.lib.fd_megakernel_ticks_per_second()), range(2, args.tokens),
                            resident=raw[..., RESIDENT] & ((1 << SM_SHIFT) - 1))
        sms = block_sms(mk.graph, raw[2, :, RESIDENT])
        if sms is not None:
            summary["block_sm"] = sms
        untraced = latency_summary([[s * 1e3 for s in plain.step_seconds]])
        summary.update(untraced_p50_us=untraced["p50_ms"] * 1e3, same_tokens_traced=traced.tokens == plain.tokens,
                       plan=str(mk.plan), tuning=str(mk.tuning), library=path, tokens=plain.tokens)
        summary.update(chain_view(summary))
        if name:
            print(f"== {name}: {path or 'the default build'}")
        print(f"untraced P50 {summary['untraced_p50_us']:.1f} us; traced tokens equal: {summary['same_tokens_traced']}")
        print_summary(summary)
        if args.out:
            with open(_named(args.out, name), "w") as f:
                f.write(json.dumps(summary, indent=1) + "\n")
        if args.raw:
            np.savez_compressed(_named(args.raw, name), raw=raw[:4])
        summaries[name] = summary
        del mk, trace
        torch.cuda.empty_cache()
    if len(summaries) > 1:
        print(compare_libraries(summaries))
    return 0


def run_name(library: str, variant: str, n_variants: int) -> str:
    """A traced run's name: its library's, its variant's where several are traced ('' for one run)."""
    if n_variants <= 1:
        return library
    return f"{library}:{variant or 'default'}" if library else (variant or "default")


def compare_libraries(summaries: dict[str, dict]) -> str:
    """Each kind's mean run and each MoE-layer stage's fired time (us) side by side, one column a traced
    run (a library, a variant or both), with the change against the first; then the staged kinds' share of
    tasks whose weights had landed before their inputs were ready, and the chain to the top-k. A kernel
    change shows in its own kind's run; what the other kinds do in the same process is the build's code
    generation (docs/megakernel.md part 19), which moved untouched kinds by 15-50 % between builds while one
    binary traced twice agrees closely."""
    names = list(summaries)
    first = summaries[names[0]]
    width = max(18, *(len(n) + 2 for n in names))  # a value and its change against the first library
    lines = [f"{'per kind: run us':28s}" + "".join(f"{n:>{width}s}" for n in names)]

    def row(label: str, values: list) -> str:
        base = values[0]
        cells = [f"{v:{width}.2f}" if v is not None else f"{'-':>{width}s}" for v in values[:1]]
        for v in values[1:]:
            change = f"{v:.2f} ({100 * (v / base - 1):+.0f}%)" if v is not None and base else \
                (f"{v:.2f}" if v is not None else "-")
            cells.append(f"{change:>{width}s}")
        return f"{label:28s}" + "".join(cells)

    for kind in first["kinds"]:
        lines.append(row(kind, [s["kinds"].get(kind, {}).get("run_us_mean") for s in summaries.values()]))
    lines.append(f"{'MoE layer: stage fired us':28s}")
    for stage in first["moe_layer_stages"]:
        lines.append(row("  " + stage, [s["moe_layer_stages"].get(stage, {}).get("fired_us")
                                        for s in summaries.values()]))
    def percent(share):
        return None if share is None else 100 * share

    views = [chain_view(s) for s in summaries.values()]
    staged = [k for k in first["kinds"] if any(s["kinds"].get(k, {}).get("staged_tasks") for s in summaries.values())]
    if staged:
        lines.append(f"{'resident before ready %':28s}")
        for kind in staged:
            lines.append(row("  " + kind, [percent(s["kinds"].get(kind, {}).get("resident_before_ready_share"))
                                           for s in summaries.values()]))
        lines.append(row("  chain", [percent(v["chain_resident_share"]) for v in views]))
    lines.append(row("chain to the top-k us", [v["chain_to_topk_us"] for v in views]))
    lines.append(row("step (traced) us", [s["step_us_median"] for s in summaries.values()]))
    lines.append(row("step (untraced P50) us", [s["untraced_p50_us"] for s in summaries.values()]))
    return "\n".join(lines)


def _named(path: str, name: str) -> str:
    """out.json -> out-NAME.json (unchanged without a name); a variant's spaces, '=', '+', ':' and '/' become
    one '_' each run, so the name stays one plain file name."""
    if not name:
        return path
    name = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name).strip("_")
    stem, dot, suffix = path.rpartition(".")
    return f"{stem}-{name}.{suffix}" if dot else f"{path}-{name}"


if __name__ == "__main__":
    sys.exit(main())

"""Measurements of the megakernel on a GPU host, outside the pipeline: accuracy and timings for the
notes (docs/megakernel.md) and speed variants timed side by side.

    python -m fleet_decode.kernels.lab --tokens 32 --out mk.json          # checks + timings
    python -m fleet_decode.kernels.lab --sweep --out sweep.json           # speed variants side by side
    python -m fleet_decode.kernels.lab --sweep --variants "stage off"     # default and the named ones
    python -m fleet_decode.kernels.lab --sweep --library new=B.so         # and each of them with B.so too
    python -m fleet_decode.kernels.lab --sweep --same --variants default@new --library new=B.so  # + main's again
    python -m fleet_decode.kernels.lab --sweep --variants "tails + worker_stride=7,down_fit=true"  # FIELD=VALUE
"""

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial

import torch

from fleet_decode.bench.timing import latency_summary
from fleet_decode.graph import Plan, build_graph, decode_plan, default_plan
from fleet_decode.graph.format import Kind
from fleet_decode.graph.tails import TAIL_KINDS
from fleet_decode.kernels import library
from fleet_decode.kernels.runtime import Megakernel, Tuning, WatchdogTimeout, on_default_tuning
from fleet_decode.kernels.staging import STAGEABLE_KINDS
from fleet_decode.kernels.trace import library_specs
from fleet_decode.model.compare import cosine, exact_twin, relative_error
from fleet_decode.model.reference import Reference


def _exact_step(model, prompt, token, forced_routes):
    """One step of exact arithmetic (compare.exact_twin) from the bf16 prefill's cache, on the given experts."""
    bf16 = Reference(model, max_positions=len(prompt) + 1)
    bf16.prefill(prompt)
    exact = exact_twin(model, bf16, len(prompt))
    logits = exact.step(token, forced_routes=forced_routes)
    hidden = exact.hidden_states
    del exact, bf16
    torch.cuda.empty_cache()
    return hidden, logits


def _latency(launches_step_seconds) -> dict:
    """The bench's statistics (P50/P95 over the steady steps of every launch) of device step times."""
    return latency_summary([[s * 1e3 for s in steps] for steps in launches_step_seconds])


def _p50_ms(step_seconds):
    return _latency([step_seconds])["p50_ms"]


PLAN_SWEEP = {  # tilings to time: one tile per worker per stage (default), fewer and larger tiles, ...
    "default": {}, "stage_tiles=66": {"stage_tiles": 66}, "stage_tiles=264": {"stage_tiles": 264},
    "heads_per_tile=2": {"heads_per_tile": 2}, "round-robin": {"assign": "round-robin"},
}


@torch.no_grad()
def measure(source: str, n_prompt: int, n_tokens: int) -> dict:
    """Numbers for the notes (docs/megakernel.md): every layer alone vs the Reference (M2), one step
    vs the Reference on the same experts and vs HF eager (M3), n_tokens in one launch vs HF greedy and
    HF teacher-forced (M4), per-step times for a few tilings, and the watchdog on a broken graph."""
    from fleet_decode.model import hf_decode, load_model, prompt_ids
    from fleet_decode.model.reference import Route

    out = {"source": source, "prompt": n_prompt, "tokens": n_tokens}
    model = load_model(source, dtype=torch.bfloat16, device="cuda")
    config = model.config
    prompt = prompt_ids(n_prompt, vocab_size=config.vocab_size)
    out["m2_rel_vs_reference"] = {}
    for layer in range(config.num_hidden_layers):
        ours, ref = Megakernel(model, layers=[layer]).run_layer(prompt)
        out["m2_rel_vs_reference"][layer] = relative_error(ours, ref)

    mk = Megakernel(model)
    one = mk.decode(prompt, 1)
    ref = Reference(model, max_positions=n_prompt + 1)
    first = int(ref.prefill(prompt).argmax())
    mk_routes = mk.routes()
    forced = {l: Route(torch.tensor(e, device="cuda"), None) for l, e in mk_routes.items()}
    ref_logits = ref.step(first, forced_routes=forced)
    ref_hidden, own_routes = ref.hidden_states, ref.routes
    hf_tokens, hf_logits, hf_hidden, _ = hf_decode(model, prompt, 2)
    exact_hidden, exact_logits = _exact_step(model, prompt, first, forced)
    out["m3_vs_exact_same_experts"] = {  # exact: fp32 arithmetic on the same weights, cache and experts
        "megakernel": [relative_error(a, b) for a, b in zip(one.hidden_states[0], exact_hidden)],
        "reference": [relative_error(a, b) for a, b in zip(ref_hidden, exact_hidden)],
        "megakernel_logits_cos": cosine(one.logits[0], exact_logits), "reference_logits_cos": cosine(ref_logits, exact_logits),
    }
    out["m3"] = {
        "rel_vs_reference_same_experts": [relative_error(a, b) for a, b in zip(one.hidden_states[0], ref_hidden)],
        "rel_vs_hf": [relative_error(a, b) for a, b in zip(one.hidden_states[0], hf_hidden[1])],
        "route_differences_vs_reference": {
            l: {"ours": mk_routes[l], "reference": own_routes[l].experts.tolist(), "margin": own_routes[l].margin()}
            for l in mk_routes if mk_routes[l] != own_routes[l].experts.tolist()},
        "logits_cos_vs_hf": cosine(one.logits[0], hf_logits[1]),
        "logits_cos_vs_reference_same_experts": cosine(one.logits[0], ref_logits),
        "next_token": one.tokens[0], "hf_next_token": hf_tokens[1],
    }

    many = mk.decode(prompt, n_tokens)
    again = mk.decode(prompt, n_tokens)
    hf_free = hf_decode(model, prompt, n_tokens + 1)[0][1:]
    forced_hf = hf_decode(model, prompt, n_tokens + 1, forced_tokens=[first] + many.tokens)[1][1:]
    ref = Reference(model, max_positions=n_prompt + n_tokens + 1)
    token, ref_cos = int(ref.prefill(prompt).argmax()), []
    for s in range(n_tokens):
        ref_cos.append(cosine(many.logits[s], ref.step(token)))
        token = many.tokens[s]
    same = [a == b for a, b in zip(many.tokens, hf_free)]
    diverge = same.index(False) if False in same else None
    out["m4"] = {
        "tokens": many.tokens, "hf_tokens": hf_free, "identical_prefix": diverge if diverge is not None else n_tokens,
        "hf_top2_margin_at_divergence": None if diverge is None else
        float(forced_hf[diverge].topk(2).values.diff().abs()),
        "cos_vs_hf_teacher_forced": [cosine(a, b) for a, b in zip(many.logits, forced_hf)],
        "cos_vs_reference_teacher_forced": ref_cos,
        "deterministic_logits": all(torch.equal(a, b) for a, b in zip(many.logits, again.logits)),
        "launch_seconds": many.seconds, "step_ms": [s * 1e3 for s in many.step_seconds],
        "p50_ms": _p50_ms(many.step_seconds),
    }

    out["plans"] = {}
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    for name, overrides in PLAN_SWEEP.items():
        variant = Megakernel(model, plan=default_plan(config, workers=n_sm, **overrides))
        result = variant.decode(prompt, n_tokens)
        out["plans"][name] = {"p50_ms": _p50_ms(result.step_seconds), "tasks": len(variant.graph.tasks),
                              "same_tokens": result.tokens == many.tokens}

    broken = build_graph(config, mk.plan, layers=[1])
    victim = broken.task_index("L1.q_absorb[0]")
    broken.tasks[victim].inputs.append((broken.event_index("L1.o_proj"), 0))  # a cycle: never fires
    bad = Megakernel(model, graph=broken)
    started = time.perf_counter()
    try:
        bad.run_layer(prompt, timeout_s=0.5)
        out["watchdog"] = {"raised": False}
    except WatchdogTimeout as err:
        out["watchdog"] = {"raised": True, "message": str(err), "seconds": time.perf_counter() - started}
    ours, ref_out = Megakernel(model, layers=[1]).run_layer(prompt)
    out["watchdog"]["next_launch_rel"] = relative_error(ours, ref_out)
    return out


@dataclass(frozen=True)
class Variant:
    plan: dict = field(default_factory=dict)  # default_plan overrides (a new graph)
    tuning: Tuning = Tuning()  # launch arguments (same graph), its changes set on runtime.default_tuning's
    library: str | None = None  # another build of the kernels (None: this GPU's build dir)
    # "tpc-pairs": the plan's lists re-placed so that the two blocks of each SM pair (2k, 2k + 1, one
    # TPC on the H200: the smid trace of part 10) hold a heavy and a light list (tpc_pairs)
    placement: str | None = None


def tpc_pairs(graph, expert_window_only=False):
    """The graph with its worker lists re-placed: sorted by the weight elements they stream (all of them,
    or only the expert tiles'), the heaviest and the lightest on blocks 0 and 1, the next two on 2 and 3,
    and so on (lab only)."""
    experts = (Kind.GATE_UP, Kind.DOWN_ACCUM, Kind.EXPERT_GATE_UP, Kind.EXPERT_DOWN_ACCUM)
    cost = [sum(graph.tasks[i].cost for i in tasks if not expert_window_only or graph.tasks[i].kind in experts)
            for tasks in graph.workers]
    order = sorted(range(len(cost)), key=lambda w: -cost[w])
    placed = []
    while order:
        placed.append(order.pop(0))
        if order:
            placed.append(order.pop())
    graph.workers = [graph.workers[w] for w in placed]
    return graph


PLACEMENTS = {"tpc-pairs": tpc_pairs, "tpc-pairs-experts": partial(tpc_pairs, expert_window_only=True)}


def variant_graph(config, plan, variant: "Variant"):
    """The graph a variant runs: None (the Megakernel builds the plan's own) unless it re-places the lists."""
    if variant.placement is None:
        return None
    return PLACEMENTS[variant.placement](build_graph(config, plan))


def _staged_but(*left_out: str) -> tuple[str, ...]:
    return tuple(kind.name for kind in STAGEABLE_KINDS if kind.name not in left_out)


STAGED_KIND_SETS = {  # every set names both merge kinds and both o_proj kinds: a plan has one of each
    "all": _staged_but(),
    "no q/kv": _staged_but("RMSNORM_GEMV"),
    "no o_proj": _staged_but("O_PROJ_RESIDUAL", "O_PROJ_ROUTER"),
    "no q/kv+o_proj": _staged_but("RMSNORM_GEMV", "O_PROJ_RESIDUAL", "O_PROJ_ROUTER"),
    "no q/kv+o_proj+router": _staged_but("RMSNORM_GEMV", "O_PROJ_RESIDUAL", "O_PROJ_ROUTER", "ROUTER"),
    "merge only": ("ATTN_MERGE_UV", "ATTN_MERGE_COLS"),
}


def speed_variants(n_prompt: int, n_tokens: int) -> dict[str, Variant]:
    """What `--sweep` times, each a change to decode_plan() and Tuning() (docs/megakernel.md "Speed";
    earlier sweeps' variants, L2 prefetch and fenced sync among them, are in docs/measurements/)."""
    return {
        "default": Variant(),  # decode_plan + Tuning(): cache sized to the decode, its chunks, staged weights
        "tpc pairs": Variant(placement="tpc-pairs"),
        "tpc pairs experts": Variant(placement="tpc-pairs-experts"),
        "stage off": Variant(tuning=Tuning(stage=False)),
        "stage 64 KiB": Variant(tuning=Tuning(stage_kib=64)),
        # Which kinds' tiles are staged (staging.STAGEABLE_KINDS; each copy is HBM traffic beside what
        # runs when it is issued: q/kv during the previous layer's experts, o_proj during attention).
        **{f"stage {name}": Variant(tuning=Tuning(staged_kinds=kinds)) for name, kinds in STAGED_KIND_SETS.items()},
        # the top-k and the argmax run by the last tile of the stage before them (graph.tails)
        "tails": Variant(tuning=Tuning(tail_kinds=TAIL_KINDS)),
        "tails topk": Variant(tuning=Tuning(tail_kinds=("ROUTE_TOPK",))),
        "tails argmax": Variant(tuning=Tuning(tail_kinds=("ARGMAX",))),
        "moe split-k": Variant({"moe_tiles": "split-k"}),
        "moe split-k-routed": Variant({"moe_tiles": "split-k-routed"}),
        "moe split-k-routed rows 48": Variant({"moe_tiles": "split-k-routed", "split_k_rows": 48}),
        "moe split-k-routed rows 64": Variant({"moe_tiles": "split-k-routed", "split_k_rows": 64}),
        "tails moe split-k-routed": Variant({"moe_tiles": "split-k-routed"}, Tuning(tail_kinds=TAIL_KINDS)),
        "moe split-k shared 44": Variant({"moe_tiles": "split-k", "split_k_shared_tiles": 44}),
        "moe split-k shared 22": Variant({"moe_tiles": "split-k", "split_k_shared_tiles": 22}),
        # the slices add into one int64 row per layer; the sum tiles read one row (docs/megakernel.md part 26)
        "fixed-point sum": Variant({"split_k_sum": "fixed-point"}),
        # and in one tile run by the last slice to arrive (graph.tails): no wait and wake-up after the window
        "fixed-point sum tail": Variant({"split_k_sum": "fixed-point", "sum_rows": 2048},
                                        Tuning(tail_kinds=("SUM_FIXED_POINT",))),
        # the routed rows handed out at run time in pieces (EXPERT_POOL, the pool entries of the library)
        **{f"pool {rows}": Variant({"split_k_sum": "fixed-point", "routed_pool_rows": rows}) for rows in (16, 32, 64)},
        "pool 32 sum tail": Variant({"split_k_sum": "fixed-point", "routed_pool_rows": 32, "sum_rows": 2048},
                                    Tuning(tail_kinds=("SUM_FIXED_POINT",))),
        # every piece's 2,048 atomic adds, instead of one flush a taker (Plan.pool_local_sum)
        "pool 32 adds per piece": Variant({"split_k_sum": "fixed-point", "routed_pool_rows": 32,
                                           "pool_local_sum": False}),
        "moe shared-first": Variant({"moe_tiles": "shared-first"}),
        "moe shared-first-all": Variant({"moe_tiles": "shared-first-all"}),
        "shared_parts=2": Variant({"shared_parts": 2}),
        "shared_parts=4": Variant({"shared_parts": 4}),
        "absorb_parts=2": Variant({"absorb_parts": 2}),
        "absorb_parts=8": Variant({"absorb_parts": 8}),
        "attn_chunk=32": Variant({"attn_chunk": 32}),
        "attn_chunk=64": Variant({"attn_chunk": 64}),
        # decode_plan picks the chunk length so that chunks x groups fit the workers (1,088 rows: 32, 64)
        "attn_head_groups=2": Variant({"attn_head_groups": 2}),
        "attn_head_groups=4": Variant({"attn_head_groups": 4}),
        # the cache rounded to 64 rows as before sweep 39 (1,088 at 1,024 + 32: 48- or 64-position chunks)
        "1088 rows": Variant({"max_positions": 1088}),
        "1088 rows attn_chunk=64": Variant({"max_positions": 1088, "attn_chunk": 64}),
        "attn_chunk=48": Variant({"attn_chunk": 48}),
        "router_in_o_proj": Variant({"router_in_o_proj": True}),
        "router_in_o_proj merge_v_parts=2": Variant({"router_in_o_proj": True, "merge_v_parts": 2}),
        "merge_v_parts=2": Variant({"merge_v_parts": 2}),
        "merge_v_parts=4": Variant({"merge_v_parts": 4}),
        "down_split=2": Variant({"down_split": 2}),
        "down_split=3": Variant({"down_split": 3}),
        "heads_per_tile=2": Variant({"heads_per_tile": 2}),
        "task_overhead=32768": Variant({"task_overhead": 32768}),
    }


def _setting(cls, key: str, text: str):
    """FIELD=VALUE's value as cls's field wants it: true/false, an int, a '/'-separated tuple, or text."""
    kind = str(next(f.type for f in fields(cls) if f.name == key))
    if "tuple" in kind:
        return tuple(text.split("/"))
    if "bool" in kind:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{key} wants true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if "int" in kind:
        return int(text)
    return text


def variant_named(name: str, known: dict[str, Variant]) -> Variant:
    """A variant of `known`, or parts joined by ' + ', each a known variant or a FIELD=VALUE setting of a
    Plan or Tuning field: 'tails + worker_stride=7 + down_fit=true'. Later parts win."""
    if name in known:
        return known[name]
    plan_fields, tuning_fields = {f.name for f in fields(Plan)}, {f.name for f in fields(Tuning)}
    plan, tuning, placement = {}, {}, None
    for part in (p.strip() for p in name.split(" + ")):
        key, eq, text = part.partition("=")
        key = key.strip()
        if part in known:
            placement = known[part].placement or placement
            plan.update(known[part].plan)
            tuning.update(known[part].tuning.changes())
        elif eq and key in plan_fields:
            plan[key] = _setting(Plan, key, text.strip())
        elif eq and key in tuning_fields:
            tuning[key] = _setting(Tuning, key, text.strip())
        else:
            raise ValueError(f"{part!r} is neither a known variant nor FIELD=VALUE of a Plan or Tuning field")
    return Variant(plan, Tuning(**tuning), placement=placement)


def interleaved_launches(runners: dict, launches: int, after_round=None) -> tuple[dict, dict]:
    """Runs every runner (name -> a callable that makes one launch and returns its result) `launches`
    times in rounds, each runner once a round in order, so that a machine's drift during a sweep falls
    on every variant alike. A runner that raises is recorded and left out of later rounds. Returns
    (results per name, error text per name); after_round(results, errors) is called after each round."""
    results, errors = {name: [] for name in runners}, {}
    for _ in range(launches):
        for name, run in runners.items():
            if name in errors:
                continue
            try:
                results[name].append(run())
            except Exception as err:  # noqa: BLE001 -- one broken variant must not cost the others their numbers
                errors[name] = f"{type(err).__name__}: {err}"
        if after_round is not None:
            after_round(results, errors)
    return results, errors


@torch.no_grad()
def sweep(source: str, n_prompt: int, n_tokens: int, variants: dict | None = None, launches: int = 3,
          out: str | None = None) -> dict:
    """Times every variant: `launches` launches of n_tokens steps each, taken in rounds (every variant
    once a round), P50 over the steps >= 2 of all of them, and checks its tokens (and, for the default's
    graph, its logits bit for bit) against the first variant's (the default). One prefill per graph; a
    variant that fails is recorded and the sweep goes on."""
    from fleet_decode.graph.counts import weight_elements
    from fleet_decode.model import load_model, prompt_ids

    model = load_model(source, dtype=torch.bfloat16, device="cuda")
    prompt = prompt_ids(n_prompt, vocab_size=model.config.vocab_size)
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    variants = variants or speed_variants(n_prompt, n_tokens)
    graphs: dict[tuple, Megakernel] = {}
    built, build_errors, build_seconds, weight_bytes, tunings = {}, {}, {}, {}, {}
    for name, variant in variants.items():
        started = time.perf_counter()
        try:
            plan = decode_plan(model.config, n_prompt + n_tokens, n_sm, **variant.plan)
            tunings[name] = tuning = on_default_tuning(variant.tuning, plan, model.config)
            # the tuning's built fields (tails, staged kinds) are read when a Megakernel builds its tables
            key = (tuple(sorted(variant.plan.items())), variant.library, tuning.built_fields(), variant.placement)
            if key not in graphs:
                lib = library.load(variant.library) if variant.library else None
                graphs[key] = Megakernel(model, plan=plan, graph=variant_graph(model.config, plan, variant), lib=lib,
                                         tuning=tuning)
                graphs[key].prefill(prompt)
            built[name] = graphs[key]
            # the elements alone: a graph run with tails has tasks on no worker's list
            weight_bytes[name] = 2 * sum(weight_elements(built[name].graph).values())
        except Exception as err:  # noqa: BLE001 -- one broken variant must not cost the others their numbers
            build_errors[name] = f"{type(err).__name__}: {err}"
        build_seconds[name] = time.perf_counter() - started

    def launch(mk, tuning):
        mk.tuning = tuning  # launch-time fields may differ between variants sharing a graph
        return mk.generate(n_prompt, n_tokens)

    def result(results, errors):
        rows, baseline = {}, None
        for name, variant in variants.items():
            error = build_errors.get(name) or errors.get(name)
            if error or not results.get(name):
                rows[name] = {"error": error} if error else {"pending": True}
                continue
            runs, mk = results[name], built[name]
            latency = _latency([r.step_seconds for r in runs])
            first = runs[0]
            baseline = baseline or first
            rows[name] = {
                "p50_ms": latency["p50_ms"], "p95_ms": latency["p95_ms"],
                "weight_tb_per_s_at_p50": weight_bytes[name] / (latency["p50_ms"] / 1e3) / 1e12,
                "p50_ms_per_launch": [_p50_ms(r.step_seconds) for r in runs],
                "same_tokens_as_default": first.tokens == baseline.tokens,
                "same_tokens_every_launch": all(r.tokens == first.tokens for r in runs),
                "max_abs_logit_diff_vs_default": max(float((a - b).abs().max())
                                                     for a, b in zip(first.logits, baseline.logits)),
                "tasks": len(mk.graph.tasks), "plan": variant.plan, "tuning": asdict(tunings[name]),
                "library": variant.library, "build_seconds": build_seconds[name],
            }
        return {"source": source, "prompt": n_prompt, "tokens": n_tokens, "launches": launches, "sm": n_sm,
                "interleaved": True, "variants": rows}

    runners = {name: partial(launch, mk, tunings[name]) for name, mk in built.items()}
    # after every round: a call cut short keeps what it timed
    results, errors = interleaved_launches(runners, launches,
                                           (lambda r, e: _write_json(out, result(r, e))) if out else None)
    return result(results, errors)


def _write_json(path: str, data: dict):
    with open(path, "w") as f:
        f.write(json.dumps(data, indent=1, default=str) + "\n")


def print_sweep(result: dict):
    rows = result["variants"]
    default = rows.get("default", {}).get("p50_ms")
    print(f"{'variant':44s} {'P50 ms':>8s} {'P95 ms':>8s} {'vs default':>10s} {'TB/s':>5s}  tokens  max |dlogit|")
    for name, r in sorted(rows.items(), key=lambda kv: kv[1].get("p50_ms", math.inf)):
        if "error" in r or "pending" in r:
            print(f"{name:44s} " + (f"FAILED {r['error']}" if "error" in r else "not launched"))
            continue
        ratio = f"{r['p50_ms'] / default:10.3f}" if default else f"{'-':>10s}"
        same = "same" if r["same_tokens_as_default"] and r["same_tokens_every_launch"] else "DIFFER"
        print(f"{name:44s} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} {ratio} {r['weight_tb_per_s_at_p50']:5.2f}  {same:6s}  "
              f"{r['max_abs_logit_diff_vs_default']:.3g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:deepseek-coder-v2-lite")
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--out", help="write the numbers as JSON here")
    parser.add_argument("--sweep", action="store_true",
                        help="only time the speed variants (speed_variants) side by side, sorted by P50")
    parser.add_argument("--variants", help="with --sweep: only these variants, comma-separated (default always runs); "
                                           "a variant is a known name or parts joined by ' + ', each a known name "
                                           "or FIELD=VALUE of a Plan or Tuning field")
    parser.add_argument("--library", action="append", metavar="NAME=PATH",
                        help="with --sweep: also time each variant with this build of the kernels, as "
                             "'VARIANT@NAME', in the same process (repeatable)")
    parser.add_argument("--same", action="store_true",
                        help="with --sweep: also time the default variant on this tree's library again, as "
                             "'default@same': how far two timings of one binary fall apart in one process, the "
                             "spread a kernel build must beat (two builds of one source differ by 2-5 %%, "
                             "docs/megakernel.md part 19)")
    args = parser.parse_args(argv)
    if args.sweep:
        variants = speed_variants(args.prompt, args.tokens)
        libraries = library_specs(parser, args.library)
        # "VARIANT@NAME" in --variants: that variant with library NAME only (else every variant with each)
        names = [v.strip() for v in (args.variants or "").split(",") if v.strip()]
        picked = [v for v in names if "@" in v]
        plain = list(dict.fromkeys(["default", *(v for v in names if "@" not in v)])) if names else list(variants)
        try:
            variants.update({v: variant_named(v, variants) for v in [*plain, *(p.partition("@")[0] for p in picked)]})
        except (ValueError, TypeError) as err:
            parser.error(f"{err}; known variants: {', '.join(variants)}")
        unknown = [v for v in picked if v.partition("@")[2] not in libraries]
        if unknown:
            parser.error(f"unknown libraries in {unknown}; libraries {list(libraries)}")
        chosen = {name: variants[name] for name in plain}
        for lib_name, path in libraries.items():
            with_lib = [v.partition("@")[0] for v in picked if v.partition("@")[2] == lib_name] if picked else plain
            chosen.update({f"{name}@{lib_name}": replace(variants[name], library=path) for name in with_lib
                           if variants[name].library is None})
        if args.same:
            if "same" in libraries:
                parser.error("--same names its library 'same': give the other libraries other names")
            chosen["default@same"] = replace(variants["default"],
                                             library=str(library.default_library_path(library.device_arch())))
        variants = chosen
        result = sweep(args.model, args.prompt, args.tokens, variants, out=args.out)
        print_sweep(result)
        return 0
    result = measure(args.model, args.prompt, args.tokens)
    if args.out:
        _write_json(args.out, result)
    m3, m4 = result["m3"], result["m4"]
    print(f"M2 every layer vs reference: max rel {max(result['m2_rel_vs_reference'].values()):.4f}")
    print(f"M3 layer 26 rel vs reference (same experts) {m3['rel_vs_reference_same_experts'][-1]:.4f}, vs HF "
          f"{m3['rel_vs_hf'][-1]:.4f}; logits cos vs HF {m3['logits_cos_vs_hf']:.5f}; token {m3['next_token']} "
          f"(HF {m3['hf_next_token']}); route differences at layers {sorted(m3['route_differences_vs_reference'])}")
    exact = result["m3_vs_exact_same_experts"]
    print(f"vs exact fp32 arithmetic at layer 26: megakernel {exact['megakernel'][-1]:.4f}, reference "
          f"{exact['reference'][-1]:.4f}")
    print(f"M4 {m4['identical_prefix']}/{len(m4['tokens'])} tokens as HF greedy (HF top-2 margin there "
          f"{m4['hf_top2_margin_at_divergence']}); min cos vs HF teacher-forced {min(m4['cos_vs_hf_teacher_forced']):.5f}; "
          f"deterministic {m4['deterministic_logits']}; p50 {m4['p50_ms']:.3f} ms/token")
    print("plans: " + ", ".join(f"{k} {v['p50_ms']:.3f} ms" for k, v in result["plans"].items()))
    print(f"watchdog: {result['watchdog']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

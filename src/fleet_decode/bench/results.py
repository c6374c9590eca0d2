"""What a run_bench result says, computed from the result alone (no torch, so the report can use it):
the ratios every contender is read by (derive), the few numbers an evidence file leads with
(headline), and one table from two runs (combine: the pipeline's bench rule times the megakernel
with the floor, its baselines rule the torch contenders without it).
"""
import copy

BASELINE = "hf_eager"


def derive(result: dict) -> None:
    """Bandwidth, share of the floor, ratio to HF eager and token agreement, per contender and length."""
    baseline = result["contenders"].get(BASELINE, {}).get("lengths", {})
    for record in result["contenders"].values():
        for length, entry in record["lengths"].items():
            if "p50_ms" not in entry:
                continue
            facts = result.get("lengths", {}).get(length)
            if facts:  # a run with the floor (not floor=False)
                entry["achieved_bytes_per_s"] = facts["bytes_per_token"] / (entry["p50_ms"] * 1e-3)
                entry["achieved_tb_s"] = entry["achieved_bytes_per_s"] / 1e12
                entry["percent_of_floor"] = 100 * facts["floor_ms"] / entry["p50_ms"]
            reference = baseline.get(length, {})
            if "p50_ms" in reference:
                entry["speedup_vs_hf_eager"] = reference["p50_ms"] / entry["p50_ms"]
                entry["tokens_equal_hf_eager"] = sum(a == b for a, b in zip(entry["tokens"], reference["tokens"]))


# What must agree for two runs' timings to stand in one table: the same model, tokens and lengths.
COMBINED_ON = ("prompt_lengths", "decode_tokens", "runs", "steady_from_step")
COMBINED_MODEL = ("source", "config_sha256", "dtype")


class Mismatch(ValueError):
    pass


def combine(bench: dict, baselines: dict, label: str = "baselines") -> dict:
    """One run_bench result from a run with the floor (the pipeline's bench rule: the megakernel) and a
    timings-only run (floor=False; its baselines rule): the second's contenders join the first's, each
    marked with `from_run` = label, and every ratio (floor, HF eager, token agreement) is derived again
    against the first run's floor. Raises Mismatch when the two did not time the same thing."""
    if "lengths" not in bench:
        raise Mismatch("the first run has no floor (run_bench(floor=False) made it)")
    problems = [f"{key} {bench.get(key)} against {baselines.get(key)}" for key in COMBINED_ON
                if bench.get(key) != baselines.get(key)]
    problems += [f"model {key} {bench['model'].get(key)} against {baselines['model'].get(key)}"
                 for key in COMBINED_MODEL if bench["model"].get(key) != baselines["model"].get(key)]
    twice = sorted(set(bench["contenders"]) & set(baselines["contenders"]))
    if twice:
        problems.append(f"{', '.join(twice)} timed in both")
    if problems:
        raise Mismatch("the bench and the baselines timed different things: " + "; ".join(problems))
    result = copy.deepcopy(bench)
    for name, record in baselines["contenders"].items():
        result["contenders"][name] = copy.deepcopy(record) | {"from_run": label}
    result["combined_from"] = {label: {"environment": baselines["environment"], "seconds": baselines.get("seconds")}}
    derive(result)
    return result


def headline(result: dict, prompt_length: int | None = None,
             prefer=("megakernel", "reference_graph", "hf_static_compile", "hf_eager", "reference_eager")) -> dict:
    """The few numbers an evidence envelope leads with: those of the first measured contender in
    `prefer`, at `prompt_length` (default: the one nearest 1,024), plus HF eager's and the floor."""
    lengths = result["prompt_lengths"]
    length = str(prompt_length or min(lengths, key=lambda L: abs(L - 1024)))
    name = next((n for n in prefer if "p50_ms" in result["contenders"].get(n, {}).get("lengths", {}).get(length, {})), None)
    if name is None:
        raise ValueError(f"no contender was measured at prompt length {length}")
    entry, facts = result["contenders"][name]["lengths"][length], result["lengths"][length]
    baseline = result["contenders"].get(BASELINE, {}).get("lengths", {}).get(length, {})
    return {"timed": name, "prompt_length": int(length), "p50_ms": entry["p50_ms"], "p95_ms": entry["p95_ms"],
            "tokens_per_s": entry["tokens_per_s"], "launches_per_token": entry.get("launches_per_token"),
            "bytes_per_token": facts["bytes_per_token"], "floor_ms": facts["floor_ms"],
            "achieved_tb_s": entry["achieved_tb_s"], "percent_of_floor": entry["percent_of_floor"],
            "copy_bandwidth_bytes_per_s": result["copy_bandwidth"]["bytes_per_s"],
            "hf_eager_p50_ms": baseline.get("p50_ms"), "speedup_vs_hf_eager": entry.get("speedup_vs_hf_eager")}

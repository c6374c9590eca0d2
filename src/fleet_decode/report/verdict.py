"""The verdict the report leads with: per host, each milestone PASS / FAIL / INVALID / STALE /
MISSING and its headline numbers. The same verdicts end `snakemake report` as a one-screen summary.

A milestone takes the worst state of its evidence files: INVALID (unreadable or edited), MISSING,
STALE (a source or host setting changed since it was made; what it said is kept beside), FAIL (a
gate failed), PASS.
"""
from dataclasses import dataclass, field
from pathlib import Path

from fleet_decode.pipeline.audit import State, evidence_state
from fleet_decode.pipeline.config import host_params
from fleet_decode.pipeline.sources import EVIDENCE
from fleet_decode.report.benches import host_bench

MILESTONES = {"M0": ["m0_host", "m0_build"], "M1": ["m1"], "M2": ["m2"], "M3": ["m3"], "M4": ["m4"],
              "bench": ["bench", "baselines"], "generate": ["generate"]}
RANK = ["INVALID", "MISSING", "STALE", "FAIL", "PASS"]


@dataclass
class Verdict:
    milestone: str
    state: str  # PASS | FAIL | STALE | INVALID | MISSING
    headline: str
    was: str | None = None  # a stale milestone's own PASS / FAIL
    files: list = field(default_factory=list)  # repo-relative evidence paths

    @property
    def label(self) -> str:
        return f"{self.state} (was {self.was})" if self.was else self.state


def _pct(x) -> str:
    return f"{x * 100:.3g} %" if isinstance(x, (int, float)) else "?"  # 0.042 % on a GPU, 1.8e-05 % in fp32


def _m0(docs):
    host = docs.get("m0/host.json", {}).get("host", {})
    build = docs.get("m0/build.json", {}).get("metrics", {})
    gpu = (host.get("gpu") or {}).get("name") or host.get("cpu") or "?"
    return f"{gpu}, backend {build.get('backend', '?')}"


def _m1(docs):
    gates = docs.get("m1/kernels.json", {}).get("gates", {})
    checked = gates.get("task_kinds_checked", {}).get("value")
    failed = sum(not g["passed"] for g in gates.values())
    return f"{checked} task kinds checked, {failed} gate(s) failed"


def _m2(docs):
    parts = []
    for layer in (0, 1):
        value = docs.get(f"m2/layer_{layer}.json", {}).get("metrics", {}).get("rel_err")
        parts.append(f"layer {layer} {_pct(value)}")
    return "rel err vs reference: " + ", ".join(parts)


def _m3(docs):
    m = docs.get("m3/layers.json", {}).get("metrics", {})
    if "worst_rel_err_vs_exact" not in m:  # evidence from before the exact gates
        worst = max(m.get("layer_rel_err") or [float("nan")])
        return f"worst layer {_pct(worst)} from HF eager (no exact comparison in this evidence)"
    return (f"worst layer {_pct(m['worst_rel_err_vs_exact'])} from exact (HF eager "
            f"{_pct(m.get('hf_worst_rel_err_vs_exact'))}), logits cosine {m['logits_cosine_vs_exact']:.7f}")


def _m4(docs):
    m = docs.get("m4/e2e.json", {}).get("metrics", {})
    tokens = m.get("tokens") or []
    if "splits" not in m:
        return f"{len(tokens)} tokens; no exact comparison in this evidence"
    excused = sum(s["allowed"] for s in m["splits"])
    return (f"{len(tokens) - len(m['splits'])}/{len(tokens)} tokens as exact, {len(m['splits'])} split(s) "
            f"({excused} at near-ties); HF eager {m.get('hf_argmax_agrees_with_exact', '?')}/{len(tokens)}")


def _bench(docs):
    bench = host_bench(docs)
    if not bench or bench["headline"] is None:
        return "no timing" + (f" ({bench['problem']})" if bench.get("problem") else "")
    m = bench["headline"]
    vs_eager = (f", {m['speedup_vs_hf_eager']:.2f}x HF eager" if m.get("speedup_vs_hf_eager") and m["timed"] != "hf_eager"
                else "")
    return (f"P50 {m['p50_ms']:.3f} ms, {m['percent_of_floor']:.1f} % of floor, {m['tokens_per_s']:.1f} tokens/s "
            f"({m.get('timed')} at {m.get('prompt_length')}){vs_eager}"
            + (f"; {bench['problem']}" if bench["problem"] else ""))


def _generate(docs):
    m = docs.get("generate/generate.json", {}).get("metrics", {})
    if "tokens_generated" not in m:
        return "no generation"
    timing = (f"P50 {m['p50_ms']:.3f} ms/token over the generation, {m['p50_vs_one_launch']:.3f}x one launch"
              if m.get("timed") else "not timed (simulator)")
    return (f"{m['tokens_generated']} tokens in {m['launches']} launches, {m['tokens_as_exact']}/"
            f"{m['tokens_checked']} as exact; {timing}")


HEADLINES = {"M0": _m0, "M1": _m1, "M2": _m2, "M3": _m3, "M4": _m4, "bench": _bench, "generate": _generate}


def repo_relative(root, path) -> str:
    """`path` as the repository names it (results/<host>/...), however the caller spelled it."""
    root, path = Path(root).resolve(), Path(path).resolve()
    return (path.relative_to(root) if path.is_relative_to(root) else path).as_posix()


def milestone_verdict(milestone: str, states: dict[str, State], root=".") -> Verdict:
    """From the states of the milestone's evidence files, keyed by their path under results/<host>/."""
    docs, worst, was = {}, "PASS", None
    for rel, state in states.items():
        name = {"fresh": None, "stale": "STALE", "invalid": "INVALID", "missing": "MISSING"}[state.state]
        if state.doc is not None and state.state in ("fresh", "stale"):
            docs[rel] = state.doc
            passed = "PASS" if state.doc["status"] == "pass" else "FAIL"
            name = name or passed
            if state.state == "stale":
                was = passed if was in (None, "PASS") else was
        if RANK.index(name) < RANK.index(worst):
            worst = name
    headline = HEADLINES[milestone](docs) if docs else "no valid evidence"
    return Verdict(milestone, worst, headline, was if worst == "STALE" else None,
                   [repo_relative(root, s.path) for s in states.values()])


def host_verdicts(root, results, host: str, host_config: dict | None, hashes: dict) -> list[Verdict]:
    root, results = Path(root), Path(results)
    params = host_params(host_config) if host_config else None
    verdicts = []
    for milestone, rules in MILESTONES.items():
        states = {rel: evidence_state(root / results / host / rel, root, params, hashes)
                  for rule in rules for rel in EVIDENCE[rule]}
        verdicts.append(milestone_verdict(milestone, states, root))
    return verdicts


def summary(verdicts: dict[str, list[Verdict]]) -> str:
    """One screen: per host a line of milestone states, then each milestone's headline."""
    lines = []
    for host, items in verdicts.items():
        lines.append(f"{host}: " + "  ".join(f"{v.milestone} {v.label}" for v in items))
        lines += [f"  {v.milestone:5} {v.headline}" for v in items]
    return "\n".join(lines)

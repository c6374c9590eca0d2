"""Renders results/REPORT.md and a self-contained results/report.html (plots embedded as base64
SVG) from every host's evidence, plus results/report.json, the report's own sealed stamp (its
sources' hashes, so a template edit reruns only the report, and the sha256 of the two files it
rendered, so a hand edit of either is caught by `fleet-decode audit`).

The report leads with the verdict (report.verdict: per host, each milestone's state and headline
numbers), then the details: benchmark tables, milestone tables with hosts side by side (values and
gates only), and the provenance of each evidence file once (file, rule, commit, host, fresh/stale).
"""
import datetime
import getpass
import json
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fleet_decode.pipeline.audit import audit, shown_evidence
from fleet_decode.pipeline.config import ConfigError, load
from fleet_decode.pipeline.evidence import MANIFEST, SCHEMA, write_evidence
from fleet_decode.pipeline.sources import EVIDENCE, hash_sources, sha256_file
from fleet_decode.report.benches import host_bench
from fleet_decode.report.plots import figures
from fleet_decode.report.verdict import host_verdicts, repo_relative, summary

ORDER = [rel for rels in EVIDENCE.values() for rel in rels]


@dataclass
class Cell:
    value: str
    gate: str | None
    passed: bool | None


@dataclass
class Provenance:
    file: str  # repo-relative
    rule: str
    commit: str
    host: str
    freshness: str  # fresh | stale: <reasons>


def _format(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        return f"{type(value).__name__}[{len(value)}]"
    return str(value)


def item_key(name: str) -> str:
    """Rows line up across hosts and evidence generations whatever the case of a task kind
    (`ARGMAX.max_rel` and `argmax.max_rel` are one row)."""
    return name.lower()


def natural(text: str):
    """Sort key that puts layer_3 before layer_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _cells(doc: dict):
    """(item, Cell) for each gate, then for each scalar metric, of one evidence file."""
    for name, g in doc["gates"].items():
        yield f"gate {item_key(name)}", Cell(_format(g["value"]), f"{g['op']} {_format(g['bound'])}", g["passed"])
    for name, value in doc["metrics"].items():
        if value is None or isinstance(value, (int, float, str, bool)):
            yield item_key(name), Cell(_format(value), None, None)


def _config(root: Path) -> dict:
    try:
        return load(root / "config" / "config.yaml")
    except (ConfigError, OSError):
        return {"hosts": {}, "targets": []}


def collect(root: Path, results: Path):
    """Hosts, table rows {(evidence, item): {host: Cell}} in order, provenance per evidence file,
    invalid evidence [(repo-relative path, why)], evidence docs per host."""
    hosts, rows, provenance, problems, docs = [], {}, [], [], {}
    for state in audit(root, results.relative_to(root) if results.is_absolute() else results):
        rel_to_results = state.path.relative_to(root / results)
        host, rel = rel_to_results.parts[0], "/".join(rel_to_results.parts[1:])
        if host not in hosts:
            hosts.append(host)
        path = repo_relative(root, state.path)
        if state.state in ("invalid", "missing"):
            if state.state == "invalid":
                problems.append((path, "; ".join(r.replace(str(state.path), path) for r in state.reasons)))
            continue
        docs.setdefault(host, {})[rel] = doc = state.doc
        provenance.append(Provenance(
            path, doc["rule"], (doc["git"].get("commit") or "?")[:12] + ("+dirty" if doc["git"].get("dirty") else ""),
            host, "fresh" if state.state == "fresh" else "stale: " + "; ".join(state.reasons)))
        for item, cell in _cells(doc):
            rows.setdefault((rel, item), {})[host] = cell
    ordered = sorted(rows.items(), key=lambda kv: (ORDER.index(kv[0][0]) if kv[0][0] in ORDER else len(ORDER),
                                                   kv[0][0], natural(kv[0][1])))
    provenance.sort(key=lambda p: (p.host, ORDER.index(p.file.split("/", 2)[2]) if p.file.split("/", 2)[2] in ORDER
                                   else len(ORDER), p.file))
    return hosts, ordered, provenance, problems, docs


@dataclass
class BenchRow:
    contender: str
    length: str
    status: str
    p50_ms: str
    p95_ms: str
    tokens_per_s: str
    launches_per_token: str
    achieved_tb_s: str
    vs_hf_eager: str  # speed-up over HF eager at the same prompt length
    percent_of_floor: str
    floor_ms: str
    rule: str  # the rule whose run timed it: bench (the megakernel) or baselines


@dataclass
class BenchTable:
    host: str
    copy_bandwidth: str  # what the floor uses
    files: list  # the evidence files it was read from (repo-relative)
    rows: list
    problem: str | None  # why the baselines were left out, if they were


def _num(entry, key, fmt):
    value = entry.get(key)
    return "—" if value is None else fmt.format(value)


def bench_tables(docs, provenance) -> list[BenchTable]:
    """Per host with bench evidence: every contender at every prompt length (the bench's and its
    baselines', report.benches), with its ratios to HF eager and to the floor (bytes per token over
    the copy bandwidth measured in the bench's run)."""
    tables = []
    for p in provenance:
        if p.rule != "bench":
            continue
        bench = host_bench(docs[p.host])
        if not bench:
            continue
        result = bench["result"]
        floors = result.get("lengths", {})
        files = [f"results/{p.host}/{rel}" for rel in bench["files"]]
        table = BenchTable(p.host, _format(result.get("copy_bandwidth", {}).get("bytes_per_s")), files, [],
                           bench["problem"])
        for name, record in result.get("contenders", {}).items():
            for length in sorted(record.get("lengths", {}), key=int):
                e = record["lengths"][length]
                table.rows.append(BenchRow(
                    record.get("label", name), length, e.get("status", "?") if "error" not in e
                    else f"{e.get('status', 'failed')}: {str(e['error'])[:120]}",
                    _num(e, "p50_ms", "{:.3f}"), _num(e, "p95_ms", "{:.3f}"), _num(e, "tokens_per_s", "{:.1f}"),
                    _num(e, "launches_per_token", "{:.4g}"), _num(e, "achieved_tb_s", "{:.3f}"),
                    _num(e, "speedup_vs_hf_eager", "{:.2f}x"), _num(e, "percent_of_floor", "{:.1f} %"),
                    _num(floors.get(length, {}), "floor_ms", "{:.3f}"), record.get("from_run", "bench")))
        tables.append(table)
    return tables


def _git(root, *args) -> str:
    r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def _manifest_commit(root) -> str:
    """A copy of the tree without .git (on a GPU host) knows its commit from its deploy manifest."""
    path = Path(root) / MANIFEST
    return json.loads(path.read_text()).get("commit", "") if path.exists() else ""


def verdicts(root, results, hosts=None) -> dict:
    """{host: [Verdict per milestone]} for the given hosts (default: the configured targets and
    every host with evidence)."""
    root, results = Path(root), Path(results)
    config = _config(root)
    if hosts is None:
        base = results if results.is_absolute() else root / results
        hosts = list(dict.fromkeys([*config["targets"], *sorted(p.name for p in base.iterdir() if p.is_dir())]
                                   if base.is_dir() else config["targets"]))
    hashes = {}
    return {host: host_verdicts(root, results, host, config["hosts"].get(host), hashes) for host in hosts}


def render(root, results, md_path, html_path, stamp_path):
    root, results = Path(root), Path(results)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    hosts, rows, provenance, problems, docs = collect(root, results)
    verdict = verdicts(root, results)
    hosts = list(dict.fromkeys([*verdict, *hosts]))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(root / "report_templates"),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    commit = _git(root, "rev-parse", "HEAD") or _manifest_commit(root)
    context = dict(hosts=hosts, rows=rows, problems=problems, generated_at=started, provenance=provenance,
                   commit=commit[:12] or "unknown", bench=bench_tables(docs, provenance),
                   verdicts=verdict, milestones=[v.milestone for v in next(iter(verdict.values()), [])],
                   summary=summary(verdict), docs=docs, plots=figures(docs))
    Path(md_path).write_text(env.get_template("REPORT.md.j2").render(context))
    Path(html_path).write_text(env.get_template("report.html.j2").render(context))
    write_evidence(stamp_path, {
        "schema": SCHEMA, "rule": "report", "milestone": "report", "evidence": "REPORT.md",
        "argv": sys.argv, "git": {"commit": context["commit"], "dirty": bool(_git(root, "status", "--porcelain"))},
        "sources": hash_sources(root, "report"),
        "host": {"name": "local", "hostname": socket.gethostname(), "user": getpass.getuser()},
        "model": {}, "params": {}, "started_at": started,
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "status": "pass", "gates": {},
        # what it shows, so that a change to any host's evidence (targeted or not) reruns it
        "metrics": {"hosts": hosts, "invalid": [f"{path}: {why}" for path, why in problems],
                    "evidence": shown_evidence(results if results.is_absolute() else root / results),
                    # what was rendered, so that a hand edit of either file is caught (pipeline.audit)
                    "rendered": {"REPORT.md": sha256_file(md_path), "report.html": sha256_file(html_path)},
                    "verdicts": {host: {v.milestone: v.label for v in items} for host, items in verdict.items()}},
    })
    Path(f"{stamp_path}.sha256").unlink(missing_ok=True)  # the sidecar is for fetches only

"""Renders results/REPORT.md and a self-contained results/report.html (plots embedded as base64
SVG) from every host's evidence, plus results/report.json, the report's own sealed stamp (its
sources' hashes, so a template edit reruns only the report). Every metric cell names its evidence
file, rule, commit and host, and whether that evidence is fresh or stale against the current tree.
"""
import datetime
import getpass
import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jinja2

from fleet_decode.pipeline.audit import audit, shown_evidence
from fleet_decode.pipeline.evidence import MANIFEST, SCHEMA, write_evidence
from fleet_decode.pipeline.sources import EVIDENCE, hash_sources
from fleet_decode.report.plots import figures

ORDER = [rel for rels in EVIDENCE.values() for rel in rels]


@dataclass
class Cell:
    value: str
    gate: str | None
    passed: bool | None
    file: str
    rule: str
    commit: str
    host: str
    freshness: str


def _format(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        return f"{type(value).__name__}[{len(value)}]"
    return str(value)


def _cells(path: str, doc: dict, host: str, freshness: str):
    """(item, Cell) for each gate, then for each scalar metric, of one evidence file."""
    common = dict(file=path, rule=doc["rule"], commit=(doc["git"].get("commit") or "?")[:12]
                  + ("+dirty" if doc["git"].get("dirty") else ""), host=host, freshness=freshness)
    for name, g in doc["gates"].items():
        yield f"gate {name}", Cell(_format(g["value"]), f"{g['op']} {_format(g['bound'])}",
                                   g["passed"], **common)
    for name, value in doc["metrics"].items():
        if value is None or isinstance(value, (int, float, str, bool)):
            yield name, Cell(_format(value), None, None, **common)


def collect(root: Path, results: Path):
    """Hosts, table rows {(evidence, item): {host: Cell}}, problems, and evidence docs per host."""
    hosts, rows, problems, docs = [], {}, [], {}
    for state in audit(root, results.relative_to(root) if results.is_absolute() else results):
        rel_to_results = state.path.relative_to(root / results)
        host, rel = rel_to_results.parts[0], "/".join(rel_to_results.parts[1:])
        if host not in hosts:
            hosts.append(host)
        if state.state == "invalid":
            problems.append(f"results/{rel_to_results.as_posix()}: INVALID ({'; '.join(state.reasons)})")
            continue
        freshness = "fresh" if state.state == "fresh" else "stale: " + "; ".join(state.reasons)
        docs.setdefault(host, {})[rel] = state.doc
        for item, cell in _cells(f"results/{rel_to_results.as_posix()}", state.doc, host, freshness):
            rows.setdefault((rel, item), {})[host] = cell
    ordered = sorted(rows.items(), key=lambda kv: (ORDER.index(kv[0][0]) if kv[0][0] in ORDER
                                                   else len(ORDER), kv[0][0]))
    return hosts, ordered, problems, docs


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


@dataclass
class BenchTable:
    host: str
    cell: Cell  # provenance of the whole table (its value: the copy bandwidth the floor uses)
    rows: list


def _num(entry, key, fmt):
    value = entry.get(key)
    return "—" if value is None else fmt.format(value)


def bench_tables(rows, docs) -> list[BenchTable]:
    """Per host with bench evidence: every contender at every prompt length, with its ratios to HF
    eager and to the floor (bytes per token over the copy bandwidth measured in the same run)."""
    tables = []
    for (rel, item), by_host in rows:
        if rel != "bench/bench.json" or item != "copy_bandwidth_bytes_per_s":
            continue
        for host, cell in by_host.items():
            bench = docs[host][rel]["metrics"].get("bench", {})
            floors, table = bench.get("lengths", {}), BenchTable(host, cell, [])
            for name, record in bench.get("contenders", {}).items():
                for length in sorted(record.get("lengths", {}), key=int):
                    e = record["lengths"][length]
                    table.rows.append(BenchRow(
                        record.get("label", name), length, e.get("status", "?") if "error" not in e
                        else f"{e.get('status', 'failed')}: {str(e['error'])[:120]}",
                        _num(e, "p50_ms", "{:.3f}"), _num(e, "p95_ms", "{:.3f}"), _num(e, "tokens_per_s", "{:.1f}"),
                        _num(e, "launches_per_token", "{:.4g}"), _num(e, "achieved_tb_s", "{:.3f}"),
                        _num(e, "speedup_vs_hf_eager", "{:.2f}x"), _num(e, "percent_of_floor", "{:.1f} %"),
                        _num(floors.get(length, {}), "floor_ms", "{:.3f}")))
            tables.append(table)
    return tables


def _git(root, *args) -> str:
    r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def _manifest_commit(root) -> str:
    """A copy of the tree without .git (on a GPU host) knows its commit from its deploy manifest."""
    path = Path(root) / MANIFEST
    return json.loads(path.read_text()).get("commit", "") if path.exists() else ""


def render(root, results, md_path, html_path, stamp_path):
    root, results = Path(root), Path(results)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    hosts, rows, problems, docs = collect(root, results)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(root / "report_templates"),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    commit = _git(root, "rev-parse", "HEAD") or _manifest_commit(root)
    context = dict(hosts=hosts, rows=rows, problems=problems, generated_at=started,
                   commit=commit[:12] or "unknown", bench=bench_tables(rows, docs),
                   docs=docs, plots=figures(docs))
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
        "metrics": {"hosts": hosts, "invalid": problems,
                    "evidence": shown_evidence(results if results.is_absolute() else root / results)},
    })
    Path(f"{stamp_path}.sha256").unlink(missing_ok=True)  # the sidecar is for fetches only

"""Fresh, stale or invalid: what each evidence file under results/ is worth against the current tree.

fresh   - a valid sealed envelope whose recorded source hashes (and host settings) match now;
stale   - valid, but a declared source (named) or a host setting changed since it was made;
invalid - unreadable, not an envelope, or checksum mismatch (edited by hand);
missing - evidence that a configured target should have and does not.

The report (results/report.json, its stamp) is judged the same way, and is also stale when any
evidence it shows changed, appeared or went away since it was rendered: every host's, so evidence
of a host the run did not target (brought back from a GPU host and committed) reruns it too. The
stamp records the sha256 of REPORT.md and report.html as rendered, so an edited report is invalid.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path

from fleet_decode.pipeline.config import ConfigError, host_params, load
from fleet_decode.pipeline.evidence import InvalidEvidence, read_evidence, stale_reasons
from fleet_decode.pipeline.sources import EVIDENCE, RULE_SOURCES, changed_sources, hash_sources, sha256_file

REPORT_STAMP = "report.json"  # under results/: the report's own envelope
REPORT_FILES = ("REPORT.md", "report.html")  # under results/, their sha256 recorded in the stamp


@dataclass
class State:
    path: Path
    state: str  # fresh | stale | invalid | missing
    reasons: list = field(default_factory=list)
    doc: dict | None = None


def _envelope_or_state(path: Path, missing: str) -> State | dict:
    """The envelope at `path`, or the State that says why there is none (missing, invalid)."""
    if not path.exists():
        return State(path, "missing", [missing])
    try:
        return read_evidence(path)
    except InvalidEvidence as e:
        return State(path, "invalid", [str(e)])


def evidence_state(path, root, params: dict | None = None, _hashes: dict | None = None) -> State:
    """`params`: the host's current settings (None skips that comparison). `_hashes` caches
    hash_sources per rule across many files."""
    path = Path(path)
    doc = _envelope_or_state(path, "no evidence yet")
    if isinstance(doc, State):
        return doc
    if doc["rule"] not in RULE_SOURCES:
        return State(path, "invalid", [f"{path}: unknown rule {doc['rule']!r}"], doc)
    if _hashes is None:
        _hashes = {}
    if doc["rule"] not in _hashes:
        _hashes[doc["rule"]] = hash_sources(root, doc["rule"])
    reasons = stale_reasons(doc, _hashes[doc["rule"]], params)
    return State(path, "stale" if reasons else "fresh", reasons, doc)


def evidence_files(results) -> list[Path]:
    """Every evidence JSON under results/<host>/ (sidecars and the report's own stamp excluded)."""
    return sorted(p for p in Path(results).glob("*/**/*.json") if not p.name.startswith("."))


def shown_evidence(results) -> dict[str, str]:
    """The sha256 of every evidence file under results/<host>/, by its path under results/: what a
    report rendered from `results` shows (the report records it in its stamp)."""
    results = Path(results)
    return {path.relative_to(results).as_posix(): sha256_file(path) for path in evidence_files(results)}


def _sha256_or_none(path: Path) -> str | None:
    return sha256_file(path) if path.exists() else None


def report_state(root=".", results="results") -> State:
    """The report's state: missing, invalid (its stamp), stale (a report source changed, or an
    evidence file it shows, of any host, changed, appeared or went away), or fresh."""
    path = Path(root) / results / REPORT_STAMP
    doc = _envelope_or_state(path, "no report yet")
    if isinstance(doc, State):
        return doc
    rendered = doc["metrics"].get("rendered")
    if rendered is None:
        return State(path, "invalid", ["the stamp does not record the sha256 of REPORT.md and report.html"], doc)
    edited = [name for name in REPORT_FILES if rendered.get(name) != _sha256_or_none(path.parent / name)]
    if edited:
        return State(path, "invalid", [f"{path.parent.name}/{name} differs from what was rendered (edited by hand?)"
                                       for name in edited], doc)
    reasons = changed_sources(doc["sources"], hash_sources(root, "report"))
    shown = doc["metrics"].get("evidence")
    if shown is None:
        reasons.append("the report does not record which evidence it shows")
    else:
        reasons += [f"{Path(results).as_posix()}/{change}"
                    for change in changed_sources(shown, shown_evidence(Path(root) / results))]
    return State(path, "stale" if reasons else "fresh", reasons, doc)


def audit(root=".", results="results", config_path="config/config.yaml") -> list[State]:
    """Every evidence file under results/, then every one a configured target lacks (missing)."""
    root = Path(root)
    try:
        config = load(root / config_path)
    except (ConfigError, OSError):
        config = {"hosts": {}, "targets": []}
    hosts = config["hosts"]
    hashes, states = {}, []
    for path in evidence_files(root / results):
        host = path.relative_to(root / results).parts[0]
        params = host_params(hosts[host]) if host in hosts else None
        states.append(evidence_state(path, root, params, hashes))
    for host in config["targets"]:
        for rel in (rel for rels in EVIDENCE.values() for rel in rels):
            path = root / results / host / rel
            if not path.exists():
                states.append(State(path, "missing", [f"target {host} has no {rel}"]))
    return states


def main(argv=None) -> int:
    """Exit 1 when any evidence file or the report is invalid, or a configured target lacks evidence."""
    import argparse

    from rich.console import Console

    parser = argparse.ArgumentParser(prog="fleet-decode audit", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    parser.add_argument("--results", default="results")
    parser.add_argument("--json", action="store_true", help="print machine-readable states (evidence files)")
    args = parser.parse_args(argv)
    states = audit(args.root, args.results)
    report = report_state(args.root, args.results)
    root = Path(args.root)
    if args.json:
        print(json.dumps([{"path": str(s.path.relative_to(root)), "state": s.state,
                           "reasons": s.reasons} for s in states], indent=1))
    else:
        console = Console(highlight=False, soft_wrap=True)  # one line per file, greppable when piped
        style = {"fresh": "green", "stale": "yellow", "invalid": "bold red", "missing": "bold red"}

        def show(s: State, what: str = ""):
            why = f"  ({'; '.join(s.reasons)})" if s.reasons else ""
            console.print(f"[{style[s.state]}]{s.state:8}[/] {s.path.relative_to(root)}{what}{why}")

        for s in states:
            show(s)
        counts = {k: sum(s.state == k for s in states) for k in style}
        console.print(f"{len(states)} evidence files: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        show(report, " (the report)")
    return 1 if any(s.state in ("invalid", "missing") for s in states) or report.state == "invalid" else 0

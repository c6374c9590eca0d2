"""The content hashes that decide staleness, of the sources each rule declares (the milestone
table, fleet_decode.pipeline.milestones).

Hashes are of file contents only, so a fresh clone or a `touch` changes nothing, and an edit changes
exactly the rules that declare the file. The same declarations are hashed on the host (into the
evidence envelope), on the laptop (to decide what Snakemake reruns) and by `fleet-decode audit`.
"""
import hashlib
import os
from pathlib import Path

from fleet_decode.pipeline.milestones import LAB_BENCH, MILESTONES, REPORT_SOURCES

RULE_SOURCES = {name: list(rule.declared()) for name, rule in MILESTONES.items()} | {"report": list(REPORT_SOURCES)}
EVIDENCE = {name: rule.evidence_files() for name, rule in MILESTONES.items()}

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache"}


def sha256_file(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def declared_files(root, rule: str) -> list[str]:
    """Every existing file under the rule's declared entries, as sorted repo-relative paths."""
    root = Path(root)
    found = set()
    for entry in RULE_SOURCES[rule]:
        path = root / entry
        if path.is_file():
            found.add(entry)
        elif path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
                for name in filenames:
                    if not name.endswith(".pyc"):
                        found.add((Path(dirpath) / name).relative_to(root).as_posix())
    return sorted(found - set(LAB_BENCH))


def hash_sources(root, rule: str) -> dict[str, str]:
    return {rel: sha256_file(Path(root) / rel) for rel in declared_files(root, rule)}


def changed_sources(recorded: dict, current: dict) -> list[str]:
    """Paths whose hash differs, that appeared, or that disappeared, each with what happened."""
    changes = []
    for path in sorted(set(recorded) | set(current)):
        if path not in current:
            changes.append(f"{path} (removed)")
        elif path not in recorded:
            changes.append(f"{path} (added)")
        elif recorded[path] != current[path]:
            changes.append(f"{path} (changed)")
    return changes

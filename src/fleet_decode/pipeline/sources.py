"""What each rule's evidence depends on, and the content hashes that decide staleness.

A source entry is a file or a directory (every file below it). Hashes are of file contents only,
so a fresh clone or a `touch` changes nothing, and an edit changes exactly the rules that declare
the file. The same declarations are hashed on the host (into the evidence envelope), on the laptop
(to decide what Snakemake reruns) and by `fleet-decode audit`.
"""
import hashlib
import os
from pathlib import Path

_ENVELOPE = ["src/fleet_decode/pipeline/evidence.py"]
_MODEL = ["src/fleet_decode/__init__.py", "src/fleet_decode/model"]
_KERNELS = ["hip", "src/fleet_decode/kernels"]
_DECODER = [*_KERNELS, "src/fleet_decode/graph", "src/fleet_decode/sim",
            "src/fleet_decode/pipeline/backends.py"]

RULE_SOURCES = {
    "m0_host": ["remote/m0_host.py", *_ENVELOPE, *_MODEL],
    "m0_build": ["remote/m0_build.py", *_ENVELOPE, *_DECODER],
    "m1": ["remote/m1_kernels.py", *_ENVELOPE, *_MODEL, *_DECODER],
    "m2": ["remote/m2_layer.py", *_ENVELOPE, *_MODEL, *_DECODER],
    "m3": ["remote/m3_layers.py", *_ENVELOPE, *_MODEL, *_DECODER],
    "m4": ["remote/m4_e2e.py", *_ENVELOPE, *_MODEL, *_DECODER],
    "bench": ["remote/bench.py", *_ENVELOPE, *_MODEL, *_DECODER],
    "report": ["report_templates", "src/fleet_decode/report"],
}

# Evidence files per rule, relative to results/<host>/, and the entry point that writes them.
EVIDENCE = {
    "m0_host": ["m0/host.json"],
    "m0_build": ["m0/build.json"],
    "m1": ["m1/kernels.json"],
    "m2": ["m2/layer_0.json", "m2/layer_1.json"],
    "m3": ["m3/layers.json"],
    "m4": ["m4/e2e.json"],
    "bench": ["bench/bench.json"],
}

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache"}


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    return sorted(found)


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

"""Evidence that a rerun cannot lose.

Snakemake deletes a job's outputs before the job runs, and again when it fails, so a rerun that is
refused, cannot reach its host, fails or is killed would leave the old evidence deleted and nothing
in its place. So every output a run may redo is copied under `.work/kept/` when the workflow is
parsed, and put back wherever the output is missing once the run has ended (rules/common.smk's
onsuccess and onerror handlers) or, after a SIGKILL, when the next invocation parses the workflow.
An output that a job remade supersedes its kept copy, which is then dropped.
"""
import os
import shutil
from pathlib import Path

KEPT = Path(".work/kept")


def keep(root, paths) -> list[str]:
    """Copies each existing file of `paths` (relative to `root`) under root/.work/kept/, with its
    mtime; returns the paths kept."""
    root, kept = Path(root), []
    for rel in paths:
        source = root / rel
        if source.is_file():
            copy = root / KEPT / rel
            copy.parent.mkdir(parents=True, exist_ok=True)
            tmp = copy.with_name(f".{copy.name}.tmp-{os.getpid()}")
            shutil.copy2(source, tmp)
            os.replace(tmp, copy)  # a kill mid-copy never leaves a torn copy to restore
            kept.append(str(rel))
    return kept


def restore_missing(root) -> list[str]:
    """Puts back every kept file whose original is missing and drops those whose original exists
    (remade, or never removed); returns the paths restored."""
    root, restored = Path(root), []
    base = root / KEPT
    if not base.is_dir():
        return restored
    for copy in sorted(p for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")):
        rel = copy.relative_to(base)
        original = root / rel
        if original.exists():
            copy.unlink()
        else:
            original.parent.mkdir(parents=True, exist_ok=True)
            os.replace(copy, original)
            restored.append(rel.as_posix())
    return restored

"""The provenance envelope every milestone writes, and the checks that read it back.

On the host, a remote/ entry point wraps its work in `Milestone(...)`: the evidence JSON is written
once, atomically (temp + rename), only if the body finishes; a crash leaves nothing behind, and a
failing gate is written as status "fail". Beside it goes `<file>.sha256`, which the fetching side
checks. The envelope carries a checksum of its own canonical JSON, so a hand edit is detectable.
"""
import argparse
import datetime
import hashlib
import importlib
import json
import operator
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

from fleet_decode.pipeline.sources import changed_sources, hash_sources

SCHEMA = "fleet-decode/evidence/1"
MANIFEST = "DEPLOY_MANIFEST.json"
REQUIRED = {
    "schema": str, "rule": str, "milestone": str, "evidence": str, "argv": list, "git": dict,
    "sources": dict, "host": dict, "model": dict, "params": dict, "started_at": str,
    "finished_at": str, "status": str, "gates": dict, "metrics": dict, "checksum": str,
}
_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


class InvalidEvidence(ValueError):
    pass


def require(module: str, needed_for: str):
    """Imports `module` or stops with one line saying what is missing and what needed it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise SystemExit(f"error: {needed_for} needs {module}, which is not importable here "
                         f"({e}); is that part of the tree merged and deployed?") from None


def canonical_json(doc) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def checksum(doc: dict) -> str:
    return hashlib.sha256(canonical_json({k: v for k, v in doc.items() if k != "checksum"})).hexdigest()


def write_atomic(path, data: bytes):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_evidence(path, doc: dict):
    """Seals `doc` with its checksum and writes it and its `.sha256` sidecar atomically."""
    doc = dict(doc, checksum=checksum(doc))
    data = json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"
    write_atomic(path, data)
    write_atomic(f"{path}.sha256", f"{hashlib.sha256(data).hexdigest()}\n".encode())


def envelope_problems(doc) -> list[str]:
    """Why `doc` is not a valid sealed envelope (empty list: it is)."""
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    problems = [f"missing or mistyped key {k!r}" for k, t in REQUIRED.items()
                if not isinstance(doc.get(k), t)]
    if problems:
        return problems
    if doc["schema"] != SCHEMA:
        problems.append(f"schema {doc['schema']!r} is not {SCHEMA!r}")
    if doc["checksum"] != checksum(doc):
        problems.append("envelope checksum does not match its content (edited by hand?)")
    if doc["status"] not in ("pass", "fail"):
        problems.append(f"status {doc['status']!r} is neither pass nor fail")
    elif doc["status"] != ("pass" if all(g.get("passed") for g in doc["gates"].values()) else "fail"):
        problems.append("status disagrees with the gates")
    return problems


def read_evidence(path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise InvalidEvidence(f"{path}: unreadable ({e})") from None
    problems = envelope_problems(doc)
    if problems:
        raise InvalidEvidence(f"{path}: {problems[0]}")
    return doc


def stale_reasons(doc: dict, current_sources: dict, current_params: dict | None = None) -> list[str]:
    reasons = changed_sources(doc["sources"], current_sources)
    if current_params is not None:
        reasons += [f"config {k} changed" for k in sorted(set(doc["params"]) | set(current_params))
                    if doc["params"].get(k) != current_params.get(k)]
    return reasons


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def command_output(argv) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def host_fingerprint(name: str, details: bool = False) -> dict:
    """What the evidence says about the host: the config's name for it and what it runs, not which
    machine it is, unless the host's config sets `record_host_details`."""
    import torch
    import transformers

    gpu = arch = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_bytes": props.total_memory,
               "multiprocessors": props.multi_processor_count}
        arch = getattr(props, "gcnArchName", None) or f"sm_{props.major}{props.minor}"
    driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    fingerprint = {
        "name": name, "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "gpu": gpu, "arch": arch, "driver": driver,
        "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None),
        "torch": torch.__version__, "transformers": transformers.__version__,
        # SLURM's own name for the node (its NodeName need not be the hostname), as sacct and scontrol know it
        "slurm_node": os.environ.get("SLURMD_NODENAME") or os.environ.get("SLURM_JOB_NODELIST"),
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
    }
    if details:
        fingerprint.update(hostname=socket.gethostname(), executable=sys.executable)
    return fingerprint


def wrong_gpu(expected: str | None) -> str | None:
    """Why this host is not the GPU its config names in `expect_gpu` (a case-insensitive part of the
    GPU's name, e.g. "H200"), or None where it is or the config names none. A host name like "h200"
    says what its evidence stands for; a lent machine of another kind must not write it."""
    if not expected:
        return None
    import torch

    found = torch.cuda.get_device_properties(0).name if torch.cuda.is_available() else None
    if found is None:
        return f"its config expects a GPU named *{expected}*, and this machine has no GPU"
    if expected.lower() not in found.lower():
        return f"its config expects a GPU named *{expected}*, and this machine's is {found}"
    return None


def recorded_argv(argv: list[str], evidence: str, details: bool = False) -> list[str]:
    """The command as the evidence records it: the interpreter by name and the output by its path
    under results/<host>/, so no path of the host's file system is written down."""
    argv = list(argv)
    if "--out" in argv[:-1]:
        argv[argv.index("--out") + 1] = evidence
    return [sys.executable if details else Path(sys.executable).name, *argv]


def relative_paths(value, root: Path):
    """`value` with every string path inside the deployed tree made relative to it, and every
    other path under the host's work dir (the tree's grandparent) written as <workdir>/..."""
    tree, workdir = f"{root.resolve()}/", f"{root.resolve().parent.parent}/"
    if isinstance(value, str):
        return value.replace(tree, "").replace(workdir, "<workdir>/")
    if isinstance(value, dict):
        return {k: relative_paths(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [relative_paths(v, root) for v in value]
    return value


def deployed_git(root) -> dict:
    """Provenance of the tree we run from: its deploy manifest (a deployed tree has no .git)."""
    path = Path(root) / MANIFEST
    if not path.exists():
        raise SystemExit(f"error: {path} not found; run milestones from a tree deployed by the "
                         "pipeline (fleet_decode.pipeline.deploy), not from a checkout")
    manifest = json.loads(path.read_text())
    return {k: manifest.get(k) for k in ("commit", "tree", "dirty", "diff_sha256")}


def milestone_args(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", required=True, help="host name in the workflow config")
    parser.add_argument("--params", required=True, help="JSON of the host's settings (config.host_params)")
    parser.add_argument("--out", required=True, help="evidence file to write")
    parser.add_argument("--root", default=".", help="the deployed tree")
    return parser


class Milestone:
    """Collects gates and metrics; on a clean exit seals and writes the evidence file."""

    def __init__(self, rule: str, milestone: str, evidence: str, args):
        self.rule, self.milestone, self.evidence, self.args = rule, milestone, evidence, args
        self.params = json.loads(args.params)
        self.gates, self.metrics, self.model_info = {}, {}, {"source": self.params.get("model")}

    def __enter__(self):
        self.started_at = _now()
        self._clock = time.monotonic()
        self.git = deployed_git(self.args.root)
        wrong = wrong_gpu(self.params.get("expect_gpu"))
        if wrong:
            raise SystemExit(f"error: host {self.args.host}: {wrong}; nothing was run and no evidence written "
                             f"(expect_gpu in the workflow config)")
        self.progress(f"started on {self.args.host} ({self.params.get('backend')}, {self.params.get('model')})")
        return self

    def progress(self, message: str):
        """One line to stdout, flushed at once: the run's log, which the rule streams to the terminal."""
        print(f"[{self.rule} {time.monotonic() - self._clock:7.1f}s] {message}", flush=True)

    def gate(self, name: str, value, op: str, bound) -> bool:
        passed = bool(value is not None and _OPS[op](value, bound))
        self.gates[name] = {"value": value, "op": op, "bound": bound, "passed": passed}
        return passed

    def load_model(self):
        model_api = require("fleet_decode.model", f"{self.milestone} (model source)")
        import torch

        # The decoder under test runs BF16 on a GPU; the CPU simulator checks in fp32.
        dtype = torch.bfloat16 if self.device() == "cuda" else torch.float32
        model = model_api.load_model(self.params["model"], dtype=dtype, device=self.device())
        self.model_info["dtype"] = str(dtype).removeprefix("torch.")
        self.model_info["config_sha256"] = model_api.config_sha256(model.config)
        return model

    def prompt(self, model) -> list[int]:
        """The fixed prompt's first `prompt_tokens` ids, folded into the model's vocab."""
        model_api = require("fleet_decode.model", f"{self.milestone} (prompt)")
        return model_api.prompt_ids(self.params["prompt_tokens"], vocab_size=model.config.vocab_size)

    def device(self) -> str:
        return "cuda" if self.params.get("backend") == "gpu" else "cpu"

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.progress(f"stopped by {exc_type.__name__}: {exc}; no evidence written")
            return False
        root = Path(self.args.root)
        sources = hash_sources(root, self.rule)
        manifest_files = json.loads((root / MANIFEST).read_text()).get("files", {})
        edited_after_deploy = [p for p, h in sources.items() if manifest_files.get(p) != h]
        details = bool(self.params.get("record_host_details"))
        write_evidence(self.args.out, relative_paths({
            "schema": SCHEMA, "rule": self.rule, "milestone": self.milestone,
            "evidence": self.evidence, "argv": recorded_argv(sys.argv, self.evidence, details),
            "git": dict(self.git, dirty=bool(self.git.get("dirty") or edited_after_deploy)),
            "sources": sources, "host": host_fingerprint(self.args.host, details), "model": self.model_info,
            "params": self.params, "started_at": self.started_at, "finished_at": _now(),
            "status": "pass" if all(g["passed"] for g in self.gates.values()) else "fail",
            "gates": self.gates, "metrics": self.metrics,
        }, root))
        failed = [name for name, g in self.gates.items() if not g["passed"]]
        self.progress(f"evidence written: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}")
        return False

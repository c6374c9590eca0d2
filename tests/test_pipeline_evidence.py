"""The provenance envelope: written once and atomically, failing gates kept, crashes leave nothing,
and hand edits are detected by the checksum."""
import argparse
import json

import pytest

from fleet_decode.pipeline.evidence import (MANIFEST, InvalidEvidence, Milestone, envelope_problems,
                                            read_evidence)
from fleet_decode.pipeline.sources import hash_sources


@pytest.fixture
def deployed(tmp_path):
    """A minimal deployed tree: one declared source of m1 and a deploy manifest that matches it."""
    root = tmp_path / "tree"
    (root / "remote").mkdir(parents=True)
    (root / "remote" / "m1_kernels.py").write_text("print('m1')\n")
    files = hash_sources(root, "m1")
    (root / MANIFEST).write_text(json.dumps({"commit": "c0ffee" * 6 + "abcd", "tree": "t", "dirty": False,
                                             "diff_sha256": None, "files": files}))
    return root


def args_for(root, out):
    return argparse.Namespace(host="cpu", out=str(out), root=str(root),
                              params=json.dumps({"backend": "sim", "model": "tiny"}))


def test_envelope_has_provenance_and_a_failing_gate_is_kept(deployed, tmp_path):
    out = tmp_path / "results" / "m1" / "kernels.json"
    with Milestone("m1", "M1", "m1/kernels.json", args_for(deployed, out)) as m:
        m.gate("good", 1e-6, "<=", 1e-4)
        m.gate("bad", 0.5, "<=", 1e-4)
        m.metrics["note"] = "x"
    doc = read_evidence(out)
    assert doc["status"] == "fail"
    assert doc["gates"]["bad"] == {"value": 0.5, "op": "<=", "bound": 1e-4, "passed": False}
    assert doc["gates"]["good"]["passed"] is True
    assert doc["git"] == {"commit": "c0ffee" * 6 + "abcd", "tree": "t", "dirty": False, "diff_sha256": None}
    assert doc["sources"] == {"remote/m1_kernels.py": hash_sources(deployed, "m1")["remote/m1_kernels.py"]}
    assert doc["host"]["name"] == "cpu" and doc["host"]["torch"]
    assert (out.parent / "kernels.json.sha256").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["kernels.json", "kernels.json.sha256"]


def test_a_crash_leaves_no_evidence(deployed, tmp_path):
    out = tmp_path / "results" / "m1" / "kernels.json"
    with pytest.raises(RuntimeError):
        with Milestone("m1", "M1", "m1/kernels.json", args_for(deployed, out)) as m:
            m.gate("good", 0, "==", 0)
            raise RuntimeError("kernel launch failed")
    assert not out.exists() and not (tmp_path / "results").exists()


def test_a_source_edited_on_the_host_after_deploy_marks_the_evidence_dirty(deployed, tmp_path):
    (deployed / "remote" / "m1_kernels.py").write_text("print('edited on the host')\n")
    out = tmp_path / "kernels.json"
    with Milestone("m1", "M1", "m1/kernels.json", args_for(deployed, out)):
        pass
    assert read_evidence(out)["git"]["dirty"] is True


def test_running_outside_a_deployed_tree_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="DEPLOY_MANIFEST.json not found"):
        with Milestone("m1", "M1", "m1/kernels.json", args_for(tmp_path, tmp_path / "x.json")):
            pass


def test_checksum_catches_any_edit(deployed, tmp_path):
    out = tmp_path / "kernels.json"
    with Milestone("m1", "M1", "m1/kernels.json", args_for(deployed, out)) as m:
        m.gate("g", 1, "==", 1)
    doc = json.loads(out.read_text())
    assert envelope_problems(doc) == []
    doc["metrics"]["added"] = 1
    assert envelope_problems(doc) == ["envelope checksum does not match its content (edited by hand?)"]
    out.write_text(json.dumps({k: v for k, v in doc.items() if k != "gates"}))
    with pytest.raises(InvalidEvidence, match="missing or mistyped key 'gates'"):
        read_evidence(out)


@pytest.mark.parametrize("details", [False, True])
def test_evidence_records_repo_relative_paths_and_the_configured_host_name(deployed, tmp_path, monkeypatch, details):
    import socket
    import sys

    out = tmp_path / "runs" / "m1-x" / "out" / "m1" / "kernels.json"
    monkeypatch.setattr(sys, "argv", ["remote/m1_kernels.py", "--host", "cpu", "--out", str(out)])
    args = args_for(deployed, out)
    if details:
        args.params = json.dumps({"backend": "sim", "model": "tiny", "record_host_details": True})
    with Milestone("m1", "M1", "m1/kernels.json", args) as m:
        m.metrics["simulator"] = str(deployed.resolve() / "src" / "fleet_decode" / "sim" / "__init__.py")
        m.metrics["scratch"] = str(deployed.resolve().parent.parent / "runs" / "m1-x" / "scratch.bin")
    doc = read_evidence(out)
    assert doc["argv"][1:] == ["remote/m1_kernels.py", "--host", "cpu", "--out", "m1/kernels.json"]
    assert doc["metrics"] == {"simulator": "src/fleet_decode/sim/__init__.py",
                              "scratch": "<workdir>/runs/m1-x/scratch.bin"}
    assert doc["host"]["name"] == "cpu"
    assert str(tmp_path) not in out.read_text()
    if details:
        assert doc["host"]["hostname"] == socket.gethostname() and doc["argv"][0] == sys.executable
    else:
        assert "hostname" not in doc["host"] and "/" not in doc["argv"][0]


class _FakeGpu:
    """What torch.cuda.get_device_properties says of a GPU, as far as the evidence reads it."""

    def __init__(self, name):
        self.name, self.total_memory, self.multi_processor_count, self.major, self.minor = name, 80 << 30, 132, 9, 0


def _expecting(args, gpu):
    args.params = json.dumps({"backend": "gpu", "model": "tiny", "expect_gpu": gpu})
    return args


def test_a_host_that_expects_a_gpu_refuses_a_machine_without_one(deployed, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "results" / "m1" / "kernels.json"
    with pytest.raises(SystemExit, match=r"host cpu: its config expects a GPU named \*H200\*, and this machine "
                                         r"has no GPU; nothing was run and no evidence written"):
        with Milestone("m1", "M1", "m1/kernels.json", _expecting(args_for(deployed, out), "H200")):
            pytest.fail("the milestone's body ran")
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("name, runs", [("NVIDIA H100 80GB HBM3", False), ("NVIDIA H200", True),
                                        ("nvidia h200 nvl", True)])
def test_a_host_that_expects_a_gpu_runs_only_on_that_gpu(deployed, tmp_path, monkeypatch, name, runs):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: _FakeGpu(name))
    out = tmp_path / "results" / "m1" / "kernels.json"
    args = _expecting(args_for(deployed, out), "H200")
    if not runs:
        with pytest.raises(SystemExit, match=f"expects a GPU named \\*H200\\*, and this machine's is {name};"):
            with Milestone("m1", "M1", "m1/kernels.json", args):
                pytest.fail("the milestone's body ran")
        assert not out.exists()
        return
    with Milestone("m1", "M1", "m1/kernels.json", args) as m:
        m.gate("ran", 1, "==", 1)
    doc = read_evidence(out)
    assert doc["host"]["gpu"]["name"] == name and doc["params"]["expect_gpu"] == "H200"
    assert doc["status"] == "pass"

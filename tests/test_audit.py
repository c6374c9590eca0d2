"""`python -m fleet_decode audit`: fresh / stale (naming the changed source) / invalid (hand edit)."""
import json
import os
import subprocess
import sys

import pytest

from pipeline_helpers import built_pipeline, fresh_clone


pytestmark = pytest.mark.slow  # the first test of the session builds the pipeline (~1 min)


@pytest.fixture
def clone(tmp_path_factory, tmp_path):
    return fresh_clone(built_pipeline(tmp_path_factory), tmp_path / "clone")


def audit(clone):
    result = subprocess.run([sys.executable, "-m", "fleet_decode", "audit", "--json"], cwd=clone,
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(clone / "src")))
    return result.returncode, {s["path"]: s for s in json.loads(result.stdout)}


def test_committed_evidence_is_fresh(clone):
    rc, states = audit(clone)
    assert rc == 0
    assert len(states) == 10  # every milestone's evidence of the one host
    assert {s["state"] for s in states.values()} == {"fresh"}


def test_an_edited_source_makes_its_evidence_stale_and_says_which(clone):
    script = clone / "remote" / "m1_kernels.py"
    script.write_text(script.read_text() + "\n# an edit\n")
    rc, states = audit(clone)
    assert rc == 0
    assert states["results/cpu/m1/kernels.json"]["state"] == "stale"
    assert states["results/cpu/m1/kernels.json"]["reasons"] == ["remote/m1_kernels.py (changed)"]
    assert all(s["state"] == "fresh" for p, s in states.items() if p != "results/cpu/m1/kernels.json")


def test_a_hand_edited_evidence_file_is_invalid(clone):
    path = clone / "results" / "cpu" / "m4" / "e2e.json"
    doc = json.loads(path.read_text())
    doc["gates"]["tokens_generated"]["value"] += 1
    path.write_text(json.dumps(doc, indent=1))
    rc, states = audit(clone)
    assert rc == 1
    assert states["results/cpu/m4/e2e.json"]["state"] == "invalid"
    assert "checksum" in states["results/cpu/m4/e2e.json"]["reasons"][0]


def test_human_output_names_each_state(clone):
    (clone / "results" / "cpu" / "m0" / "build.json").write_text("{not json")
    result = subprocess.run([sys.executable, "-m", "fleet_decode", "audit"], cwd=clone,
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(clone / "src")))
    assert result.returncode == 1
    assert "invalid  results/cpu/m0/build.json" in result.stdout
    assert "fresh    results/cpu/m1/kernels.json" in result.stdout
    assert "10 evidence files: 9 fresh, 0 stale, 1 invalid" in result.stdout


def test_the_report_is_judged_too_and_goes_stale_with_any_hosts_evidence(clone):
    def human():
        return subprocess.run([sys.executable, "-m", "fleet_decode", "audit"], cwd=clone, capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=str(clone / "src"))).stdout

    assert "fresh    results/report.json (the report)" in human()
    bench = clone / "results" / "cpu" / "bench" / "bench.json"
    (clone / "results" / "h200" / "bench").mkdir(parents=True)
    (clone / "results" / "h200" / "bench" / "bench.json").write_bytes(bench.read_bytes())
    assert "stale    results/report.json (the report)  (results/h200/bench/bench.json (added))" in human()


def test_an_edited_report_is_invalid_and_fails_the_audit(clone):
    report = clone / "results" / "REPORT.md"
    report.write_text(report.read_text().replace("PASS", "PASS!", 1))
    result = subprocess.run([sys.executable, "-m", "fleet_decode", "audit"], cwd=clone, capture_output=True,
                            text=True, env=dict(os.environ, PYTHONPATH=str(clone / "src")))
    assert result.returncode == 1
    assert "invalid  results/report.json (the report)  (results/REPORT.md differs from what was rendered" in result.stdout


def test_evidence_missing_for_a_configured_target_is_listed_and_fails_the_audit(clone):
    (clone / "results" / "cpu" / "m2" / "layer_1.json").unlink()
    rc, states = audit(clone)
    assert rc == 1
    assert states["results/cpu/m2/layer_1.json"]["state"] == "missing"
    assert states["results/cpu/m2/layer_1.json"]["reasons"] == ["target cpu has no m2/layer_1.json"]

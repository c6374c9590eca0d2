"""How a run ends and what it says: `snakemake report` ends with the verdict per host,
`--config strict=true` fails a run with a failing gate, a dry run names the source that changed."""
import pytest

from pipeline_helpers import built_pipeline, fresh_clone, git, snakemake

pytestmark = pytest.mark.slow  # the first test of the session builds the pipeline (~1 min)


@pytest.fixture
def clone(tmp_path_factory, tmp_path):
    return fresh_clone(built_pipeline(tmp_path_factory), tmp_path / "clone")


def test_snakemake_report_ends_with_the_verdict_per_host(clone):
    out = snakemake(clone, "report").stdout
    assert "cpu: M0 PASS  M1 PASS  M2 PASS  M3 PASS  M4 PASS  bench PASS" in out
    assert "  M3    worst layer " in out and "from exact" in out
    assert "  bench P50 " in out and "% of floor" in out


def test_strict_fails_the_run_on_a_failing_gate_and_keeps_its_evidence(clone):
    script = clone / "remote" / "m4_e2e.py"
    script.write_text(script.read_text() + '    m.gate("deliberately_failing", 1, "==", 0)\n')  # inside the with block
    git(clone, "commit", "-qam", "a gate that fails")
    relaxed = snakemake(clone, "report")
    assert "M4 FAIL" in relaxed.stdout and "  M4 " in relaxed.stdout
    strict = snakemake(clone, "report", "--config", "strict=true", check=False)
    assert strict.returncode != 0
    assert "strict: cpu M4 FAIL" in strict.stdout + strict.stderr
    assert '"status": "fail"' in (clone / "results" / "cpu" / "m4" / "e2e.json").read_text()


def test_a_dry_run_names_the_source_that_changed_for_each_job(clone):
    script = clone / "remote" / "m3_layers.py"
    script.write_text(script.read_text() + "\n# an edit\n")
    out = snakemake(clone, "-n").stderr
    assert "to redo results/cpu/m3/layers.json: remote/m3_layers.py (changed)" in out
    assert "to redo results/cpu/m4/e2e.json" not in out  # it reruns after m3, which Snakemake says itself

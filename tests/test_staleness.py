"""Staleness by content, through `snakemake -n` in fresh clones of a repo whose
committed evidence came from a real run of the default workflow."""
import shutil
from pathlib import Path

import pytest

from pipeline_helpers import built_pipeline, fresh_clone, planned_jobs, run, snakemake

DECODER_JOBS = {"m0_build": 1, "m1": 1, "m2": 2, "m3": 1, "m4": 1, "bench": 1, "generate": 1, "render_report": 1,
                "all": 1}


pytestmark = pytest.mark.slow  # the first test of the session builds the pipeline (~1 min)


@pytest.fixture
def clone(tmp_path_factory, tmp_path):
    return fresh_clone(built_pipeline(tmp_path_factory), tmp_path / "clone")


def dry_run(clone: Path) -> dict:
    result = snakemake(clone, "-n")
    return planned_jobs(result.stdout + result.stderr)


def test_fresh_clone_with_matching_evidence_reruns_nothing(clone):
    output = snakemake(clone, "-n")
    assert planned_jobs(output.stdout + output.stderr) == {}
    assert "Nothing to be done" in output.stdout + output.stderr
    assert not (clone / ".work" / "hosts").exists()  # no host was reached, not even this one
    assert "mi300x" not in output.stdout + output.stderr and "h200" not in output.stdout + output.stderr


def test_touch_without_content_change_reruns_nothing(clone):
    tracked = run(["git", "ls-files"], cwd=clone).stdout.split()
    run(["touch", *tracked], cwd=clone)
    assert dry_run(clone) == {}


def test_task_kernel_edit_reruns_m1_to_m4_and_bench_not_the_fingerprint(clone):
    kernel = sorted((clone / "hip" / "tasks").glob("*"))[0]
    kernel.write_text(kernel.read_text() + "\n// an edit\n")
    jobs = dry_run(clone)
    assert jobs == DECODER_JOBS
    assert "m0_host" not in jobs and "baselines" not in jobs  # the torch contenders stay timed
    assert (clone / ".work/triggers/cpu/m1/kernels.json.trigger").read_text().startswith(
        f"hip/tasks/{kernel.name} (changed)")


def test_bench_code_edit_reruns_the_bench_and_its_baselines_not_the_decoder_checks(clone):
    timing = clone / "src" / "fleet_decode" / "bench" / "timing.py"
    timing.write_text(timing.read_text() + "\n# an edit\n")
    # generate follows the bench (never beside it on the GPU); the baselines come last
    assert dry_run(clone) == {"bench": 1, "generate": 1, "baselines": 1, "render_report": 1, "all": 1}
    assert (clone / ".work/triggers/cpu/bench/baselines.json.trigger").read_text().startswith(
        "src/fleet_decode/bench/timing.py (changed)")


def test_template_edit_reruns_only_the_report(clone):
    template = clone / "report_templates" / "REPORT.md.j2"
    template.write_text(template.read_text() + "\n")
    assert dry_run(clone) == {"render_report": 1, "all": 1}


def test_evidence_of_a_host_the_run_does_not_target_reruns_only_the_report(clone):
    # what happens when a GPU host's evidence is brought back and committed, then `snakemake report`
    shutil.copytree(clone / "results" / "cpu", clone / "results" / "h200")
    assert dry_run(clone) == {"render_report": 1, "all": 1}
    assert "results/h200/m0/host.json (added)" in (clone / ".work/triggers/report.trigger").read_text()


def test_changed_host_setting_makes_that_hosts_evidence_stale(clone):
    config = clone / "config" / "config.yaml"
    config.write_text(config.read_text().replace("decode_tokens: 3", "decode_tokens: 4"))
    jobs = dry_run(clone)
    assert set(jobs) == {"m0_host", "baselines", *DECODER_JOBS}  # the baselines time the same decode
    assert "config decode_tokens changed" in (clone / ".work/triggers/cpu/m4/e2e.json.trigger").read_text()

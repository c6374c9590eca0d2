"""Evidence is never lost: a rerun that is refused (dirty tree), cannot reach its host, fails, or
is killed leaves the previous evidence in place (pipeline.safekeep, pipeline.run.preflight,
rules/common.smk's onstart / onsuccess / onerror)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline_helpers import built_pipeline, free_port, fresh_clone, git, snakemake

from fleet_decode.pipeline.safekeep import keep, restore_missing

M4 = "results/cpu/m4/e2e.json"


def test_kept_files_come_back_only_where_missing(tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / "results" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "results" / name).write_text(name)
    assert keep(tmp_path, ["results/a.json", "results/b.json", "results/none.json"]) == ["results/a.json", "results/b.json"]
    (tmp_path / "results" / "a.json").unlink()  # removed by a job that then failed
    (tmp_path / "results" / "b.json").write_text("remade")  # remade by a job that finished
    assert restore_missing(tmp_path) == ["results/a.json"]
    assert (tmp_path / "results" / "a.json").read_text() == "a.json"
    assert (tmp_path / "results" / "b.json").read_text() == "remade"  # the new evidence wins
    assert restore_missing(tmp_path) == []  # nothing kept any longer


@pytest.fixture
def clone(tmp_path_factory, tmp_path):
    return fresh_clone(built_pipeline(tmp_path_factory), tmp_path / "clone")


def results(clone) -> dict:
    return {p.relative_to(clone).as_posix(): p.read_bytes() for p in (clone / "results").rglob("*") if p.is_file()}


def commit_edit(clone, rel, prefix):
    path = clone / rel
    path.write_text(prefix + path.read_text())
    git(clone, "commit", "-qam", f"edit {rel}")


def assert_refused_leaving_results_as_they_were(clone, why):
    before = results(clone)
    r = snakemake(clone, "report", check=False)
    assert r.returncode != 0
    assert "nothing was run" in r.stderr and why in r.stderr
    assert results(clone) == before


@pytest.mark.slow
def test_a_refused_rerun_removes_nothing(clone):
    script = clone / "remote" / "m4_e2e.py"
    script.write_text(script.read_text() + "\n# uncommitted\n")  # stale and dirty
    assert_refused_leaving_results_as_they_were(clone, "refusing to deploy")


@pytest.mark.slow
def test_an_unreachable_host_is_named_before_anything_is_removed(clone, tmp_path):
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host fleet-closed\n  HostName 127.0.0.1\n  Port {free_port()}\n"
                          f"  UserKnownHostsFile {tmp_path}/known_hosts\n")
    config = yaml.safe_load((clone / "config" / "config.yaml").read_text())
    config["hosts"]["far"] = dict(config["hosts"]["cpu"], transport="ssh", ssh_alias="fleet-closed")
    config["targets"], config["ssh_config"] = ["cpu", "far"], str(ssh_config)
    (clone / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    subprocess.run(["cp", "-r", str(clone / "results" / "cpu"), str(clone / "results" / "far")], check=True)
    (clone / "results" / "far" / "bench" / "bench.json").unlink()  # so far has a job to run
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "a host that cannot be reached")
    assert_refused_leaving_results_as_they_were(clone, "host far cannot be reached")


@pytest.mark.slow
def test_a_failed_job_gets_its_old_evidence_back(clone):
    commit_edit(clone, "remote/m4_e2e.py", 'raise SystemExit("deliberately broken")\n')
    before = results(clone)
    r = snakemake(clone, "report", check=False)
    assert r.returncode != 0 and "deliberately broken" in r.stderr
    assert f"restored {M4}" in r.stderr
    assert results(clone) == before


@pytest.mark.slow
def test_a_killed_run_gets_its_old_evidence_back_on_the_next_invocation(clone):
    commit_edit(clone, "remote/m4_e2e.py", "import time\ntime.sleep(300)\n")
    before = results(clone)
    env = dict(os.environ, PYTHONPATH=str(clone / "src"))
    process = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "report"], cwd=clone, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(1200):  # until Snakemake has removed m4's evidence to rerun it
            if not (clone / M4).exists() or process.poll() is not None:
                break
            time.sleep(0.1)
        assert not (clone / M4).exists(), "snakemake never started m4"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        try:  # what the killed Snakemake left behind: its job's own process
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in (clone / ".work" / "hosts" / "cpu" / "runs").glob("m4-*/pid"):  # the detached run
            try:
                os.killpg(int(pid.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    assert not (clone / M4).exists()
    r = snakemake(clone, "-n", "report")
    assert f"restored {M4}" in r.stderr
    assert results(clone) == before

"""Two SSH hosts in one invocation, each in a network namespace of its own with its own sshd: both
run the whole workflow side by side (`--cores 2`), the report shows both; then one is cut off
(its link taken down) while a milestone runs there, and then it is unreachable from the start: each
time the other still completes its evidence, and the cut one fails naming itself with what it had
before left intact."""
import datetime
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet_helpers import NetnsHost, netns_unavailable
from pipeline_helpers import host_entry, make_repo, snakemake

from fleet_decode.pipeline.audit import audit
from fleet_decode.pipeline.sources import EVIDENCE

pytestmark = pytest.mark.slow

NAMES = ("fleet-a", "fleet-b")
FILES = [rel for rels in EVIDENCE.values() for rel in rels]
RERUN = ("m3/layers.json", "m4/e2e.json", "bench/bench.json", "generate/generate.json")  # what `--forcerun m3` remakes


@dataclass
class Fleet:
    repo: Path
    hosts: dict  # name -> NetnsHost
    workdirs: dict  # name -> the host's work dir


def evidence_bytes(repo: Path, host: str) -> dict:
    return {rel: (repo / "results" / host / rel).read_bytes() for rel in FILES
            if (repo / "results" / host / rel).exists()}


def running_runs(workdir: Path, rule: str) -> list[Path]:
    """Run directories of `rule` that have started (pid written) and not ended (no exit code)."""
    return [d for d in (workdir / "runs").glob(f"{rule}-*")
            if (d / "pid").exists() and not (d / "exitcode").exists()]


def stop_orphaned_runs(workdir: Path):
    """A cut host's run goes on (it was started detached); end it by its own process group."""
    for run_dir in running_runs(workdir, "*"):
        try:
            os.killpg(int((run_dir / "pid").read_text()), signal.SIGTERM)
        except (ValueError, ProcessLookupError):
            pass


def when(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("fleet")
    base = 2 * (os.getpid() % 120)  # two /24s of 10.231.x.0 per test process, so that runs side by side differ
    hosts, workdirs = {}, {name: tmp / f"{name} work" for name in NAMES}
    try:
        for i, name in enumerate(NAMES, start=1):
            hosts[name] = NetnsHost(base + i, tmp / f"sshd-{name}")
        ssh_config = tmp / "ssh_config"
        ssh_config.write_text("".join(hosts[name].sshd.alias(name) for name in NAMES))
        entries = {name: host_entry(transport="ssh", ssh_alias=name, workdir=str(workdirs[name]))
                   for name in NAMES}
        repo = make_repo(tmp / "laptop", entries, list(NAMES), ssh_config=ssh_config)
        yield Fleet(repo, hosts, workdirs)
    finally:
        for workdir in workdirs.values():
            if (workdir / "runs").exists():
                stop_orphaned_runs(workdir)
        for host in hosts.values():
            host.close()


@pytest.fixture(scope="module")
def first_run(fleet):
    """Both hosts, from nothing to the report, two jobs at a time."""
    snakemake(fleet.repo, "report", cores=2)
    return {name: evidence_bytes(fleet.repo, name) for name in NAMES}


def test_two_hosts_run_side_by_side_and_the_report_shows_both(fleet, first_run):
    states = audit(fleet.repo)
    assert sorted(str(s.path.relative_to(fleet.repo)) for s in states) == sorted(
        f"results/{name}/{rel}" for name in NAMES for rel in FILES)
    assert {s.state for s in states} == {"fresh"}
    for s in states:
        assert s.doc["host"]["name"] == s.path.relative_to(fleet.repo / "results").parts[0]

    # Side by side, not one after the other: some job of one host ran while one of the other did.
    spans = {name: [(when(s.doc["started_at"]), when(s.doc["finished_at"])) for s in states
                    if s.doc["host"]["name"] == name] for name in NAMES}
    assert any(a0 < b1 and b0 < a1 for a0, a1 in spans["fleet-a"] for b0, b1 in spans["fleet-b"])

    report = (fleet.repo / "results" / "REPORT.md").read_text()
    assert "| evidence | item | fleet-a | fleet-b |" in report
    for name in NAMES:
        assert f"| `results/{name}/m4/e2e.json` | m4 |" in report
        assert f"results/{name}/bench/bench.json" in (fleet.repo / "results" / "report.html").read_text()


def snakemake_cutting(fleet, host: str, rule: str, log_path: Path):
    """`snakemake --cores 2 --forcerun m3 report`; takes `host`'s link down once its `rule` runs there
    (rule None: before the start). Returns (exit code, output, when it started). A run that does not
    end fails the test with every process's Python stacks (faulthandler, on SIGABRT) in the message,
    and leaves no Snakemake lock behind for the next test."""
    env = dict(os.environ, PYTHONPATH=str(fleet.repo / "src"), PYTHONFAULTHANDLER="1")
    started = time.time()
    if rule is None:
        fleet.hosts[host].cut()
    with open(log_path, "w+") as log:
        # Its own process group: Snakemake spawns each job as a child process, and a hang may be in any.
        run = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "--forcerun", "m3", "report"],
                               cwd=fleet.repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            if rule is not None:
                deadline = time.monotonic() + 300  # a guard against a hung run, not a timing claim
                while not running_runs(fleet.workdirs[host], rule) and run.poll() is None \
                        and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert running_runs(fleet.workdirs[host], rule), f"{rule} never ran on {host}"
                fleet.hosts[host].cut()
            run.wait(timeout=540)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGABRT)  # each Python process writes its threads' stacks to the log
            time.sleep(3)
            log.seek(0)
            pytest.fail(f"snakemake did not end within 540 s of the cut; its log, stacks last:\n{log.read()[-12000:]}")
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
            if run.returncode is not None and run.returncode < 0:  # killed: its lock would stop the next test
                snakemake(fleet.repo, "--unlock", check=False)
        log.seek(0)
        return run.returncode, log.read(), started


def assert_complete_and_remade(fleet, host: str, before: dict, started: float):
    """Every evidence file of `host` is there and fresh; those `--forcerun m3` reruns were made
    after `started`, the others are byte for byte what they were."""
    after = evidence_bytes(fleet.repo, host)
    assert sorted(after) == sorted(FILES)
    states = {s.path.relative_to(fleet.repo / "results" / host).as_posix(): s
              for s in audit(fleet.repo) if s.path.is_relative_to(fleet.repo / "results" / host)}
    assert {s.state for s in states.values()} == {"fresh"}
    for rel in FILES:
        if rel in RERUN:
            assert when(states[rel].doc["started_at"]) >= int(started), rel
        else:
            assert after[rel] == before[rel], rel


def assert_untouched_but_m3(fleet, host: str, before: dict):
    """What the failed host had is as it was; only its M3 (the job that failed) may be gone."""
    now = evidence_bytes(fleet.repo, host)
    for rel, data in now.items():
        assert data == before[rel], rel
    assert set(FILES) - {"m3/layers.json"} <= set(now)


def test_a_host_cut_off_mid_run_fails_clearly_and_the_other_keeps_complete_evidence(fleet, first_run, tmp_path):
    before = {name: evidence_bytes(fleet.repo, name) for name in NAMES}
    rc, output, started = snakemake_cutting(fleet, "fleet-b", "m3", tmp_path / "snakemake.log")

    assert rc != 0
    assert "fleet-b: connection lost during m3" in output, output[-4000:]
    assert_complete_and_remade(fleet, "fleet-a", before["fleet-a"], started)
    assert_untouched_but_m3(fleet, "fleet-b", before["fleet-b"])

    # Both hosts side by side in a report rendered from what there is now.
    from fleet_decode.report import render

    out = tmp_path / "report"
    out.mkdir()
    render(fleet.repo, fleet.repo / "results", out / "REPORT.md", out / "report.html", out / "report.json")
    report = (out / "REPORT.md").read_text()
    assert "| evidence | item | fleet-a | fleet-b |" in report
    assert "| `results/fleet-a/m4/e2e.json` | m4 |" in report
    assert "| `results/fleet-b/m2/layer_0.json` | m2 |" in report


def test_an_unreachable_host_fails_at_once_and_the_other_still_runs_to_the_end(fleet, first_run, tmp_path):
    # The other host's M4 and bench come after the unreachable host's failure here: only with
    # keep-going (the workflow profile) do they still run.
    before = {name: evidence_bytes(fleet.repo, name) for name in NAMES}
    rc, output, started = snakemake_cutting(fleet, "fleet-b", None, tmp_path / "snakemake.log")

    assert rc != 0
    assert "fleet-b: cannot reach 'fleet-b'" in output, output[-4000:]
    assert_complete_and_remade(fleet, "fleet-a", before["fleet-a"], started)
    assert_untouched_but_m3(fleet, "fleet-b", before["fleet-b"])

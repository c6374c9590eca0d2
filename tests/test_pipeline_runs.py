"""Runs on a host: old run directories pruned per rule, newest kept; a run an interrupted
invocation left behind found again by what it computes; two runs of one host one at a time
(pipeline.run, pipeline.transport)."""
import os
import shutil
import subprocess
import time

import pytest

from fleet_decode.pipeline.run import one_at_a_time, prune_runs, run_key, run_name
from fleet_decode.pipeline.transport import LocalTransport, TransportError


def make_runs(root, rule, n):
    names = [run_name(rule, f"20261130T1000{i:02d}", f"{i:06x}") for i in range(n)]
    for name in names:
        (root / "runs" / name / "out").mkdir(parents=True)
        (root / "runs" / name / "log").write_text("a log\n")
    return names


def test_only_the_rules_oldest_runs_beyond_keep_are_removed(tmp_path):
    m1, m2, m0 = make_runs(tmp_path, "m1", 7), make_runs(tmp_path, "m2", 2), make_runs(tmp_path, "m0_host", 4)
    (tmp_path / "runs" / "m1-notes").mkdir()  # not a run's name: never touched
    removed = prune_runs(LocalTransport("t"), str(tmp_path), "m1", keep=3, current=f"{tmp_path}/runs/{m1[-1]}")
    assert removed == m1[:4]
    left = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert left == sorted([*m1[4:], *m2, *m0, "m1-notes"])


def test_the_current_run_is_kept_whatever_its_age_and_nothing_to_prune_is_fine(tmp_path):
    m4 = make_runs(tmp_path, "m4", 3)
    removed = prune_runs(LocalTransport("t"), str(tmp_path), "m4", keep=1, current=f"{tmp_path}/runs/{m4[0]}")
    assert removed == [m4[1]]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [m4[0], m4[2]]
    assert prune_runs(LocalTransport("t"), str(tmp_path / "elsewhere"), "m4", keep=1, current="") == []


def test_a_pending_run_with_the_same_key_is_found_and_nothing_else(tmp_path):
    import os
    import signal
    import time

    transport, runs = LocalTransport("t"), tmp_path / "runs"
    live, killed, done, failed, fetched, other = (str(runs / run_name("bench", f"20261130T10000{i}", f"{i:06x}"))
                                                  for i in range(6))
    transport.start(live, "sleep 60", key="K")
    transport.start(killed, "sleep 60", key="K")
    transport.start(done, "true", key="D")
    transport.start(failed, "false", key="K")
    transport.start(fetched, "true", key="K")
    transport.start(other, "sleep 60", key="L")
    try:
        transport.wait(done, "done", timeout_s=20)
        transport.wait(fetched, "fetched", timeout_s=20)
        transport.check(f"touch {fetched}/fetched", "marking")
        with pytest.raises(TransportError):
            transport.wait(failed, "failed", timeout_s=20)
        os.kill(int((runs / killed.rsplit("/", 1)[1] / "pid").read_text()), signal.SIGKILL)
        for _ in range(100):  # until the killed run's process is gone (no exit code: it was killed)
            if transport.sh(f"kill -0 $(cat {killed}/pid)").rc != 0:
                break
            time.sleep(0.05)
        # K: `killed`, `failed` and `fetched` are newer than `live`, but dead, failed or fetched
        assert transport.pending_run(str(runs), "K") == live.rsplit("/", 1)[1]
        assert transport.pending_run(str(runs), "D") == done.rsplit("/", 1)[1]  # ended well, never fetched
        assert transport.pending_run(str(runs), "L") == other.rsplit("/", 1)[1]
        assert transport.pending_run(str(runs), "M") is None
        assert transport.pending_run(str(tmp_path / "no-runs-yet"), "K") is None
    finally:  # each run is its own process group (setsid): end the sleeps too
        for run in (live, killed, other):
            transport.sh(f"kill -- -$(cat {run}/pid) 2>/dev/null")


def test_the_run_key_names_what_is_computed():
    argv = ["python3", "remote/bench.py", "--host", "h200", "--params", '{"seed": 0}']
    key = run_key("h200", "bench", "/w/trees/abc", argv, {"A": "1"})
    assert key == run_key("h200", "bench", "/w/trees/abc", list(argv), {"A": "1"})
    assert key != run_key("h200", "bench", "/w/trees/abd", argv, {"A": "1"})  # another tree
    assert key != run_key("h200", "bench", "/w/trees/abc", [*argv[:-1], '{"seed": 1}'], {"A": "1"})
    assert key != run_key("h200", "bench", "/w/trees/abc", argv, {"A": "2"})


def _start_two_runs(tmp_path, path_env):
    """Two runs of one host started together, each logging its start and end into one file."""
    trace = tmp_path / "trace"
    script = f'echo "start $0" >> {trace}; sleep 0.6; echo "end $0" >> {trace}'
    runs = []
    for name in ("a", "b"):
        command = one_at_a_time(str(tmp_path), "X=1", ["sh", "-c", script, name], str(tmp_path / "host.lock"))
        runs.append(subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PATH=path_env)))
        deadline = time.monotonic() + 10
        while name == "a" and not trace.exists() and time.monotonic() < deadline:  # a is running first
            time.sleep(0.02)
    logs = [r.communicate(timeout=20)[0] for r in runs]
    assert all(r.returncode == 0 for r in runs)
    return trace.read_text().splitlines(), logs


def test_two_runs_on_one_host_take_turns_and_the_waiting_one_says_so(tmp_path):
    lines, logs = _start_two_runs(tmp_path, os.environ["PATH"])
    assert lines == ["start a", "end a", "start b", "end b"]
    assert logs[0] == "" and logs[1].startswith("waiting for another milestone on this host to finish")


def test_a_host_without_flock_runs_unlocked(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "sleep"):  # everything the runs need but flock
        (bin_dir / tool).symlink_to(shutil.which(tool))
    lines, logs = _start_two_runs(tmp_path, str(bin_dir))
    assert sorted(lines[:2]) == ["start a", "start b"]  # side by side
    assert logs == ["", ""]

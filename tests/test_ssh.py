"""The SSH transport against a real sshd on 127.0.0.1: host keys, unreachable hosts, detached runs
that survive a dropped connection, failing commands, verified fetches, shell quoting."""
import hashlib
import os
import shlex
import threading
import time

import pytest

from pipeline_helpers import Sshd

from fleet_decode.pipeline.transport import SshTransport, TransportError, open_transport


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    if os.geteuid() != 0 or not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("needs root and openssh-server (/usr/sbin/sshd); scripts/setup.sh installs it")
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def ssh(sshd):
    with SshTransport("testhost", "fleet-test", str(sshd.ssh_config)) as transport:
        yield transport


def test_runs_commands_and_quotes_arguments(ssh, tmp_path):
    awkward = str(tmp_path / "dir with 'quotes' and $HOME; echo pwned")
    out = ssh.check(f"mkdir -p {shlex.quote(awkward)} && cd {shlex.quote(awkward)} && pwd", "pwd")
    assert out.strip() == awkward


def test_unknown_host_key_is_refused(sshd):
    with pytest.raises(TransportError, match="unknown host key .*refusing to connect"):
        SshTransport("testhost", "fleet-unknown", str(sshd.ssh_config))
    assert sshd.unknown_known_hosts.read_text() == ""


def test_trust_on_first_use_records_the_key(sshd, tmp_path):
    with SshTransport("testhost", "fleet-unknown", str(sshd.ssh_config), trust_on_first_use=True) as t:
        assert t.check("echo ok", "echo").strip() == "ok"
    recorded = sshd.unknown_known_hosts.read_text()
    sshd.unknown_known_hosts.write_text("")
    assert f"[127.0.0.1]:{sshd.port}" in recorded
    assert (sshd.dir / "host_key.pub").read_text().split()[1] in recorded


def test_unreachable_host_fails_fast_naming_it(sshd):
    start = time.monotonic()
    host = {"transport": "ssh", "ssh_alias": "fleet-closed"}
    with pytest.raises(TransportError, match="cannot reach 'fleet-closed'"):
        open_transport("gpu-box", host, str(sshd.ssh_config))
    assert time.monotonic() - start < 30


def test_failing_remote_command_shows_the_log_tail(ssh, tmp_path):
    run_dir = str(tmp_path / "run fail")
    ssh.start(run_dir, "echo step one; echo 'boom: no GPU found' >&2; exit 3")
    with pytest.raises(TransportError) as error:
        ssh.wait(run_dir, "m1", timeout_s=30, poll_s=0.1)
    message = str(error.value)
    assert "m1 failed on the host (exit 3)" in message.splitlines()[0]
    assert "boom: no GPU found" in message and "step one" in message


def test_ssh_drop_mid_run_reattaches_and_the_run_survives(ssh, tmp_path):
    run_dir = str(tmp_path / "run drop")
    ssh.start(run_dir, "echo started; sleep 2; echo finished")
    first = ssh.connection
    threading.Timer(0.5, lambda: first.client.get_transport().close()).start()
    logged = []
    ssh.wait(run_dir, "m3", timeout_s=60, poll_s=0.2, on_log=logged.append)
    assert ssh.connection is not first  # it re-attached over a new connection
    assert "finished" in "".join(logged)
    assert ssh.check(f"cat {shlex.quote(run_dir)}/exitcode", "exit code").strip() == "0"


def test_ssh_drop_without_reattach_fails_clearly(ssh, tmp_path, monkeypatch):
    run_dir = str(tmp_path / "run lost")
    ssh.start(run_dir, "sleep 5")
    ssh.connection.client.get_transport().close()

    def unreachable():
        from fleet_decode.pipeline.transport import ConnectionLost
        raise ConnectionLost("testhost: cannot reach 'fleet-test'")

    monkeypatch.setattr(ssh, "reconnect", unreachable)
    with pytest.raises(TransportError, match="connection lost during m4 and not re-attached within 1 s"):
        ssh.wait(run_dir, "m4", timeout_s=60, poll_s=0.1, reattach_s=1)


def test_fetch_checks_sha256_written_on_the_host(ssh, tmp_path):
    remote = tmp_path / "host side" / "e2e.json"
    remote.parent.mkdir()
    remote.write_text('{"ok": true}\n')
    (tmp_path / "host side" / "e2e.json.sha256").write_text(
        hashlib.sha256(remote.read_bytes()).hexdigest() + "\n")
    ssh.fetch_verified(str(remote), tmp_path / "local" / "good.json")
    assert (tmp_path / "local" / "good.json").read_text() == '{"ok": true}\n'

    remote.write_text('{"ok": false}\n')  # corrupted after the host sealed it
    with pytest.raises(TransportError, match="sha256 mismatch for fetched .*refused"):
        ssh.fetch_verified(str(remote), tmp_path / "local" / "bad.json")
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == ["good.json"]


@pytest.mark.slow
def test_whole_workflow_over_ssh_produces_every_evidence_file_and_the_report(sshd, tmp_path):
    from pipeline_helpers import host_entry, make_repo, snakemake

    from fleet_decode.pipeline.audit import audit
    from fleet_decode.pipeline.sources import EVIDENCE

    secret = "hf_0123456789abcdefSECRET"
    host = host_entry(transport="ssh", ssh_alias="fleet-test", workdir=str(tmp_path / "remote 'work' dir"),
                      env={"HF_TOKEN": secret})
    repo = make_repo(tmp_path / "laptop", {"gpu-box": host}, ["gpu-box"], ssh_config=sshd.ssh_config)
    snakemake(repo, "report")
    expected = sorted(f"results/gpu-box/{rel}" for rels in EVIDENCE.values() for rel in rels)
    states = audit(repo)
    assert sorted(str(s.path.relative_to(repo)) for s in states) == expected
    assert {s.state for s in states} == {"fresh"}
    assert {s.doc["host"]["name"] for s in states} == {"gpu-box"}
    assert {s.doc["params"]["backend"] for s in states} == {"sim"}
    report = (repo / "results" / "REPORT.md").read_text()
    assert "| `results/gpu-box/m4/e2e.json` | m4 | `" in report
    html = (repo / "results" / "report.html").read_text()
    assert "data:image/svg+xml;base64," in html and "results/gpu-box/bench/bench.json" in html
    runs = [p for p in (tmp_path / "remote 'work' dir" / "runs").iterdir() if p.is_dir()]
    assert len(runs) == len(expected)
    assert (tmp_path / "remote 'work' dir" / "runs" / "one-at-a-time.lock").is_file()  # each ran under the lock
    assert all((run / "exitcode").read_text().strip() == "0" for run in runs)
    # The env's value went to the runs (see test_ssh_hardening) and nowhere on disk, either side.
    written = [p for root in (tmp_path / "remote 'work' dir" / "runs", repo / "results", repo / ".work")
               for p in root.rglob("*") if p.is_file()]
    assert written and not [p for p in written if secret.encode() in p.read_bytes()]
    # Evidence names the host by its config key and paths relative to the tree, not where it ran.
    assert not [s.path for s in states if str(tmp_path) in s.path.read_text() or "hostname" in s.doc["host"]]

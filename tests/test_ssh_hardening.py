"""Hostile hosts and hostile known_hosts files, against real sshd servers on 127.0.0.1: a ProxyJump
hop is checked like the host itself, @revoked and @cert-authority lines are honoured, a first use
appends one line, a silent host is named, secrets under `env` never touch the disk or the
process list."""
import os
import shlex
import socket
import subprocess
import threading
import time

import pytest

from pipeline_helpers import Sshd
from test_ssh import sshd  # noqa: F401  (the target server)

from fleet_decode.pipeline import transport as transport_module
from fleet_decode.pipeline.transport import SshTransport, TransportError, open_transport


@pytest.fixture(scope="module")
def jump(tmp_path_factory, sshd):  # noqa: F811
    """A second sshd, the jump host; it lets the target's user key in."""
    server = Sshd(tmp_path_factory.mktemp("jump"))
    with open(server.dir / "authorized_keys", "a") as keys:
        keys.write((sshd.dir / "user_key.pub").read_text())
    yield server
    server.stop()


def via_jump(sshd, jump, tmp_path, known_hosts_text):  # noqa: F811
    """An ssh_config whose alias `fleet-via-jump` reaches the target through `fleet-jump`."""
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_text)
    config = tmp_path / "ssh_config"
    config.write_text(sshd.alias("fleet-jump", known, port=jump.port)
                      + sshd.alias("fleet-via-jump", known, ProxyJump="fleet-jump"))
    return config, known


def test_proxyjump_hop_with_an_unknown_key_is_refused(sshd, jump, tmp_path):  # noqa: F811
    # The target's key is known, the jump host's is not: the whole route is refused.
    config, known = via_jump(sshd, jump, tmp_path, "# jump host not listed\n" + sshd.known_hosts_line())
    before = known.read_text()
    with pytest.raises(TransportError, match=rf"unknown host key for \[127.0.0.1\]:{jump.port} .*refusing"):
        SshTransport("gpu-box", "fleet-via-jump", str(config))
    assert known.read_text() == before


def test_proxyjump_with_every_hop_known_connects_through_the_jump_host(sshd, jump, tmp_path):  # noqa: F811
    config, _ = via_jump(sshd, jump, tmp_path, jump.known_hosts_line() + sshd.known_hosts_line())
    with SshTransport("gpu-box", "fleet-via-jump", str(config)) as ssh:
        assert [f"{h.host}:{h.port}" for h in ssh.hops] == [f"127.0.0.1:{sshd.port}", f"127.0.0.1:{jump.port}"]
        # The target's sshd sees the connection coming from the jump host's forwarding.
        assert ssh.check("echo $SSH_CONNECTION", "where from").split()[2:] == ["127.0.0.1", str(sshd.port)]


def test_proxyjump_hop_with_a_wrong_key_is_refused(sshd, jump, tmp_path):  # noqa: F811
    wrong = sshd.known_hosts_line().replace(f"]:{sshd.port} ", f"]:{jump.port} ")  # the target's key for the jump host
    config, _ = via_jump(sshd, jump, tmp_path, wrong + sshd.known_hosts_line())
    with pytest.raises(TransportError, match=rf"host key of \[127.0.0.1\]:{jump.port} does NOT match"):
        SshTransport("gpu-box", "fleet-via-jump", str(config))


def alias_with(sshd, tmp_path, known_hosts_text, name="fleet-marked"):  # noqa: F811
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_text)
    config = tmp_path / "ssh_config"
    config.write_text(sshd.alias(name, known))
    return config, known


def test_revoked_host_key_is_refused_even_when_also_listed(sshd, tmp_path):  # noqa: F811
    config, _ = alias_with(sshd, tmp_path, sshd.known_hosts_line() + sshd.known_hosts_line("@revoked"))
    with pytest.raises(TransportError, match=r"is marked @revoked in .*known_hosts:2; refusing"):
        SshTransport("gpu-box", "fleet-marked", str(config))


def test_revoked_host_key_is_refused_even_with_trust_on_first_use(sshd, tmp_path):  # noqa: F811
    config, known = alias_with(sshd, tmp_path, sshd.known_hosts_line("@revoked"))
    before = known.read_text()
    with pytest.raises(TransportError, match="@revoked"):
        SshTransport("gpu-box", "fleet-marked", str(config), trust_on_first_use=True)
    assert known.read_text() == before


def test_cert_authority_line_is_refused_clearly_not_a_crash(sshd, tmp_path):  # noqa: F811
    ca_key = (sshd.dir / "user_key.pub").read_text().split()[:2]
    config, _ = alias_with(sshd, tmp_path, f"@cert-authority 127.0.0.1,[127.0.0.1]:* {' '.join(ca_key)}\n")
    with pytest.raises(TransportError, match=r"trusted only through a @cert-authority line .*not checked"):
        SshTransport("gpu-box", "fleet-marked", str(config))


def test_markers_beside_the_real_key_do_not_get_in_the_way(sshd, tmp_path):  # noqa: F811
    other = (sshd.dir / "user_key.pub").read_text().split()[:2]
    text = (f"@cert-authority *.example.com {' '.join(other)}\n@revoked * {' '.join(other)}\n"
            "garbage line\n" + sshd.known_hosts_line())
    config, _ = alias_with(sshd, tmp_path, text)
    with SshTransport("gpu-box", "fleet-marked", str(config)) as ssh:
        assert ssh.check("echo ok", "echo").strip() == "ok"


def test_trust_on_first_use_appends_one_line_and_keeps_the_rest(sshd, tmp_path):  # noqa: F811
    other = (sshd.dir / "user_key.pub").read_text().split()[:2]
    kept = f"# team hosts, keep this comment\n@cert-authority *.example.com {' '.join(other)}\nold.example.com {' '.join(other)}"
    config, known = alias_with(sshd, tmp_path, kept)  # no newline at the end, on purpose
    with SshTransport("gpu-box", "fleet-marked", str(config), trust_on_first_use=True) as ssh:
        assert ssh.check("echo ok", "echo").strip() == "ok"
    assert known.read_text() == kept + "\n" + sshd.known_hosts_line()
    with SshTransport("gpu-box", "fleet-marked", str(config)) as ssh:  # now known, without TOFU
        assert ssh.check("echo ok", "echo").strip() == "ok"


@pytest.fixture
def silent_server():
    """Accepts TCP connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted = []
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_host_that_never_speaks_ssh_is_named_without_a_traceback(sshd, silent_server, tmp_path,  # noqa: F811
                                                                    monkeypatch, capfd):
    monkeypatch.setattr(transport_module, "CONNECT_TIMEOUT_S", 2)
    config, _ = alias_with(sshd, tmp_path, sshd.known_hosts_line())
    config.write_text(sshd.alias("fleet-silent", tmp_path / "known_hosts", port=silent_server))
    with pytest.raises(TransportError) as error:
        open_transport("gpu-box", {"transport": "ssh", "ssh_alias": "fleet-silent"}, str(config))
    message = str(error.value)
    assert message.startswith("gpu-box: no SSH banner within 2 s from 'fleet-silent'")
    assert f"127.0.0.1:{silent_server}" in message and "\n" not in message
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out


def test_a_missing_ssh_config_is_named(tmp_path):
    missing = tmp_path / "no_such_ssh_config"
    with pytest.raises(TransportError, match=f"gpu-box: ssh_config {missing} does not exist"):
        open_transport("gpu-box", {"transport": "ssh", "ssh_alias": "fleet-test"}, str(missing))


SECRET = "hf_s3cr3t-VALUE with 'quotes' and $dollars"


@pytest.mark.parametrize("over", ["ssh", "local"])
def test_env_values_reach_the_run_but_never_the_disk_the_process_list_or_the_log(sshd, tmp_path, over):  # noqa: F811
    transport = (SshTransport("gpu-box", "fleet-test", str(sshd.ssh_config)) if over == "ssh"
                 else open_transport("cpu", {"transport": "local"}))
    run_dir = tmp_path / "runs" / "m1-run"
    with transport:
        # The run proves it got the value (its sha256) without printing it, and waits to be looked at.
        transport.start(str(run_dir), 'printf %s "$HF_TOKEN" | sha256sum; while [ ! -e "$RUN_DIR/go" ]; do sleep 0.1; done',
                        key="k", env={"HF_TOKEN": SECRET, "RUN_DIR": str(run_dir)})
        deadline = time.monotonic() + 30
        while not (run_dir / "log").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        # The run is going while we look: between its sleeps the loop is the shell alone, so look
        # until a snapshot shows it (every snapshot is checked for the secret below).
        processes = ""
        while time.monotonic() < deadline:
            processes += subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            if "sha256sum" in processes or "sleep" in processes:
                break
            time.sleep(0.02)
        assert "sha256sum" in processes or "sleep" in processes
        transport.check(f"touch {shlex.quote(str(run_dir))}/go", "releasing the run")
        transport.wait(str(run_dir), "m1", timeout_s=30, poll_s=0.1)
    import hashlib
    assert (run_dir / "log").read_text().split()[0] == hashlib.sha256(SECRET.encode()).hexdigest()
    assert SECRET not in processes and "hf_s3cr3t" not in processes
    assert not (run_dir / "env").exists()  # read, then deleted
    for path in run_dir.rglob("*"):
        assert "hf_s3cr3t" not in path.read_text(errors="replace"), path

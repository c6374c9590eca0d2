"""A host whose link goes silent (taken down, not closed: no reset ever comes) while a copy or a
command waits on it: every wait ends with ConnectionLost naming the host, none hangs. The host is a
network namespace with its own sshd (tests/fleet_helpers.py)."""
import os
import threading

import pytest

from fleet_helpers import NetnsHost, netns_unavailable

from fleet_decode.pipeline import transport as transport_module
from fleet_decode.pipeline.transport import ConnectionLost, SshTransport

pytestmark = pytest.mark.slow


@pytest.fixture
def silent_host(tmp_path, monkeypatch):
    """An open SshTransport to a netns host, with short limits so that a silent link shows soon."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    monkeypatch.setattr(transport_module, "CHANNEL_TIMEOUT_S", 3)
    monkeypatch.setattr(transport_module, "KEEPALIVE_S", 1)
    monkeypatch.setattr(transport_module, "DEAD_LINK_S", 3)
    host = NetnsHost(241 + os.getpid() % 13, tmp_path / "sshd")  # the fleet tests take 1..240
    try:
        config = tmp_path / "ssh_config"
        config.write_text(host.sshd.alias("silent"))
        with SshTransport("gpu-box", "silent", str(config)) as transport:
            yield host, transport
    finally:
        host.close()


def outcome_of(call, *args) -> BaseException | None:
    """What `call(*args)` raised, run in a thread; fails the test if it has not ended in 5 minutes
    (a guard against the hang under test, not a timing claim)."""
    raised = []

    def target():
        try:
            call(*args)
            raised.append(None)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            raised.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(300)
    assert raised, f"{call.__name__} still waiting on a silent link after 5 minutes"
    return raised[0]


def test_a_copy_on_a_link_gone_silent_ends_naming_the_host(silent_host, tmp_path):
    host, transport = silent_host
    local = tmp_path / "evidence.json"
    local.write_bytes(os.urandom(1 << 20))
    remote = str(tmp_path / "on the host.json")  # the netns host shares this machine's files
    transport.put(local, remote)  # the SFTP session is open before the cut
    host.cut()
    error = outcome_of(transport.get, remote, tmp_path / "fetched.json")
    assert isinstance(error, ConnectionLost), repr(error)
    assert str(error).startswith("gpu-box: SSH connection to 'silent' dropped while copying")
    assert not (tmp_path / "fetched.json").exists() or (tmp_path / "fetched.json").stat().st_size < local.stat().st_size


def test_a_first_copy_after_the_link_went_silent_ends_naming_the_host(silent_host, tmp_path):
    host, transport = silent_host
    (tmp_path / "env").write_text("export A=1\n")
    host.cut()  # SFTP was never opened on this connection: opening it waits on the silent link
    error = outcome_of(transport.put, tmp_path / "env", str(tmp_path / "env on the host"))
    assert isinstance(error, ConnectionLost), repr(error)
    assert str(error).startswith("gpu-box: SSH connection to 'silent' dropped while copying")


def test_a_command_on_a_link_gone_silent_ends_naming_the_host(silent_host):
    host, transport = silent_host
    host.cut()
    error = outcome_of(transport.sh, "echo hello", 3)
    assert isinstance(error, ConnectionLost), repr(error)
    assert str(error).startswith("gpu-box: ")


def test_a_command_whose_link_goes_silent_before_it_starts_ends_naming_the_host(silent_host, monkeypatch):
    """The channel is open, then the link goes silent before the host answers the exec request:
    paramiko waits for that answer with no limit of its own, before invoke's timeout starts."""
    import paramiko

    host, transport = silent_host
    exec_command = paramiko.Channel.exec_command

    def cut_first(channel, command):
        host.cut()
        return exec_command(channel, command)

    monkeypatch.setattr(paramiko.Channel, "exec_command", cut_first)
    error = outcome_of(transport.sh, "echo hello", 3)
    assert isinstance(error, ConnectionLost), repr(error)
    assert str(error).startswith("gpu-box: SSH connection to 'silent' dropped")

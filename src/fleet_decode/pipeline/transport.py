"""How the laptop drives a host: run a shell command, copy files both ways, and run long commands
detached (nohup + setsid, with a log and an exit-code file) so that a dropped SSH connection does
not kill them; the waiting side polls, streams the log, re-attaches after a drop, and on failure
raises with the log's tail. `local` runs the same shell protocol on this machine, so both paths
share every step but the wire.
"""
import hashlib
import logging
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

q = shlex.quote
CONNECT_TIMEOUT_S = 10
# Opening a channel on a connection whose peer went silent (a link cut, not closed) waits this long,
# not paramiko's hour, before the connection counts as lost.
CHANNEL_TIMEOUT_S = 30
REATTACH_WINDOW_S = 60
# A link that goes silent must end every wait on it, SFTP's too, whose own waits have no end: an SSH
# keepalive after this many idle seconds keeps data in flight, and the kernel drops a connection whose
# data stays unacknowledged for DEAD_LINK_S (Linux's TCP_USER_TIMEOUT; elsewhere its own retries end it).
KEEPALIVE_S = 10
DEAD_LINK_S = 30


# paramiko logs a failed handshake with a traceback from its own thread; the transport's errors
# say what happened, in one line that names the host.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False


class TransportError(RuntimeError):
    pass


class ConnectionLost(TransportError):
    """The connection dropped or could not be opened; a wait may re-attach after it."""


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str


class Transport:
    name: str

    def sh(self, command: str, timeout: float | None = 120) -> Result:
        raise NotImplementedError

    def put(self, local, remote: str):
        raise NotImplementedError

    def get(self, remote: str, local):
        raise NotImplementedError

    def reconnect(self):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check(self, command: str, what: str, timeout: float | None = 120) -> str:
        r = self.sh(command, timeout)
        if r.rc != 0:
            detail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TransportError(f"{self.name}: {what} failed (exit {r.rc}): {detail[0]}")
        return r.stdout

    # Detached runs. A run directory holds `command.sh`, `key` (what it computes, see
    # pipeline.run.run_key), `pid`, `log`, `exitcode` once it ended, `fetched` once its evidence was.
    def start(self, run_dir: str, command: str, key: str = "", env: dict | None = None):
        """Starts `command` detached in `run_dir`. `env` (secrets, say) never reaches command.sh,
        an argv or the log: it travels in a 0600 file that the run reads and deletes first."""
        env_file = f"{q(run_dir)}/env"
        self.check(f"mkdir -p {q(run_dir)} && (umask 077 && : > {env_file})", f"preparing {run_dir}")
        with tempfile.TemporaryDirectory(prefix="fleet-env-") as scratch:
            local = Path(scratch) / "env"
            local.write_text("".join(f"export {k}={q(v)}\n" for k, v in (env or {}).items()))
            local.chmod(0o600)
            self.put(local, f"{run_dir}/env")
        wrapper = (f". {env_file}; rm -f {env_file}; ( {command} ) > {q(run_dir)}/log 2>&1; "
                   f"echo $? > {q(run_dir)}/exitcode.tmp; mv {q(run_dir)}/exitcode.tmp {q(run_dir)}/exitcode")
        self.check(f"printf '%s\\n' {q(wrapper)} > {q(run_dir)}/command.sh && "
                   f"printf '%s\\n' {q(key)} > {q(run_dir)}/key && "
                   f"{{ nohup setsid sh {q(run_dir)}/command.sh > /dev/null 2>&1 < /dev/null & "
                   f"echo $! > {q(run_dir)}/pid; }}",
                   f"starting {run_dir}")

    def pending_run(self, runs_dir: str, key: str) -> str | None:
        """The newest run under runs_dir with this key whose evidence was never fetched, that is
        still going (no exit code, its process alive) or ended well (exit 0): a run an earlier
        invocation started and stopped waiting for (interrupted on this side)."""
        script = (f"cd {q(runs_dir)} 2>/dev/null || exit 0; for d in $(ls -1 | sort -r); do "
                  f'[ "$(cat "$d/key" 2>/dev/null)" = {q(key)} ] && [ ! -e "$d/fetched" ] && '
                  f'{{ [ "$(cat "$d/exitcode" 2>/dev/null)" = 0 ] || {{ [ ! -e "$d/exitcode" ] && '
                  f'kill -0 "$(cat "$d/pid" 2>/dev/null)" 2>/dev/null; }}; }} && {{ echo "$d"; break; }}; done; true')
        found = self.check(script, f"looking for a pending run in {runs_dir}").split()
        return found[0] if found else None

    def wait(self, run_dir: str, what: str, timeout_s: float, poll_s: float = 0.5, on_log=None,
             reattach_s: float = REATTACH_WINDOW_S) -> None:
        """Blocks until the run ends; raises TransportError with the log's tail if it failed."""
        deadline, offset, lost_since = time.monotonic() + timeout_s, 0, None
        log, exitcode = f"{q(run_dir)}/log", f"{q(run_dir)}/exitcode"
        while True:
            # One round trip: "<log size> [<exit code>]", then the log's bytes since the last poll.
            probe = (f'size=$(wc -c < {log} 2>/dev/null || echo 0); '
                     f'echo "$size $(cat {exitcode} 2>/dev/null)"; '
                     f'tail -c +{offset + 1} {log} 2>/dev/null | head -c $((size - {offset}))')
            try:
                status = self.sh(probe, timeout=30)
                header, _, chunk = status.stdout.partition("\n")
                if status.rc != 0 or not header.split():
                    raise TransportError(f"{self.name}: cannot read {run_dir}: {status.stderr.strip()}")
                size, *code = header.split()
                size, code = int(size), "".join(code)
                if on_log is not None and chunk:
                    on_log(chunk)
                offset = max(offset, size)
                lost_since = None
            except ConnectionLost as e:
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > reattach_s:
                    raise TransportError(f"{self.name}: connection lost during {what} and not "
                                         f"re-attached within {reattach_s:g} s ({e}); the run "
                                         f"may still be going on the host in {run_dir}") from None
                time.sleep(min(1.0, reattach_s / 2))
                self._try_reconnect()
                continue
            if code:
                rc = int(code)
                if rc != 0:
                    tail = self.sh(f"tail -n 20 {q(run_dir)}/log").stdout.rstrip()
                    raise TransportError(f"{self.name}: {what} failed on the host (exit {rc}); "
                                         f"last lines of {run_dir}/log:\n{tail}")
                return
            if time.monotonic() > deadline:
                raise TransportError(f"{self.name}: {what} still running after {timeout_s} s "
                                     f"(log: {run_dir}/log)")
            time.sleep(poll_s)

    def _try_reconnect(self):
        try:
            self.reconnect()
        except ConnectionLost:
            pass

    def fetch_verified(self, remote: str, local) -> None:
        """Copies `remote` to `local` only if its bytes match the `<remote>.sha256` the host wrote."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(f".{local.name}.fetching")
        try:
            expected = self.check(f"cat {q(remote + '.sha256')}", f"reading {remote}.sha256").split()
            self.get(remote, partial)
            actual = hashlib.sha256(partial.read_bytes()).hexdigest()
            if not expected or expected[0] != actual:
                raise TransportError(f"{self.name}: sha256 mismatch for fetched {remote}: the host "
                                     f"wrote {expected[0] if expected else 'nothing'}, got {actual}; "
                                     "refused")
            os.replace(partial, local)
        finally:
            partial.unlink(missing_ok=True)


class LocalTransport(Transport):
    def __init__(self, name: str):
        self.name = name

    def sh(self, command, timeout=120):
        try:
            r = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TransportError(f"{self.name}: command timed out after {timeout} s: {command[:80]}")
        return Result(r.returncode, r.stdout, r.stderr)

    def put(self, local, remote):
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, remote)

    def get(self, remote, local):
        shutil.copyfile(remote, local)


class SshTransport(Transport):
    """Fabric through an ssh_config Host alias. Every hop (each ProxyJump gateway, then the host)
    has its key checked against the same known_hosts files (~/.ssh/known_hosts and the alias's
    UserKnownHostsFile; see pipeline.known_hosts): an unknown key is refused unless
    `trust_on_first_use`, which appends it to the first of those files."""

    def __init__(self, name: str, alias: str, ssh_config: str | None = None,
                 trust_on_first_use: bool = False):
        self.name, self.alias, self.ssh_config, self.tofu = name, alias, ssh_config, trust_on_first_use
        self.connection, self.hops = None, []
        self.reconnect()

    def _known_hosts(self, host_config) -> list[Path]:
        listed = host_config.get("userknownhostsfile", "~/.ssh/known_hosts")
        return [Path(os.path.expanduser(p)) for p in listed.split()]

    def _ssh_config_path(self) -> str | None:
        if self.ssh_config is None:
            default = os.path.expanduser("~/.ssh/config")
            return default if os.path.exists(default) else None
        path = os.path.expanduser(self.ssh_config)
        if not os.path.isfile(path):
            raise TransportError(f"{self.name}: ssh_config {self.ssh_config} does not exist")
        return path

    def reconnect(self):
        import fabric

        from fleet_decode.pipeline.known_hosts import KnownHosts

        self.close()
        # Each hop's own timeouts: a host that takes the TCP connection but never speaks SSH.
        config = fabric.Config(runtime_ssh_path=self._ssh_config_path(), overrides={
            "connect_kwargs": {"banner_timeout": CONNECT_TIMEOUT_S, "auth_timeout": CONNECT_TIMEOUT_S,
                               "channel_timeout": CHANNEL_TIMEOUT_S}})
        connection = fabric.Connection(self.alias, config=config, connect_timeout=CONNECT_TIMEOUT_S)
        known = KnownHosts.read(self._known_hosts(connection.ssh_config))
        # Fabric gives every ProxyJump gateway its own client that accepts any key: each gets ours.
        hops, hop = [connection], connection.gateway
        while isinstance(hop, fabric.Connection):
            hops.append(hop)
            hop = hop.gateway
        for hop in hops:
            known.trust(hop.client, self.name, self.tofu)
        route = " -> ".join(f"{h.host}:{h.port}" for h in reversed(hops))
        try:
            self._open(connection, hops, known, route)
        except BaseException:
            for hop in hops:  # a failed open leaves paramiko's transport thread; Fabric's close skips it
                hop.close()
                hop.client.close()
            raise
        self.connection, self.hops = connection, hops

    def _open(self, connection, hops, known, route: str):
        """Opens `connection` (and its gateways); every failure becomes one line naming the host."""
        import paramiko

        from fleet_decode.pipeline.known_hosts import HostKeyRefused

        try:
            connection.open()
            for hop in hops:
                _notice_a_silent_link(hop.client.get_transport())
        except HostKeyRefused as e:
            raise TransportError(str(e)) from None
        except paramiko.BadHostKeyException as e:
            revoked = known.revoked_at(e.key)
            why = f"is marked @revoked in {revoked}" if revoked else "does NOT match known_hosts"
            raise TransportError(f"{self.name}: host key of {_hop_offering(hops, e.key)} {why} (route {route}); "
                                 "refusing to connect") from None
        except paramiko.SSHException as e:
            if "banner" in str(e) or "No existing session" in str(e):
                raise ConnectionLost(f"{self.name}: no SSH banner within {CONNECT_TIMEOUT_S} s from "
                                     f"{self.alias!r} (route {route}): something accepts the TCP "
                                     "connection there but does not speak SSH") from None
            raise ConnectionLost(f"{self.name}: SSH to {self.alias!r} (route {route}) failed: {e}") from None
        except (OSError, EOFError) as e:
            raise ConnectionLost(f"{self.name}: cannot reach {self.alias!r} (route {route}): "
                                 f"{e.strerror or e or type(e).__name__}") from None

    def _alive(self):
        transport = self.connection and self.connection.client.get_transport()
        if transport is None or not transport.is_active():
            raise ConnectionLost(f"{self.name}: SSH connection to {self.alias!r} is closed")

    def sh(self, command, timeout=120):
        import invoke
        import paramiko
        self._alive()
        try:
            r = self.connection.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise ConnectionLost(f"{self.name}: SSH connection to {self.alias!r} dropped: {e}") from None
        except invoke.CommandTimedOut:  # no answer at all: a cut link looks like this, not like an error
            raise ConnectionLost(f"{self.name}: no answer from {self.alias!r} within {timeout} s") from None
        if r.exited in (None, -1):  # the channel closed before the command's exit status came
            raise ConnectionLost(f"{self.name}: SSH connection to {self.alias!r} dropped mid-command")
        return Result(r.exited, r.stdout, r.stderr)

    def put(self, local, remote):
        self._copy("put", str(local), remote)

    def get(self, remote, local):
        self._copy("get", remote, str(local))

    def _copy(self, direction: str, source: str, target: str):
        import paramiko
        self._alive()
        try:
            # A read that hears nothing for CHANNEL_TIMEOUT_S gives up (paramiko's SFTP waits for ever).
            self.connection.sftp().get_channel().settimeout(CHANNEL_TIMEOUT_S)
            getattr(self.connection, direction)(source, target)
        except (paramiko.SSHException, EOFError, socket.timeout, ConnectionError) as e:
            raise ConnectionLost(f"{self.name}: SSH connection to {self.alias!r} dropped while copying "
                                 f"{source}: {str(e) or type(e).__name__}") from None

    def close(self):
        for hop in self.hops:  # Fabric closes a connection, not the gateways it went through
            hop.close()
        self.connection, self.hops = None, []


def _notice_a_silent_link(transport):
    if transport is None:
        return
    transport.set_keepalive(KEEPALIVE_S)
    if isinstance(transport.sock, socket.socket) and hasattr(socket, "TCP_USER_TIMEOUT"):
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, DEAD_LINK_S * 1000)


def _hop_offering(hops, key) -> str:
    """known_hosts' name ("[host]:port", or "host" on port 22) of the hop whose server sent `key`."""
    for hop in hops:
        transport = hop.client.get_transport()
        if transport is not None and transport.host_key == key:
            return hop.host if int(hop.port) == 22 else f"[{hop.host}]:{hop.port}"
    return "a hop"


def open_transport(name: str, host: dict, ssh_config: str | None = None) -> Transport:
    if host["transport"] == "local":
        return LocalTransport(name)
    try:
        return SshTransport(name, host["ssh_alias"], ssh_config, host.get("trust_on_first_use", False))
    except ConnectionLost as e:
        raise TransportError(str(e)) from None

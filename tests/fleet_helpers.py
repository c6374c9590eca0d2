"""Test hosts for fleet runs: each in a network namespace of its own, reached over a veth pair at an
address inside that namespace, with its own sshd there. Only namespaces, links and addresses made
here are touched, and close() removes them (deleting a namespace deletes its veth pair)."""
import os
import shutil
import subprocess
from pathlib import Path

from pipeline_helpers import Sshd

SUBNET = "10.231"  # <SUBNET>.<n>.1 on this side of host n's veth pair, <SUBNET>.<n>.2 inside


def netns_unavailable() -> str | None:
    """Why network-namespace hosts cannot be made here, or None if they can."""
    if os.geteuid() != 0:
        return "needs root (ip netns add)"
    if not shutil.which("ip"):
        return "needs iproute2 (`ip`)"
    if not os.path.exists("/usr/sbin/sshd"):
        return "needs openssh-server (/usr/sbin/sshd); scripts/setup.sh installs it"
    probe = f"fleet-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns add` is not permitted here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")


class NetnsHost:
    """Host number `n` (1-254): namespace `fleet-<pid>-<n>`, veth `fl<pid>h<n>` on this side."""

    def __init__(self, n: int, tmp: Path):
        tag = f"{os.getpid() % 100000}"
        self.netns, self.veth, peer = f"fleet-{tag}-{n}", f"fl{tag}h{n}", f"fl{tag}n{n}"
        self.address = f"{SUBNET}.{n}.2"
        self.sshd = None
        # While the link is down its own route is gone, and the default route would carry packets for
        # the address off this machine: this route keeps them here, answered "no route to host".
        self.guard = ["route", "add", "unreachable", f"{SUBNET}.{n}.0/24", "metric", "1000"]
        _ip(*self.guard)
        try:
            _ip("netns", "add", self.netns)
            _ip("link", "add", self.veth, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", self.netns)
            _ip("addr", "add", f"{SUBNET}.{n}.1/24", "dev", self.veth)
            _ip("link", "set", self.veth, "up")
            _ip("-n", self.netns, "addr", "add", f"{self.address}/24", "dev", peer)
            _ip("-n", self.netns, "link", "set", peer, "up")
            _ip("-n", self.netns, "link", "set", "lo", "up")
            tmp.mkdir(parents=True, exist_ok=True)
            self.sshd = Sshd(tmp, address=self.address, port=22, netns=self.netns)
        except BaseException:
            self.close()
            raise

    def cut(self):
        """Takes this side of the link down: from here on the host is unreachable (no route to it),
        and a connection open to it goes silent."""
        _ip("link", "set", self.veth, "down")

    def close(self):
        if self.sshd is not None:
            self.sshd.stop()
            self.sshd = None
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
        subprocess.run(["ip", "route", "del", *self.guard[2:]], capture_output=True)

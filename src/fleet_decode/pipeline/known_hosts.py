"""known_hosts as the SSH transport reads it: plain host keys, `@revoked` keys (refused for every
host, as OpenSSH does) and `@cert-authority` lines, which paramiko cannot verify, so a host known
only through one is refused with a message that says so. A host key accepted on first use is
appended as one line; the file is never rewritten (paramiko's save_host_keys would drop its
comments and markers).
"""
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey


class HostKeyRefused(paramiko.SSHException):
    """A host key that known_hosts does not let through; the message says why and names the host."""


@dataclass
class KnownHosts:
    files: list[Path]
    keys: paramiko.HostKeys = field(default_factory=paramiko.HostKeys)
    revoked: list[tuple[str, paramiko.PKey]] = field(default_factory=list)  # (where, key)
    authorities: list[tuple[str, list[str]]] = field(default_factory=list)  # (where, host patterns)

    @classmethod
    def read(cls, files) -> "KnownHosts":
        known = cls([Path(f) for f in files])
        for file in known.files:
            if not file.exists():
                continue
            for lineno, raw in enumerate(file.read_text().splitlines(), 1):
                known._add_line(raw.strip(), f"{file}:{lineno}")
        revoked = {key.asbytes() for _, key in known.revoked}
        # A revoked key listed plainly as well stays revoked: drop it from what is trusted.
        trusted = paramiko.HostKeys()
        for entry in known.keys._entries:
            if entry.key.asbytes() not in revoked:
                trusted._entries.append(entry)
        known.keys = trusted
        return known

    def _add_line(self, line: str, where: str):
        if not line or line.startswith("#"):
            return
        marker = None
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            line = line.strip()
        try:
            entry = HostKeyEntry.from_line(line)
        except (InvalidHostKey, paramiko.SSHException, ValueError):
            entry = None  # an unparsable line trusts nothing, as in OpenSSH
        if marker == "@revoked" and entry is not None:
            self.revoked.append((where, entry.key))
        elif marker == "@cert-authority":
            self.authorities.append((where, line.split()[0].split(",") if line else []))
        elif marker is None and entry is not None:
            self.keys._entries.append(entry)

    def revoked_at(self, key: paramiko.PKey) -> str | None:
        return next((where for where, k in self.revoked if k.asbytes() == key.asbytes()), None)

    def authority_for(self, hostname: str) -> str | None:
        """Where a @cert-authority line covers `hostname` ("[host]:port" or "host")."""
        bare = hostname[1:].partition("]")[0] if hostname.startswith("[") else hostname
        for where, patterns in self.authorities:
            if any(fnmatch.fnmatch(name, p) for p in patterns for name in (hostname, bare)):
                return where
        return None

    def trust(self, client: paramiko.SSHClient, name: str, trust_on_first_use: bool):
        """Makes `client` check host keys against these files with the policy below."""
        # Entries, not HostKeys.add per name: add() keeps one key per host and type, known_hosts may
        # list several (a key being rotated).
        client.get_host_keys()._entries[:] = self.keys._entries
        client.set_missing_host_key_policy(_Policy(self, name, trust_on_first_use))

    def append(self, hostname: str, key: paramiko.PKey):
        file = self.files[0]
        file.parent.mkdir(parents=True, exist_ok=True)
        text = file.read_text() if file.exists() else ""
        with open(file, "a") as f:
            f.write(("\n" if text and not text.endswith("\n") else "")
                    + f"{hostname} {key.get_name()} {key.get_base64()}\n")
        self.keys.add(hostname, key.get_name(), key)


class _Policy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko for a host whose key type known_hosts does not list."""

    def __init__(self, known: KnownHosts, name: str, trust_on_first_use: bool):
        self.known, self.name, self.tofu = known, name, trust_on_first_use

    def missing_host_key(self, client, hostname, key):
        files = ", ".join(map(str, self.known.files))
        revoked = self.known.revoked_at(key)
        if revoked:
            raise HostKeyRefused(f"{self.name}: the host key of {hostname} is marked @revoked in "
                                 f"{revoked}; refusing to connect")
        authority = self.known.authority_for(hostname)
        if authority:
            raise HostKeyRefused(
                f"{self.name}: {hostname} is trusted only through a @cert-authority line ({authority}), "
                "and host certificates are not checked by this SSH client; refusing to connect "
                "(add the host's own key with ssh-keyscan)")
        if self.tofu:
            self.known.append(hostname, key)
            return
        raise HostKeyRefused(
            f"{self.name}: unknown host key for {hostname} is not in {files}; refusing to connect "
            "(add it with ssh-keyscan, or set trust_on_first_use: true for this host)")

"""Shared by the pipeline tests: a real sshd on 127.0.0.1 with throwaway keys and an ssh_config
alias file, and a throwaway git repository holding the current tree with a small test config."""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, cwd=None, check=True, **kw):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


class Sshd:
    """sshd -D with throwaway keys, on 127.0.0.1 at a free port unless told otherwise (`netns`: started
    inside that network namespace, listening on its `address`); aliases: `fleet-test` (known key),
    `fleet-unknown` (key not in its known_hosts), `fleet-closed` (nothing listens)."""

    def __init__(self, tmp: Path, address: str = "127.0.0.1", port: int | None = None,
                 netns: str | None = None):
        self.dir, self.address = tmp, address
        self.port = port or free_port()
        for name in ("host_key", "user_key"):
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)])
        shutil.copy(tmp / "user_key.pub", tmp / "authorized_keys")
        (tmp / "sshd_config").write_text(f"""Port {self.port}
ListenAddress {address}
HostKey {tmp}/host_key
AuthorizedKeysFile {tmp}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
StrictModes no
UsePAM no
PidFile {tmp}/sshd.pid
Subsystem sftp internal-sftp
""")
        (tmp / "known_hosts").write_text(self.known_hosts_line())
        self.unknown_known_hosts = tmp / "unknown_known_hosts"
        self.unknown_known_hosts.write_text("")
        self.ssh_config = tmp / "ssh_config"
        self.ssh_config.write_text(
            self.alias("fleet-test")
            + self.alias("fleet-unknown", self.unknown_known_hosts)
            + self.alias("fleet-closed", port=free_port()))
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self.log = open(tmp / "sshd.log", "w")
        inside = ["ip", "netns", "exec", netns] if netns else []
        self.process = subprocess.Popen([*inside, "/usr/sbin/sshd", "-D", "-e", "-f", str(tmp / "sshd_config")],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited: {(tmp / 'sshd.log').read_text()}")
            try:
                socket.create_connection((address, self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("sshd did not start listening")

    def known_hosts_line(self, marker="") -> str:
        key_type, key = (self.dir / "host_key.pub").read_text().split()[:2]
        known_as = self.address if self.port == 22 else f"[{self.address}]:{self.port}"  # as ssh looks it up
        return f"{marker + ' ' if marker else ''}{known_as} {key_type} {key}\n"

    def alias(self, name, known_hosts=None, port=None, **options) -> str:
        """An ssh_config Host stanza that reaches this sshd (or `port`) as root-or-$USER with the
        throwaway user key, checking host keys against `known_hosts` (default: this server's)."""
        user = os.environ.get("USER") or "root"
        lines = {"HostName": self.address, "Port": port or self.port, "User": user,
                 "IdentityFile": self.dir / "user_key", "IdentitiesOnly": "yes",
                 "UserKnownHostsFile": known_hosts or self.dir / "known_hosts", **options}
        return f"Host {name}\n" + "".join(f"  {k} {v}\n" for k, v in lines.items())

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()


def host_entry(**overrides) -> dict:
    """A small, fast host running the CPU simulator on the tiny model."""
    entry = {"transport": "local", "backend": "sim", "model": "tiny", "workdir": ".work/hosts/cpu",
             "python": sys.executable, "prompt_tokens": 16, "decode_tokens": 3, "workers": 2,
             "bench_runs": 1, "generate_tokens": 6}
    entry.update(overrides)
    return entry


def make_repo(path: Path, hosts: dict, targets: list, probe_kernel=True, ssh_config=None) -> Path:
    """A git repo holding the current tree (tracked and untracked-but-not-ignored files), with
    config/config.yaml replaced by a test config, committed."""
    listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO).stdout.split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not rel.startswith("results/"):
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, path / rel)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["hosts"].update(hosts)
    config["targets"] = targets
    if ssh_config:
        config["ssh_config"] = str(ssh_config)
    (path / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if probe_kernel and not any((path / "hip" / "tasks").glob("*")):
        # The staleness tests edit a task kernel; give them one if the kernels are not merged yet.
        (path / "hip" / "tasks").mkdir(parents=True, exist_ok=True)
        (path / "hip" / "tasks" / "probe_task.cu").write_text("// staleness probe\n")
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "test tree")
    return path


def git(path, *args):
    return run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args], cwd=path)


def snakemake(path, *args, check=True, cores=1):
    env = dict(os.environ, PYTHONPATH=str(Path(path) / "src"))
    return run([sys.executable, "-m", "snakemake", "--cores", str(cores), *args], cwd=path, check=check, env=env)


def planned_jobs(dry_run_output: str) -> dict:
    """{rule: count} from the `Job stats` table of `snakemake -n`; {} when nothing is to be done."""
    jobs, in_table = {}, False
    for line in dry_run_output.splitlines():
        fields = line.split()
        if fields[:2] == ["job", "count"]:
            in_table = True
        elif in_table and len(fields) == 2 and fields[1].isdigit():
            if fields[0] == "total":
                break
            jobs[fields[0]] = int(fields[1])
    return jobs


_built = {}


def built_pipeline(tmp_path_factory) -> Path:
    """One real run of the default workflow (local transport, sim backend, tiny model, small
    prompt) in a throwaway repo whose evidence is then committed; built once per test session."""
    if "repo" not in _built:
        repo = make_repo(tmp_path_factory.mktemp("pipeline") / "repo", {"cpu": host_entry()}, ["cpu"])
        snakemake(repo, "report")
        git(repo, "add", "-A", "results")
        git(repo, "commit", "-q", "-m", "evidence")
        _built["repo"] = repo
    return _built["repo"]


def fresh_clone(repo: Path, where: Path) -> Path:
    run(["git", "clone", "-q", str(repo), str(where)])
    return where

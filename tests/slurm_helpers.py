"""A real single-node SLURM cluster on this machine for the tests: munged, slurmctld and slurmd
(Debian's slurm-wlm), all started here with a config, key, state and logs in a temporary directory,
on free ports, and stopped again by their own process ids. The node is this machine with its real
CPU count and memory (as `slurmd -C` reports them) under its own node name, in two partitions, `gpu`
(the default) and `cpu`; it declares /dev/null as its one GPU, so that jobs asking for `--gpus=1`
schedule exactly as they would on a GPU node (a job run on it must not need a real GPU). There is no
slurmdbd: `sacct` answers "accounting storage is disabled", so job status comes from `squeue`, which
keeps finished jobs for MinJobAge seconds."""
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from pipeline_helpers import free_port

NODE = "fleetnode"  # not this machine's hostname: provenance must name SLURM's node, not guess it
DAEMONS = ("munged", "slurmctld", "slurmd")


def slurm_unavailable() -> str | None:
    """Why a local SLURM cannot be started here, or None if it can."""
    if os.geteuid() != 0:
        return "needs root (slurmd and munged run as root here)"
    missing = [d for d in DAEMONS if not shutil.which(d) and not os.path.exists(f"/usr/sbin/{d}")]
    if missing:
        return f"needs {', '.join(missing)} (Debian's slurm-wlm and munge; scripts/setup.sh installs them)"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "needs snakemake-executor-plugin-slurm (pip install -e '.[slurm]')"
    return None


def _node_line() -> str:
    """`NodeName=... CPUs=... RealMemory=...` of this machine, as slurmd itself measures it."""
    measured = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    fields = dict(f.split("=", 1) for f in measured.splitlines()[0].split())
    hardware = " ".join(f"{k}={fields[k]}" for k in
                        ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory"))
    return f"NodeName={NODE} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 {hardware} Gres=gpu:1"


class LocalSlurm:
    def __init__(self, tmp: Path):
        self.dir = tmp
        tmp.chmod(0o755)  # munged wants the path to its socket searchable by everyone
        (tmp / "state").mkdir()
        (tmp / "spool").mkdir()
        key = tmp / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.conf = tmp / "slurm.conf"
        self.conf.write_text(f"""ClusterName=fleettest
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={tmp}/munge.socket
StateSaveLocation={tmp}/state
SlurmdSpoolDir={tmp}/spool
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd.pid
SlurmctldLogFile={tmp}/slurmctld.log
SlurmdLogFile={tmp}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=3600
GresTypes=gpu
{_node_line()}
PartitionName=gpu Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
PartitionName=cpu Nodes={NODE} MaxTime=INFINITE State=UP
""")
        (tmp / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu File=/dev/null\n")
        # Inside a job the executor plugin's jobstep drops every SLURM_* variable before its srun, so
        # SLURM_CONF cannot say where this config is; a real node finds it in /etc/slurm. Rather than
        # write there, the test puts first on PATH an srun that names this config and runs the real one.
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "srun").write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {shutil.which("srun")} "$@"\n')
        (bin_dir / "srun").chmod(0o755)
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), PATH=f"{bin_dir}:{os.environ['PATH']}")
        self.processes = []
        try:
            self._start("munged", ["munged", "--foreground", "--force", f"--socket={tmp}/munge.socket",
                                   f"--key-file={key}", f"--pid-file={tmp}/munged.pid",
                                   f"--log-file={tmp}/munged.log", f"--seed-file={tmp}/munged.seed"])
            self._wait_for(lambda: (tmp / "munge.socket").exists(), "munged's socket")
            self._start("slurmctld", ["slurmctld", "-D", "-i"])
            self._start("slurmd", ["slurmd", "-D", "-N", NODE])
            self._wait_for(lambda: self.node_state() == "idle", f"node {NODE} idle")
        except BaseException:
            self.stop()
            raise

    def _start(self, name, argv):
        log = open(self.dir / f"{name}.out", "w")
        self.processes.append((name, subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT), log))

    def _wait_for(self, ready, what, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process, _ in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited ({process.returncode}): "
                                       f"{(self.dir / f'{name}.out').read_text()[-2000:]}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"SLURM did not come up: no {what} within {timeout_s} s; "
                           f"slurmctld.log: {self.log_tail('slurmctld.log')}")

    def log_tail(self, name: str) -> str:
        path = self.dir / name
        return path.read_text()[-2000:] if path.exists() else "(none)"

    def node_state(self) -> str:
        r = subprocess.run(["sinfo", "-h", "-n", NODE, "-o", "%T"], env=self.env, capture_output=True, text=True)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""

    def jobs(self) -> list[dict]:
        """Every job slurmctld still knows (finished ones too, for MinJobAge)."""
        columns = ["JobID", "Name", "State", "Partition", "tres-per-job", "NodeList", "Comment"]
        r = subprocess.run(["squeue", "--states=all", "--noheader", "-O", ",".join(f"{c}:|" for c in columns)],
                           env=self.env, capture_output=True, text=True, check=True)
        return [dict(zip(columns, (v.strip() for v in line.split("|")))) for line in r.stdout.splitlines() if line]

    def stop(self):
        for name, process, log in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            log.close()
        self.processes = []

"""The body of every host rule: deploy the tree (if that exact tree is not there yet), run the
rule's remote/ entry point detached on the host, wait while streaming its log, and fetch the
evidence checked against the sha256 the host wrote. Nothing reaches results/ unless all of it
succeeded. Then the rule's older run directories beyond the host's `keep_runs` are removed.

If an earlier invocation started the same computation (same tree, entry point, arguments and
environment) and stopped waiting for it (Ctrl-C, a closed laptop), and that run is still going on
the host or ended well without its evidence being fetched, the rule waits for it and fetches its
evidence instead of starting a second run beside it (two runs on one GPU would also spoil each
other's timings)."""
import datetime
import hashlib
import json
import re
import secrets

from rich.console import Console

from fleet_decode.pipeline.config import host_params
from fleet_decode.pipeline.deploy import DirtyTree, ensure_deployed, resolve_workdir, snapshot
from fleet_decode.pipeline.milestones import MILESTONES
from fleet_decode.pipeline.transport import ConnectionLost, TransportError, open_transport, q


def run_name(rule: str, stamp: str, token: str) -> str:
    return f"{rule}-{stamp}-{token}"  # sorts by start time within a rule


def prune_runs(transport, workdir: str, rule: str, keep: int, current: str) -> list[str]:
    """Removes all but the `keep` newest run directories of `rule` under <workdir>/runs, never
    `current`, nor anything not named as run_name names runs; returns the names removed."""
    pattern = re.compile(re.escape(rule) + r"-\d{8}T\d{6}-[0-9a-f]{6}")
    listing = transport.check(f"cd {q(workdir)}/runs && ls -1 || true", "listing the runs")
    runs = sorted(name for name in listing.split() if pattern.fullmatch(name))
    old = [name for name in runs[:-keep] if f"{workdir}/runs/{name}" != current]
    if old:
        transport.check(f"cd {q(workdir)}/runs && rm -rf -- " + " ".join(map(q, old)), "removing old runs")
    return old


def one_at_a_time(cwd: str, env_prefix: str, argv: list[str], lock: str) -> str:
    """The shell command line that runs `argv` in `cwd` under the host's lock, so that milestones never
    share a host's GPU, whatever the DAG lets run side by side (`-j`, a second invocation, the
    baselines, which follow no decoder milestone): flock(1) holds the lock for the run's life and
    frees it when the run ends or is killed; the run's log says when it waits. A host without
    flock runs unlocked."""
    waiting = f"waiting for another milestone on this host to finish (lock {lock})"
    return (f"set --; if command -v flock >/dev/null 2>&1; then flock -n {q(lock)} true || echo {q(waiting)}; "
            f'set -- flock {q(lock)}; fi; cd {q(cwd)} && {env_prefix} "$@" ' + " ".join(map(q, argv)))


def run_key(host_name: str, rule: str, tree: str, argv: list[str], env: dict) -> str:
    """What a run computes: the same key means the same evidence would come out."""
    what = json.dumps([host_name, rule, tree, argv, sorted(env.items())])
    return hashlib.sha256(what.encode()).hexdigest()[:32]


def _deploy_on(transport, host: dict, snap) -> tuple[str, str]:
    """(work dir, deployed tree dir) on the host, deploying `snap` if it is not there yet."""
    workdir = resolve_workdir(transport, host["workdir"])
    return workdir, ensure_deployed(transport, snap, workdir, host["python"])


def preflight(config: dict, host_names, repo) -> tuple[list[str], dict[str, str]]:
    """Checked before any job runs, because a job that starts has its old evidence removed by
    Snakemake first: (why nothing may run: a tree that would be refused as dirty; {host: why it
    cannot be reached} for each planned host that does not answer)."""
    problems = []
    try:
        snapshot(repo, config.get("allow_dirty", False))
    except DirtyTree as e:
        problems.append(str(e))
    unreachable = {}
    for name in sorted(set(host_names)):
        try:
            with open_transport(name, config["hosts"][name], config.get("ssh_config")) as transport:
                transport.check("true", "reaching the host", timeout=30)
        except (TransportError, OSError) as e:
            unreachable[name] = f"host {name} cannot be reached: {e}"
    return problems, unreachable


def deploy(config: dict, host_name: str, repo) -> dict:
    host = config["hosts"][host_name]
    snap = snapshot(repo, config.get("allow_dirty", False))  # a dirty tree fails before connecting
    with open_transport(host_name, host, config.get("ssh_config")) as transport:
        _, tree = _deploy_on(transport, host, snap)
    return {"host": host_name, "tree_dir": tree, "commit": snap.commit, "dirty": snap.dirty,
            "diff_sha256": snap.diff_sha256}


def run_rule(config: dict, host_name: str, rule: str, output: str, evidence: str, repo,
             extra_args: tuple = ()) -> None:
    host = config["hosts"][host_name]
    console = Console(stderr=True, highlight=False)
    snap = snapshot(repo, config.get("allow_dirty", False))
    with open_transport(host_name, host, config.get("ssh_config")) as transport:
        workdir, tree = _deploy_on(transport, host, snap)
        env = dict(host.get("env", {}))
        # The deployed src first, then the config's extra paths, then whatever the host already had
        # (a GPU host may carry its Python packages on PYTHONPATH).
        pythonpath = q(":".join(["src", *filter(None, [env.pop("PYTHONPATH", None)])]))
        argv = [host["python"], MILESTONES[rule].script, "--host", host_name,
                "--params", json.dumps(host_params(host), sort_keys=True), *map(str, extra_args)]
        key = run_key(host_name, rule, tree, [pythonpath, *argv, "--out", evidence], env)
        label = f"{host_name} {rule} {evidence}"
        earlier = transport.pending_run(f"{workdir}/runs", key)
        if earlier:
            run_dir = f"{workdir}/runs/{earlier}"
            console.print(f"[bold]{label}[/bold]: re-attaching to the same run on {host_name}, which an earlier "
                          f"invocation started and did not fetch, in {run_dir}", markup=True)
        else:
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
            run_dir = f"{workdir}/runs/{run_name(rule, stamp, secrets.token_hex(3))}"
            console.print(f"[bold]{label}[/bold]: running on {host_name} in {run_dir}", markup=True)
        remote_out = f"{run_dir}/out/{evidence}"

        def show(text):
            for line in text.splitlines():
                console.print(f"  [{label}] {line}", markup=False)

        if not earlier:
            command = one_at_a_time(tree, f'PYTHONPATH={pythonpath}"${{PYTHONPATH:+:$PYTHONPATH}}"',
                                    [*argv, "--out", remote_out], f"{workdir}/runs/one-at-a-time.lock")
            try:
                transport.start(run_dir, command, key, env)  # env may hold secrets: never in command.sh
            except ConnectionLost as e:  # the run may be going: the next invocation re-attaches to it
                raise TransportError(f"{host_name}: connection lost during {rule} ({evidence}) as it "
                                     f"started ({e}); if it did start, the next run re-attaches to it "
                                     f"in {run_dir}") from None
        transport.wait(run_dir, f"{rule} ({evidence})", timeout_s=host["timeout_s"], on_log=show)
        transport.fetch_verified(remote_out, output)
        transport.check(f"touch {q(run_dir)}/fetched", f"marking {run_dir} fetched")
        keep = host.get("keep_runs", 10)
        removed = prune_runs(transport, workdir, rule, keep, run_dir)
        if removed:
            console.print(f"  [{label}] removed {len(removed)} older {rule} run(s) (keep_runs {keep})", markup=False)


"""The workflow on a SLURM cluster through Snakemake's own executor plugin and profiles/slurm, as
written: a real single-node SLURM started here (tests/slurm_helpers.py), the checkout as the shared
storage, the CPU simulator as the job. Each milestone becomes a SLURM job with the profile's
partition and GPU request, and its evidence names the node and job it ran as."""
import os
import socket
import sys

import pytest

from pipeline_helpers import host_entry, make_repo, run
from slurm_helpers import NODE, LocalSlurm, slurm_unavailable

from fleet_decode.pipeline.audit import audit

pytestmark = pytest.mark.slow

TARGET = ["m0/host.json", "m0/build.json", "m1/kernels.json"]  # a chain of three jobs: m0_host -> m0_build -> m1


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = slurm_unavailable()
    if reason:
        pytest.skip(reason)
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()


def test_milestones_run_as_slurm_jobs_with_the_profiles_resources_and_name_their_node(slurm, tmp_path):
    repo = make_repo(tmp_path / "shared" / "checkout", {"cluster": host_entry(workdir=".work/hosts/cluster")},
                     ["cluster"])
    # Site settings of this cluster (no slurmdbd, no accounts), given as the plugin's own flags so
    # that the profile itself is used as committed; status checks start soon, the jobs being short.
    result = run([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm",
                  "--slurm-status-command", "squeue", "--slurm-no-account",
                  "--slurm-init-seconds-before-status-checks", "2", "--slurm-keep-successful-logs",
                  *(f"results/cluster/{rel}" for rel in TARGET)],
                 cwd=repo, check=False, env=dict(slurm.env, PYTHONPATH=str(repo / "src")))
    assert result.returncode == 0, (f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}\n"
                                    f"slurmctld.log: {slurm.log_tail('slurmctld.log')}")

    jobs = {job["JobID"]: job for job in slurm.jobs()}
    assert len(jobs) == len(TARGET)  # one SLURM job per milestone, nothing run on the login side
    for job in jobs.values():
        assert job["State"] == "COMPLETED", job
        assert (job["Partition"], job["tres-per-job"], job["NodeList"]) == ("gpu", "gres:gpu:1", NODE), job

    audited = {s.path.relative_to(repo / "results" / "cluster").as_posix(): s for s in audit(repo)}
    states = {rel: s for rel, s in audited.items() if s.state != "missing"}  # audit also lists the rest
    assert sorted(states) == sorted(TARGET)
    assert {s.state for s in states.values()} == {"fresh"}
    ran_as = {}
    for rel, state in states.items():
        host = state.doc["host"]
        assert host["name"] == "cluster"
        assert host["slurm_node"] == NODE != socket.gethostname()  # the node, not the submitting machine
        ran_as[host["slurm_job"]] = state.doc["rule"]
    # each milestone's evidence names its own job, and that job is the one submitted for its rule
    assert sorted(ran_as) == sorted(jobs)
    for job_id, rule in ran_as.items():
        assert jobs[job_id]["Comment"].startswith(f"rule_{rule}_wildcards_"), jobs[job_id]

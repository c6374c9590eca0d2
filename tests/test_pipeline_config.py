"""The workflow config and its JSON schema: defaults, and one-line errors that name the key."""
import copy
from pathlib import Path

import pytest
import yaml

from pipeline_helpers import REPO, host_entry, make_repo, planned_jobs, snakemake

from fleet_decode.pipeline.config import ConfigError, load, validate

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_default_config_targets_the_local_cpu_simulator_with_the_tiny_model():
    config = load(REPO / "config" / "config.yaml")
    assert config["targets"] == ["cpu"]
    cpu = config["hosts"]["cpu"]
    assert (cpu["transport"], cpu["backend"], cpu["model"]) == ("local", "sim", "tiny")
    assert cpu["gates"]["rel_err_max"] == 1e-4  # schema defaults are filled in
    assert config["hosts"]["h200"]["arch"] == "sm_90a"
    assert config["hosts"]["mi300x"]["transport"] == "ssh"


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["hosts"]["cpu"].update(backend="cuda"),
     "config error at hosts.cpu.backend: 'cuda' is not one of ['sim', 'gpu']"),
    (lambda c: c["hosts"]["mi300x"].pop("ssh_alias"),
     "config error at hosts.mi300x: 'ssh_alias' is a required property"),
    (lambda c: c["hosts"]["cpu"].update(model="tinyy"),
     "config error at hosts.cpu.model: 'tinyy' does not match"),
    (lambda c: c["hosts"]["cpu"]["gates"].update(rel_err_mx=1),
     "config error at hosts.cpu.gates: Additional properties are not allowed ('rel_err_mx'"),
    (lambda c: c.update(targets=["nowhere"]),
     "config error at targets: 'nowhere' is not a key of hosts"),
])
def test_invalid_config_names_the_key(edit, message):
    config = copy.deepcopy(DEFAULT)
    config["hosts"]["cpu"]["gates"] = {}
    edit(config)
    with pytest.raises(ConfigError) as error:
        validate(config)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_snakemake_refuses_an_invalid_config_before_doing_anything(tmp_path):
    repo = make_repo(tmp_path / "repo", {"cpu": host_entry(workers=0)}, ["cpu"], probe_kernel=False)
    result = snakemake(repo, "-n", check=False)
    assert result.returncode != 0
    assert "config error at hosts.cpu.workers: 0 is less than the minimum of 1" in result.stdout + result.stderr
    assert not (Path(repo) / ".work").exists()


def test_check_config_reports_valid_invalid_and_unreadable_configs(tmp_path, capsys):
    from fleet_decode.__main__ import main

    assert main(["check-config", str(REPO / "config" / "config.yaml")]) == 0
    assert "valid; targets ['cpu']; hosts cpu (local, sim), h200 (local, gpu)" in capsys.readouterr().out
    bad = copy.deepcopy(DEFAULT)
    bad["hosts"]["cpu"]["backend"] = "cuda"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert main(["check-config", str(tmp_path / "bad.yaml")]) == 1
    assert "config error at hosts.cpu.backend: 'cuda' is not one of" in capsys.readouterr().err
    assert main(["check-config", str(tmp_path / "missing.yaml")]) == 1
    assert "config error: cannot read" in capsys.readouterr().err


def test_the_schedules_the_schema_allows_are_the_simulators_own():
    from fleet_decode.sim.runtime import SCHEDULES

    schema = yaml.safe_load((REPO / "config" / "config.schema.yaml").read_text())
    assert schema["$defs"]["host"]["properties"]["schedule"]["enum"] == list(SCHEDULES)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["hosts"].update({"../../evil": c["hosts"]["cpu"]}), "config error at hosts: '../../evil' does not match"),
    (lambda c: c["hosts"]["cpu"].update(schedule="adversarial"), "config error at hosts.cpu.schedule: 'adversarial' is not one of"),
    (lambda c: c["hosts"]["cpu"].update(workdir="~bob/work"), "config error at hosts.cpu.workdir: '~bob/work' does not match"),
    (lambda c: c["hosts"]["cpu"].update(env={"HF TOKEN": "x"}), "config error at hosts.cpu.env: 'HF TOKEN' does not match"),
    (lambda c: c["hosts"]["h200"].update(arch="gfx942"), "config error at hosts.h200.arch: 'gfx942' does not match '^sm_'"),
    (lambda c: c["hosts"]["h200"].update(expect_gpu=""), "config error at hosts.h200.expect_gpu: '' should be non-empty"),
    (lambda c: c.update(ssh_config="/no/such/ssh_config", targets=["mi300x"]),
     "config error at ssh_config: /no/such/ssh_config does not exist (target 'mi300x' connects over ssh"),
])
def test_the_schema_refuses_what_would_fail_later(edit, message):
    config = copy.deepcopy(DEFAULT)
    edit(config)
    with pytest.raises(ConfigError) as error:
        validate(config)
    assert str(error.value).startswith(message)


def test_a_workdir_of_tilde_is_the_hosts_home():
    import os

    from fleet_decode.pipeline.deploy import resolve_workdir
    from fleet_decode.pipeline.transport import LocalTransport

    home = os.path.realpath(os.path.expanduser("~"))
    assert resolve_workdir(LocalTransport("cpu"), "~") == home
    assert resolve_workdir(LocalTransport("cpu"), "~/.cache") == os.path.join(home, ".cache")


@pytest.fixture(scope="module")
def small_repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("configs") / "repo", {"cpu": host_entry()}, ["cpu"], probe_kernel=False)


def test_configfile_is_validated_exactly_as_check_config_validates_it(small_repo, tmp_path):
    from fleet_decode.__main__ import main

    config = copy.deepcopy(DEFAULT)
    del config["hosts"]["cpu"]["workdir"]  # config/config.yaml has one: it must not fill this in
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(config))
    expected = "config error at hosts.cpu: 'workdir' is a required property"
    assert main(["check-config", str(tmp_path / "x.yaml")]) == 1
    result = snakemake(small_repo, "-n", "--configfile", str(tmp_path / "x.yaml"), check=False)
    assert result.returncode != 0 and expected in result.stdout + result.stderr


def test_numeric_host_overrides_on_the_command_line_are_accepted(small_repo):
    result = snakemake(small_repo, "-n", "report", "--config", "hosts={cpu: {workers: 4, bench_time_budget_s: 2.5}}")
    # Without reading "4" as a number the schema would refuse it ('4' is not of type 'integer').
    assert "config error" not in result.stdout + result.stderr
    assert planned_jobs(result.stdout)["m0_host"] == 1
    refused = snakemake(small_repo, "-n", "report", "--config", "hosts={cpu: {workers: many}}", check=False)
    assert refused.returncode != 0
    assert "config error at hosts.cpu.workers: 'many' is not of type 'integer'" in refused.stdout + refused.stderr


def test_the_expected_gpu_reaches_the_milestones_only_where_a_host_names_one():
    from fleet_decode.pipeline.config import host_params

    config = load(REPO / "config" / "config.yaml")
    assert host_params(config["hosts"]["h200"])["expect_gpu"] == "H200"
    assert "expect_gpu" not in host_params(config["hosts"]["cpu"])  # the CPU evidence's params stay as they were


def test_the_h100_target_is_the_h200_target_on_another_gpu():
    """Where the device lends an H100, its run differs from the H200's only in the GPU it insists on,
    so the two hosts' evidence compares like for like (and never files one GPU's numbers as the other's)."""
    from fleet_decode.pipeline.config import host_params

    hosts = load(REPO / "config" / "config.yaml")["hosts"]
    h100, h200 = host_params(hosts["h100"]), host_params(hosts["h200"])
    assert h100.pop("expect_gpu") == "H100" and h200.pop("expect_gpu") == "H200"
    assert h100 == h200
    assert {k: v for k, v in hosts["h100"].items() if k != "expect_gpu"} == \
        {k: v for k, v in hosts["h200"].items() if k != "expect_gpu"}  # transport, workdir, arch as well

"""The workflow config and its JSON schema: defaults, and one-line errors that name the key."""
import copy
from pathlib import Path

import pytest
import yaml

from pipeline_helpers import REPO, host_entry, make_repo, snakemake

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

"""A property of the config schema: any config, however odd, is either refused by
`fleet-decode check-config` in one line that names the field, or plans cleanly with
`snakemake -n` (run on the first few such configs; each costs seconds). A refused config is
refused by Snakemake with the same line, on the first few too."""
import contextlib
import copy
import io
import itertools

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_helpers import host_entry, make_repo, snakemake

from fleet_decode.__main__ import main

VALID_HOST = host_entry()
# Per field: values that fit and values that should be refused (or fail later if let through).
FIELD_VALUES = {
    "transport": ["local", "ssh", "telnet"],
    "ssh_alias": ["gpu-box", "user@gpu-box:2222", "two words", ""],
    "backend": ["sim", "gpu", "cuda"],
    "compiler": ["nvcc", "hipcc", "clang"],
    "arch": ["sm_90a", "gfx942", "x86_64"],
    "model": ["tiny", "random:tiny@3", "hf:/data/model", "tinyy", ""],
    "workdir": [".work/hosts/x", "~", "~/fleet-decode", "~bob/fd", "", "/tmp/fd dir"],
    "python": ["python3", ""],
    "env": [{"HF_TOKEN": "hf_x"}, {"BAD NAME": "x"}, {"N": 1}, {}],
    "prompt_tokens": [1, 16, 0, -3, "8", 2.5],
    "decode_tokens": [3, 2],
    "workers": [1, 3, 0, "8"],
    "schedule": ["round-robin", "random", "reverse", "adversarial"],
    "seed": [0, -1, "x"],
    "keep_runs": [1, 0],
    "timeout_s": [60, 0],
    "bench_prompt_lengths": [[16], [], [0]],
    "bench_runs": [1, 0],
    "bench_time_budget_s": [1.5, 0],
    "trust_on_first_use": [True, "yes"],
    "record_host_details": [True, 1],
    "expect_gpu": ["H200", "", 5],
    "colour": ["blue"],  # not a field
}
HOST_NAMES = ["cpu", "gpu-box", "a_b-1", "H200"]
BAD_HOST_NAMES = ["../../evil", "-x", "", "h" * 70, "gpu.lab"]


def rarely(draw, strategy, otherwise):
    """One draw in five from `strategy`, else `otherwise`: most configs should be near valid."""
    return draw(strategy) if draw(st.integers(0, 4)) == 0 else otherwise


@st.composite
def configs(draw, ssh_config_path):
    hosts = {}
    for name in draw(st.lists(st.sampled_from(HOST_NAMES), min_size=1, max_size=2, unique=True)):
        host = copy.deepcopy(VALID_HOST)
        host["workdir"] = f".work/hosts/{len(hosts)}"
        for field in draw(st.lists(st.sampled_from(sorted(FIELD_VALUES)), max_size=2, unique=True)):
            host[field] = draw(st.sampled_from(FIELD_VALUES[field]))
        host.pop(rarely(draw, st.sampled_from(["transport", "backend", "model", "workdir"]), None), None)
        hosts[rarely(draw, st.sampled_from(BAD_HOST_NAMES), name)] = host
    targets = draw(st.lists(st.sampled_from(sorted(hosts)), min_size=1, max_size=2, unique=True))
    config = {"targets": targets + rarely(draw, st.just(["elsewhere"]), []), "hosts": hosts}
    extra = rarely(draw, st.sampled_from(["missing ssh_config", "bad allow_dirty", "unknown"]),
                   draw(st.sampled_from(["none", "ssh_config", "allow_dirty"])))
    config.update({"none": {}, "ssh_config": {"ssh_config": str(ssh_config_path)},
                   "missing ssh_config": {"ssh_config": "/no/such/ssh_config"},
                   "allow_dirty": {"allow_dirty": True}, "bad allow_dirty": {"allow_dirty": "no"},
                   "unknown": {"colour": "blue"}}[extra])
    return config


def names_a_field(where: str, message: str, config: dict) -> bool:
    """`where` (a dotted path) leads into `config`; at the top level the message quotes a key."""
    if where == "(top level)":
        return any(f"'{key}'" in message for key in [*config, "targets", "hosts"])
    node = config
    for part in where.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = make_repo(tmp_path_factory.mktemp("property") / "repo", {"cpu": host_entry()}, ["cpu"], probe_kernel=False)
    (path.parent / "ssh_config").write_text("Host gpu-box\n  HostName 127.0.0.1\n")
    return path


SNAKEMAKE_RUNS = {"plans": 5, "refusals": 2}
seen = {"plans": 0, "refusals": 0, "valid": 0, "refused": 0}


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_config_is_refused_in_one_line_naming_the_field_or_plans_cleanly(repo, data):
    config = data.draw(configs(repo.parent / "ssh_config"))
    path = repo.parent / f"config-{next(counter)}.yaml"
    path.write_text(yaml.safe_dump(config))
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(["check-config", str(path)])
    if status == 0:
        seen["valid"] += 1
        assert stderr.getvalue() == ""
        if seen["plans"] < SNAKEMAKE_RUNS["plans"]:
            seen["plans"] += 1
            result = snakemake(repo, "-n", "--configfile", str(path), check=False)
            assert result.returncode == 0, f"{config}\n{result.stderr[-2000:]}"
        return
    seen["refused"] += 1
    line = stderr.getvalue()
    assert status == 1 and line.count("\n") == 1, line
    prefix = f"{path}: config error at "
    assert line.startswith(prefix), line
    where, _, message = line[len(prefix):].partition(": ")
    assert names_a_field(where, message, config), f"{line} does not name a field of {config}"
    if seen["refusals"] < SNAKEMAKE_RUNS["refusals"]:
        seen["refusals"] += 1
        result = snakemake(repo, "-n", "--configfile", str(path), check=False)
        assert result.returncode != 0 and line.removeprefix(f"{path}: ").strip() in result.stdout + result.stderr


counter = itertools.count()


def test_the_property_saw_both_outcomes():
    """Runs after the property (same module, in order): it met valid and refused configs alike."""
    if seen["valid"] + seen["refused"] == 0:
        pytest.skip("the property test did not run (deselected)")
    assert seen["valid"] >= 1 and seen["refused"] >= 1 and seen["plans"] >= 1, seen

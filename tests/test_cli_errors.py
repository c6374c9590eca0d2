"""Bad input to the command lines ends in one line that names the problem, exit code 2; a reader
that closes the pipe early ends the output quietly. Each runs as a user would run it."""
import json
import os
import subprocess
import sys

import pytest

from pipeline_helpers import REPO

ENV = dict(os.environ, PYTHONPATH=str(REPO / "src"))


def cli(*argv, **kwargs):
    streams = kwargs or {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.run([sys.executable, "-m", *argv], text=True, env=ENV, timeout=300, **streams)


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    where = tmp_path_factory.mktemp("configs")
    (where / "llama").mkdir()
    (where / "llama" / "config.json").write_text(json.dumps(
        {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096}))
    (where / "bad.json").write_text(json.dumps({"model_type": "deepseek_v2", "hidden_size": "big"}))
    return where


@pytest.mark.parametrize("argv, names", [
    (["--tokens", "0"], "argument --tokens: 0 is not a positive integer"),
    (["--workers", "0"], "argument --workers: 0 is not a positive integer"),
    (["--prompt-len", "0"], "argument --prompt-len: 0 is not a positive integer"),
    (["--tokens", "eight"], "argument --tokens: 'eight' is not an integer"),
    (["--schedule", "adversarial"], "argument --schedule: invalid choice: 'adversarial'"),
    (["--model", "random:/nonexistent.json"], "--model /nonexistent.json: no such config"),
    (["--model", "hf:/tmp/nothing-here"], "--model hf:/tmp/nothing-here: no such checkpoint directory"),
    (["--model", "random:{configs}/llama/config.json"], "model_type is 'llama', fleet-decode decodes only 'deepseek_v2'"),
    (["--model", "hf:{configs}/llama"], "model_type is 'llama', fleet-decode decodes only 'deepseek_v2'"),
    (["--model", "random:{configs}/bad.json"], "bad.json: transformers refuses this config"),
])
def test_simulator_cli_refuses_bad_input_in_one_line(argv, names, configs):
    result = cli("fleet_decode.sim", *[a.format(configs=configs) for a in argv])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and names in result.stderr, result.stderr
    assert result.stderr.startswith("python -m fleet_decode.sim: error: ")


@pytest.mark.parametrize("argv", [["fleet_decode", "--help"], ["fleet_decode", "audit", "--root", str(REPO)],
                                  ["fleet_decode.sim", "--help"]])
def test_a_reader_that_leaves_early_gets_no_traceback(argv):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head` that has already exited: every write fails with EPIPE
    try:
        result = cli(*argv, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert result.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert result.returncode in (0, 1)  # argparse's --help swallows the error itself


def test_fleet_decode_refuses_unknown_input_in_one_line():
    for argv, names in ((["bogus"], "unknown command 'bogus'"),
                        (["check-config", "a.yaml", "b.yaml"], "unrecognized arguments: b.yaml")):
        result = cli("fleet_decode", *argv)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and names in result.stderr

"""Every command in the README's code blocks, run as written in a throwaway copy of the repo (the
one the whole-workflow tests built, with their small config), so that a documented command cannot
rot. New commands are picked up from the README itself. Those this CPU machine cannot run as
written are in COMMANDS_NOT_RUN_HERE, each with how it is exercised instead."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_helpers import REPO, built_pipeline
from readme_commands import readme_commands

# How a command that needs the GPU host (or is CI itself) is exercised here:
#   "ci":      .ci/run runs it as written, before (or as) this test suite
#   "dry-run": with `-n` after `snakemake`: the config is validated and the DAG planned, nothing runs
#   "options": `python -m <module> --help` (or `fleet-decode <command> --help`) runs, and lists every
#              option the command uses
COMMANDS_NOT_RUN_HERE = {
    "bash scripts/setup.sh": "ci",
    "bash scripts/test.sh": "ci",
    "snakemake report --config targets='[h200]'": "dry-run",
    "python -m fleet_decode.model.compare --model random:deepseek-coder-v2-lite --dtype bf16 --device cuda "
    "--prefill 1024 --steps 32": "options",
    "python -m fleet_decode.kernels.build --arch sm_90a": "options",  # nvcc for sm_90a
    "python -m fleet_decode.kernels.checks": "options",
    "python -m fleet_decode.kernels.lab --tokens 32 --out m.json": "options",
    "python -m fleet_decode.bench --model random:deepseek-coder-v2-lite --device cuda "
    "--prompt-lengths 256,1024,4096 --tokens 32 --runs 3 --json bench.json": "options",
    # a real checkpoint, which this machine does not have
    "fleet-decode generate --model hf:/data/DeepSeek-Coder-V2-Lite-Base --prompt \"def quicksort(\" "
    "--max-new-tokens 200 --temperature 0.7 --top-p 0.95 --seed 1": "options",
}
COMMANDS = list(dict.fromkeys(readme_commands(REPO / "README.md")))


def test_the_readme_has_commands_and_the_table_lists_only_readme_commands():
    assert "snakemake report" in COMMANDS and "bash scripts/test.sh" in COMMANDS
    assert set(COMMANDS_NOT_RUN_HERE) <= set(COMMANDS), set(COMMANDS_NOT_RUN_HERE) - set(COMMANDS)


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    # `python` and `snakemake` are this interpreter's; fleet_decode is the copy's.
    env = dict(os.environ, PYTHONPATH=str(cwd / "src"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_works_as_written(command, tmp_path_factory):
    how = COMMANDS_NOT_RUN_HERE.get(command, "as written")
    if how == "ci":  # `bash scripts/x.sh`: .ci/run runs scripts/x.sh itself
        script = command.removeprefix("bash ")
        assert re.search(rf"^(exec )?(bash )?(\./)?{re.escape(script)}$", (REPO / ".ci" / "run").read_text(), re.M)
        return
    repo = built_pipeline(tmp_path_factory)
    if how == "dry-run":
        result = shell(re.sub(r"^snakemake ", "snakemake -n ", command), repo)
    elif how == "options":
        module = re.match(r"(?:python -m|fleet-decode) (\S+)", command).group(1)
        help_command = f"python -m fleet_decode {module} --help" if command.startswith("fleet-decode ") \
            else f"python -m {module} --help"
        result = shell(help_command, repo)
        missing = [o for o in re.findall(r"(?<!\S)(--[a-z][\w-]*)", command) if o not in result.stdout]
        assert not missing, f"{command}: {module} --help does not list {missing}"
    else:
        result = shell(command, repo)
    assert result.returncode == 0, f"{command} ({how}) exited {result.returncode}:\n{result.stderr[-3000:]}"

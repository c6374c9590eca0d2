"""docs/next/pool/pick.py: the rule that picks decode_plan's sum form from the pool sweep on the machine that
then runs the pipeline on it (docs/next/README.md). Synthetic sweeps, the shape kernels.lab writes."""
import importlib.util
import json
from pathlib import Path

import pytest

PICK = Path(__file__).resolve().parents[1] / "docs" / "next" / "pool" / "pick.py"


@pytest.fixture(scope="module")
def pick():
    spec = importlib.util.spec_from_file_location("pool_pick", PICK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pick


def sweep_dirs(tmp_path, p50: dict[str, tuple[float, float]], tests_rc="0", same=(), candidates=None):
    sweeps, cands = tmp_path / "sweeps", tmp_path / "cands"
    sweeps.mkdir(parents=True)
    cands.mkdir()
    for name in candidates if candidates is not None else [n for n in p50 if n != "default"]:
        (cands / name.replace(" ", "_")).mkdir()
    if tests_rc is not None:
        (sweeps / "tests.rc").write_text(tests_rc + "\n")
    for i, prompt in enumerate((1024, 4096)):
        rows = {name: {"p50_ms": times[i], "same_tokens_every_launch": name not in same} for name, times in p50.items()}
        (sweeps / f"sweep-{prompt}-pool.json").write_text(json.dumps({"prompt": prompt, "variants": rows}))
    return sweeps, cands


def test_the_form_with_the_lowest_two_lengths_wins_among_those_a_percent_faster(pick, tmp_path):
    p50 = {"default": (2.0, 2.4), "pool 32 sum tail": (1.9, 2.3), "fixed-point sum tail": (1.95, 2.2),
           "pool 16": (1.5, 2.5),  # faster at 1,024, slower at 4,096: not eligible
           "fixed-point sum": (1.99, 2.0)}  # 0.5 % at 1,024: too little
    assert pick(*sweep_dirs(tmp_path, p50)) == "fixed-point_sum_tail"


def test_anything_missing_or_failed_keeps_the_default(pick, tmp_path):
    p50 = {"default": (2.0, 2.4), "pool 32": (1.8, 2.2)}
    assert pick(*sweep_dirs(tmp_path / "a", p50, tests_rc="1")) == "default"  # a GPU test failed
    assert pick(*sweep_dirs(tmp_path / "b", p50, tests_rc=None)) == "default"  # the tests did not run
    assert pick(*sweep_dirs(tmp_path / "c", p50, same=("pool 32",))) == "default"  # tokens moved between launches
    assert pick(*sweep_dirs(tmp_path / "d", p50, candidates=[])) == "default"  # no candidate built for it
    sweeps, cands = sweep_dirs(tmp_path / "e", p50)
    (sweeps / "sweep-4096-pool.json").unlink()  # the second sweep cut short
    assert pick(sweeps, cands) == "default"
    sweeps, cands = sweep_dirs(tmp_path / "f", {"default": (2.0, 2.4)}, candidates=["pool 32"])
    assert pick(sweeps, cands) == "default"  # a candidate the sweep did not time
    assert pick(*sweep_dirs(tmp_path / "g", p50)) == "pool_32"

"""Old run directories on a host are pruned per rule, newest kept (pipeline.run.prune_runs)."""
from fleet_decode.pipeline.run import prune_runs, run_name
from fleet_decode.pipeline.transport import LocalTransport


def make_runs(root, rule, n):
    names = [run_name(rule, f"20261130T1000{i:02d}", f"{i:06x}") for i in range(n)]
    for name in names:
        (root / "runs" / name / "out").mkdir(parents=True)
        (root / "runs" / name / "log").write_text("a log\n")
    return names


def test_only_the_rules_oldest_runs_beyond_keep_are_removed(tmp_path):
    m1, m2, m0 = make_runs(tmp_path, "m1", 7), make_runs(tmp_path, "m2", 2), make_runs(tmp_path, "m0_host", 4)
    (tmp_path / "runs" / "m1-notes").mkdir()  # not a run's name: never touched
    removed = prune_runs(LocalTransport("t"), str(tmp_path), "m1", keep=3, current=f"{tmp_path}/runs/{m1[-1]}")
    assert removed == m1[:4]
    left = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert left == sorted([*m1[4:], *m2, *m0, "m1-notes"])


def test_the_current_run_is_kept_whatever_its_age_and_nothing_to_prune_is_fine(tmp_path):
    m4 = make_runs(tmp_path, "m4", 3)
    removed = prune_runs(LocalTransport("t"), str(tmp_path), "m4", keep=1, current=f"{tmp_path}/runs/{m4[0]}")
    assert removed == [m4[1]]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [m4[0], m4[2]]
    assert prune_runs(LocalTransport("t"), str(tmp_path / "elsewhere"), "m4", keep=1, current="") == []

"""Deploy by `git archive` into a content-addressed dir, and one rule run end to end over the local
transport, including a remote failure that must leave nothing behind."""
import json

import pytest

from pipeline_helpers import git, host_entry, make_repo

from fleet_decode.pipeline.config import load
from fleet_decode.pipeline.deploy import DirtyTree, ensure_deployed, snapshot
from fleet_decode.pipeline.evidence import read_evidence
from fleet_decode.pipeline.run import run_rule
from fleet_decode.pipeline.transport import ConnectionLost, LocalTransport, TransportError


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy") / "repo"
    return make_repo(root, {"cpu": host_entry(workdir=str(root.parent / "host work")),
                            "broken": host_entry(model="random:no-such-config",
                                                 workdir=str(root.parent / "host work"))},
                     ["cpu"], probe_kernel=False)


def test_dirty_tree_is_refused_unless_allowed(repo):
    readme = repo / "config" / "config.yaml"
    original = readme.read_text()
    readme.write_text(original + "# uncommitted\n")
    try:
        with pytest.raises(DirtyTree, match=r"refusing to deploy: 1 uncommitted change\(s\) .*config/config.yaml"):
            snapshot(repo)
        snap = snapshot(repo, allow_dirty=True)
        assert snap.dirty and len(snap.diff_sha256) == 64
        assert snap.key.endswith("-dirty")
    finally:
        readme.write_text(original)
    (repo / "results").mkdir(exist_ok=True)
    (repo / "results" / "new.json").write_text("{}")  # pipeline outputs are not "dirt"
    assert not snapshot(repo).dirty


def test_deploy_is_content_addressed_with_a_manifest_and_no_git(repo, tmp_path):
    snap = snapshot(repo)
    transport = LocalTransport("cpu")
    tree = ensure_deployed(transport, snap, str(tmp_path / "work dir"), "python3")
    manifest = json.loads((tmp_path / "work dir" / "trees" / snap.key / "DEPLOY_MANIFEST.json").read_text())
    assert tree.endswith(snap.key)
    assert manifest["commit"] == git(repo, "rev-parse", "HEAD").stdout.strip()
    assert manifest["files"]["remote/m1_kernels.py"] == snap.files["remote/m1_kernels.py"]
    assert not (tmp_path / "work dir" / "trees" / snap.key / ".git").exists()
    (tmp_path / "work dir" / "trees" / snap.key / "marker").write_text("kept")
    assert ensure_deployed(transport, snap, str(tmp_path / "work dir"), "python3") == tree
    assert (tmp_path / "work dir" / "trees" / snap.key / "marker").exists()  # reused, not re-unpacked


def test_rule_runs_on_the_host_and_fetches_verified_evidence(repo, tmp_path):
    config = load(repo / "config" / "config.yaml")
    out = tmp_path / "results" / "cpu" / "m0" / "host.json"
    run_rule(config, "cpu", "m0_host", str(out), "m0/host.json", repo)
    doc = read_evidence(out)
    assert doc["status"] == "pass" and doc["rule"] == "m0_host"
    assert doc["model"]["source"] == "tiny" and len(doc["model"]["config_sha256"]) == 64
    assert doc["git"]["commit"] == git(repo, "rev-parse", "HEAD").stdout.strip()


def test_an_interrupted_rule_reattaches_to_its_run_instead_of_starting_another(repo, tmp_path, monkeypatch, capsys):
    config = load(repo / "config" / "config.yaml")
    out = tmp_path / "results" / "cpu" / "m0" / "host.json"
    started, real_start, real_wait = [], LocalTransport.start, LocalTransport.wait

    def counting_start(self, run_dir, command, key="", env=None):
        started.append(run_dir)
        real_start(self, run_dir, command, key, env)

    def interrupted_wait(self, *args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C on this side while the run goes on on the host

    monkeypatch.setattr(LocalTransport, "start", counting_start)
    monkeypatch.setattr(LocalTransport, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        run_rule(config, "cpu", "m0_host", str(out), "m0/host.json", repo)
    assert len(started) == 1 and not out.exists()
    monkeypatch.setattr(LocalTransport, "wait", real_wait)
    run_rule(config, "cpu", "m0_host", str(out), "m0/host.json", repo)
    assert len(started) == 1  # waited for (or fetched) the first run, started none
    assert "re-attaching to the same run" in capsys.readouterr().err
    doc = read_evidence(out)
    assert doc["status"] == "pass" and doc["argv"][-2:] == ["--out", "m0/host.json"]
    run_rule(config, "cpu", "m0_host", str(out), "m0/host.json", repo)  # fetched now: a new run
    assert len(started) == 2


def test_a_connection_lost_as_the_run_starts_names_the_rule_and_the_next_run_reattaches(repo, tmp_path, monkeypatch,
                                                                                       capsys):
    config = load(repo / "config" / "config.yaml")
    out = tmp_path / "results" / "cpu" / "m0" / "host.json"
    started, real_start = [], LocalTransport.start

    def start_then_lose_the_answer(self, run_dir, command, key="", env=None):
        started.append(run_dir)
        real_start(self, run_dir, command, key, env)  # it did start on the host; the answer never came
        raise ConnectionLost("cpu: SSH connection to 'cpu' dropped mid-command")

    monkeypatch.setattr(LocalTransport, "start", start_then_lose_the_answer)
    with pytest.raises(TransportError) as error:
        run_rule(config, "cpu", "m0_host", str(out), "m0/host.json", repo)
    assert str(error.value).startswith("cpu: connection lost during m0_host (m0/host.json) as it started "
                                       "(cpu: SSH connection to 'cpu' dropped mid-command)")
    assert started[0] in str(error.value) and not out.exists()
    run_rule(config, "cpu", "m0_host", str(out), "m0/host.json", repo)
    assert len(started) == 1 and "re-attaching to the same run" in capsys.readouterr().err
    assert read_evidence(out)["status"] == "pass"


def test_a_failing_remote_command_shows_its_log_tail_and_leaves_nothing(repo, tmp_path):
    config = load(repo / "config" / "config.yaml")
    out = tmp_path / "results" / "broken" / "m0" / "host.json"
    with pytest.raises(TransportError) as error:
        run_rule(config, "broken", "m0_host", str(out), "m0/host.json", repo)
    first, *tail = str(error.value).splitlines()
    assert first.startswith("broken: m0_host (m0/host.json) failed on the host (exit 1)")
    assert any("no-such-config" in line for line in tail)
    assert not out.exists() and not out.parent.exists()


def test_a_copy_without_git_deploys_from_its_manifest_or_is_refused(repo, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    with pytest.raises(DirtyTree, match="neither a git checkout nor a copy carrying DEPLOY_MANIFEST.json"):
        snapshot(copy)
    (copy / "DEPLOY_MANIFEST.json").write_bytes(snapshot(repo).manifest())
    snap = snapshot(copy)
    assert snap.commit == git(repo, "rev-parse", "HEAD").stdout.strip() and not snap.dirty
    assert snap.files == snapshot(repo).files
    tree = ensure_deployed(LocalTransport("h200"), snap, str(tmp_path / "work"), "python3")
    assert json.loads((tmp_path / "work" / "trees" / snap.key / "DEPLOY_MANIFEST.json").read_text())["commit"] == snap.commit
    assert (tmp_path / "work" / "trees" / snap.key / "remote" / "m1_kernels.py").exists() and tree
    (copy / "remote" / "m1_kernels.py").write_text("# edited on the GPU host\n")
    with pytest.raises(DirtyTree, match=r"1 file\(s\) .* differ from its DEPLOY_MANIFEST.json \(first: remote/m1_kernels.py\)"):
        snapshot(copy)
    assert snapshot(copy, allow_dirty=True).dirty


def test_a_copy_whose_git_has_no_commit_deploys_from_its_manifest(repo, tmp_path):
    """How the tree reaches the GPU host here: files synced beside an empty .git."""
    import shutil

    copy = tmp_path / "synced"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    git(copy, "init", "-q")
    with pytest.raises(DirtyTree, match="neither a git checkout nor a copy carrying DEPLOY_MANIFEST.json"):
        snapshot(copy)
    (copy / "DEPLOY_MANIFEST.json").write_bytes(snapshot(repo).manifest())
    assert snapshot(copy).commit == snapshot(repo).commit


def test_a_copy_beside_an_old_commit_deploys_from_its_matching_manifest(repo, tmp_path):
    """A host that kept an older .git: its HEAD is not these files, the manifest written in the
    checkout is; a manifest that does not match, or a checkout without one, is still refused."""
    import shutil

    copy = tmp_path / "kept"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    git(copy, "init", "-q")
    (copy / "remote" / "m1_kernels.py").rename(copy / "m1.bak")
    (copy / "remote" / "m1_kernels.py").write_text("# an older version\n")
    git(copy, "add", "-A")
    git(copy, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old")
    (copy / "m1.bak").replace(copy / "remote" / "m1_kernels.py")
    with pytest.raises(DirtyTree, match="uncommitted change"):
        snapshot(copy)
    (copy / "DEPLOY_MANIFEST.json").write_bytes(snapshot(repo).manifest())
    snap = snapshot(copy)
    assert snap.commit == snapshot(repo).commit and not snap.dirty and snap.files == snapshot(repo).files
    (copy / "remote" / "m1_kernels.py").write_text("# edited on the host\n")
    with pytest.raises(DirtyTree, match="uncommitted change"):
        snapshot(copy)

"""Deploy = `git archive` of the committed tree, unpacked on the host into a content-addressed
directory beside a manifest (commit, dirty flag, sha256 of every file). The host has no .git, so
evidence reads its provenance from that manifest. A tree with uncommitted changes is refused unless
`allow_dirty`; then the working tree (as `git stash create` snapshots it) is deployed and the diff's
hash recorded. Deploying the same tree twice reuses the first copy.

A copy of the checkout without .git (how a tree travels to a GPU host that runs the workflow
itself) deploys from the DEPLOY_MANIFEST.json written into it beforehand:

  python -m fleet_decode.pipeline.deploy [--allow-dirty]    # in the checkout, before copying it
"""
import hashlib
import io
import json
import secrets
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fleet_decode.pipeline.evidence import MANIFEST
from fleet_decode.pipeline.sources import sha256_file
from fleet_decode.pipeline.transport import Transport, TransportError, q

# Evidence and reports are outputs of the pipeline, not inputs: neither deployed nor "dirt".
NOT_DEPLOYED = ("results",)


class DirtyTree(RuntimeError):
    pass


@dataclass
class Snapshot:
    commit: str
    tree: str
    dirty: bool
    diff_sha256: str | None
    archive: bytes
    files: dict

    @property
    def key(self) -> str:
        return f"{self.commit[:12]}-{self.tree[:12]}" + ("-dirty" if self.dirty else "")

    def manifest(self) -> bytes:
        doc = {"commit": self.commit, "tree": self.tree, "dirty": self.dirty,
               "diff_sha256": self.diff_sha256, "files": self.files}
        return json.dumps(doc, indent=1, sort_keys=True).encode()


# Everything under the checkout but what is never deployed (git pathspec).
_PATHSPEC = ["--", ".", *(f":(exclude){p}" for p in NOT_DEPLOYED)]


def _git(repo, *args, binary=False):
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary)
    if r.returncode != 0:
        err = r.stderr.decode() if binary else r.stderr
        raise DirtyTree(f"git {' '.join(args[:2])} failed in {repo}: {err.strip()}")
    return r.stdout


def snapshot(repo, allow_dirty: bool = False) -> Snapshot:
    """What to deploy: the committed tree of a git checkout, or, for a copy of one without .git
    (how a tree reaches a GPU host), the files its DEPLOY_MANIFEST.json lists. A copy whose .git
    holds no commit (as a tree synced file by file arrives) counts as one without .git, and so does
    a copy whose .git holds some other commit while every file matches its manifest byte for byte
    (a host that keeps an old .git beside freshly synced files): the manifest, written in the
    checkout, is then the better record of what these files are."""
    git = (Path(repo) / ".git").exists() and _has_commit(repo)
    if git and (Path(repo) / MANIFEST).exists() and _git_changes(repo):
        try:
            state = _manifest_state(repo)
        except (OSError, ValueError, KeyError):  # an unreadable manifest: git decides, as without one
            state = None
        if state is not None and not state[2]:
            return _manifest_snapshot(repo, allow_dirty, state)
    if git:
        return _git_snapshot(repo, allow_dirty)
    if (Path(repo) / MANIFEST).exists():
        return _manifest_snapshot(repo, allow_dirty)
    raise DirtyTree(f"refusing to deploy: {repo} is neither a git checkout nor a copy carrying "
                    f"{MANIFEST}, so its provenance is unknown; in the checkout it was copied from, "
                    f"run `python -m fleet_decode.pipeline.deploy` to write one")


def _has_commit(repo) -> bool:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", "HEAD"],
                          capture_output=True).returncode == 0


def _git_changes(repo) -> list[str]:
    return _git(repo, "status", "--porcelain", "--untracked-files=no", *_PATHSPEC).splitlines()


def _manifest_state(repo):
    """(manifest, sha256 of each listed file present, listed files missing or changed)."""
    manifest = json.loads((Path(repo) / MANIFEST).read_text())
    listed = manifest["files"]
    files = {rel: sha256_file(Path(repo) / rel) for rel in sorted(listed) if (Path(repo) / rel).is_file()}
    return manifest, files, [p for p, h in listed.items() if files.get(p) != h]


def _manifest_snapshot(repo, allow_dirty: bool, state=None) -> Snapshot:
    manifest, files, changed = state or _manifest_state(repo)
    if changed and not allow_dirty:
        raise DirtyTree(f"refusing to deploy: {len(changed)} file(s) in {repo} differ from its "
                        f"{MANIFEST} (first: {changed[0]}); set allow_dirty: true to deploy anyway")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for rel in files:
            tar.add(Path(repo) / rel, arcname=rel, recursive=False)
    dirty = bool(manifest.get("dirty") or changed)
    diff = manifest.get("diff_sha256")
    if changed:
        diff = hashlib.sha256(json.dumps({p: files.get(p) for p in changed}, sort_keys=True).encode()).hexdigest()
    tree = hashlib.sha1(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return Snapshot(manifest["commit"], tree, dirty, diff, buffer.getvalue(), files)


def _git_snapshot(repo, allow_dirty: bool) -> Snapshot:
    changes = _git_changes(repo)
    commit = _git(repo, "rev-parse", "HEAD").strip()
    source, diff_sha256 = commit, None
    if changes:
        if not allow_dirty:
            raise DirtyTree(f"refusing to deploy: {len(changes)} uncommitted change(s) in {repo} "
                            f"(first: {changes[0].strip()}); commit them or set allow_dirty: true")
        source = _git(repo, "stash", "create").strip()
        diff_sha256 = hashlib.sha256(_git(repo, "diff", "--binary", "HEAD", *_PATHSPEC, binary=True)).hexdigest()
    tree = _git(repo, "rev-parse", f"{source}^{{tree}}").strip()
    archive = _git(repo, "archive", "--format=tar", source, *_PATHSPEC, binary=True)
    files = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isfile():
                files[member.name] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    return Snapshot(commit, tree, bool(changes), diff_sha256, archive, files)


def resolve_workdir(transport: Transport, workdir: str) -> str:
    """Absolute path of the host's work dir (created if needed); `~` or `~/...` is the host's home."""
    home, _, rest = workdir.partition("/")
    path = q(workdir) if home != "~" else '"$HOME"' + (f"/{q(rest)}" if rest else "")
    return transport.check(f"mkdir -p {path} && cd {path} && pwd", f"creating work dir {workdir}").strip()


def ensure_deployed(transport: Transport, snap: Snapshot, workdir: str, python: str) -> str:
    """Returns the deployed tree's directory on the host, uploading and unpacking it if needed."""
    target = f"{workdir}/trees/{snap.key}"
    if transport.sh(f"test -f {q(target)}/{MANIFEST}").rc == 0:
        return target
    # Unique upload and unpack dirs: two jobs may deploy the same tree at once; the first rename wins.
    incoming = f"{workdir}/incoming/{snap.key}-{secrets.token_hex(4)}"
    transport.check(f"mkdir -p {q(incoming)} {q(workdir)}/trees", "preparing upload")
    with tempfile.TemporaryDirectory(prefix="fleet-deploy-") as scratch:
        for name, data in (("tree.tar", snap.archive), ("manifest.json", snap.manifest())):
            (Path(scratch) / name).write_bytes(data)
            transport.put(Path(scratch) / name, f"{incoming}/{name}")
    expected = hashlib.sha256(snap.archive).hexdigest()
    hash_tar = (f"{q(python)} -c 'import hashlib,sys; "
                f"print(hashlib.sha256(open(sys.argv[1], \"rb\").read()).hexdigest())' "
                f"{q(incoming)}/tree.tar")
    got = transport.check(hash_tar, "hashing the uploaded archive").strip()
    if got != expected:
        raise TransportError(f"{transport.name}: uploaded archive sha256 {got} != {expected}; refused")
    partial = f"{incoming}/tree"
    transport.check(f"mkdir -p {q(partial)} && tar -xf {q(incoming)}/tree.tar -C {q(partial)} && "
                    f"mv {q(incoming)}/manifest.json {q(partial)}/{MANIFEST} && "
                    f"{{ mv -T {q(partial)} {q(target)} 2>/dev/null || true; }} && rm -rf {q(incoming)} && "
                    f"test -f {q(target)}/{MANIFEST}", f"unpacking {snap.key}")
    return target



def main():
    """`python -m fleet_decode.pipeline.deploy [--allow-dirty]`: writes DEPLOY_MANIFEST.json at the
    root of this checkout, so that a copy of the tree without .git (e.g. sent to a GPU host that
    runs the workflow itself) still deploys with this commit's provenance."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--repo", default=".")
    parser.add_argument("--allow-dirty", action="store_true")
    args = parser.parse_args()
    snap = _git_snapshot(args.repo, args.allow_dirty)
    (Path(args.repo) / MANIFEST).write_bytes(snap.manifest())
    print(f"{Path(args.repo) / MANIFEST}: commit {snap.commit[:12]}, {len(snap.files)} files"
          + (", dirty" if snap.dirty else ""))


if __name__ == "__main__":
    main()

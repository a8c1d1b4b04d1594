"""verl's checkout pinned by content on the prep box: the git tricks that fooled `git status`
(skip-worktree, core.worktree, core.fsmonitor) are built for real, and prepare-inputs and
pin-inputs neither run the checkout's programs nor accept its edits."""
import hashlib
import shutil
import subprocess

import pytest
from prep.volume import pin, verl_input, verltree
from twgrpo.run.profile import load_profile


def checkout(storage):
    return next(p for p in (storage / "code" / "verl").iterdir() if p.is_dir())


def git(path, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def fsmonitor_hook(storage, folder):
    marker = storage / "fsmonitor-ran"
    hook = storage / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(folder, "config", "core.fsmonitor", str(hook))
    return marker


def test_prepare_inputs_never_runs_a_checkouts_fsmonitor(storage):
    folder = checkout(storage)
    marker = fsmonitor_hook(storage, folder)
    subprocess.run(["git", "-C", str(folder), "status"], capture_output=True)  # git itself would
    assert marker.exists()
    marker.unlink()
    assert verl_input.verl_problem(folder, folder.name) == ""
    assert not marker.exists()


def test_prepare_inputs_sees_an_edit_that_skip_worktree_hides(storage):
    folder = checkout(storage)
    target = folder / "verl" / "trainer" / "main_ppo.py"
    target.write_text(target.read_text() + "\n# edited\n")
    git(folder, "update-index", "--skip-worktree", "verl/trainer/main_ppo.py")
    assert "main_ppo.py" not in git(folder, "status", "--porcelain")
    problem = verl_input.verl_problem(folder, folder.name)
    assert "verl/trainer/main_ppo.py: marked skip-worktree" in problem
    assert "verl/trainer/main_ppo.py: differs from the commit's blob" in problem


def test_prepare_inputs_sees_an_edit_behind_core_worktree(storage):
    folder = checkout(storage)
    pristine = storage / "pristine"
    shutil.copytree(folder, pristine, ignore=shutil.ignore_patterns(".git"))
    (folder / "verl" / "__init__.py").write_text("raise SystemExit('edited')\n")
    git(folder, "config", "core.worktree", str(pristine))
    assert git(folder, "status", "--porcelain") == ""  # git looks at the pristine copy
    assert "verl/__init__.py: differs from the commit's blob" in \
        verl_input.verl_problem(folder, folder.name)


def test_pin_inputs_refuses_an_edited_tree_and_keeps_its_manifest(storage):
    folder = checkout(storage)
    manifest = verltree.manifest_path(folder)
    before = manifest.read_bytes()
    profile = load_profile(str(storage / "tools/verl/two-worker-grpo/profiles/test-fixture.env"))
    assert pin.read_pins(profile, storage)["VERL_SUMS_SHA256"] == hashlib.sha256(before).hexdigest()
    (folder / "verl" / "__init__.py").write_text("# edited\n")
    with pytest.raises(pin.UnsafeFolder, match="differs from the commit's blob"):
        pin.read_pins(profile, storage)
    assert manifest.read_bytes() == before


def test_a_manifest_that_differs_is_never_overwritten(storage):
    folder = checkout(storage)
    manifest = verltree.manifest_path(folder)
    manifest.write_text(manifest.read_text() + f"{'0' * 64}  verl/extra.py\n")
    before = manifest.read_bytes()
    with pytest.raises(verltree.TreeError, match="exists and differs"):
        verltree.ensure_manifest(folder, folder.name)
    assert manifest.read_bytes() == before


def test_an_untracked_file_in_the_tree_is_refused_on_the_prep_box(storage):
    folder = checkout(storage)
    (folder / "verl" / "sitecustomize.py").write_text("print('hi')\n")
    with pytest.raises(verltree.TreeError, match="verl/sitecustomize.py: not tracked"):
        verltree.tree_manifest(folder, folder.name)


def test_the_manifest_lists_the_commits_blobs_by_sha256(storage):
    folder = checkout(storage)
    text = verltree.tree_manifest(folder, folder.name)
    listed = dict(reversed(line.split("  ", 1)) for line in text.splitlines())
    assert set(listed) == set(git(folder, "ls-files").split())
    for path, digest in listed.items():
        assert hashlib.sha256((folder / path).read_bytes()).hexdigest() == digest


def test_a_replace_ref_cannot_pin_an_edited_tree_as_the_commit(storage):
    folder = checkout(storage)
    commit = folder.name
    target = folder / "verl" / "__init__.py"
    target.write_text("raise SystemExit('edited')\n")
    git(folder, "add", "verl/__init__.py")
    tree = git(folder, "write-tree").strip()
    edited = git(folder, "commit-tree", tree, "-p", commit, "-m", "edited").strip()
    git(folder, "replace", commit, edited)  # git now shows the edited commit under the pinned id
    git(folder, "reset", "-q", commit)  # the index reads the replaced tree: nothing staged
    assert git(folder, "status", "--porcelain") == ""
    (folder / ".git" / "info").mkdir(exist_ok=True)
    (folder / ".git" / "info" / "grafts").write_text(f"{commit}\n")  # a graft is ignored too
    with pytest.raises(verltree.TreeError, match="verl/__init__.py: differs from the commit's blob"):
        verltree.tree_manifest(folder, commit)

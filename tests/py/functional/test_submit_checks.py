"""make submit checks before it sends: on PREP_ROOT, from files alone, every check that would
make the job die in its first second refuses the submission locally, with its finding id and the
fix, and nothing reaches the job server (a real HTTP server here, which records every request).
After a failed run, the last line names the failed checks with their ids, or, when the job died
before making a run folder, the driver's own error line."""
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from prep import bundle, outcome, site, submit
from twgrpo.run.runfolder import RunFolder

JOB_ROOT = "/mnt/verl-reproduction"


class Recorder(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):  # noqa: N802
        Recorder.seen.append(("GET", self.path))
        self.send_response(404)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Recorder.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("volume")
    assert bundle.main(["install", "--prep-root", str(root)]) == 0
    return root


def sent(capsys, address, prep_root, *more):
    code = submit.main(["submit", "--address", address, "--run-id", "exp-9", "--storage-root",
                        JOB_ROOT, "--prep-root", str(prep_root), "--profile", "smoke-1x1", *more])
    return code, capsys.readouterr().err


def test_submit_before_install_tools_is_refused_locally_naming_make_install_tools(
        capsys, server, tmp_path):
    code, err = sent(capsys, server, tmp_path)
    assert code == 2
    assert "submit: (SUB-E130) bundle bundle-" in err
    assert "    HINT: Run make install-tools PREP_ROOT=<this box's mount>" in err  # the catalog's
    assert "re-copy the command for" not in err  # LAUNCH-E046's way out is not this one
    assert err.splitlines()[-1] == ("submit: exp-9: not submitted, 1 check(s) failed before "
                                    "sending: SUB-E130 — nothing reached the cluster")
    assert Recorder.seen == []  # not even /api/version
    assert not (tmp_path / "runs").exists()


def test_an_installed_bundle_goes_on_to_the_job_server(capsys, server, installed):
    code, err = sent(capsys, server, installed)
    assert code == 2 and "(SUB-E004)" in err  # the recorder is no job server: it was asked
    assert Recorder.seen == [("GET", "/api/version")]
    assert "SUB-E13" not in err


def test_a_profile_edited_after_install_is_refused(capsys, server, installed, tmp_path):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle.BUNDLE, copy)  # the same launcher (version), one profile changed
    with open(copy / "profiles" / "smoke-1x1.env", "a", encoding="utf-8") as stream:
        stream.write("# edited\n")
    code, err = sent(capsys, server, installed, "--bundle", str(copy))
    assert code == 2 and "(SUB-E131) profile smoke-1x1.env differs" in err
    assert "    HINT: The profile was edited after it was installed: for a bundle profile run make " \
        "checksums, then make install-tools" in err and Recorder.seen == []


def test_an_installed_version_changed_in_place_is_refused(capsys, server, tmp_path):
    assert bundle.main(["install", "--prep-root", str(tmp_path)]) == 0
    version = bundle.version_of(bundle.BUNDLE / bundle.LAUNCHER_NAME)
    launcher = tmp_path / bundle.BUNDLES_REL / version / bundle.LAUNCHER_NAME
    launcher.chmod(0o644)
    launcher.write_text(launcher.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    code, err = sent(capsys, server, tmp_path)
    assert code == 2 and "(SUB-E130) the installed launcher differs" in err and Recorder.seen == []


def test_a_run_id_that_ran_before_is_refused(capsys, server, installed):
    folder = RunFolder.at(installed, "exp-9").path
    folder.mkdir(parents=True)
    try:
        code, err = sent(capsys, server, installed)
    finally:
        folder.rmdir()
    assert code == 2 and "(SUB-E013)" in err and Recorder.seen == []


def checkpoint(folder: Path, step: int, world: int = 1, leave_out: str = ""):
    actor = folder / "checkpoints" / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for kind in ("model", "optim", "extra_state"):
        for rank in range(world):
            name = f"{kind}_world_size_{world}_rank_{rank}.pt"
            if name != leave_out:
                (actor / name).write_bytes(b"PK\x03\x04 stand-in")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    (actor / "huggingface" / "config.json").write_text("{}")
    (actor.parent / "data.pt").write_bytes(b"PK stand-in")
    (folder / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(str(step))


@pytest.mark.parametrize("state, fid, words", [
    ("absent", "SUB-E132", "RESUME_FROM=exp-8 names no earlier run on PREP_ROOT"),
    ("no-checkpoint", "SUB-E133", "run exp-8 saved no checkpoint"),
    ("shard-missing", "SUB-E133", "(POST-E021) no optim shard for rank 0"),
    ("succeeded", "SUB-E133", "run exp-8 succeeded: there is nothing to resume"),
    ("complete", None, ""),
])
def test_resume_from_must_name_a_run_with_a_complete_checkpoint(capsys, server, tmp_path, state,
                                                                fid, words):
    assert bundle.main(["install", "--prep-root", str(tmp_path)]) == 0
    earlier = RunFolder.at(tmp_path, "exp-8").path
    if state != "absent":
        earlier.mkdir(parents=True)
    if state in ("shard-missing", "complete", "succeeded"):
        checkpoint(earlier, 1, leave_out="optim_world_size_1_rank_0.pt" if state == "shard-missing" else "")
    if state == "succeeded":
        (earlier / "SUCCESS").write_text("x\n")
    code, err = sent(capsys, server, tmp_path, "--var", "RESUME_FROM=exp-8")
    assert code == 2
    if fid:
        assert f"({fid})" in err and words in err and Recorder.seen == []
    else:
        assert "SUB-E13" not in err and Recorder.seen == [("GET", "/api/version")]


@pytest.mark.parametrize("value", ["../../../etc", "exp-8/../exp-7", ".hidden"])
def test_resume_from_that_is_a_path_is_refused_without_being_followed(capsys, server, installed, value):
    code, err = sent(capsys, server, installed, "--var", f"RESUME_FROM={value}")
    assert code == 2 and f"(SUB-E132) RESUME_FROM={value!r} is not a RUN_ID" in err
    assert Recorder.seen == []


def test_resume_from_auto_is_left_to_the_launcher(capsys, server, installed):
    code, err = sent(capsys, server, installed, "--var", "RESUME_FROM=auto")
    assert "SUB-E13" not in err and Recorder.seen == [("GET", "/api/version")]


def test_without_prep_root_the_checks_are_skipped_with_one_warning(capsys, server):
    code, err = sent(capsys, server, "/nonexistent/volume")
    assert "(SUB-W001) PREP_ROOT is not mounted on this box" in err
    assert Recorder.seen == [("GET", "/api/version")]


def test_a_failed_runs_line_names_its_failed_checks_and_ids(tmp_path):
    folder = RunFolder.at(tmp_path, "exp-3").path
    folder.mkdir(parents=True)
    (folder / "FAILED").write_text("phase=preflight\nexit_status=1\nsignal=none\n")
    (folder / "preflight.json").write_text(json.dumps({"status": "failed", "checks": [
        {"name": "node-count", "status": "failed", "findings": [{"id": "PRE-E012"}]},
        {"name": "gpus", "status": "passed", "findings": []},
        {"name": "driver", "status": "failed", "findings": [{"id": "PRE-E004"}, {"id": "PRE-E003"}]},
    ]}))
    assert outcome.run_outcome(str(tmp_path), "exp-3") == (
        "FAILED phase=preflight exit_status=1 signal=none — failed checks preflight: node-count "
        "(PRE-E012); preflight: driver (PRE-E003, PRE-E004)")
    assert outcome.run_outcome(str(tmp_path), "exp-4") is None  # no folder: the log speaks


def test_a_job_that_died_before_its_run_folder_shows_the_drivers_own_line():
    log = ("driver: something\n"
           "driver: (LAUNCH-E046) bundle bundle-0123 of this command is not in /v/tools — run make "
           "install-tools\nmore noise\n")
    assert outcome.error_line(log).startswith("driver: (LAUNCH-E046) bundle bundle-0123")
    assert outcome.error_line("Traceback\nValueError: x\n") is None


def test_a_site_profile_must_be_installed_under_its_sha256_before_sending(capsys, server, installed,
                                                                         tmp_path):
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    text = (bundle.BUNDLE / "profiles" / "smoke-1x1.env").read_text()
    (site_dir / "ours.env").write_text(text.replace("PROFILE_NAME=smoke-1x1", "PROFILE_NAME=ours"))
    code = submit.main(["submit", "--address", server, "--run-id", "exp-9", "--storage-root",
                        JOB_ROOT, "--prep-root", str(installed), "--profile",
                        str(site_dir / "ours.env")])
    err = capsys.readouterr().err
    assert code == 2 and "(SUB-E131) site profile ours (sha256 " in err
    assert f"in {site_dir})" in err and "make install-tools SITE=<folder>" in err
    assert Recorder.seen == []
    assert site.install(installed, site_dir, say=lambda line: None) == 0
    code = submit.main(["submit", "--address", server, "--run-id", "exp-9", "--storage-root",
                        JOB_ROOT, "--prep-root", str(installed), "--profile",
                        str(site_dir / "ours.env")])
    err = capsys.readouterr().err
    assert code == 2 and "(SUB-E004)" in err and "SUB-E13" not in err  # it was sent
    assert Recorder.seen == [("GET", "/api/version")]

"""One status per case: for every run folder a real GPU run left (tests/fixtures/real-*/) and
mutations of each (a marker, a record, a log or checkpoints/ deleted, a record truncated or
grown past the glance's whole read, a checkpoint byte flipped, FAILED beside SUCCESS, a failed
verification, a stale or live heartbeat, an attempt planted beside it), make runs, make report,
make audit and make submit give the run the same status; after make postflight judges the
mutated folder they agree again, and postflight exits 0 exactly when that status is SUCCESS (or
3, judging nothing, where checkpoints/ is not here, naming the status the run keeps).

Fast and bounded: each fixture is unpacked once per module, each case is a copy made of hard
links (every writer of the bundle replaces a file by rename, never writes into it, and the
mutations below do the same), so a case costs its judgements, not a copy of the shards.
"""
import json
import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest
from prep import outcome, submit
from realruns import copy_runs
from test_one_verdict import FakeJobs  # a job server whose job has ended with a status
from twgrpo.checks.postflight.audit import EXIT_PARTIAL
from twgrpo.report import runs
from twgrpo.run import glance
from twgrpo.run.runfolder import RunFolder, runs_dir
from views import quiet, report_view, statuses

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PACKED = {"real-smoke-run-2x1": next((FIXTURES / "real-smoke-run-2x1").glob("*.tar.xz"))}
GROUPS = sorted(p.name for p in FIXTURES.glob("real-*") if p.is_dir())


def _runs_of(group: str):
    if group in PACKED:
        return [PACKED[group].name[:-len(".tar.xz")]]
    return sorted(p.name for p in (FIXTURES / group).iterdir()
                  if p.is_dir() and (p / "run.json").is_file())


CASES_RUNS = [(group, name) for group in GROUPS for name in _runs_of(group)]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """{group: storage root} with the group's run folders as the fixture holds them."""
    roots = {}
    for group in GROUPS:
        root = tmp_path_factory.mktemp(group) / "storage"
        if group in PACKED:
            every_run = runs_dir(root)
            every_run.mkdir(parents=True)
            with tarfile.open(PACKED[group]) as archive:
                archive.extractall(every_run, filter="data")
        else:
            copy_runs(FIXTURES / group, _runs_of(group), root)
        roots[group] = root
    before = _fingerprint(roots)
    yield roots
    assert _fingerprint(roots) == before, "a case wrote into a file it shares with the fixture"


def _fingerprint(roots):
    """Every pristine file's size and modification time: a write through a hard link shows."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for root in roots.values() for p in root.rglob("*") if p.is_file()}


def _replace(path: Path, data: bytes) -> None:
    """Write by replacing the file, never into it: the case's copy shares its inodes."""
    path.unlink()
    path.write_bytes(data)


def _truncate(name):
    def mutate(folder: Path) -> bool:
        path = folder / name
        if not path.is_file():
            return False
        data = path.read_bytes()
        _replace(path, data[:len(data) // 2])
        return True
    return mutate


def _delete(name):
    def mutate(folder: Path) -> bool:
        if not (folder / name).exists():
            return False
        (folder / name).unlink()
        return True
    return mutate


def _grown(folder: Path) -> bool:
    """preflight.json between 16 and 64 KiB, laid out as the writer lays it out (a multi-node
    preflight.json): read whole by the report, searched by make runs's glance."""
    path = folder / "preflight.json"
    if not path.is_file():
        return False
    record = json.loads(path.read_text())
    record["zz_nodes_note"] = "n" * max(0, (40 << 10) - path.stat().st_size)
    _replace(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    assert glance.WHOLE < path.stat().st_size < 64 << 10
    return True


def _large_run_json_cut_short(folder: Path) -> bool:
    """run.json past glance.WHOLE (make runs checks its ends only), cut in half."""
    path = folder / "run.json"
    record = json.loads(path.read_text())
    record["zz_note"] = "n" * (glance.WHOLE * 2)
    text = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    _replace(path, text[:len(text) // 2])
    return True


def _checkpoint_byte(folder: Path) -> bool:
    top = folder / "checkpoints"
    shards = sorted(top.rglob("*.pt")) if top.is_dir() else []
    if not shards:
        return False
    data = bytearray(shards[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    _replace(shards[0], bytes(data))
    return True


def _heartbeat(age_s: float):
    def mutate(folder: Path) -> bool:
        path = folder / "heartbeat.json"
        now = time.time() - age_s
        record = {"beat_epoch": now, "beater_pid": 1, "beats": 3, "host": "vm", "interval_s": 2,
                  "lease_s": 600, "pid": 1, "run_id": folder.name, "state": "alive",
                  "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}
        if path.exists():
            path.unlink()
        path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        return True
    return mutate


def _failed_beside_success(folder: Path) -> bool:
    if not (folder / "SUCCESS").exists() or (folder / "FAILED").exists():
        return False
    (folder / "FAILED").write_text("time=2026-12-04T00:00:00Z\nphase=postflight\nexit_status=1\n"
                                   "signal=none\n")
    return True


def _verification_failed(folder: Path) -> bool:
    path = folder / "verification.json"
    if not path.is_file():
        return False
    record = json.loads(path.read_text())
    record["status"] = "failed"
    _replace(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    return True


def _no_checkpoints(folder: Path) -> bool:
    if not (folder / "checkpoints").is_dir():
        return False
    shutil.rmtree(folder / "checkpoints")
    return True


def _planted(folder: Path) -> bool:
    """An attempt folder beside the run holding a copy of its run.json and a SUCCESS marker."""
    planted = folder.parent / (folder.name + ".9")
    planted.mkdir()
    shutil.copyfile(folder / "run.json", planted / "run.json")
    (planted / "SUCCESS").write_text("2026-12-04T00:00:00+00:00\n")
    return True


MUTATIONS = {
    "as-left": lambda folder: True,
    "no-SUCCESS": _delete("SUCCESS"),
    "no-FAILED": _delete("FAILED"),
    "no-resume.json": _delete("resume.json"),
    "no-verification.json": _delete("verification.json"),
    "truncated-verification.json": _truncate("verification.json"),
    "truncated-preflight.json": _truncate("preflight.json"),
    "truncated-run.json": _truncate("run.json"),
    "preflight.json-40KiB": _grown,
    "large-run.json-cut-short": _large_run_json_cut_short,
    "checkpoint-byte": _checkpoint_byte,
    "no-checkpoints": _no_checkpoints,
    "FAILED-beside-SUCCESS": _failed_beside_success,
    "verification-failed": _verification_failed,
    "no-run.json": _delete("run.json"),
    "no-driver.log": _delete("driver.log"),
    "no-training.log": _delete("training.log"),
    "no-inputs.json": _delete("inputs.json"),
    "no-preflight.json": _delete("preflight.json"),
    "stale-heartbeat": _heartbeat(3600),
    "live-heartbeat": _heartbeat(0),
    "planted-attempt": _planted,
}


def _case(pristine, tmp_path, group, name, mutation):
    root = tmp_path / "storage"
    shutil.copytree(pristine[group], root, copy_function=os.link)
    folder = RunFolder.at(root, name).path
    if not MUTATIONS[mutation](folder):
        pytest.skip(f"{name} has nothing for {mutation} to change")
    return root, folder


def _one_status(root: Path, run_id: str, html: Path) -> str:
    """The one status the views give. make report and make audit judge with the profile run.json
    records: without it they refuse (exit 2, saying why) and give none, which is no other one."""
    found, audit_code, audit_text = statuses(root, run_id, html)
    if "(POST-E066)" in runs.run_row(RunFolder.at(root, run_id).path)["verdict"]:
        # the audit never passes such a run: its checks fail, or it fails it with that finding
        assert audit_code == 1, audit_text[-2000:]
        assert "(POST-E066)" in audit_text or "FAILED (" in audit_text, audit_text[-2000:]
    if "cannot read the run's profile" in audit_text:
        assert found["report"] is None and found["audit"] is None, found
        found = {view: status for view, status in found.items() if status is not None}
    assert None not in found.values() and len(set(found.values())) == 1, (found, audit_text[-2000:])
    return found["runs"]


def _submit_says(capsys, root: Path, run_id: str, status: str) -> None:
    """make submit's last line names the run folder's status, whatever Ray says, and exits 0
    exactly for SUCCESS."""
    capsys.readouterr()
    for ray in ("SUCCEEDED", "FAILED"):
        code = submit.follow(FakeJobs(ray), run_id, "/mnt/v/run", 0.0, str(root))
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert (code == 0) == (status == "SUCCESS"), (ray, code, last)
        assert status in last, (ray, status, last)


@pytest.fixture(autouse=True)
def no_wait_for_driver_log(monkeypatch):
    """Postflight gives a lagging driver.log a few seconds; these folders are complete."""
    from twgrpo.checks.postflight import launcher_records
    monkeypatch.setattr(launcher_records, "DRIVER_LOG_WAIT_S", 0.0)


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("group,name", CASES_RUNS, ids=[n for _, n in CASES_RUNS])
def test_every_view_gives_one_status(pristine, tmp_path, capsys, group, name, mutation):
    root, folder = _case(pristine, tmp_path, group, name, mutation)
    status = _one_status(root, name, tmp_path / "page.html")
    if mutation == "planted-attempt":
        _one_status(root, name + ".9", tmp_path / "planted.html")
    _submit_says(capsys, root, name, status)
    code, text = quiet(["postflight", "--storage-root", str(root), "--run-id", name])
    if mutation == "live-heartbeat":
        _heartbeat(3600)(folder)  # the launcher has gone since: judged as it left the folder
    view, _, report_text = report_view(root, name, tmp_path / "after.html")
    after = {"runs": runs.run_row(folder)["verdict"].split()[0],
             "submit": outcome.folder_verdict(str(root), name).status}
    if view is not None or "cannot read the run's profile" not in report_text:
        after["report"] = view.verdict.status
    assert len(set(after.values())) == 1, (after, text[-2000:])
    if code == EXIT_PARTIAL:  # checkpoints/ is not here: no judgement, the recorded one named
        assert f"recorded verdict stays {after['runs']}" in text, (after, text[-2000:])
    else:
        assert (code == 0) == (after["runs"] == "SUCCESS"), (code, after, text[-2000:])

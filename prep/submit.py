#!/usr/bin/env python3
"""Summary: Submit the Driver command to a Ray cluster's job server, follow it, stop it, read it.

Usage: prep/submit.py submit --address URL --run-id ID [--profile NAME] [--storage-root DIR]
                             [--prep-root DIR] [--bundle DIR] [--poll S] [--var KEY=VALUE]...
       prep/submit.py stop --address URL --run-id ID
       prep/submit.py logs --address URL --run-id ID

The job's submission id is its RUN_ID; its entrypoint is the Driver command (make
driver-command) and its RuntimeEnv the bundle's (make runtime-env) without client-side paths,
with RUN_ID and the job's variables as environment variables. `submit` follows the job's status
and log until it ends and exits with the run's verdict. Standard library only.
Exit codes: 0 the run ended with SUCCESS (stop, logs: done); 1 the run failed or was stopped
(the launcher's own exit status when Ray reports it); 2 usage error, unreachable or wrong
address; 130 interrupted while following (the job runs on).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from prep import jobspec, outcome, precheck, progress, site  # noqa: E402
from prep.jobs_api import TERMINAL, JobsClient, JobsError, TooLarge, parse_address  # noqa: E402
from twgrpo.run.findings import UsageError, usage  # noqa: E402
from twgrpo.run.runfolder import RunFolder  # noqa: E402
from twgrpo.run.profile import DEFAULT_PROFILE  # noqa: E402

PROG = "submit"
STOP_WAIT_S = jobspec.STOP_WAIT_S + 30  # how long `stop` waits for the job to end
FOLDER_WAIT_S = 60  # make logs FOLLOW=1 without RAY_ADDRESS: how long a new run's folder may take


OPEN_LINE = [False]  # the log printed so far ends inside a line


def say(text: str) -> None:
    if OPEN_LINE[0]:  # finish the log's open line first, so this line stands on its own
        print(flush=True)
        OPEN_LINE[0] = False
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def say_error(exc: Exception) -> None:
    """An error with a finding id, then its catalog hint when it carries one."""
    say(str(exc))
    if getattr(exc, "hint", ""):
        print(f"    HINT: {exc.hint}", file=sys.stderr, flush=True)


def run_folder(storage_root: str, run_id: str) -> str:
    return str(RunFolder.at(storage_root, run_id).path)


def verdict_code(info: dict) -> int:
    """0 for SUCCEEDED; otherwise the launcher's exit status when Ray has it, else 1."""
    if info.get("status") == "SUCCEEDED":
        return 0
    code = info.get("driver_exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else 1


class LogFollower:
    """Prints the part of the job's log not printed yet; gives up (saying so) past MAX_BODY."""

    def __init__(self, client: JobsClient, job_id: str, where: str):
        self.client, self.job_id, self.where = client, job_id, where
        self.printed = 0
        self.tail = ""  # the log's last 64 KiB: the driver's own error line, when it died early
        self.active = True
        self.next_at = 0.0  # a long log is fetched less often: every second per MiB it holds

    def poll(self, final: bool = False) -> None:
        if not self.active or (time.monotonic() < self.next_at and not final):
            return
        try:
            text = self.client.logs(self.job_id)
        except TooLarge:
            self.active = False
            say(f"the job's log is over 64 MiB: no longer following it; read {self.where}/driver.log")
            return
        self.next_at = time.monotonic() + len(text) / (1024 * 1024)
        if len(text) > self.printed:
            sys.stdout.write(text[self.printed:])
            sys.stdout.flush()
            self.printed = len(text)
            self.tail = text[-65536:]
            OPEN_LINE[0] = not text.endswith("\n")


class ProgressLines:
    """progress.py's line about the run, said when its phase or step changes, and at least
    every QUIET_S while it runs (the heartbeat's age moves on); nothing without PREP_ROOT."""
    QUIET_S = 30.0

    def __init__(self, prep_root: str, job_id: str):
        mounted = bool(prep_root) and Path(prep_root).is_dir()
        self.progress = progress.Progress(Path(run_folder(prep_root, job_id))) if mounted else None
        self.job_id, self.said, self.said_at = job_id, "", 0.0

    def poll(self) -> None:
        if self.progress is None or not self.progress.run_dir.is_dir():
            return
        line = self.progress.line()
        news = line.split(" · heartbeat")[0] != self.said.split(" · heartbeat")[0]
        if news or time.monotonic() - self.said_at >= self.QUIET_S:
            say(f"{self.job_id}: {line}")
            self.said, self.said_at = line, time.monotonic()


def follow(client: JobsClient, job_id: str, where: str, poll_s: float, prep_root: str = "") -> int:
    """Status changes, new log lines and the run's progress until the job ends; the run's
    verdict as exit code."""
    logs = LogFollower(client, job_id, where)
    steps = ProgressLines(prep_root, job_id)
    start, last = time.monotonic(), None
    while True:
        info = client.status(job_id)
        status = info.get("status")
        logs.poll(final=status in TERMINAL)
        if status != last:
            say(f"{job_id}: {status} after {time.monotonic() - start:.0f} s")
            last = status
        if status not in TERMINAL:
            steps.poll()
        if status in TERMINAL:
            break
        time.sleep(poll_s)
    code = verdict_code(info)
    folder = outcome.folder_verdict(prep_root, job_id)
    if code == 0 and folder is not None and folder.status != "SUCCESS":
        code = 1  # Ray's SUCCEEDED is the job's exit; the folder's records are the run's verdict
    if code and folder is not None and folder.status == "SUCCESS":  # the job ended after it
        say(f"{job_id}: SUCCESS — the run folder says so, though Ray says {status} (exit status "
            f"{code}): the job ended badly after the run's verdict was written; the run's folder "
            f"is {where} (make report RUN_ID={job_id})")
        return 0
    told = outcome.run_outcome(prep_root, job_id) if code else None
    status_there = re.search(r"\bexit_status=(\d+)\b", told or "")
    if code and info.get("driver_exit_code") is None and status_there:
        code = min(int(status_there.group(1)), 255) or 1  # the launcher's own status
    if code == 0 and folder is None:  # Ray's word alone, labelled as such
        why = f"this box cannot read the run folder {where}" + (
            "" if prep_root and Path(prep_root).is_dir() else " (PREP_ROOT is not mounted here)")
        say(f"{job_id}: SUCCEEDED by Ray's word only: {why}, so the run's verdict was not read "
            f"(make report RUN_ID={job_id} where the volume is mounted)")
    elif code == 0:
        say(f"{job_id}: SUCCESS — the run's folder is {where} (make report RUN_ID={job_id})")
    elif folder is not None and info.get("status") == "SUCCEEDED":
        say(f"{job_id}: Ray says SUCCEEDED, but the run folder says {told} (make report "
            f"RUN_ID={job_id})")
    elif told:
        say(f"{job_id}: {status}, exit status {code}: {told} (make report RUN_ID={job_id})")
    else:  # no run folder here: the job died before making one, or this box cannot see it
        own = outcome.error_line(logs.tail)
        message = own or " ".join(str(info.get("message") or "").split())[:300]
        seen = "it made no run folder" if prep_root and Path(prep_root).is_dir() else \
            f"this box does not mount the volume (PREP_ROOT), the run folder would be {where}"
        say(f"{job_id}: {status}, exit status {code}: {message} ({seen})")
    return code


def job_variables(items) -> dict:
    """--var NAME=value items (empty values are left out: an unset knob)."""
    bad = [item for item in items if "=" not in item]
    if bad:
        raise JobsError("SUB-E011", f"job variable {bad[0]!r} is not NAME=value")
    return dict(item.split("=", 1) for item in items)


def refused_here(args: argparse.Namespace, variables: dict) -> bool:
    """precheck.py's checks on PREP_ROOT; each finding printed, then one line naming them all."""
    bundle_dir = Path(args.bundle) if args.bundle else jobspec.bundle.BUNDLE
    profile = site.profile_of(bundle_dir, args.profile, DEFAULT_PROFILE)
    rel = jobspec.installed_rel(args.storage_root, bundle_dir if args.bundle else None)
    found = precheck.before_sending(args.prep_root, rel, bundle_dir, args.profile, args.run_id,
                                    variables.get("RESUME_FROM", ""), profile)
    for item in found:  # each with the catalog's hint, as say_error prints an error
        say(f"({item.id}) {item.message}")
        if item.hint:
            print(f"    HINT: {item.hint}", file=sys.stderr, flush=True)
    errors = [item.id for item in found if item.level == "error"]
    if errors:
        say(f"{args.run_id}: not submitted, {len(errors)} check(s) failed before sending: "
            f"{', '.join(errors)} — nothing reached the cluster")
    return bool(errors)


def cmd_submit(args: argparse.Namespace, client: JobsClient) -> int:
    variables = job_variables(args.var)
    variables["RUN_ID"] = jobspec.check_run_id(args.run_id)
    profile = site.profile_file(Path(args.bundle) if args.bundle else jobspec.bundle.BUNDLE,
                                args.profile, DEFAULT_PROFILE)
    # The checks on PREP_ROOT first: they take milliseconds, the spec a subprocess (an unknown
    # profile is the spec's to name, SUB-E010).
    if profile.is_file() and refused_here(args, variables):
        return 2
    spec = jobspec.job_spec(args.storage_root, args.profile,
                            Path(args.bundle) if args.bundle else None, variables)
    version = client.version()
    client.submit(**spec)
    say(f"submitted {args.run_id} to {client.base} (Ray {version.get('ray_version')}); "
        f"following it (Ctrl-C stops following, not the job: make stop RUN_ID={args.run_id})")
    try:
        mounted = bool(args.prep_root) and Path(args.prep_root).is_dir()  # this box's view
        where = run_folder(args.prep_root if mounted else args.storage_root, args.run_id)
        return follow(client, args.run_id, where, args.poll, args.prep_root)
    except KeyboardInterrupt:
        say(f"stopped following; {args.run_id} runs on — make logs RUN_ID={args.run_id}, "
            f"make stop RUN_ID={args.run_id}")
        return 130


def cmd_stop(args: argparse.Namespace, client: JobsClient) -> int:
    info = client.status(args.run_id)
    if info.get("status") in TERMINAL or not client.stop(args.run_id):
        say(f"{args.run_id} had already ended: {client.status(args.run_id).get('status')}")
        return 0
    say(f"{args.run_id}: stop sent (SIGTERM: the launcher writes FAILED with signal=TERM)")
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        status = client.status(args.run_id).get("status")
        if status in TERMINAL:
            say(f"{args.run_id}: {status}")
            return 0
        time.sleep(1)
    say_error(usage("SUB-E014", None, f"{args.run_id} is still not stopped after {args.wait:.0f} s"))
    return 1


def cmd_logs(args: argparse.Namespace, client: JobsClient) -> int:
    info = client.status(args.run_id)
    if args.follow:  # the log so far, then as it grows, with the run's progress, to its verdict
        mounted = bool(args.prep_root) and Path(args.prep_root).is_dir()
        if not mounted:
            say("PREP_ROOT is not mounted here: following the job's log and status only")
        try:
            return follow(client, args.run_id, run_folder(args.prep_root or "<the volume>",
                                                          args.run_id), args.poll, args.prep_root)
        except KeyboardInterrupt:
            say(f"stopped following; {args.run_id} runs on")
            return 130
    try:
        sys.stdout.write(client.logs(args.run_id))
    except TooLarge:
        say("the job's log is over 64 MiB; read driver.log in the run's folder instead")
    sys.stdout.flush()
    say(f"{args.run_id}: {info.get('status')}")
    return 0


def watch_folder(args: argparse.Namespace) -> int:
    """make logs FOLLOW=1 without RAY_ADDRESS: the run's progress and verdict from PREP_ROOT."""
    if not args.run_id:
        raise JobsError("SUB-E012", "no RUN_ID given: make logs FOLLOW=1 follows the run RUN_ID names")
    jobspec.check_run_id(args.run_id)
    folder = Path(run_folder(args.prep_root, args.run_id)) if args.prep_root else None
    if folder is None or not Path(args.prep_root).is_dir():
        raise JobsError("SUB-E135", "RAY_ADDRESS is not set and PREP_ROOT is not mounted here")
    for _ in range(int(FOLDER_WAIT_S / max(args.poll, 0.1)) + 1):  # a job just applied: its folder comes
        if folder.is_dir():
            break
        time.sleep(args.poll)
    else:
        raise JobsError("SUB-E134", f"{folder} does not exist after {FOLDER_WAIT_S} s")
    say(f"{args.run_id}: following {folder} (no RAY_ADDRESS: from the run folder alone)")
    try:
        return progress.watch(folder, lambda line: say(f"{args.run_id}: {line}"), args.poll)
    except KeyboardInterrupt:
        return 130


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="prep/submit.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("submit", "stop", "logs"):
        p = sub.add_parser(name)
        p.add_argument("--address", default="", help="the head's job server, http://<head>:8265")
        p.add_argument("--run-id", default="")
        if name == "logs":
            p.add_argument("--follow", action="store_true", help="follow the run to its verdict")
            p.add_argument("--prep-root", default="", help="where this box mounts the volume")
            p.add_argument("--poll", type=float, default=2.0, help="seconds between status polls")
        if name == "stop":
            p.add_argument("--wait", type=float, default=STOP_WAIT_S,
                           help="seconds to wait for the job to end")
        if name == "submit":
            p.add_argument("--profile", default="")
            p.add_argument("--storage-root", default=jobspec.bundle.DEFAULT_JOB_ROOT,
                           help="where the job mounts the volume")
            p.add_argument("--prep-root", default="", help="where this box mounts it (optional)")
            p.add_argument("--bundle", default="", help="the bundle folder (default: this checkout's)")
            p.add_argument("--poll", type=float, default=2.0, help="seconds between status polls")
            p.add_argument("--var", action="append", default=[], metavar="KEY=VALUE",
                           help=f"a job variable ({', '.join(jobspec.JOB_VARIABLES[1:])}, ...)")
    args = parser.parse_args(argv)
    try:
        if args.command == "logs" and args.follow and not args.address:
            return watch_folder(args)  # a run KubeRay or Slurm started: its folder alone
        client = JobsClient(parse_address(args.address))
        if args.command != "submit" and not args.run_id:
            raise JobsError("SUB-E012", f"no RUN_ID given: make {args.command} acts on the run RUN_ID names")
        return {"submit": cmd_submit, "stop": cmd_stop, "logs": cmd_logs}[args.command](args, client)
    except (JobsError, jobspec.SpecError, UsageError) as exc:
        say_error(exc)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

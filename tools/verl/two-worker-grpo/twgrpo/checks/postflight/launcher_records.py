"""Postflight's reading of what the launcher itself recorded: a FAILED marker, driver.log's
phase lines, and the evidence inputs.json holds against the profile's pins.

SUCCESS is written only beside records that add up: never beside FAILED, never without the
launcher's line that training ended with status 0, never when inputs.json's evidence names
other inputs than the profile pins (an edited inputs.json would put the wrong commit on the
report). A run recorded before the verl tree was pinned (its run.json has no VERL_SUMS_SHA256)
is judged by the evidence its inputs phase could give: the commit and the model and data pins.
"""
from __future__ import annotations

import time
from typing import List

from ...run import humane, runrecord
from ...run.budget import of_profile
from ...run.records import read_json
from ...run.findings import Finding, finding, mismatch
from ...run.runverdict import failed_fields, phase_statuses
from ...run.runfolder import RunFolder

# The tee that writes driver.log may lag the launcher's line by a moment: look again this long.
DRIVER_LOG_WAIT_S = 3.0

# inputs.json evidence key -> the profile value it must equal
EVIDENCE_PINS = (("verl_commit", "VERL_COMMIT"), ("verl_sums_sha256", "VERL_SUMS_SHA256"),
                 ("model_sums_sha256", "MODEL_SUMS_SHA256"), ("data_sums_sha256", "DATA_SUMS_SHA256"))


def check_launcher_records(ctx) -> List[Finding]:
    """No FAILED beside this run, and driver.log says training ended with status 0. A PREEMPTED
    run's FAILED and unfinished training are its stop, which completion-markers reports
    (POST-E170, so no SUCCESS either way): not said twice here."""
    if getattr(ctx, "stop", None) is not None:
        ctx.evidence["launcher_phases"] = phase_statuses(ctx.run_dir)
        return []
    found = []
    failed = failed_fields(ctx.run_dir)
    if failed is not None:
        found.append(finding("POST-E070", str(RunFolder(ctx.run_dir).failed), "the launcher recorded "
                             f"FAILED (phase {failed.get('phase', '?')}, exit status "
                             f"{failed.get('exit_status', '?')}): no SUCCESS is written beside it"))
    deadline = time.monotonic() + DRIVER_LOG_WAIT_S
    ended = phase_statuses(ctx.run_dir)
    while "training" not in ended and time.monotonic() < deadline:
        time.sleep(0.2)
        ended = phase_statuses(ctx.run_dir)
    ctx.evidence["launcher_phases"] = ended
    if ended.get("training") != 0:
        found.append(finding("POST-E071", str(RunFolder(ctx.run_dir).driver_log), "no line of the launcher "
                             "saying training ended with status 0" if "training" not in ended else
                             f"the launcher says training ended with status {ended['training']}"))
    return found


def check_inputs_evidence(ctx) -> List[Finding]:
    """inputs.json's evidence names the inputs the profile pins (called by inputs-record)."""
    try:
        record = read_json(RunFolder(ctx.run_dir).inputs_json, of_profile(ctx.profile).record_bytes)
        evidence = record.get("evidence")
    except (OSError, ValueError, AttributeError, RecursionError):
        return []  # check_inputs_record reports the unreadable record
    if not isinstance(evidence, dict):
        return [finding("POST-E072", str(RunFolder(ctx.run_dir).inputs_json), "holds no evidence object")]
    found, compared = [], []
    for key, pin_key in EVIDENCE_PINS:
        pin = ctx.profile.values.get(pin_key, "")
        if not pin:  # a run recorded before this pin existed
            continue
        compared.append(key)
        actual = evidence.get(key, "absent")
        if actual != pin:  # shown whole up to 300 characters: an edited record may hold megabytes
            found.append(mismatch("POST-E072", str(RunFolder(ctx.run_dir).inputs_json), f"evidence {key}",
                                  pin, actual if isinstance(actual, str) and len(actual) <= 300
                                  else humane.clipped(actual)))
    ctx.evidence["inputs_evidence_checked"] = compared
    return found + _storage_roots_agree(ctx, record)


def _storage_roots_agree(ctx, record) -> List[Finding]:
    """inputs.json and run.json name the storage root the job saw, both from its STORAGE_ROOT:
    a resumed run's checks take that root from run.json (the folder verl must have loaded), so a
    run.json edited to point elsewhere must also agree with the inputs phase's own record."""
    job_root = runrecord.read_or_empty(ctx.run_dir).get("storage_root")
    if job_root is None or record.get("storage_root") == job_root:
        return []
    recorded = record.get("storage_root")
    said = "no storage root" if recorded is None else f"storage root {humane.clipped(recorded)}"
    return [finding("POST-E073", str(RunFolder(ctx.run_dir).inputs_json), f"the inputs phase "
                    f"recorded {said}, run.json {humane.clipped(job_root)}: one of them was edited "
                    "or belongs to another run")]

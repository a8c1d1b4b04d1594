"""Finding ids of make report, make runs and make compare (RPT, CMP): id -> (what it means, what to do).

twgrpo/run/catalog.py joins the parts into CATALOG in the order docs/findings.md lists them."""
ENTRIES = {
    # The report (make report): what could not be read, so the page shows a gap, not a guess
    "RPT-E010": ("SUCCESS exists but the records do not prove it (UNPROVEN)", "The message names what is missing (a phase record, driver.log's training line, a postflight check): run make postflight RUN_ID=... to judge the run again; a folder the launcher did not make stays UNPROVEN."),
    "RPT-E001": ("run.json is missing or unreadable", "The launcher writes run.json first: check RUN_ID and PREP_ROOT; for a run started another way, set PROFILE= to the profile it used."),
    "RPT-E002": ("a JSON record is unreadable", "Re-run make postflight RUN_ID=... to rewrite verification.json and actor-placement.json; inputs.json and preflight.json come only from the run itself."),
    "RPT-E003": ("driver.log is missing or holds no phase line", "The launcher tees driver.log from its first line: the run was not started by the launcher, or its log was removed."),
    "RPT-E004": ("SUCCESS or FAILED disagrees with the latest records", "The latest verification wins: read verification.json, fix what it names, and re-run make postflight RUN_ID=..."),
    "RPT-E005": ("TensorBoard scalars cannot be charted", "See postflight's POST-E014..E017 for the event files; charts need readable events.out.tfevents.* under tensorboard/."),
    "RPT-E006": ("no rollout samples can be shown", "See postflight's POST-E018..E020; samples come from rollouts/<step>.jsonl."),
    "RPT-E007": ("the run has no verdict yet", "If the job has ended, its Driver was stopped before it could write FAILED: run make postflight RUN_ID=... to judge what it left."),
    "RPT-E050": ("the parent run of a resumed run is not beside it", "The charts cannot show the inherited steps: the parent's folder (run.json names it) was moved or removed from runs/ on this volume."),
    "RPT-E020": ("a record's field has the wrong type or is out of range", "The page leaves those fields out. Records are written by the bundle: re-run make postflight RUN_ID=... to rewrite verification.json and actor-placement.json; inputs.json, preflight.json and run.json come only from the run itself."),
    "RPT-E021": ("driver.log holds malformed launcher phase lines", "The launcher writes 'phase NAME started <UTC time>' and 'phase NAME ended with status N after S s'; other lines that look like them were written by something else and are left out of the timeline."),
    "RPT-E022": ("a checkpoint's actor/ folder holds more files than the run's size explains", "The page sums the shards of each step by kind up to 8 names a rank (and 64 more); something else writes into the checkpoint folder. Postflight's checkpoint check judges the step it needs."),
    "RPT-E450": ("the report's reference run cannot be read", "REPORT_REFERENCE names a run beside this one under runs/ (make runs lists them); a resumed run's parent is its reference by default: put the parent's folder back, or set REPORT_REFERENCE=none."),
    # make compare RUN_ID=<run> AGAINST=<reference ...>, on the prep box
    "CMP-E001": ("a run to compare has no run folder", "RUN_ID and every AGAINST must name run folders under PREP_ROOT's runs/verl/two-worker-grpo/ (make runs lists them)."),
    "CMP-E002": ("a run is named twice", "Name each run once: RUN_ID=<run> AGAINST=<another run> (several AGAINST allowed, space-separated)."),
    "CMP-E003": ("TOLERANCE is not a relative tolerance", "Set TOLERANCE to a number from 0 to 10 (0.05 is 5% of the larger value) or a percentage such as 5%; leave it empty for 5%."),
    "CMP-E004": ("the compare page would be written inside a run folder", "A run folder is never written by make compare: set COMPARE_HTML to a path outside every run folder, or leave it empty for runs/verl/two-worker-grpo-compare/."),
    "CMP-W001": ("a run logged no scalar that can be read", "It never trained or its TensorBoard events are unreadable (make report RUN_ID=<it> says which): it is compared on what it ran and how it went."),
    "CMP-W002": ("the runs used other profiles or bundle versions", "Their metrics are still compared, but the recipe or code differences listed first can explain any metric difference: compare runs of one profile and bundle to prove a reproduction."),
    "CMP-W003": ("a fact is not recorded by every run", "An older bundle did not record it, no bundle records it yet (the image, a reward hash), or the record is unreadable: it cannot be compared and is listed as such; nothing is assumed."),
}

"""A long run's records stay small and its views agree: verification.json lists the first and
last rollouts.LISTED_STEPS steps (and any step with a finding) and sums the rest; a 150-step run
gives SUCCESS in postflight, report and runs."""
import contextlib
import io
import json

import synthrun
from twgrpo.checks.postflight import rollouts
from twgrpo.cli import main

STEPS = 150


def _run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def test_a_long_runs_rollouts_are_summed_in_verification_json(tmp_path):
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=STEPS)
    (run / "rollouts" / "100.jsonl").write_text("")  # one step without rows: named in full
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 1
    evidence = json.loads((run / "verification.json").read_text())["evidence"]
    listed = sorted(int(step) for step in evidence["rollouts"])
    edge = rollouts.LISTED_STEPS
    assert listed == list(range(1, edge + 1)) + [100] + list(range(STEPS - edge + 1, STEPS + 1))
    assert evidence["rollouts"]["100"]["rows"] == 0
    summary = evidence["rollouts_summary"]
    assert summary == {"steps": STEPS, "rows": (STEPS - 1) * 4 * 2, "score_min": 0.0,
                       "score_max": 0.0, "listed": len(listed)}


def test_a_healthy_long_run_is_success_in_every_view(tmp_path):
    run, env = synthrun.healthy_run(tmp_path, 2, 2, steps=STEPS)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    code, report = _run(["report", "--output-dir", str(run), "--profile", str(env)])
    assert code == 0 and "run exp: SUCCESS" in report
    code, listing = _run(["runs", "--storage-root", str(tmp_path)])
    assert [line.split()[-1] for line in listing.splitlines() if line.startswith("exp ")] == ["SUCCESS"]

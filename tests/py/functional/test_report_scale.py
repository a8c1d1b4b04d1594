"""The report of a healthy run past every former constant: 180 x 8 (more than 512 shard files,
more than 64 nodes, more than 4,096 shard entries in verification.json) and 520 x 8 (more than
4,096 ranks in actor-placement.json): SUCCESS with no finding about a cap, every node in the
per-node table, and the page saying how many nodes it draws."""
import contextlib
import io
import json

import pytest
import synthrun
from twgrpo.cli import main
from twgrpo.report import nodegrid


def _run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.mark.parametrize("nodes", [180, 520])
def test_a_big_healthy_run_reports_success_with_no_cap_reached(tmp_path, nodes):
    run, env = synthrun.healthy_run(tmp_path, nodes, 8, probe_bytes=2000)
    assert main(["postflight", "--output-dir", str(run), "--profile", str(env)]) == 0
    code, text = _run(["report", "--output-dir", str(run), "--profile", str(env)])
    assert code == 0 and "run exp: SUCCESS" in text
    for capped in ("RPT-E020", "RPT-E022", "RPT-E002", "RPT-E005"):
        assert capped not in text, text
    page = (run / "report.html").read_text()
    assert f"Drawn: {nodegrid.MAX_CARDS} of {nodes} nodes" in page
    assert page.count("<tr><td>node-") >= nodes  # every node in the per-node table
    ranks = nodes * 8
    assert f"model_world_size_{ranks}_rank_{{0..{ranks - 1}}}.pt" in page
    assert f"{ranks} verified" in page
    code, listing = _run(["runs", "--storage-root", str(tmp_path)])
    assert [line.split()[-1] for line in listing.splitlines() if line.startswith("exp ")] == ["SUCCESS"]
    assert len(json.loads((run / "actor-placement.json").read_text())["actors"]) == ranks

"""usage(): an id raised before there is a finding list still prints '(ID) message' and the
catalog's hint, wherever such errors are printed."""
import pytest

from twgrpo.cli import main
from twgrpo.run.catalog import CATALOG
from twgrpo.run.findings import UsageError, usage, usage_lines


def test_usage_says_the_id_and_message_and_carries_the_catalogs_hint():
    exc = usage("LAUNCH-E008", None, "run folder /v/runs/x already exists")
    assert isinstance(exc, UsageError) and exc.fid == "LAUNCH-E008"
    assert str(exc) == "(LAUNCH-E008) run folder /v/runs/x already exists"
    assert exc.hint == CATALOG["LAUNCH-E008"][1]
    named = usage("CMP-E001", "run-a", "is not a run folder")
    assert str(named) == "run-a: (CMP-E001) is not a run folder"


def test_usage_refuses_an_id_the_catalog_lacks():
    with pytest.raises(KeyError):
        usage("LAUNCH-" + "E999", None, "no such id")


def test_an_error_is_printed_with_its_hint_line_and_one_without_an_id_alone():
    exc = usage("GEN-E130", None, "KEEP='x' is not a whole number of at least 1")
    assert usage_lines("prune", exc) == [f"prune: {exc}", f"    HINT: {CATALOG['GEN-E130'][1]}"]
    assert usage_lines("prune", UsageError("plain")) == ["prune: plain"]


def test_the_verifier_prints_the_hint_after_the_line(tmp_path, capsys):
    assert main(["heartbeat", "--storage-root", str(tmp_path), "--run-id", "r1",
                 "--interval", "100", "--lease", "10"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("verify-two-worker-grpo-v1: (LAUNCH-E090) HEARTBEAT_INTERVAL=100")
    assert lines[1:] == [f"    HINT: {CATALOG['LAUNCH-E090'][1]}"]

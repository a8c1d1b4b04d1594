"""make report with a reference run: its scalars drawn on every chart as a second series; a
resumed run's parent by default; a reference that cannot be read named (RPT-E450)."""
import pytest
from compareruns import FRESH, PARENT, RESUMED, TWO_HOST, storage_with_real_runs
from twgrpo.cli import main


@pytest.fixture
def volume(tmp_path):
    runs = storage_with_real_runs(tmp_path / "storage")
    return tmp_path / "storage", runs


def report(capsys, root, run, *extra):
    assert main(["report", "--storage-root", str(root), "--run-id", run, *extra]) == 0
    out = capsys.readouterr().out
    page = (root / "runs/verl/two-worker-grpo" / run / "report.html").read_text(encoding="utf-8")
    return out, page


def test_a_resumed_runs_parent_is_drawn_as_its_reference(volume, capsys):
    root, _ = volume
    out, page = report(capsys, root, RESUMED)
    charts = page.count('<figure class="chart')
    assert charts > 30 and page.count('<path class="reference"') == charts
    assert f"reference {PARENT}" in out and "this run&#x27;s parent" in page


def test_reference_none_draws_no_second_series(volume, capsys):
    root, _ = volume
    out, page = report(capsys, root, RESUMED, "--reference", "none")
    assert 'class="reference"' not in page and "  reference " not in out


def test_a_named_reference_is_drawn_on_a_fresh_runs_charts(volume, capsys):
    root, _ = volume
    out, page = report(capsys, root, TWO_HOST, "--reference", FRESH)
    assert page.count('<path class="reference"') == page.count('<figure class="chart') > 30
    assert f"reference {FRESH}" in out and "RPT-E450" not in out


@pytest.mark.parametrize("name, why", [("no-such-run", "is not a run folder"), ("bad name!", "is not a RUN_ID"),
                                       (TWO_HOST, "is this run itself")])
def test_a_reference_that_cannot_be_read_is_named_and_the_page_still_written(volume, capsys, name, why):
    root, _ = volume
    out, page = report(capsys, root, TWO_HOST, "--reference", name)
    assert "(RPT-E450)" in out and why in out
    assert 'class="reference"' not in page and page.count('<figure class="chart') > 30


def test_a_resumed_reference_is_drawn_from_step_1_with_its_parents_steps(volume, capsys):
    root, _ = volume
    _, page = report(capsys, root, TWO_HOST, "--reference", RESUMED)
    charts = page.count('<figure class="chart')
    assert page.count("<title>reference step 1: ") == page.count("<title>reference step 2: ") == charts


def test_a_longer_reference_is_read_to_its_own_size(tmp_path, capsys, monkeypatch):
    """A 40-step reference whose event file is over what 2 steps allow is read within the
    budget of its own recorded steps, as its own report reads it."""
    import synthrun
    from twgrpo.report import runview
    long, _ = synthrun.healthy_run(tmp_path, 2, 2, steps=40, run_id="long")
    synthrun.healthy_run(tmp_path, 2, 2, run_id="short")
    size = sum(p.stat().st_size for p in (long / "tensorboard").rglob("*") if p.is_file())
    monkeypatch.setattr(runview, "EVENT_BYTES_BASE", 0)
    monkeypatch.setattr(runview, "EVENT_BYTES_PER_STEP", size // 20)  # 40 steps: twice its size
    out, page = report(capsys, tmp_path, "short", "--reference", "long")
    assert "RPT-E450" not in out and "reference long" in out
    assert 'class="reference"' in page

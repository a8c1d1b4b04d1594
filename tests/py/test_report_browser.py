"""The report page in a real browser: headless Chromium renders the real run's page, and the
DOM it built holds the verdict, the topology and one chart per required scalar."""
import html.parser
import shutil
import subprocess
from pathlib import Path

import pytest
from twgrpo.cli import main
from twgrpo.checks.postflight import REQUIRED_SCALARS

FIXTURE = next((Path(__file__).resolve().parents[1] / "fixtures" / "real-smoke-run").glob("smoke-*"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RESULTS = Path(__file__).resolve().parents[2] / ".cache" / "test-results"
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="needs Debian's chromium (tests/run.sh installs it)")


def chromium(tmp_path, *args):
    """Headless, offline, in a private profile; root needs --no-sandbox."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


class Dom(html.parser.HTMLParser):
    def __init__(self, text):
        super().__init__()
        self.found = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    run = tmp_path_factory.mktemp("report") / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    assert main(["postflight", "--output-dir", str(run)]) == 0  # judged by this postflight
    assert main(["report", "--output-dir", str(run)]) == 0
    return run / "report.html"


def test_chromium_renders_the_verdict_the_topology_and_a_chart_per_required_scalar(page, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    elements = Dom(dom).found
    banner = [a for t, a in elements if t == "section" and "banner" in a.get("class", "")]
    assert [a["class"] for a in banner] == ["banner SUCCESS"]
    assert "SUCCESS" in dom and "every check of every phase passed" in dom
    topology = [a for t, a in elements if t == "svg" and "topology-svg" in a.get("class", "")]
    assert len(topology) == 1
    assert [a.get("data-hostname") for t, a in elements if t == "g" and a.get("class") == "node"] == ["vm"]
    charts = [a["data-tag"] for t, a in elements if t == "figure" and "data-tag" in a]
    for tag in REQUIRED_SCALARS:
        assert charts.count(tag) == 1, tag
    svgs_in_charts = sum(1 for t, a in elements if t == "svg" and "chart-svg" in a.get("class", ""))
    assert svgs_in_charts == len(charts)
    assert not [t for t, _ in elements if t == "script"]


def test_chromium_draws_the_page_into_a_screenshot(page, tmp_path):
    RESULTS.mkdir(parents=True, exist_ok=True)
    shot = RESULTS / "report-real-smoke-run.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2400)
    assert len(data) > 50_000  # a drawn page, not a blank one (blank is a few kilobytes)


RESUME_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-resume-run"


@pytest.fixture(scope="module")
def resume_pages(tmp_path_factory):
    """The real preempted run and its resumption side by side, each with its report."""
    import tarfile
    runs = tmp_path_factory.mktemp("resume") / "runs" / "verl" / "two-worker-grpo"
    runs.mkdir(parents=True)
    for run in RESUME_FIXTURES.glob("spot-*"):
        shutil.copytree(run, runs / run.name)
    with tarfile.open(RESUME_FIXTURES / "shards.tar.gz") as tar:
        tar.extractall(runs, filter="data")
    pages = {}
    for run in sorted(runs.iterdir()):
        assert main(["report", "--output-dir", str(run)]) == 0
        pages[run.name[-1]] = run / "report.html"
    return pages


def test_chromium_shows_the_preempted_run_as_preempted_with_its_resume_line(resume_pages, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", resume_pages["a"].as_uri()).stdout
    elements = Dom(dom).found
    banner = [a["class"] for t, a in elements if t == "section" and "banner" in a.get("class", "")]
    assert banner == ["banner PREEMPTED"]
    assert [a for t, a in elements if t == "div" and a.get("class") == "resume"]
    assert "RESUME_FROM=spot-" in dom and "No findings: every check passed" not in dom


def test_chromium_draws_the_parents_steps_before_the_resumed_runs_own(resume_pages, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", resume_pages["b"].as_uri()).stdout
    elements = Dom(dom).found
    charts = [a["data-tag"] for t, a in elements if t == "figure" and "data-tag" in a]
    inherited = [a for t, a in elements if t == "path" and a.get("class") == "inherited"]
    marks = [a for t, a in elements if t == "line" and a.get("class") == "resumed"]
    assert len(inherited) == len(marks) == len(charts) > 5
    assert any(t == "h2" and a.get("id") == "lineage" for t, a in elements)
    shot = RESULTS / "report-real-resumed-run.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", resume_pages["b"].as_uri())
    assert len(shot.read_bytes()) > 50_000

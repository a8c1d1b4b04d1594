"""The report page in a real browser: headless Chromium renders the real run's page, and the
DOM it built holds the verdict, the topology and one chart per required scalar."""
import html
import html.parser
import shutil
import subprocess
from pathlib import Path

import pytest
from twgrpo.cli import main
from twgrpo.checks.postflight.postflight import REQUIRED_SCALARS

FIXTURE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RESULTS = Path(__file__).resolve().parents[3] / ".cache" / "test-results"
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


RESUME_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real-resume-run"


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


# The topology at scale: 4 GPU nodes x 8 H100 over IB behind a CPU-only head, drawn as cards that
# reflow. A copy of the page gets a measuring script (the page itself runs none: its CSP forbids
# it), and Chromium reports where each card and GPU tile landed at 900 and 1400 px.
MEASURE = """<script>
const out = {vw: innerWidth, sw: document.documentElement.scrollWidth, cards: [], bad: [], scale: 9};
for (const c of document.querySelectorAll('.node-card')) {
  const r = c.getBoundingClientRect();
  out.cards.push([c.dataset.hostname, r.left, r.top, r.right, r.bottom]);
  for (const t of c.querySelectorAll('g.gpu rect')) {
    const q = t.getBoundingClientRect();
    if (q.left < r.left - .5 || q.right > r.right + .5 || q.top < r.top - .5 || q.bottom > r.bottom + .5)
      out.bad.push(c.dataset.hostname);
  }
  for (const s of c.querySelectorAll('svg.node-svg'))
    out.scale = Math.min(out.scale, s.getBoundingClientRect().width / s.viewBox.baseVal.width);
}
document.body.setAttribute('data-layout', JSON.stringify(out));
</script>"""


@pytest.fixture(scope="module")
def big_page(tmp_path_factory):
    import synthrun
    from twgrpo.run.profile import load_profile
    root = tmp_path_factory.mktemp("big")
    text = load_profile(None).path.read_text().replace("PROFILE_NAME=tutorial-2x2-a100",
                                                        "PROFILE_NAME=h100-4x8-ib")
    for key, value in (("NODES", 4), ("GPUS_PER_NODE", 8), ("GPU_MODEL", "NVIDIA H100 80GB HBM3"),
                       ("TRAIN_BATCH_SIZE", 32), ("PPO_MINI_BATCH_SIZE", 32)):
        text = "".join(f"{key}={value}\n" if line.startswith(f"{key}=") else line + "\n"
                       for line in text.splitlines())
    profile = root / "h100-4x8-ib.env"
    profile.write_text(text + "NCCL_TRANSPORT=ib\n")
    hosts = [{"hostname": "head-cpu", "ip": "10.10.0.2", "gpus": 0}] + \
        [{"hostname": f"gpu-node-{i}", "ip": f"10.10.0.{10 + i}"} for i in range(4)]
    run = root / "runs/verl/two-worker-grpo/ib-001"
    synthrun.write_run(run, load_profile(str(profile)), "ib-001", "/mnt/verl-reproduction", hosts,
                       transport="ib")
    assert main(["postflight", "--output-dir", str(run), "--profile", str(profile)]) == 0
    assert main(["report", "--output-dir", str(run), "--profile", str(profile)]) == 0
    return run / "report.html"


@pytest.mark.parametrize("width", [900, 1400])
def test_a_4x8_topology_fits_the_window_with_no_card_overlapping_another(big_page, tmp_path, width):
    import json
    import re
    page = big_page.read_text(encoding="utf-8")
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium(tmp_path, "--dump-dom", f"--window-size={width},3000", measured.as_uri()).stdout
    layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    assert layout["vw"] == width and layout["sw"] <= width  # nothing sticks out sideways
    cards = layout["cards"]
    assert [c[0] for c in cards] == ["head-cpu"] + [f"gpu-node-{i}" for i in range(4)]
    for name, left, top, right, bottom in cards:
        assert 0 <= left and right <= width, name
    for i, a in enumerate(cards):
        for b in cards[i + 1:]:
            apart = a[3] <= b[1] or b[3] <= a[1] or a[4] <= b[2] or b[4] <= a[2]
            assert apart, (a, b)
    assert layout["bad"] == []  # every GPU tile inside its node's card
    assert layout["scale"] >= 0.9  # the tiles' 11-12 px text is drawn at least 10 px high
    assert "every rank (32)" in dom and "ranks 0–7" in dom and "CPU only" in dom

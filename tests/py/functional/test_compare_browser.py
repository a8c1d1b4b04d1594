"""The compare page in a real browser: headless Chromium lays out the page of the two-host run
against the fresh and the resumed run at 900 and 1400 px; nothing sticks out sideways, every
chart holds one series per run, and the differing facts and verdicts are there."""
import html
import json
import re

import pytest
from compareruns import FRESH, RESUMED, TWO_HOST, storage_with_real_runs
from test_report_browser import CHROMIUM, RESULTS, chromium
from twgrpo.cli import main

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="needs Debian's chromium (tests/run.sh installs it)")
MEASURE = """<script>
const out = {vw: innerWidth, sw: document.documentElement.scrollWidth, charts: [], out: [],
  banners: document.querySelectorAll('section.banner').length,
  differs: [...document.querySelectorAll('tr.row-differs')].map(r => r.dataset.what)};
for (const f of document.querySelectorAll('figure.chart')) {
  const r = f.getBoundingClientRect();
  const runs = new Set([...f.querySelectorAll('circle.point')].map(c => c.dataset.run));
  out.charts.push([f.dataset.tag, runs.size, f.querySelectorAll('path.series').length, r.width]);
  if (r.left < 0 || r.right > innerWidth) out.out.push(f.dataset.tag);
}
document.body.setAttribute('data-layout', JSON.stringify(out));
</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-page") / "storage"
    storage_with_real_runs(root)
    target = root.parent / "compare.html"
    assert main(["compare", "--storage-root", str(root), "--run-id", TWO_HOST, "--against", FRESH,
                 "--against", RESUMED, "--html", str(target)]) == 1
    return target


@pytest.mark.parametrize("width", [900, 1400])
def test_the_compare_page_fits_the_window_and_draws_every_run_on_every_chart(page, tmp_path, width):
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text  # the page itself runs nothing; the copy below gets a measurer
    measured = tmp_path / "measured.html"
    measured.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
                        .replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium(tmp_path, "--dump-dom", f"--window-size={width},3000", measured.as_uri()).stdout
    layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    assert layout["vw"] == width and layout["sw"] <= width  # nothing sticks out sideways
    assert layout["banners"] == 2 and layout["out"] == []
    assert {"NODES", "world size", "steps inherited", "bundle SHA256SUMS"} <= set(layout["differs"])
    charts = layout["charts"]
    assert len(charts) > 30
    for tag, runs, lines, chart_width in charts:
        assert runs == 3, tag  # every run's points on every chart
        assert lines >= 1 and chart_width >= 240, tag


def test_chromium_draws_the_compare_page_into_a_screenshot(page, tmp_path):
    RESULTS.mkdir(parents=True, exist_ok=True)
    for width in (900, 1400):
        shot = RESULTS / f"compare-real-runs-{width}.png"
        chromium(tmp_path, f"--screenshot={shot}", f"--window-size={width},2400", page.as_uri())
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000

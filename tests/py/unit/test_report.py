"""make report and make runs on the real run's artifacts and on hostile or damaged copies:
the page parses (HTML and every SVG), escapes what it shows, stays bounded, and says what it
could not read."""
import html.parser
import json
import os
import re
import shutil
import tarfile
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import synthrun
from tbwrite import write_events  # runs of 5,000 and 20,000 steps, written fast
from twgrpo.formats import bounded, tfevents
from twgrpo.run import humane, runverdict
from twgrpo.cli import main
from twgrpo.checks.postflight.postflight import REQUIRED_SCALARS
from twgrpo.run.profile import load_profile
from twgrpo.report import runview
from twgrpo.report.runview import MAX_SAMPLE_CHARS

FIXTURE = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*"))


class Page(html.parser.HTMLParser):
    """Every element with its attributes, and the text, as the standard library parses it."""

    def __init__(self, text):
        super().__init__()
        self.elements, self.text = [], []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def tags(self, name):
        return [attrs for tag, attrs in self.elements if tag == name]


@pytest.fixture
def as_recorded(tmp_path):
    """The real run as its GPU machine left it."""
    copy = tmp_path / "runs" / "verl" / "two-worker-grpo" / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    return copy


@pytest.fixture
def run(as_recorded, capsys):
    """The real run judged again by this postflight, as make postflight RUN_ID=... does."""
    assert main(["postflight", "--output-dir", str(as_recorded)]) == 0
    capsys.readouterr()
    return as_recorded


def test_a_verification_from_an_older_postflight_is_unproven_until_judged_again(as_recorded, capsys):
    record = json.loads((as_recorded / "verification.json").read_text())
    older = [name for name in record["passed_checks"].split(",") if name != "inputs-record"]
    record["passed_checks"] = ",".join(older)  # as a postflight before that check wrote it
    record["checks"] = [c for c in record["checks"] if c.get("name") != "inputs-record"]
    (as_recorded / "verification.json").write_text(json.dumps(record))
    code, out, text = report(as_recorded, capsys)
    assert code == 0
    assert [a.get("class") for a in Page(text).tags("section")] == ["banner UNPROVEN"]
    assert "(RPT-E010)" in out + text and "lacks passing checks inputs-record" in text


def report(run, capsys, *extra):
    code = main(["report", "--output-dir", str(run), *extra])
    out = capsys.readouterr().out
    return code, out, (run / "report.html").read_text(encoding="utf-8")


def svgs(text):
    return re.findall(r"<svg\b.*?</svg>", text, re.S)


def test_the_real_run_gets_a_page_with_its_verdict_topology_and_one_chart_per_scalar(run, capsys):
    code, out, text = report(run, capsys)
    assert code == 0
    page = Page(text)
    assert [a.get("class") for a in page.tags("section")] == ["banner SUCCESS"]
    charts = {a["data-tag"] for a in page.tags("figure")}
    assert set(REQUIRED_SCALARS) <= charts and len(charts) == 64  # every scalar of the real run
    for picture in svgs(text):
        ET.fromstring(picture)  # every SVG is well-formed XML
    topology = next(p for p in svgs(text) if "topology-svg" in p)
    pid = re.search(r"\(WorkerDict pid=(\d+)\)", (run / "training.log").read_text()).group(1)
    assert "node 0 · vm" in topology and f"rank 0 · pid {pid}" in topology and "H200" in topology
    assert "1e-06" in text and "9.99999" not in text
    assert "1 node x 1 GPU (any model)" in text
    assert "All rewards are 0, as expected" in text
    assert "1e2402e6ec4b" not in "".join(page.text)  # hostnames, not Ray node ids
    assert f"report: {run / 'report.html'}" in out


def test_a_two_node_run_draws_each_host_with_its_gpus_ranks_and_links(tmp_path, capsys):
    run = tmp_path / "runs" / "verl" / "two-worker-grpo" / "exp-001"
    hosts = [{"hostname": "gpu-a", "ip": "10.0.0.11"}, {"hostname": "gpu-b", "ip": "10.0.0.12"}]
    synthrun.write_run(run, load_profile("tutorial-2x2-a100"), "exp-001", "/mnt/verl-reproduction", hosts)
    assert main(["postflight", "--output-dir", str(run)]) == 0
    code, out, text = report(run, capsys)
    assert code == 0
    topology = ET.fromstring(next(p for p in svgs(text) if "topology-svg" in p))
    nodes = [g for g in topology.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"]
    assert [g.get("data-hostname") for g in nodes] == ["gpu-a", "gpu-b"]
    ranks = [[t.text for t in g.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "rank"]
             for g in nodes]
    assert [[r.split(" · ")[0] for r in node] for node in ranks] == [["rank 0", "rank 1"], ["rank 2", "rank 3"]]
    assert "4 ranks · NCCL over Socket (TCP) · RDMA off" in "".join(topology.itertext())
    assert "2 nodes x 2 GPUs (NVIDIA A100-SXM4-80GB), world size 4" in out
    assert "  node 1    gpu-b (10.0.0.12, worker): 2 x NVIDIA A100-SXM4-80GB, driver 535.104.05, ranks 2, 3" in out


def test_the_real_two_host_run_shows_each_host_with_its_rank(tmp_path, capsys):
    archive = next((FIXTURE.parents[1] / "real-smoke-run-2x1").glob("smoke-2x1-*.tar.xz"))
    with tarfile.open(archive) as packed:
        if hasattr(tarfile, "data_filter"):
            packed.extractall(tmp_path, filter="data")
        else:  # Python before 3.11.4: the archive is ours, its members plain files
            packed.extractall(tmp_path)
    run = tmp_path / archive.name[:-len(".tar.xz")]
    assert main(["postflight", "--output-dir", str(run)]) == 0  # judged by this postflight
    capsys.readouterr()
    code, out, text = report(run, capsys)
    assert code == 0
    assert out.startswith(f"run {run.name}: SUCCESS: every check of every phase passed\n")
    assert "2 nodes x 1 GPU (any model), world size 2" in out
    topology = ET.fromstring(next(p for p in svgs(text) if "topology-svg" in p))
    nodes = [g for g in topology.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"]
    assert [g.get("data-hostname") for g in nodes] == ["node-0", "node-1"]
    ranks = [[t.text for t in g.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "rank"]
             for g in nodes]
    log = (run / "training.log").read_text()
    pids = [re.search(rf"\(WorkerDict pid=(\d+){ip}\)", log).group(1) for ip in ("", ", ip=10.231.0.11")]
    assert ranks == [[f"rank 0 · pid {pids[0]}"], [f"rank 1 · pid {pids[1]}"]]
    assert "Gloo full mesh connected 1 of 1 peers" in text


def test_the_page_is_self_contained_and_runs_nothing(run, capsys):
    _, _, text = report(run, capsys)
    page = Page(text)
    assert not page.tags("script") and not page.tags("link") and not page.tags("img")
    for tag, attrs in page.elements:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for key in ("src", "href"):
            assert not attrs.get(key), (tag, attrs)
    assert "default-src 'none'" in page.tags("meta")[1]["content"]
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", text)


def test_the_page_is_written_atomically_and_readable_by_others(run, capsys):
    (run / "report.html").write_text("an older page")
    report(run, capsys)
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".")) == []
    assert (run / "report.html").stat().st_mode & 0o044 == 0o044
    assert "an older page" not in (run / "report.html").read_text()


def test_hostile_artifacts_are_shown_as_text_and_never_run(run, capsys):
    rollout = run / "rollouts" / "2.jsonl"
    rows = [json.loads(line) for line in rollout.read_text().splitlines()]
    rows[0]["output"] = "</pre><script>alert('rollout')</script><img src=x onerror=alert(1)>\x00\x1b[31m"
    rows[1]["input"] = "A" * (5 * MAX_SAMPLE_CHARS)
    rollout.write_text("".join(json.dumps(r) + "\n" for r in rows))
    preflight = json.loads((run / "preflight.json").read_text())
    preflight["workers"][0]["hostname"] = "<svg onload=alert(2)>vm]]>&\x1b]0;pwned\x07\x1b[2J"
    (run / "preflight.json").write_text(json.dumps(preflight))
    code, out, text = report(run, capsys)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out  # no escape sequence reaches the terminal
    assert "<svg onload=alert(2)>vm]]>&\ufffd]0;pwned" in out
    page = Page(text)
    assert not page.tags("script") and not page.tags("img")
    assert all(not any(k.startswith("on") for k in attrs) for _, attrs in page.elements)
    assert "<script>alert('rollout')</script>" in "".join(page.text)  # shown, as text
    assert "A" * MAX_SAMPLE_CHARS in text and "A" * (MAX_SAMPLE_CHARS + 1) not in text
    for picture in svgs(text):
        ET.fromstring(picture)  # no control character or markup breaks the SVG


def test_unreadable_records_become_findings_and_nothing_hangs(run, capsys):
    (run / "run.json").unlink()
    os.mkfifo(run / "run.json")  # opening a FIFO would block forever
    (run / "actor-placement.json").write_text("{not json")
    (run / "driver.log").unlink()
    code, out, text = report(run, capsys)
    assert code == 0
    for fid in ("RPT-E001", "RPT-E002", "RPT-E003"):
        assert fid in out and fid in text
    assert "not a regular file" in out


def test_an_empty_run_folder_says_what_is_missing_instead_of_guessing(tmp_path, capsys):
    empty = tmp_path / "exp-1"
    empty.mkdir()
    code, out, _ = report(empty, capsys)
    assert code == 0
    assert "(RPT-E001) run.json is missing; the report assumes profile tutorial-2x2-a100" in out
    assert "(RPT-E007)" in out and "no SUCCESS or FAILED yet" in out


def test_charts_stay_bounded_on_a_long_run(run, capsys):
    for path in (run / "tensorboard").iterdir():
        path.unlink()
    write_events(run / "tensorboard" / "events.out.tfevents.1.host.1.0",
                 [(s, {"actor/lr": 1e-6, "critic/score/mean": s / 5000}) for s in range(1, 5001)])
    _, _, text = report(run, capsys)
    chart = next(p for p in svgs(text) if "L" in p and "5,000" in p)
    points = re.search(r'<path d="([^"]+)"', chart).group(1).count("L") + 1
    assert tfevents.BUCKETS // 2 < points <= 2 * tfevents.BUCKETS + 1
    assert "step 5000: 1" in text


def test_a_long_runs_chart_keeps_a_one_step_spike_from_the_one_read(run):
    """Min and max per bucket from every value: a spike at one step of 20,000 is drawn."""
    for path in (run / "tensorboard").iterdir():
        path.unlink()
    write_events(run / "tensorboard" / "events.out.tfevents.1.host.1.0",
                 [(s, {"actor/grad_norm": 50.0 if s == 12345 else -3.0 if s == 777 else 1.0})
                  for s in range(1, 20001)])
    problems = []
    series, _ = runview.scalar_series(run, problems)
    points = dict(series)["actor/grad_norm"]
    assert (12345, 50.0) in points and (777, -3.0) in points and points[-1] == (20000, 1.0)
    assert len(points) <= 2 * tfevents.BUCKETS + 1 and problems == []


def test_tags_past_the_readers_memory_bound_are_a_finding_not_a_silent_cut(run, capsys, monkeypatch):
    from twgrpo.formats import tfevents
    monkeypatch.setattr(tfevents, "MAX_TAGS", 3)
    _, out, text = report(run, capsys)
    assert "(RPT-E005)" in out and "not read: their tags came after the first 3" in text


@pytest.mark.parametrize("marker, verification, status, conflict", [
    ("SUCCESS", "passed", "SUCCESS", None),
    ("SUCCESS", "failed", "FAILED", "superseded by the latest postflight"),
    ("FAILED", "passed", "FAILED", "a later postflight passed"),
    (None, "failed", "FAILED", None),
    (None, None, "INCOMPLETE", None),
])
def test_the_verdict_follows_the_latest_records(run, marker, verification, status, conflict):
    for name in ("SUCCESS", "FAILED"):
        if (run / name).exists():
            (run / name).unlink()
    if marker == "SUCCESS":
        (run / "SUCCESS").write_text("2026-12-02T13:10:34+00:00\n")
    elif marker == "FAILED":
        (run / "FAILED").write_text("time=x\nphase=training\nexit_status=1\nsignal=none\n")
    record = run / "verification.json"
    if verification is None:
        record.unlink()
    else:
        data = json.loads(record.read_text())
        data["status"] = verification
        record.write_text(json.dumps(data))
    found = runverdict.latest_verdict(run)
    assert found.status == status
    assert (conflict is None) == (not found.conflicts)
    if conflict:
        assert conflict in found.conflicts[0]


def test_a_failing_rerun_shows_the_superseded_success_it_moved_aside(run, capsys):
    (run / "SUCCESS").rename(run / "SUCCESS.superseded-20261202T140000Z")
    record = json.loads((run / "verification.json").read_text())
    record["status"] = "failed"
    (run / "verification.json").write_text(json.dumps(record))
    _, out, text = report(run, capsys)
    assert out.startswith(f"run {run.name}: FAILED: the latest postflight found problems\n")
    assert "  superseded: an earlier SUCCESS, kept as SUCCESS.superseded-20261202T140000Z" in out
    assert "kept as SUCCESS.superseded-20261202T140000Z" in text
    assert 'class="banner FAILED"' in text


def test_make_runs_lists_every_run_with_its_verdict(run, capsys):
    storage = run.parents[3]
    other = run.parent / "exp-broken"
    shutil.copytree(run, other)
    (other / "SUCCESS").unlink()
    (other / "FAILED").write_text("phase=training\nexit_status=1\n")
    (run.parent / "half-made").mkdir()
    assert main(["runs", "--storage-root", str(storage)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUN_ID", "STARTED", "TOOK", "PROFILE", "VERDICT", "LINEAGE"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert rows[run.name].endswith(" s  smoke-1x1  SUCCESS")  # took ... s
    assert rows["exp-broken"].endswith("FAILED (conflict)")  # FAILED stays beside a passing record
    assert rows["half-made"].split()[1:] == ["—", "—", "?", "INCOMPLETE"]
    assert lines[-1].startswith("runs: 3 under ")


@pytest.mark.parametrize("value, text", [
    (9.999999974752427e-07, "1e-06"), (0.38327037825059884, "0.3833"), (2.0, "2"),
    (94091471668.0, "94,091,471,668"), (float("nan"), "NaN"), (None, "—"), (6.205653190612793, "6.206"),
])
def test_numbers_are_written_for_people(value, text):
    assert humane.number(value) == text


def test_durations_sizes_and_topologies_read_naturally():
    assert [humane.duration(s) for s in (0, 53, 245, 7380)] == ["0 s", "53 s", "4 min 05 s", "2 h 03 min"]
    assert humane.size(1463140) == "1.4 MiB"
    assert humane.topology("1", "1", "*") == "1 node x 1 GPU (any model)"
    assert humane.topology(2, 2, "NVIDIA A100-SXM4-80GB") == \
        "2 nodes x 2 GPUs (NVIDIA A100-SXM4-80GB), world size 4"


LAUNCH = b"run-two-worker-grpo-v1: phase "
STARTED = b"run-two-worker-grpo-v1: phase inputs started 2026-12-02T13:09:38Z"
ENDED = b"run-two-worker-grpo-v1: phase inputs ended with status 0 after 0 s"


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 20])
@pytest.mark.parametrize("content, expected", [
    (STARTED + b"\nnoise\n" + ENDED + b"\n", [STARTED, ENDED]),
    (STARTED + b"\n" + ENDED, [STARTED, ENDED]),                 # no final newline
    (b"noise " + STARTED + b"\n" + ENDED + b"\r\n", [ENDED]),   # only at a line's start
    (b"y" * 500 + STARTED + b"\n" + ENDED + b"\n", [ENDED]),    # not inside an overlong line
    (b"", []),
])
def test_launcher_lines_are_found_across_every_block_boundary(tmp_path, chunk, content, expected):
    path = tmp_path / "driver.log"
    path.write_bytes(content)
    found = list(bounded.lines_starting(path, LAUNCH, chunk=chunk, longest=128))
    assert found == [line.decode() for line in expected]


@pytest.mark.parametrize("name,damage,expected", [
    ("no event file", lambda r: [p.unlink() for p in (r / "tensorboard").iterdir()], "RPT-E005"),
    ("no rollout file", lambda r: shutil.rmtree(r / "rollouts"), "RPT-E006"),
    ("SUCCESS beside FAILED", lambda r: (r / "FAILED").write_text("phase=training\n"), "RPT-E004"),
])
def test_what_the_page_cannot_show_is_named_with_its_finding(run, capsys, name, damage, expected):
    code, before, _ = report(run, capsys)
    assert code == 0 and expected not in before
    damage(run)
    code, out, text = report(run, capsys)
    assert code == 0
    assert f"({expected})" in out and expected in text


def test_the_image_a_run_recorded_is_shown_and_its_absence_said(run, capsys):
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    _, out, text = report(run, capsys)
    assert "image" not in record and "  image " not in out
    assert "not recorded (TWGRPO_IMAGE unset)" in "".join(Page(text).text)
    image = "registry.example/verl@sha256:" + "ab" * 32
    (run / "run.json").write_text(json.dumps({**record, "image": image}), encoding="utf-8")
    _, out, text = report(run, capsys)
    assert f"  image     {image}" in out.splitlines()
    assert image in "".join(Page(text).text) and "(RPT-E020)" not in out


def test_make_report_reads_the_runs_profile_once(run, capsys, monkeypatch):
    """The profile and, when it cannot be read, why not come from one read of run.json."""
    from twgrpo.run import runrecord
    real, reads = runrecord.read_typed, []

    def counted(run_dir, spec, problems, within=None):
        if set(spec) == {"profile"}:
            reads.append(run_dir)
        return real(run_dir, spec, problems, within)

    monkeypatch.setattr(runrecord, "read_typed", counted)
    assert main(["report", "--output-dir", str(run)]) == 0
    assert len(reads) == 1
    (run / "run.json").unlink()
    reads.clear()
    assert main(["report", "--output-dir", str(run)]) == 0
    assert len(reads) == 1 and "(RPT-E001) run.json is missing" in capsys.readouterr().out


def test_one_id_raised_by_every_rank_leaves_room_for_the_others():
    """300 findings of one id before one of another: both ids are shown, every one counted."""
    rank_finding = {"id": "POST-E151", "obj": "rank", "message": "no NET/IB line", "hint": "h"}
    record = {"checks": [{"findings": [rank_finding] * 300},
                         {"findings": [{"id": "POST-E005", "obj": "log", "message": "m"}]}]}
    shown, counts = runview.collect_findings({"postflight": record}, [])
    assert [f.id for _, f in shown] == ["POST-E151"] * 10 + ["POST-E005"]
    assert counts == {("postflight", "POST-E151"): 300, ("postflight", "POST-E005"): 1}


def test_the_reports_own_findings_and_the_ids_past_the_cap_are_still_told():
    """21 ids of 10 findings fill the records' 200: the report's own finding is still shown,
    and the 21st id is counted and named, none of it drawn."""
    from twgrpo.run.findings import finding
    record = {"checks": [{"findings": [{"id": f"POST-E{n:03d}", "obj": "o", "message": "m"}
                                       for n in range(21) for _ in range(10)]}]}
    shown, counts = runview.collect_findings({"postflight": record},
                                             [finding("RPT-E002", "inputs.json", "cannot be read")])
    assert len(shown) == runview.MAX_FINDINGS + 1 and shown[-1][1].id == "RPT-E002"
    view = types.SimpleNamespace(findings=shown, finding_counts=counts)
    groups = runview.RunView.finding_groups(view)
    last = next(g for g in groups if g.id == "POST-E020")
    assert (last.shown, last.total) == ([], 10)
    assert runview.RunView.unshown(last, 0) == (
        "postflight: (POST-E020) 10 not shown (the report shows the records' first 200 findings) "
        "in verification.json")
    assert runview.RunView.finding_total(view) == 211


def test_many_ids_in_a_record_hide_neither_the_reports_own_findings_nor_an_id(run, capsys):
    record = json.loads((run / "verification.json").read_text())
    record["checks"][0]["findings"] = [{"id": f"POST-E{n:03d}", "obj": "o", "message": "m", "hint": "h"}
                                       for n in range(21) for _ in range(10)]
    (run / "verification.json").write_text(json.dumps(record))
    shutil.rmtree(run / "tensorboard")  # the report's own finding: no charts
    code, out, text = report(run, capsys)
    assert code == 0
    assert "(RPT-E005)" in out and "RPT-E005" in text
    assert "POST-E020</span> × 10" in text and "10 not shown" in text

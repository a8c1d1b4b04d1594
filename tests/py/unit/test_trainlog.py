"""The streaming log scan equals a plain line-by-line parse, whatever the block and segment
sizes, and reads the real run's log correctly."""
import re
from pathlib import Path

import pytest
import synthrun
from twgrpo.formats import causes, evidencemerge, rankevidence, trainlines, trainlog

REAL_LOG = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("smoke-*")) / "training.log"
# the one rank's worker, as Ray's line prefix names it
PID = int(re.search(r"\(WorkerDict pid=(\d+)\)", REAL_LOG.read_text()).group(1))
HOSTS = [{"hostname": f"worker-{i}", "ip": f"10.231.0.{10 + i}"} for i in range(8)]


def line_by_line(path):
    """The reference: every line through the parser, no keyword search, one process."""
    scan = trainlog.LogScan()
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, 1):
            trainlog._parse_line(scan, number, raw.rstrip(b"\n").decode("utf-8", "replace"))
            scan.lines = number
    return scan


def synthesized(tmp_path, **options):
    lines = synthrun.training_log(HOSTS[:4], [2, 2, 2, 2], 2, "/runs/x", noise=300, **options)
    path = tmp_path / "training.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_real_log_yields_its_rank_and_transport_evidence():
    scan = trainlog.scan_log(str(REAL_LOG))
    assert scan.lines == REAL_LOG.read_bytes().count(b"\n")
    assert scan.fatal_count == 0
    assert scan.total_steps == {2} and 2 in scan.global_steps
    (comm, rank), phases = next(iter(scan.inits.items()))
    assert rank == 0 and sorted(phases) == ["COMPLETE", "START"]
    start = phases["START"][0]
    assert (start.host, start.pid, start.cuda, start.bus, start.nranks, start.prefix_pid) == ("vm", PID, 0, "60", 1, PID)
    transport = scan.transport[("vm", PID)]
    assert transport.ib_disable == ["1"] and transport.networks == {"Socket"}
    assert transport.socket_ips == {"192.0.2.2"}
    assert scan.gloo == {(PID, 0): {(0, 0)}}


def test_the_real_log_scans_like_the_line_by_line_reference():
    assert trainlog.scan_log(str(REAL_LOG)) == line_by_line(REAL_LOG)


def test_rank_evidence_comes_back_from_a_worker_whole():
    """A segment's scan is pickled back from its worker: each field of an init event and a
    transport (every one distinct here) is where it was."""
    import pickle
    event = rankevidence.InitEvent("node-7", 4242, 3, 5, "1e0", 16, 4241, 99)
    transport = rankevidence.Transport(["0"], {"10.0.0.7"}, {"IB"}, {"mlx5_0:1/IB"})
    assert pickle.loads(pickle.dumps(event)) == event
    assert pickle.loads(pickle.dumps(transport)) == transport


def test_a_scans_repeated_texts_are_one_object_each_and_stay_so_through_a_pickle(tmp_path):
    """The ranks of a segment name the same hosts, commId and devices: each text is held once,
    and each transport set once as the scan is pickled, so a segment's scan pickles and
    unpickles it once. Fails where a field is decoded per line or a set pickled per rank."""
    import pickle
    path = tmp_path / "training.log"
    path.write_text("\n".join(synthrun.training_log(HOSTS[:2], [4, 4], 2, "/runs/x", transport="ib", network="IB", ib_value="0")) + "\n")
    scan = trainlog.scan_range(str(path), 0, path.stat().st_size)
    back = pickle.loads(pickle.dumps(scan))
    assert back == scan
    for held in (scan, back):
        events = [e for phases in held.inits.values() for es in phases.values() for e in es]
        assert len(events) == 16
        assert len({id(e.host) for e in events}) == 2 and len({id(e.bus) for e in events}) <= 8
        assert len({id(comm) for comm, _ in held.inits}) == 1
    transports = list(back.transport.values())
    assert len(transports) == 8 and all(t.ib_devices and t.networks == {"IB"} for t in transports)
    assert len({id(t.ib_devices) for t in transports}) == 1 and len({id(t.networks) for t in transports}) == 1
    assert all(type(t.ib_devices) is set for t in scan.transport.values())  # the scan's own: as they were


def test_a_transport_set_grows_in_place_however_many_items_a_process_names():
    """One process naming 20,000 IPs, a line each: each line adds its IP to the one set (a
    frozen set replaced a line took 3.9 s, not 0.2); a frozen set, as a scan comes back, is
    copied once, when it first grows."""
    scan = trainlines.LogScan()
    key = ("host0", 4000)
    scan.add_transport(key, ips=["10.0.0.1"])
    first = scan.transport[key].socket_ips
    for ip in ("10.0.0.2", "10.0.0.1", "10.0.0.3"):
        scan.add_transport(key, ips=[ip])
    assert scan.transport[key].socket_ips is first and first == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}
    assert scan.kept == 1 + 3  # the transport and its three IPs, the repeat not counted
    thawed = rankevidence.grown(frozenset({"a"}), ["b"])
    assert thawed == {"a", "b"} and type(thawed) is set and rankevidence.grown(thawed, ["c"]) is thawed
    assert rankevidence.grown(rankevidence.NONE, []) == set() and rankevidence.NONE == frozenset()


@pytest.mark.parametrize("block,segment,jobs", [(1 << 12, 1 << 14, 1), (1 << 12, 1 << 14, 3),
                                                (777, 5000, 2), (1 << 20, 1 << 26, 1)])
def test_blocks_and_segments_do_not_change_the_result(tmp_path, monkeypatch, block, segment, jobs):
    path = synthesized(tmp_path, nccl_warn=True, first_step=2, resume_from="/runs/A/global_step_1")
    with open(path, "a") as stream:
        stream.write("last line without a newline: Traceback (most recent call last)")
    monkeypatch.setattr(trainlog, "BLOCK", block)
    monkeypatch.setattr(trainlog, "SEGMENT", segment)
    scan = trainlog.scan_log(str(path), jobs=jobs)
    assert scan == line_by_line(path)
    assert scan.shard_load_count == 8 * 4 and len(scan.rank_loads) == 8 * 3  # model, optimizer, rng
    assert {kind for _, kind, _ in scan.rank_loads} == set(trainlines.RANK_LOADS)  # in any segment


def test_a_log_under_one_segment_is_split_among_the_cores(tmp_path, monkeypatch):
    """A log of a few MIN_SEGMENTs is scanned by as many workers as there are jobs (at most one
    a MIN_SEGMENT), and gives what one pass gives."""
    path = synthesized(tmp_path, nccl_warn=True, first_step=2, resume_from="/runs/A/global_step_1")
    size = path.stat().st_size
    monkeypatch.setattr(trainlog, "MIN_SEGMENT", size // 3)
    cut = []
    segments = trainlog.segments
    monkeypatch.setattr(trainlog, "segments", lambda size, parts: (cut.append(parts), segments(size, parts))[1])
    assert trainlog.scan_log(str(path), jobs=2) == line_by_line(path) and cut == [2]
    assert trainlog.scan_log(str(path), jobs=8) == line_by_line(path) and cut == [2, 3]
    monkeypatch.setattr(trainlog, "MIN_SEGMENT", size)
    assert trainlog.scan_log(str(path), jobs=8) == line_by_line(path) and cut == [2, 3]  # one pass


INIT = ("(WorkerDict pid=1) h:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
        "busId 1000 commId 0xab - Init START")
LOADED = "(WorkerDict pid=1) [Rank 0] Loaded model from /{}/model_world_size_1_rank_0.pt"
STEP = "training/global_step:{}"
CUT_LOGS = {  # logs whose scan one pass and joined segments could give differently
    "a cause in a later segment": ["filler"] * 40 + ["(WorkerDict pid=4001) OSError: [Errno 28] No space left on device"],
    "a dropped value repeated later": [STEP.format(v) for v in (1, 2, 3, 3, 3)],
    "values held in file order, not sorted": [STEP.format(v) for v in (10, 5, 3)],
    "an init between steps": [STEP.format(1), INIT, STEP.format(2)],
    "a cause sample cut after a space": ["OSError: [Errno 28] No space left on device" + "x" * 356 + " y", "z"],
    "the load folders filled": [LOADED.format("F")] + [LOADED.format(f"G{i}") for i in range(64)] + [LOADED.format("F")],
}


@pytest.mark.parametrize("keep", [1, 2, 3, None])
@pytest.mark.parametrize("name", CUT_LOGS)
def test_every_cut_gives_one_pass_or_leaves_the_log_to_one(tmp_path, name, keep):
    """join gives exactly one pass's scan (line numbers of every kind shifted) or None, where
    the evidence budget or the load folders were reached and only the order of all items
    decides; scan_log then scans in one pass."""
    lines = CUT_LOGS[name]
    path = tmp_path / "training.log"
    path.write_text("\n".join(lines) + "\n")
    data = path.read_bytes()
    one = trainlog.scan_range(str(path), 0, len(data), keep=keep)
    for cut in range(1, len(lines)):
        at = len(("\n".join(lines[:cut]) + "\n").encode())
        parts = [trainlog.scan_range(str(path), 0, at, keep=keep), trainlog.scan_range(str(path), at, len(data), keep=keep)]
        joined = trainlog.join(parts, keep)
        assert joined is None or joined == one, (cut, joined, one)
        if keep is None and name != "the load folders filled":
            assert joined is not None  # under the budget every cut joins
    if name == "a cause in a later segment":
        assert one.causes[0][0] == 41


def test_a_log_past_its_budget_is_scanned_in_one_pass_when_split(tmp_path, monkeypatch):
    path = tmp_path / "training.log"
    path.write_text("\n".join(STEP.format(v) for v in list(range(1, 400)) + list(range(399, 0, -1))) + "\n")
    monkeypatch.setattr(trainlog, "MIN_SEGMENT", path.stat().st_size // 4)
    one = trainlog.scan_range(str(path), 0, path.stat().st_size, keep=100)
    assert one.dropped == 299 + 299 and trainlog.scan_log(str(path), jobs=4, keep=100) == one


def test_fatal_markers_keep_their_line_numbers_across_segments(tmp_path, monkeypatch):
    path = tmp_path / "training.log"
    lines = [f"filler line {i}" for i in range(5000)]
    lines[4321] = "(WorkerDict pid=7) torch.OutOfMemoryError: CUDA out of memory."
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(trainlog, "SEGMENT", 10_000)
    scan = trainlog.scan_log(str(path), jobs=2)
    assert scan.lines == 5000
    assert scan.fatal == [(4322, "out-of-memory", "(WorkerDict pid=7) torch.OutOfMemoryError: CUDA out of memory.")]


@pytest.mark.parametrize("text,marker", [
    ("Traceback (most recent call last):", "python-traceback"),
    ("Error executing job with overrides: []", "hydra-error"),
    ("ray.exceptions.RayTaskError(RuntimeError): boom", "ray-task-error"),
    ("ray.exceptions.ActorDiedError: The actor died", "ray-actor-died"),
    ("node:1:2 [0] NCCL WARN Call to connect returned Connection refused", "nccl-warn-or-error"),
    ("torch.distributed.DistBackendError: ncclInvalidUsage: This usually reflects invalid usage", "nccl-error-code"),
    ("[rank0]:[E] ProcessGroupNCCL's watchdog got stuck", "nccl-watchdog"),
    ("Fatal Python error: Segmentation fault", "segfault"),
    ("line 12: 4242 Killed python3 -m verl.trainer.main_ppo", "killed"),
])
def test_each_fatal_marker_is_found_behind_a_ray_prefix(tmp_path, text, marker):
    path = tmp_path / "training.log"
    path.write_text(f"ok line\n\x1b[36m(WorkerDict pid=9, ip=10.0.0.2)\x1b[0m {text}\nok line\n")
    scan = trainlog.scan_log(str(path))
    assert [(n, name) for n, name, _ in scan.fatal] == [(2, marker)]


def test_benign_lines_are_not_fatal(tmp_path):
    path = tmp_path / "training.log"
    path.write_text("INFO Using network Socket\nerrors=0 killed_workers=0\nno Error here? ErrorRate: 0\n")
    assert trainlog.scan_log(str(path)).fatal == []


def test_fatal_samples_are_bounded_but_all_are_counted(tmp_path):
    path = tmp_path / "training.log"
    path.write_text("NCCL WARN x\n" * 1000)
    scan = trainlog.scan_log(str(path))
    assert scan.fatal_count == 1000 and len(scan.fatal) == trainlog.FATAL_SAMPLES


def test_a_line_is_judged_for_fatal_markers_and_causes_only_past_the_words_both_look_for():
    """_parse_line asks _fatal_marker and classify only when a line holds one of ALARM_WORDS:
    every word either of them looks for is among them, so no marker or cause is missed."""
    assert set(trainlines.FATAL_WORDS) | set(causes.CAUSE_WORDS) == set(trainlines.ALARM_WORDS)
    for line in ("(WorkerDict pid=1) Out of memory: Kill process 7", "[Errno 28] No space left on device",
                 "EADDRINUSE on port 29500", "NCCL WARN peer lost", "Killed"):
        scan = trainlines.LogScan()
        trainlines._parse_line(scan, 1, line)
        assert scan.fatal_count + sum(scan.cause_counts.values()) > 0, line


@pytest.mark.parametrize("again", ["the same", "changed"])
def test_a_merge_takes_a_new_key_whole_only_with_room_for_all_it_holds(tmp_path, monkeypatch, again):
    """merge() adopts a rank's evidence whole when it fits the budget, and a segment's whole
    when all of it does; at every budget, the scan and its counts are the ones that adding each
    item on its own gives (both paths off). Every rank's lines come again: each key is in two
    segments, the second time with the same items or with others (another peer count, device
    and network)."""
    path = synthesized(tmp_path, transport="ib", network="IB", ib_value="0")
    text = path.read_text()
    if again == "changed":
        later = text.replace("is connected to 7.", "is connected to 6.").replace("mlx5_0", "mlx5_9")
        assert later.count("mlx5_9") >= 8 and later.count("connected to 6.") >= 8
        path.write_text(text + later.replace("Using network IB", "Using network Socket"))
    else:
        path.write_text(text * 2)
    size = path.stat().st_size
    segments = trainlog.segments(size, 3)
    assert len(segments) == 3
    items = trainlog.scan_range(str(path), 0, size).kept

    def joined(keep):
        return trainlog.merged([trainlog.scan_range(str(path), b, e, keep=keep) for b, e in segments], keep)

    keeps = sorted({1, 2, items // 3, items // 3 + 1, items // 2, items - 1, items, items + 1, 10 * items})
    got = [joined(keep) for keep in keeps]
    assert joined(None) == line_by_line(path)
    monkeypatch.setattr(evidencemerge, "room_for", lambda total, items: False)
    monkeypatch.setattr(evidencemerge, "all_fit", lambda total, other: False)
    want = [joined(keep) for keep in keeps]
    for keep, one, other in zip(keeps, got, want):
        assert (one, one.kept, one.dropped) == (other, other.kept, other.dropped), keep
    assert any(scan.dropped for scan in got) and not got[-1].dropped


def test_load_evidence_stays_small_whatever_the_paths(tmp_path):
    """Load lines of megabyte paths hold at most LOAD_PATH characters each, and at most
    LOAD_FOLDERS folders: memory does not grow with the log's size."""
    path = tmp_path / "training.log"
    long = "a" * (100 << 10)
    with open(path, "w") as log:
        for number in range(100):  # a long folder, then a long file name, then another folder each
            log.write(f"(WorkerDict pid=1) [Rank {number}] Loaded model from /x/{long}{number}/m.pt\n"
                      f"(WorkerDict pid=1) [Rank {number}] Loaded model from /x/{number}{long}.pt\n"
                      f"(WorkerDict pid=1) [Rank {number}] Loaded rng from /f{number}/rng.pt\n")
    scan = trainlog.scan_log(str(path), jobs=1)
    assert scan.shard_load_count == 300 and scan == line_by_line(path)
    assert len(scan.load_folders) == trainlines.LOAD_FOLDERS
    assert max(map(len, scan.load_folders)) <= trainlines.LOAD_PATH + 1
    assert all(len(p) <= trainlines.LOAD_PATH + 1 for _, _, p in scan.shard_loads)
    assert {kind for _, kind, _ in scan.rank_loads} == {"rng"}  # a name cut short is no rank's shard

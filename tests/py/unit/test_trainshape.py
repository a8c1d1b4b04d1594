"""A rank's line taken by its shape (trainshape.py) gives the evidence the whole-line parser
gives, on every shape, on hostile fields and under a small evidence budget; lines the shapes
must not take (alarm words, odd prefixes, extra fields) are left to the parser."""
import random

import pytest
from twgrpo.formats import trainlines, trainlog, trainshape

PREFIX = "\x1b[36m(WorkerDict pid=4242, ip=10.0.0.7)\x1b[0m "
HEAD = "node-7:4242:4250 [3] NCCL INFO "
SHAPES = {
    "init-start": HEAD + "ncclCommInitRankConfig comm 0x5f3a rank 11 nranks 16 cudaDev 3 nvmlDev 3 "
                         "busId 3B000 commId 0x9e2d44a1 - Init START",
    "init-complete": HEAD + "ncclCommInitRankConfig comm 0x5f3a rank 11 nranks 16 cudaDev 3 nvmlDev 3 "
                            "busId 3B000 commId 0x9e2d44a1 - Init COMPLETE",
    "ib-disable": HEAD + "NCCL_IB_DISABLE set by environment to 0.",
    "network": HEAD + "Using network IB",
    "ib-devices": HEAD + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.7<0>",
    "socket": HEAD + "NET/Socket : Using [0]eth0:10.0.0.7<0> [1]ib0:10.1.0.7<0>",
    "gloo": "[/pytorch/third_party/gloo/gloo/transport/tcp/context.cc:243] INFO Rank 11 is connected "
            "to 15. Expected number of connected peers is: 15",
    "metrics": "step:3 - global_seqlen/min:835 - actor/pg_loss:np.float64(0.0) - "
               "perf/max_memory_allocated_gb:np.float64(0.0888) - training/global_step:3 - "
               "critic/score/mean:0.25 - timing_s/step:1.5e-05",
}
HOSTILE = [  # each must be left to the parser, or parsed the same way by both
    PREFIX + SHAPES["init-start"].replace("node-7", "Errno-7"),
    PREFIX + SHAPES["init-start"].replace("ncclCommInitRankConfig", "ncclInvalidUsage"),
    PREFIX + SHAPES["ib-devices"] + " Error",
    PREFIX + SHAPES["ib-devices"] + " h:1:2 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1",
    PREFIX + SHAPES["socket"] + " x:9:9 [0] NCCL INFO Using network Socket",
    PREFIX + SHAPES["gloo"].replace("/pytorch/", "/Traceback/"),
    PREFIX + SHAPES["network"].replace("IB", "Killed"),
    PREFIX + SHAPES["ib-disable"].replace("0.", "Errno."),
    PREFIX + SHAPES["init-start"].replace("node-7", "nöde-7"),
    PREFIX + SHAPES["init-start"] + " localSize 8",
    PREFIX + SHAPES["network"] + "\r",
    PREFIX + " " + SHAPES["network"],
    PREFIX.replace("\x1b[0m", "\x1b[39m") + SHAPES["network"],
    "\x1b[1m\x1b[36m(WorkerDict pid=4242)\x1b[0m" + SHAPES["network"],
    "(pid=77) " + SHAPES["ib-disable"],
    "(TaskRunner pid=1) " + SHAPES["gloo"],
    "tail text " + PREFIX + SHAPES["network"],
    PREFIX + SHAPES["ib-disable"].replace("0.", "1" * 70 + "."),
    PREFIX + SHAPES["init-start"].replace("- Init START", "- Init START - Init COMPLETE"),
    # a metrics line naming a word the parser reacts to, or out of its shape
    PREFIX + SHAPES["metrics"].replace("global_seqlen/min", "ckpt/global_step_2"),
    PREFIX + SHAPES["metrics"].replace("global_seqlen/min", "x/commId"),
    PREFIX + SHAPES["metrics"].replace("np.float64(0.0)", "Traceback"),
    PREFIX + SHAPES["metrics"].replace("np.float64(0.0)", "OOM_Killed"),
    PREFIX + SHAPES["metrics"].replace("np.float64(0.0)", "/dev/shm/x"),
    PREFIX + SHAPES["metrics"].replace("actor/pg_loss", "actor/pg loss"),
    PREFIX + SHAPES["metrics"] + " - Total training steps: 9",
    PREFIX + SHAPES["metrics"] + " - training/global_step:" + "9" * 19,
    PREFIX + SHAPES["metrics"] + " - training/global_step:17",
    PREFIX + SHAPES["metrics"] + "\r",
    PREFIX + SHAPES["metrics"].replace("0.25", "0.2\t5"),
    PREFIX + SHAPES["metrics"].replace("0.25", "0.25 [Errno 28] No space left on device"),
    "(TaskRunner pid=3773) " + SHAPES["metrics"],
    SHAPES["metrics"],
    # spaces other than " - ", and heads the metrics line's pattern must not take
    PREFIX + SHAPES["metrics"].replace(" - actor", " - - actor"),
    PREFIX + SHAPES["metrics"].replace(" - actor", " -  actor"),
    PREFIX + SHAPES["metrics"].replace(" - actor", "  - actor"),
    PREFIX + SHAPES["metrics"] + " - ",
    PREFIX + SHAPES["metrics"].replace("step:3", "step:" + "3" * 19),
    PREFIX + SHAPES["metrics"].replace("step:3 - ", "step:3 -"),
    PREFIX + "step:3",
    PREFIX + "step:3 - training/global_step:3 out of memory - x:1",
    PREFIX + SHAPES["metrics"].replace("global_seqlen", "Global_seqLen"),
    PREFIX + SHAPES["metrics"].replace("timing_s/step", "timing_s/Kill\x7fed"),
    PREFIX + SHAPES["metrics"].replace("global_step:3", "global_step:3\x1b[0m5"),  # the parser strips it
]


def scan_lines(tmp_path, lines, name="training.log", **options):
    path = tmp_path / name
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    return trainlog.scan_range(str(path), 0, path.stat().st_size, **options)


def unshaped(tmp_path, lines, monkeypatch, **options):
    """The same scan with no line taken by its shape: every candidate through the parser."""
    with monkeypatch.context() as patch:
        patch.setattr(trainshape.Shapes, "find", lambda self, block, size, max_line: {})
        return scan_lines(tmp_path, lines, name="unshaped.log", **options)


def line_by_line(lines, keep=None):
    scan = trainlines.LogScan(keep=keep)
    for number, line in enumerate(lines, 1):
        trainlines._parse_line(scan, number, line)
    scan.lines = len(lines)
    return scan


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_is_taken_and_gives_what_the_parser_gives(tmp_path, shape):
    lines = ["first line", PREFIX + SHAPES[shape], "last line"]
    block = ("\n".join(lines) + "\n").encode()
    assert list(trainshape.Shapes().find(block, len(block), trainlog.MAX_LINE)) == [len(lines[0]) + 1]
    assert scan_lines(tmp_path, lines) == line_by_line(lines)


@pytest.mark.parametrize("line", HOSTILE)
def test_hostile_fields_give_what_the_parser_gives(tmp_path, monkeypatch, line):
    lines = ["first line", line, PREFIX + SHAPES["network"]]
    assert scan_lines(tmp_path, lines) == unshaped(tmp_path, lines, monkeypatch)


@pytest.mark.parametrize("line", HOSTILE[:8])
def test_a_field_holding_an_alarm_word_or_a_second_head_is_left_to_the_parser(line):
    block = ("first\n" + line + "\n").encode()
    assert trainshape.Shapes().find(block, len(block), trainlog.MAX_LINE) == {}


def test_shaped_and_parsed_lines_share_a_small_budget_in_line_order(tmp_path, monkeypatch):
    lines = []
    for rank in range(40):
        for shape in sorted(SHAPES):
            lines.append(PREFIX + SHAPES[shape].replace("rank 11", f"rank {rank}").replace("Rank 11", f"Rank {rank}")
                         .replace("node-7:4242", f"node-{rank}:{4000 + rank}"))
        lines.append(HOSTILE[rank % len(HOSTILE)])
        lines.append(f"training/global_step:{rank}")
    for keep in (7, 50, 200, None):
        assert scan_lines(tmp_path, lines, keep=keep) == unshaped(tmp_path, lines, monkeypatch, keep=keep), keep


def test_an_over_long_shaped_line_is_counted_as_long(tmp_path):
    lines = ["first", PREFIX + SHAPES["ib-devices"], PREFIX + SHAPES["network"]]
    assert scan_lines(tmp_path, lines, max_line=120).long_count == 1


@pytest.mark.parametrize("seed", range(12))
def test_mutated_lines_give_what_the_parser_gives(tmp_path, monkeypatch, seed):
    """Random edits of every shape: inserted, dropped and swapped bytes from the characters
    that decide a shape (separators, colour codes, alarm words, non-ASCII). The reference is
    the scan without shapes: a keyword broken by a colour code is missed by both alike."""
    rng = random.Random(seed)
    pieces = [" ", ":", ".", "]", "[", ")", "\x1b[0m", "\t", "\r", "é", "Error", "memory", "NCCL INFO ",
              "0x1f", "7", "\n", "COMPLETE", "Init ", " - ", "global_step_", "commId", "Killed",
              "training/global_step:8", "Total training steps: 2"]
    lines = ["first"]
    for _ in range(400):
        line = PREFIX + SHAPES[rng.choice(sorted(SHAPES))]
        for _ in range(rng.randrange(0, 3)):
            at = rng.randrange(len(line) + 1)
            edit = rng.randrange(3)
            if edit == 0:
                line = line[:at] + rng.choice(pieces) + line[at:]
            elif edit == 1:
                line = line[:at] + line[at + rng.randrange(1, 4):]
            else:
                line = line[:at] + line[at:at + 2][::-1] + line[at + 2:]
        lines.extend(line.split("\n"))
    shaped = trainshape.Shapes().find(("\n".join(lines) + "\n").encode(), 1 << 30, trainlog.MAX_LINE)
    assert len(shaped) > 100  # many lines keep their shape: the comparison is not empty
    assert scan_lines(tmp_path, lines) == unshaped(tmp_path, lines, monkeypatch)
    assert scan_lines(tmp_path, lines, keep=300) == unshaped(tmp_path, lines, monkeypatch, keep=300)


def test_the_memos_stay_small_on_a_log_of_distinct_long_fields(tmp_path):
    """Hosts and device lists repeat in a real log; a hostile one makes each distinct and long."""
    shapes = trainshape.Shapes()
    lines = ["first"] + [PREFIX + HEAD + "NET/IB : Using " + f"[{i % 9}]mlx5_{i}:1/IB " * 60
                         for i in range(trainshape.MEMO_MOST + 500)]
    block = ("\n".join(lines) + "\n").encode()
    assert len(shapes.find(block, len(block), trainlog.MAX_LINE)) == len(lines) - 1
    held = sum(len(text) for text in shapes._clean) + sum(len(text) for _, text in shapes._devices)
    assert len(shapes._clean) <= trainshape.MEMO_MOST
    assert held <= 2 * trainshape.MEMO_MOST * trainshape.MEMO_TEXT


def test_a_block_long_line_of_colour_codes_is_searched_in_small_memory():
    """An unbounded repeat of colour codes kept a backtracking record per code (356 MiB here)."""
    import tracemalloc
    block = b"x\n" + b"\x1b[m" * 2_800_000 + b"Z\n"
    tracemalloc.start()
    try:
        assert trainshape.Shapes().find(block, len(block), trainlog.MAX_LINE) == {}
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


def test_every_word_the_parser_looks_for_is_one_the_metrics_shape_knows():
    """A metrics line is taken whole only when it holds none of the parser's words (but its
    step counter): a word _parse_line looks for that LINE_WORDS and ALARM_WORDS lack would let
    the shape take a line the parser reads differently."""
    import inspect
    import re
    source = inspect.getsource(trainlines._parse_line)
    looked_for = set(re.findall(r'"([^"]+)" in body', source))
    assert looked_for and looked_for <= set(trainlines.LINE_WORDS) | set(trainlines.ALARM_WORDS), looked_for
    assert "VALIDATED in body" in source and trainlines.VALIDATED in trainlines.LINE_WORDS
    assert not re.search(r"\w+\.search\(body\)", source.replace("pattern.search(body)", "")
                         .replace("NCCL_INIT.search(body)", "").replace("CHECKPOINT_LOAD.search(body)", "")
                         .replace("SHARD_LOAD.search(body)", "")), "a search no word guards"


def test_verls_own_metrics_line_is_taken_and_gives_what_the_parser_gives(tmp_path):
    """The line verl 0.6.0 printed each step of the real GPU run (2 KB, 64 metrics, "memory" in
    three names): taken by its shape, so a 100,000-step log is read at the shape's speed."""
    from pathlib import Path
    log = next((Path(__file__).resolve().parents[2] / "fixtures" / "real-smoke-run").glob("*/training.log"))
    real = [line for line in log.read_text(encoding="utf-8").splitlines() if "training/global_step:" in line]
    assert real and len(real[0]) > 2000 and "memory" in real[0]
    lines = ["first"] + real
    block = ("\n".join(lines) + "\n").encode()
    assert len(trainshape.Shapes().find(block, len(block), trainlog.MAX_LINE)) == len(real)
    scan = scan_lines(tmp_path, lines)
    assert scan == line_by_line(lines) and scan.metric_steps == set(range(1, len(real) + 1))

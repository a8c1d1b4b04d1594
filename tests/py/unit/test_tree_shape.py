"""Small files, one job each: every module of tools/, prep/ and dev/ stays at most 350 lines, and
no room of the checks (a package folder under twgrpo/checks/) grows past 1,500 lines, where it
should become two rooms."""
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CHECKS = REPO / "tools/verl/two-worker-grpo/twgrpo/checks"
MAX_FILE_LINES = 350
MAX_ROOM_LINES = 1500
CODE = (".py", ".sh", ".bash")


def line_count(path):
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def long_files(root, names):
    """'name: N lines' for every code file of names (relative to root) past MAX_FILE_LINES."""
    return [f"{name}: {count} lines" for name in sorted(names) if name.endswith(CODE)
            for count in [line_count(root / name)] if count > MAX_FILE_LINES]


def heavy_rooms(checks):
    """'room/: N lines' for every package folder under checks whose Python, all of it, is past
    MAX_ROOM_LINES."""
    rooms = sorted(p.parent for p in checks.glob("*/__init__.py"))
    return [f"{room.name}/: {total} lines" for room in rooms
            for total in [sum(line_count(p) for p in room.rglob("*.py"))] if total > MAX_ROOM_LINES]


def tracked(*folders):
    """The files git tracks under folders, relative to the repo."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", *folders],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout, so the tracked files are unknown ({exc})")
    return [name for name in out.decode().split("\0") if name]


def test_every_module_of_tools_prep_and_dev_is_at_most_350_lines():
    names = tracked("tools", "prep", "dev")
    assert any(name.endswith("run-two-worker-grpo-v1.sh") for name in names), "git listed no bundle"
    assert long_files(REPO, names) == [], "split the file: one job per module"


def test_no_room_of_the_checks_is_past_1500_lines():
    assert len(list(CHECKS.glob("*/__init__.py"))) >= 9, "the rooms were not found"
    assert heavy_rooms(CHECKS) == [], "split the room into two"


def test_a_planted_oversized_file_is_named(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n" * MAX_FILE_LINES)
    (tmp_path / "big.sh").write_text("true\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "data.json").write_text("{}\n" * 1000)  # not code: not counted
    assert long_files(tmp_path, ["ok.py", "big.sh", "data.json"]) == [f"big.sh: {MAX_FILE_LINES + 1} lines"]


def test_a_planted_oversized_room_is_named(tmp_path):
    for room, lines in (("small", MAX_ROOM_LINES), ("big", MAX_ROOM_LINES + 1)):
        (tmp_path / room / "inner").mkdir(parents=True)
        (tmp_path / room / "__init__.py").write_text("")
        (tmp_path / room / "a.py").write_text("x = 1\n" * (lines - 1))
        (tmp_path / room / "inner" / "b.py").write_text("x = 1\n")  # a room's subfolders count
    (tmp_path / "loose").mkdir()  # no __init__.py: no room
    (tmp_path / "loose" / "c.py").write_text("x = 1\n" * 5000)
    assert heavy_rooms(tmp_path) == [f"big/: {MAX_ROOM_LINES + 1} lines"]

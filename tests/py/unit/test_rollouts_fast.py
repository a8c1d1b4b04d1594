"""A rollout file is read in pieces of whole lines (rollouts._fast_rows), and gets the verdict the
line-by-line reader gives it, row for row, on good and on hostile files, in one piece or many."""
import json

import pytest
from twgrpo.checks.postflight import rollouts


def row(step=3, **extra):
    return json.dumps({"input": "q", "output": "a", "score": 0.5, "step": step, **extra})


CASES = {
    "good": "\n".join(row() for _ in range(8)) + "\n",
    "blank and CRLF lines": row() + "\r\n\n  \n" + row() + "\r\n",
    "no final newline": row() + "\n" + row(),
    "a wrong step": row() + "\n" + row(step=4) + "\n",
    "two rows merged into one line by a bracket split across lines":
        row()[:-1] + ', "z": [{}' + "\n" + "{}]}" + "\n" + row() + ", " + row() + "\n",
    "a line separator that is not a newline": row() + "\n\u2028\n" + row() + "\n",
    "an integer of 30 digits": row(big=10 ** 30) + "\n",
    "a score of 1e400": row().replace("0.5", "1e400") + "\n",
    "nested 40 deep": row(deep=json.loads("[" * 40 + "]" * 40)) + "\n",
    "not UTF-8": None,
}


@pytest.mark.parametrize("piece", [1 << 20, 97], ids=["one piece", "pieces of 97 bytes"])
@pytest.mark.parametrize("name", CASES)
def test_the_fast_reader_agrees_with_the_line_reader(tmp_path, monkeypatch, name, piece):
    monkeypatch.setattr(rollouts, "FAST_MAX", piece)
    path = tmp_path / "3.jsonl"
    if CASES[name] is None:
        path.write_bytes(row().encode() + b"\n" + b'{"input": "\xff"}\n')
    else:
        path.write_text(CASES[name], encoding="utf-8")
    fast = rollouts._rollout_file(path, 3)
    took_fast = rollouts._fast_rows(path, 3) is not None
    monkeypatch.setattr(rollouts, "_fast_rows", lambda *a: None)  # the line-by-line reader alone
    slow = rollouts._rollout_file(path, 3)
    assert (fast[0], list(fast[1]), fast[1].count, fast[3]) == \
        (slow[0], list(slow[1]), slow[1].count, slow[3])
    if name == "good":
        assert fast[0] == 8 and fast[3] == [0.5, 0.5] and took_fast
    if name == "nested 40 deep" and piece == 97:
        assert not took_fast  # its one row is longer than a piece
    if name.startswith("two rows merged"):
        assert slow[1].count == 3  # each of the three lines is a bad row

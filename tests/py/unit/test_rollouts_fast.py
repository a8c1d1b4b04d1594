"""A rollout file is read in pieces of whole lines (rollouts._fast_rows; in verl's layout judged by
its shape, rollout_shape.py) and gets the verdict the line-by-line reader gives it, row for row, on
good and on hostile files, in one piece or many."""
import json

import pytest
from twgrpo.checks.postflight import rollout_shape, rollouts


def row(step=3, score=0.5, **extra):
    return json.dumps({"input": "q", "output": "a", "gts": "5", "score": score, "step": step, **extra},
                      ensure_ascii=False)


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
    # The layout verl writes, judged by its shape (rollout_shape.py), and its near misses.
    "escaped quotes and backslashes": "\n".join(row(gts='say \\"#### 5\\" \\\\', note="\\u00e9\\n")
                                              for _ in range(3)) + "\n",
    "a bad escape": row().replace('"q"', '"q\\x"') + "\n",
    "the integer score -0 after 0.0": row().replace("0.5", "0.0") + "\n" + row().replace("0.5", "-0") + "\n",
    "-0.0 then 0.0": row().replace("0.5", "-0.0") + "\n" + row().replace("0.5", "0.0") + "\n",
    "a step of 33 in the file of step 3": row(step=33) + "\n",
    "a second score key (the last one counts)": row()[:-1] + ', "score": 1.0}' + "\n",
    "an escaped key that reads score": row().replace('"gts"', '"sc\\u006fre"') + "\n",
    "an empty input": row().replace('"q"', '""') + "\n",
    "an input of one escaped quote": row().replace('"q"', '"\\""') + "\n",
    "a tab between the fields": row().replace(", ", ",\t") + "\n",
    "a control character in a string": row().replace('"a"', '"a\x01"') + "\n",
    "scores of 19 and 20 digits": row().replace("0.5", "9" * 19) + "\n" + row().replace("0.5", "9" * 20) + "\n",
    "an exponent of 3 digits": row().replace("0.5", "1e300") + "\n",
    "an empty file": "",
    # An escaped pair outside a string or inside a key is no JSON (nor the key it spells out).
    "an escaped backslash between two fields": row().replace('"step": 3}', '"step": 3,\\\\ "note": "x"}') + "\n",
    "an escaped quote in the key step": row().replace('"step"', '"step\\""') + "\n",
    # The JSON reader refuses a row whose parse-cost estimate (bounded.cost) passes its bound.
    "braces in a string past the reader's cost bound": row().replace('"q"', '"' + "{" * 340000 + '"') + "\n",
    # A raw newline inside a string ends the line: two lines, neither of them JSON.
    "a raw newline inside the output": row().replace('"a"', '"a\nb"') + "\n",
    "a raw newline inside the input": row().replace('"q"', '"q\nr"') + "\n",
    "a raw newline inside another key": row().replace('"gts"', '"g\nts"') + "\n",
    "a raw newline inside another value": row().replace('"5"', '"5\n"') + "\n",
}
SHAPED = {"good", "escaped quotes and backslashes", "an input of one escaped quote", "the integer score -0 after 0.0", "-0.0 then 0.0",
          "no final newline", "an empty file"}


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
    shaped = rollout_shape.shaped_rows(path.read_bytes(), 3)
    took_fast = rollouts._fast_rows(path, 3) is not None
    monkeypatch.setattr(rollouts, "_fast_rows", lambda *a: None)  # the line-by-line reader alone
    slow = rollouts._rollout_file(path, 3)
    assert (fast[0], list(fast[1]), fast[1].count, fast[3]) == \
        (slow[0], list(slow[1]), slow[1].count, slow[3])
    if name == "good":
        assert fast[0] == 8 and fast[3] == [0.5, 0.5] and took_fast
    if name == "nested 40 deep" and piece == 97:
        assert not took_fast  # its one row is longer than a piece
    assert (shaped is not None) == (name in SHAPED and rollout_shape._FILE is not None)
    if shaped is not None:
        assert shaped == (fast[0], fast[3])
    if name.startswith("the integer score -0") or name.startswith("-0.0"):
        assert str(fast[3][0]) == str(slow[3][0])  # 0.0 or -0.0 as the JSON reader read it first
    if name.startswith("two rows merged"):
        assert slow[1].count == 3  # each of the three lines is a bad row


ALPHABET = ['"', "\\", "\n", ",", ":", " ", "{", "}", "[", "]", "0", "1", "9", "-", ".", "e", "E",
            "+", "u", "n", "t", "a", "é", "\u2028", "\x00", "\t", "score", "step", '"step": 3',
            '"score": ', "\\u0022", "\\\\", '\\"', "null", "true", "1e400", "\r"]


def mutated(rng, text):
    for _ in range(rng.randrange(1, 3)):
        at = rng.randrange(len(text) + 1)
        change = rng.randrange(3)
        if change == 0:  # insert
            text = text[:at] + rng.choice(ALPHABET) + text[at:]
        elif change == 1:  # delete a few characters
            text = text[:at] + text[at + rng.randrange(1, 4):]
        else:  # replace one
            text = text[:at] + rng.choice(ALPHABET) + text[at + 1:]
    return text


@pytest.mark.skipif(rollout_shape._FILE is None, reason="Python before 3.11: no shape, the JSON reader reads all")
@pytest.mark.parametrize("seed", range(6))
def test_what_the_shape_takes_the_json_reader_passes_with_the_same_rows_and_scores(tmp_path, seed,
                                                                                monkeypatch):
    """Mutated files of verl's layout: whenever the shape judges one, the line-by-line reader
    finds no bad row, and the same rows and [min, max] score."""
    import random
    rng = random.Random(seed)
    monkeypatch.setattr(rollouts, "_fast_rows", lambda *a: None)  # the line-by-line reader alone
    path = tmp_path / "3.jsonl"
    taken = 0
    for _ in range(800):
        good = "".join(row(score=rng.choice([0.5, -0.0, 0, 1e-5, 12]), note="x") + "\n"
                       for _ in range(rng.randrange(1, 4)))
        data = mutated(rng, good).encode("utf-8")
        shaped = rollout_shape.shaped_rows(data, 3)
        if shaped is None:
            continue
        taken += 1
        path.write_bytes(data)
        slow = rollouts._rollout_file(path, 3)
        assert (shaped, slow[1].count) == ((slow[0], slow[3]), 0), data
        assert [str(v) for v in shaped[1]] == [str(v) for v in slow[3]], data  # -0.0 stays -0.0
    assert taken > 25  # the mutations leave many files in the shape: the comparison is exercised

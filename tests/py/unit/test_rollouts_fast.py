"""A rollout file is read in pieces of whole lines (rollouts._fast_rows; in verl's layout judged by
its shape, formats/rolloutshape.py) and gets the verdict the line-by-line reader gives it, row for row, on
good and on hostile files, in one piece or many."""
import json

import pytest
from twgrpo.checks.postflight import rollouts
from twgrpo.formats import rolloutshape


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
    # The layout verl writes, judged by its shape (formats/rolloutshape.py), and its near misses.
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
    shaped = rolloutshape.shaped_rows(path.read_bytes(), 3)
    took_fast = rollouts._fast_rows(path, 3) is not None
    monkeypatch.setattr(rollouts, "_fast_rows", lambda *a: None)  # the line-by-line reader alone
    slow = rollouts._rollout_file(path, 3)
    assert (fast[0], list(fast[1]), fast[1].count, fast[3]) == \
        (slow[0], list(slow[1]), slow[1].count, slow[3])
    if name == "good":
        assert fast[0] == 8 and fast[3] == [0.5, 0.5] and took_fast
    if name == "nested 40 deep" and piece == 97:
        assert not took_fast  # its one row is longer than a piece
    assert (shaped is not None) == (name in SHAPED and rolloutshape._FILE is not None)
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


@pytest.mark.skipif(rolloutshape._FILE is None, reason="Python before 3.11: no shape, the JSON reader reads all")
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
        shaped = rolloutshape.shaped_rows(data, 3)
        if shaped is None:
            continue
        taken += 1
        path.write_bytes(data)
        slow = rollouts._rollout_file(path, 3)
        assert (shaped, slow[1].count) == ((slow[0], slow[3]), 0), data
        assert [str(v) for v in shaped[1]] == [str(v) for v in slow[3]], data  # -0.0 stays -0.0
    assert taken > 25  # the mutations leave many files in the shape: the comparison is exercised


@pytest.mark.skipif(rolloutshape._FILE is None, reason="Python before 3.11: no shape, the JSON reader reads all")
@pytest.mark.parametrize("seed", range(4))
def test_files_matched_together_get_what_each_gets_alone(seed):
    """rolloutshape.shaped_files joins small files for one match: on groups of good, mutated
    and hostile files (with steps of their own) each file's answer is shaped_rows's alone."""
    import random
    rng = random.Random(seed)
    hostile = [text.encode("utf-8") for text in CASES.values() if text is not None] + [b"\xff\n", b"\\", b'"\n']
    joined = 0
    for _ in range(300):
        files, steps = [], []
        for _ in range(rng.randrange(1, 9)):
            step = rng.choice([3, 4, 33])
            good = "".join(row(step=step, score=rng.choice([0.5, -0.0, 0, 12])) + "\n" for _ in range(rng.randrange(0, 3)))
            pick = rng.randrange(10)
            data = (good.encode() if pick < 6 else mutated(rng, good).encode("utf-8") if pick < 9
                    else rng.choice(hostile))
            files.append(data)
            steps.append(step)
        alone = [rolloutshape.shaped_rows(data, step) for data, step in zip(files, steps)]
        assert rolloutshape.shaped_files(files, steps) == alone, (files, steps)
        together = rolloutshape._in_shape(b"".join(files))
        joined += together is not None and all(f.endswith(b"\n") or not f for f in files) and len(files) > 1
    assert joined > 30  # many groups were matched joined: the comparison is exercised


def test_a_group_of_good_files_is_matched_once(monkeypatch):
    """The joined match answers for every file: no file is matched alone."""
    files = [("\n".join(row(step=step) for _ in range(4)) + "\n").encode() for step in range(10, 20)]
    monkeypatch.setattr(rolloutshape, "shaped_rows", lambda *a: pytest.fail("a file matched alone"))
    tallies = rolloutshape.shaped_files(files, list(range(10, 20)))
    assert tallies == ([(4, [0.5, 0.5])] * 10 if rolloutshape._FILE is not None else [None] * 10)


def test_steps_judged_in_groups_give_what_each_file_gives(tmp_path, monkeypatch):
    """_judge_steps reads small files in groups (_small_files); missing, unreadable, large,
    growing-free hostile and wrong-step files among them get the findings the one-file reader
    gives, at every position of a group."""
    monkeypatch.setattr(rollouts, "BATCH_STEPS", 5)
    monkeypatch.setattr(rollouts, "SMALL_FILE", 4096)
    texts = [t for t in CASES.values() if t is not None]
    for step in range(1, 41):
        path = tmp_path / f"{step}.jsonl"
        kind = step % 7
        if kind == 0:
            continue  # missing
        if kind == 1:
            path.mkdir()  # not a file
        elif kind == 2:
            path.write_text("\n".join(row(step=step) for _ in range(80)) + "\n")  # past SMALL_FILE
        elif kind == 3:
            path.write_text(texts[step % len(texts)].replace('"step": 3', f'"step": {step}'))
        else:
            path.write_text("\n".join(row(step=step) for _ in range(4)) + "\n")
    folder = str(tmp_path) + "/"
    grouped = rollouts._judge_steps(folder, 1, 40, 4, (3, 38))
    taken = rollouts._small_files(folder, range(1, 41))
    monkeypatch.setattr(rollouts, "_small_files", lambda folder, steps: {})
    alone = rollouts._judge_steps(folder, 1, 40, 4, (3, 38))
    assert grouped == alone
    if rolloutshape._FILE is not None:  # the groups took the small good files, and only good ones
        assert {s for s in range(1, 41) if s % 7 > 3} <= taken.keys() <= {s for s in range(1, 41) if s % 7 > 2}
    assert grouped[2]["steps"] == 40 - 5 - 6 and any(f.id == "POST-E019" for f in grouped[0])

"""JSON nesting measured on the bytes (formats/bounded.depth) drops quoted strings cheaply first:
on any text it gives the depth the plain quoted-string pass gives, quotes and escapes included."""
import random

from twgrpo.formats import bounded


def reference(data, most=bounded.MAX_DEPTH):
    """depth() as it reads without the shortcut: every quoted string dropped by the pattern."""
    openers = data.count(b"[") + data.count(b"{")
    if openers <= most:
        return openers
    if b"\\" in data:
        data = bounded._ESCAPE.sub(b"", data)
    quoted = data.translate(bounded._OPENERS, bounded._NOT_STRUCTURE)
    brackets = bounded._QUOTED.sub(b"", quoted).replace(b'"', b"")
    for level in range(most):
        if not brackets:
            return level
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return -1
        brackets = shorter
    return most + 1 if brackets else most


def test_the_shortcut_gives_the_reference_depth_on_random_texts():
    rng = random.Random(7)
    seen = set()
    for _ in range(3000):
        size = rng.randrange(0, 120)
        data = bytes(rng.choice(b'""""[[]]{}a\\') for _ in range(size))
        got = bounded.depth(data, most=3)
        assert got == reference(data, most=3), data
        seen.add(got)
    assert {-1, 0, 1, 2, 3, 4} <= seen


def test_strings_with_and_without_brackets_side_by_side():
    text = b'{"a": "", "b": "[[", "c": ["x", "", "]]"], "d": {"e": [[[[]]]]}}'
    assert bounded.depth(text, most=3) == reference(text, most=3) == 4
    unterminated = b'["[""'  # the last string never ends: its bracket is counted, as before
    assert bounded.depth(unterminated, most=0) == reference(unterminated, most=0) == 1


def test_costs_more_answers_as_cost_does_without_counting_small_texts():
    """costs_more skips the counting passes for a text too short to cost that much (a rollout
    file, 100,000 times a long run); it must answer as cost() > memory on any text."""
    import random
    rng = random.Random(5)
    for _ in range(3000):
        data = bytes(rng.choice(b'[{,: a"') for _ in range(rng.randrange(0, 400)))
        for memory in (0, 3, 100, 1000, 20_000, 110_000, bounded.MEMORY):
            assert bounded.costs_more(data, memory) == (bounded.cost(data) > memory), (data, memory)
    assert bounded.costs_more(b"[" * 400_000, bounded.MEMORY)  # 80 MB of dicts: refused

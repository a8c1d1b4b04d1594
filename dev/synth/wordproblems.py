"""Synthetic GSM8K-style arithmetic problems with worked answers, reproducible from a seed."""
from __future__ import annotations

import random
from typing import List, Tuple

NAMES = ("Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goro", "Hana", "Ivan", "Jules")
ITEMS = ("apples", "marbles", "stickers", "books", "pencils", "cookies", "stamps", "shells")


def synthetic_problem(rng: random.Random) -> Tuple[str, str]:
    """One arithmetic word problem and its GSM8K-style worked answer."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(2, 60), rng.randint(2, 12)
    kind = rng.randrange(4)
    if kind == 0:
        question = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
        expr, result = f"{a}+{b}", a + b
    elif kind == 1:
        a += b
        question = f"{name} had {a} {item} and gave {b} away. How many {item} are left?"
        expr, result = f"{a}-{b}", a - b
    elif kind == 2:
        question = f"A bag holds {a} {item}. How many {item} are in {b} bags?"
        expr, result = f"{a}*{b}", a * b
    else:
        question = (f"{name} shares {a * b} {item} equally among {b} friends. "
                    f"How many {item} does each friend get?")
        expr, result = f"{a * b}/{b}", a
    answer = f"{name} computes {expr} = <<{expr}={result}>>{result}.\n#### {result}"
    return question, answer


def synthetic_split(seed: int, split: str, rows: int) -> List[Tuple[str, str]]:
    rng = random.Random(f"{seed}-{split}")
    return [synthetic_problem(rng) for _ in range(rows)]

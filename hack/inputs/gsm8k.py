"""GSM8K rows in verl v0.6 form, and synthetic GSM8K-style problems for generated inputs.

The verl row: data_source "openai/gsm8k", the question plus an instruction as one user message,
ability "math", a rule reward whose ground truth is the number after "####" (commas removed),
and extra_info {split, index, answer, question}.
"""
from __future__ import annotations

import random
import re
from typing import Dict, List, Tuple

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
FINAL = re.compile(r"#### (\-?[0-9\.\,]+)")


class ConversionError(ValueError):
    pass


def ground_truth(answer: str) -> str:
    match = FINAL.search(answer)
    if not match:
        raise ConversionError(f"answer has no '#### <number>' line: {answer[-80:]!r}")
    return match.group(1).replace(",", "")


def to_verl_row(question: str, answer: str, split: str, index: int) -> Dict[str, object]:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": ground_truth(answer)},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
    }


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

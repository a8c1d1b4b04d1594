"""GSM8K rows in verl v0.6 form.

The verl row: data_source "openai/gsm8k", the question plus an instruction as one user message,
ability "math", a rule reward whose ground truth is the number after "####" (commas removed),
and extra_info {split, index, answer, question}.
"""
from __future__ import annotations

import re
from typing import Dict

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

#!/usr/bin/env python3
"""Summary: A data converter for make prepare-inputs: question/answer CSV files to verl's RL parquet.

Usage: python3 csv_to_verl.py OUT_DIR SOURCE_DIR

prepare-inputs runs the profile's DATA_CONVERTER like this, with OUT_DIR a fresh staging folder
and SOURCE_DIR the make knob DATA_SOURCE. SOURCE_DIR holds train.csv and test.csv, each with a
header line `question,answer`. Every row becomes one verl row: verl's RLHFDataset renders
`prompt` (chat messages) and its reward manager scores the response by `data_source` against
`reward_model.ground_truth`; `ability` and `extra_info` are kept for the record.
Needs pyarrow (pip install pyarrow), as verl's own data scripts do.
"""
import csv
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# verl's built-in rule scorer for this data source reads the number after "####"; data of your
# own with another data_source is scored by your REWARD_FILE.
DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def verl_row(question: str, answer: str, split: str, index: int) -> dict:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer.strip()},
        "extra_info": {"split": split, "index": index},
    }


def main(out_dir: str, source_dir: str) -> int:
    for split in ("train", "test"):
        with open(Path(source_dir) / f"{split}.csv", newline="", encoding="utf-8") as stream:
            rows = [verl_row(r["question"], r["answer"], split, i)
                    for i, r in enumerate(csv.DictReader(stream))]
        pq.write_table(pa.Table.from_pylist(rows), Path(out_dir) / f"{split}.parquet")
        print(f"{split}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))

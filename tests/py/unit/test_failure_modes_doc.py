"""docs/failure-modes.md stays true: one row per FM01-FM59, every finding id it names is in the
catalog and named by a test file the row lists, and its headline count is the table's."""
import re
from pathlib import Path

from twgrpo.run.catalog import CATALOG

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "failure-modes.md"
ROW = re.compile(r"^\| (FM\d\d) \| [^|]+ \| (before|before \(partial\)|after|n/a) \| ([^|]+) \| ([^|]+) \|$")
ID = re.compile(r"\b[A-Z]+-[EW]\d{3}\b")


def rows():
    return [ROW.match(line).groups() for line in DOC.read_text().splitlines() if ROW.match(line)]


def test_one_row_per_failure_mode():
    assert [fm for fm, *_ in rows()] == [f"FM{i:02d}" for i in range(1, 60)]


def test_every_id_is_in_the_catalog_and_named_by_a_listed_test():
    problems = []
    for fm, _, findings, tests in rows():
        files = [name.strip() for name in tests.split(",")]
        texts = []
        for name in files:
            found = [REPO / "tests" / "bats" / name] if name.endswith(".bats") else \
                [REPO / "tests" / "py" / room / name for room in ("unit", "functional")]
            found = [path for path in found if path.is_file()]
            assert found, f"{fm}: {name}"
            path = found[0]
            texts.append(path.read_text())
        for fid in ID.findall(findings):
            if fid not in CATALOG:
                problems.append(f"{fm}: {fid} is not in the catalog")
            elif not any(fid in text for text in texts):
                problems.append(f"{fm}: no listed test names {fid}")
    assert problems == []


def test_the_headline_count_is_the_tables():
    classes = [cls for _, cls, *_ in rows()]
    before = sum(cls.startswith("before") for cls in classes)
    applicable = sum(cls != "n/a" for cls in classes)
    assert f"**Caught before GPU time: {before} of the {applicable} modes that can occur**" in DOC.read_text()
    assert before >= 52

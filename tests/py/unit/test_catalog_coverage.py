"""Every finding id in the catalog is named by at least one test that plants its fault, and no
test names an id the catalog does not have."""
import re
from pathlib import Path

from twgrpo.run.catalog import CATALOG

TESTS = Path(__file__).resolve().parents[2]
# Any id of a family the catalog has (LAUNCH, INP, PRE, POST, ...): a new family is searched too.
ID = re.compile(r"\b(?:%s)-[EW]\d{3}\b" % "|".join(sorted({fid.split("-")[0] for fid in CATALOG})))


def searched_files():
    here = Path(__file__).resolve()
    return [p for p in sorted(TESTS.glob("py/**/*.py")) + sorted(TESTS.glob("bats/*.bats")) if p != here]


def named_ids():
    return {fid: path.name for path in searched_files()
            for fid in ID.findall(path.read_text(encoding="utf-8"))}


def test_every_catalog_id_is_exercised_by_a_test():
    named = named_ids()
    assert [fid for fid in CATALOG if fid not in named] == []


def test_tests_name_only_ids_the_catalog_has():
    assert {fid: name for fid, name in named_ids().items() if fid not in CATALOG} == {}

"""The catalog is written in one part per phase (twgrpo/run/catalog_<phase>.py): an id written in
two parts would silently keep only the later hint, so no id may be in more than one."""
from types import SimpleNamespace

from twgrpo.run.catalog import CATALOG, PARTS


def shared_ids(parts):
    """Every id that more than one part writes, with the parts' names."""
    seen, shared = {}, []
    for part in parts:
        for fid in part.ENTRIES:
            if fid in seen:
                shared.append(f"{fid} in {seen[fid]} and {part.__name__}")
            seen.setdefault(fid, part.__name__)
    return shared


def test_no_id_is_written_in_two_parts():
    assert shared_ids(PARTS) == []
    assert len(CATALOG) == sum(len(part.ENTRIES) for part in PARTS)


def test_an_id_written_twice_is_named():
    first = SimpleNamespace(__name__="catalog_a", ENTRIES={"GEN-E001": ("a", "b")})
    second = SimpleNamespace(__name__="catalog_b", ENTRIES={"GEN-E001": ("c", "d")})
    assert shared_ids([first, second]) == ["GEN-E001 in catalog_a and catalog_b"]

"""run/findinggroups.py: findings of one id told once, in the order their ids first came."""
from twgrpo.run.findinggroups import grouped
from twgrpo.run.findings import Finding


def test_groups_keep_the_first_findings_of_each_id_and_count_every_one():
    items = [("c", Finding("A-E001", str(n), "m")) for n in range(12)]
    items.insert(3, ("c", Finding("A-W002", "x", "m", hint="")))
    items.append(("d", Finding("A-E001", "y", "m")))
    groups = grouped(items, shown=2)
    assert [(g.where, g.id, [f.obj for f in g.shown], g.total, g.more) for g in groups] == [
        ("c", "A-E001", ["0", "1"], 12, 10), ("c", "A-W002", ["x"], 1, 0), ("d", "A-E001", ["y"], 1, 0)]
    assert [g.level for g in groups] == ["error", "warning", "error"]


def test_a_groups_hint_is_its_first_findings_that_has_one():
    groups = grouped([("c", Finding("A-E001", "a", "m", hint="")), ("c", Finding("A-E001", "b", "m", hint="fix"))])
    assert groups[0].hint == "fix"


def test_totals_name_the_groups_a_reader_kept_none_of():
    groups = grouped([("c", Finding("A-E001", "a", "m"))], totals={("c", "A-E001"): 5, ("c", "A-E002"): 3})
    assert [(g.id, len(g.shown), g.total) for g in groups] == [("A-E001", 1, 5), ("A-E002", 0, 3)]

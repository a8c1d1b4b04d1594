"""README is the user's manual: its tables and commands must match the code."""
import re
from pathlib import Path

from twgrpo.run.catalog import CATALOG
from twgrpo.cli import main

REPO = Path(__file__).resolve().parents[3]
README = (REPO / "README.md").read_text(encoding="utf-8")
BUNDLE = REPO / "tools" / "verl" / "two-worker-grpo"
# Any id of a family the catalog has: a new family is searched too.
ID = re.compile(r"\b(?:%s)-[EW]\d{3}\b" % "|".join(sorted({fid.split("-")[0] for fid in CATALOG})))


def test_docs_findings_is_the_catalog(capsys):
    main(["catalog", "--page"])
    page = capsys.readouterr().out
    assert "| `LAUNCH-E000` |" in page
    assert (REPO / "docs" / "findings.md").read_text(encoding="utf-8") == page, \
        "docs/findings.md differs from the catalog: run make findings-doc"


def test_readme_links_the_finding_table_and_does_not_copy_it():
    assert "docs/findings.md" in README
    assert "| `LAUNCH-E000` |" not in README


def test_every_id_the_code_raises_is_in_the_catalog_and_every_catalog_id_is_raised():
    used = set()
    # prep/: install, Driver command, submit, rayjob, sbatch's script; dev/: make smoke's environment
    for path in [*BUNDLE.rglob("*"), *(REPO / "prep").rglob("*.py"), *(REPO / "prep").rglob("*.bash"),
                 *(REPO / "dev").rglob("*.py")]:
        if path.suffix in (".py", ".sh", ".bash") and not path.name.startswith("catalog"):
            used |= set(ID.findall(path.read_text(encoding="utf-8")))
    assert used - set(CATALOG) == set(), "ids raised but not documented"
    assert set(CATALOG) - used == set(), "ids documented but never raised"


def test_every_make_target_the_readme_names_exists():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))
    named = set(re.findall(r"\bmake ([a-z][a-z0-9-]+)", README))
    assert named - targets == set()
    assert {"smoke", "test"} <= named


def test_readme_is_short_and_links_the_detail():
    assert len(README.splitlines()) <= 250
    for page in ("docs/phases.md", "docs/development.md", "docs/findings.md"):
        assert page in README and (REPO / page).is_file()

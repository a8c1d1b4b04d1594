#!/usr/bin/env python3
"""Summary: Count passed, failed and skipped tests over the TAP and JUnit results of tests/run.sh.

Usage: tests/summarize.py RESULTS_DIR     (prints one line; exit 1 if any failed or none ran)
"""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def tap(path: Path):
    passed = failed = skipped = 0
    if not path.is_file():
        return 0, 1, 0  # a suite that wrote nothing counts as a failure
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("ok "):
            if "# skip" in line.lower():
                skipped += 1
            else:
                passed += 1
        elif line.startswith("not ok "):
            failed += 1
    return passed, failed, skipped


def junit(path: Path):
    if not path.is_file():
        return 0, 1, 0
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            failed += 1
        elif "skipped" in kinds:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main() -> int:
    results = Path(sys.argv[1])
    counts = [tap(results / "shellcheck.tap"), tap(results / "bats.tap"), junit(results / "pytest.xml")]
    passed, failed, skipped = (sum(c[i] for c in counts) for i in range(3))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    raise SystemExit(main())

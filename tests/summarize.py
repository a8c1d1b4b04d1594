#!/usr/bin/env python3
"""Summary: Count passed, failed and skipped tests over the TAP and JUnit results of tests/run.sh.

Usage: tests/summarize.py RESULTS_DIR     (prints one line; exit 1 if any failed or none ran)

A TAP file must hold its plan (1..N) and N results; a JUnit file must exist and parse.
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


PLAN = re.compile(r"^1\.\.(\d+)")


def tap(path: Path):
    """(passed, failed, skipped); the plan line says how many tests must report, so a suite
    that died midway counts each test that never reported as failed (no plan: one failure)."""
    passed = failed = skipped = 0
    if not path.is_file():
        return 0, 1, 0  # a suite that wrote nothing counts as a failure
    planned = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        plan = PLAN.match(line)
        if plan and planned is None:
            planned = int(plan.group(1))
        elif line.startswith("ok "):
            if "# skip" in line.lower():
                skipped += 1
            else:
                passed += 1
        elif line.startswith("not ok "):
            failed += 1
    reported = passed + failed + skipped
    if planned is None:
        failed += 1
    elif reported != planned:
        failed += max(planned - reported, 1)
    return passed, failed, skipped


def junit(path: Path):
    if not path.is_file():
        return 0, 1, 0
    passed = failed = skipped = 0
    try:
        cases = list(ET.parse(path).getroot().iter("testcase"))
    except ET.ParseError:  # cut off while written
        return 0, 1, 0
    for case in cases:
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

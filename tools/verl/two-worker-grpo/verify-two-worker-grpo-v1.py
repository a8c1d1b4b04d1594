#!/usr/bin/env python3
# Summary: Verify a verl GRPO run: inputs, preflight (Ray probes), postflight (artifacts).
# Usage: verify-two-worker-grpo-v1.py PHASE [--profile NAME] [options]   (PHASE --help for more)
#
# Standard library only; ray is imported only by the preflight's cluster probe.
# Exit codes: 0 every check passed, 1 a check failed, 2 usage error or missing input.
import os
import sys

if sys.version_info < (3, 8):
    sys.exit("verify-two-worker-grpo-v1: needs Python 3.8 or newer — run it with python3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from twgrpo.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())

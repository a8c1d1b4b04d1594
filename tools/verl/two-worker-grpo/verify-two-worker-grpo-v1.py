#!/usr/bin/env python3
# Summary: Verify a verl GRPO run: inputs, preflight (Ray probes), postflight (artifacts).
# Usage: verify-two-worker-grpo-v1.py PHASE [--profile NAME] [options]   (PHASE --help for more)
#
# Standard library only; ray is imported only by the preflight's cluster probe.
# Run it as `python3 -I -B` (the launcher and the Makefile do): -I keeps the working folder,
# PYTHONPATH and the user's site-packages off sys.path; -B writes no __pycache__ into the bundle.
# Exit codes: 0 every check passed, 1 a check failed, 2 usage error or missing input.
import os
import sys

if sys.version_info < (3, 8):
    sys.exit("verify-two-worker-grpo-v1: needs Python 3.8 or newer — run it with python3")
HERE = os.path.dirname(os.path.realpath(__file__))
# This folder is never on sys.path, so no file beside the verifier (an argparse.py, a json.py)
# can stand in for a standard-library module; the twgrpo package is loaded by its own path, so
# nothing on sys.path can stand in for it either.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != HERE]
sys.dont_write_bytecode = True

import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "twgrpo", os.path.join(HERE, "twgrpo", "__init__.py"),
    submodule_search_locations=[os.path.join(HERE, "twgrpo")])
_package = importlib.util.module_from_spec(_spec)
sys.modules["twgrpo"] = _package
_spec.loader.exec_module(_package)

from twgrpo.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())

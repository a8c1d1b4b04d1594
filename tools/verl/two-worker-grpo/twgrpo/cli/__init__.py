"""The command line of verify-two-worker-grpo-v1.py, on top of every layer (May import: any
layer). parser.py holds every subcommand and option, dispatch.py picks the handler and turns
errors into exit codes; phases.py (the phases, the report, the listings) and launcher.py (what
the launcher asks for) turn the parsed arguments into values once (runargs.py: a RunFolder and
a Profile) and call the phase with them. Nothing below cli/ sees argparse.
"""
from .dispatch import main

__all__ = ["main"]

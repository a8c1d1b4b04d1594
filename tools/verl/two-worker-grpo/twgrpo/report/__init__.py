"""What people read: the run's view model, the self-contained HTML page and its SVG, the text
summary of `make report`, the `make runs` listing, and `make compare` of runs (compare*.py).

May import: formats/, run/, checks/ and other modules of report/; never argparse (cli/ parses
the command line and calls each view with plain values).
"""

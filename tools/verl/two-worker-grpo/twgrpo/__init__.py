"""The two-worker GRPO bundle's verifier: standard library only.

Four layers, one folder each; a layer imports only the layers below it (tests/py/unit/test_imports.py
holds the order):

    formats/  byte-format readers: parquet, TFRecord, torch.save zips, safetensors, logs, sums
    run/      the run model: profile, findings and their catalog, run folder, records, verdict
    checks/   the phases' checks, one room each: inputs, rules, preflight with its rounds and
              node-side probes, postflight, checkpoint, resume, the training watchdog
    report/   what people read: the HTML page, its SVG, the text summary, the runs listing

cli/ (the command line: its parser, the dispatch, and each phase's glue, phases.py and, for the
launcher, launcher.py) sits on top and may import any layer; it turns the parsed arguments into
values once (a RunFolder, the Profile, keyword options), so nothing below it sees argparse.
Every check is a function ``check_<thing>(ctx) -> list[Finding]``; all checks of a phase run
and are reported. ``ray`` is imported only in what talks to the cluster (the preflight
phase, its rounds and node-side probes, the checkpoint fan-out and the watchdog's evidence).
"""

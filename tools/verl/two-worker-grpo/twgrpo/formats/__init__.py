"""Byte-format readers: parquet footers, TFRecord/Event files, torch.save zips, safetensors
headers, verl's training log, SHA256SUMS files, bounded JSON and lines.

They know nothing of runs, profiles or findings: each returns values or raises its own error.
May import: the standard library and other modules of formats/ only.
"""

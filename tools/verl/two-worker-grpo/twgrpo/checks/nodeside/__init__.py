"""What runs on a node inside a Ray task: the probes and one collective rank. The standard library and the image's packages only (isolated.py)."""

"""The phases' checks, one module a phase (inputs, preflight with its node probe, resume,
postflight with its checkpoint and placement parts): each check a small named function that
returns findings.

May import: formats/, run/ and other modules of checks/; ray only inside the cluster probe
and the in-job shard fan-out (fanout.py, with postflight --fan-out).
"""

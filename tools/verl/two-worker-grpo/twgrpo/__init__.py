"""The two-worker GRPO bundle's verifier: standard library only.

Every check is a function ``check_<thing>(ctx) -> list[Finding]``; all checks of a phase
run and are reported. ``ray`` is imported only inside the cluster probe (preflight).
"""

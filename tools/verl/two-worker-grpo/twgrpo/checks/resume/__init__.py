"""Resuming: a retry's next attempt, RESUME_FROM, liveness, and postflight's view of a resumed run."""

"""Reading a run's verification.json the way the postflight tests compare verdicts."""
import json


def failed_ids(run):
    """The ids of every error finding in RUN/verification.json."""
    record = json.loads((run / "verification.json").read_text())
    return {f["id"] for c in record["checks"] for f in c["findings"] if f["level"] == "error"}

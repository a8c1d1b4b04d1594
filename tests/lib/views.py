"""Every view's status of one run folder, each through that view's own entry point: make runs
(its row), make report (the view its page and summary are drawn from), make audit (the recorded
verdict it prints, and its exit code) and make submit (the run folder's verdict it reports)."""
import contextlib
import io
import re
from pathlib import Path

from prep import outcome
from twgrpo.cli import main
from twgrpo.report import runs, summary
from twgrpo.run.runfolder import RunFolder

STAYS = re.compile(r"the run's recorded verdict stays ([A-Z]+) ")


def quiet(argv):
    """main(argv)'s exit code and what it printed (stdout and stderr together)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


def report_view(root: Path, run_id: str, html: Path):
    """The RunView make report draws its page and summary from (runview.load, caught on its way)."""
    seen = []
    load = summary.runview.load

    def catch(*args, **kwargs):
        seen.append(load(*args, **kwargs))
        return seen[-1]
    summary.runview.load = catch
    try:
        code, text = quiet(["report", "--storage-root", str(root), "--run-id", run_id,
                            "--html", str(html)])
    finally:
        summary.runview.load = load
    return (seen[0] if seen else None), code, text


def statuses(root: Path, run_id: str, html: Path):
    """{view: status} and the audit's exit code and output (for messages)."""
    folder = RunFolder.at(root, run_id).path
    view, _, _ = report_view(root, run_id, html)
    audit_code, audit_text = quiet(["postflight", "--audit", "--storage-root", str(root),
                                    "--run-id", run_id])
    stays = STAYS.search(audit_text)
    found = {"runs": runs.run_row(folder)["verdict"].split()[0],
             "report": view.verdict.status if view else None,
             "audit": stays.group(1) if stays else None,
             "submit": outcome.folder_verdict(str(root), run_id).status}
    return found, audit_code, audit_text

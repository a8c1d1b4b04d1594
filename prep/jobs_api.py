"""The Ray Jobs REST API of a Ray head's dashboard (http://<head>:8265), standard library only.

Four calls: POST /api/jobs/ (submit), GET /api/jobs/<id> (status), GET /api/jobs/<id>/logs
(the log so far) and POST /api/jobs/<id>/stop. Every failure becomes one JobsError whose text
is a single line, `(SUB-Ennn) what went wrong`, and whose hint is the catalog's fix for that id.

The server is not trusted to be well-behaved: a redirect is refused (the job server answers
itself; a redirect to another host would send it the job), every call ends within its deadline
however slowly the answer trickles in, every answer is bounded (1 MiB, a log 64 MiB), and what
the server says is printed without terminal control sequences.
"""
from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, Optional

from prep import bundle_layout  # noqa: F401  (puts the bundle's twgrpo on the path)
from twgrpo.run.findings import UsageError, usage

TIMEOUT_S = 10  # one socket operation; the head answers these in milliseconds
DEADLINE_S = 30  # one whole call, however slowly its bytes come; a log gets MIN_RATE more
MIN_RATE = 1024 * 1024  # bytes per second a log answer may take beyond DEADLINE_S
MAX_BODY = 64 * 1024 * 1024  # the largest answer read (a job's whole log comes in one answer)
MAX_ANSWER = 1024 * 1024  # any other answer (version, status, submit, stop)
# Terminal control sequences (CSI, OSC, other escapes) and C0/C1 controls but newline and tab.
CONTROL = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|"
                     r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class JobsError(UsageError):
    """One line, (SUB-Ennn) what went wrong, with the catalog's hint (built by findings.usage, so
    an id the catalog lacks is refused)."""

    def __init__(self, fid: str, text: str):
        made = usage(fid, None, text)
        super().__init__(str(made), made.fid, made.hint, made.obj, made.text)


class TooLarge(Exception):
    """An answer longer than MAX_BODY bytes (a job log too long to fetch whole)."""


def parse_address(address: str) -> str:
    """The job server's base URL from RAY_ADDRESS, or a JobsError saying what form it needs."""
    if not address:
        raise JobsError("SUB-E001", "RAY_ADDRESS is not set")
    parts = urllib.parse.urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = " (ray:// is Ray Client's port, not the job server)" if parts.scheme == "ray" else ""
        raise JobsError("SUB-E002", f"RAY_ADDRESS={address!r} is not an http:// address{hint}")
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise JobsError("SUB-E002", f"RAY_ADDRESS={address!r} has a malformed port") from None
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise JobsError("SUB-E002", f"RAY_ADDRESS={address!r} has a path; the job server is at its "
                        "root")
    return f"{parts.scheme}://{parts.netloc}"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx answer stays an answer (an HTTPError): nothing is sent on to where it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def printable(text: str) -> str:
    """text without terminal control sequences: a server's words cannot move the cursor,
    retitle the window or clear the screen of the terminal they are printed to."""
    return CONTROL.sub("", text)


class JobsClient:
    """The job server at base (from parse_address)."""

    def __init__(self, base: str, timeout: float = TIMEOUT_S, deadline: float = DEADLINE_S):
        self.base = base
        self.timeout = timeout
        self.deadline = deadline

    def _call(self, method: str, path: str, body: Optional[dict] = None,
              limit: int = MAX_ANSWER) -> object:
        """The answer's JSON, read within the call's deadline (a thread of its own does the
        request: urllib's timeout is per socket operation, and a byte every few seconds would
        pass it forever)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        result: Dict[str, object] = {}

        def fetch() -> None:
            try:
                with OPENER.open(request, timeout=self.timeout) as answer:
                    result["raw"] = answer.read(limit + 1)
            except urllib.error.HTTPError as exc:
                result["http"] = (exc.code, exc.headers.get("Location", ""),
                                  exc.read(65536).decode("utf-8", "replace"))
            except Exception as exc:  # noqa: BLE001  (reported below, whatever it is)
                result["error"] = exc

        seconds = self.deadline + (limit / MIN_RATE if limit > MAX_ANSWER else 0)
        worker = threading.Thread(target=fetch, daemon=True)
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            raise JobsError("SUB-E003", f"the Ray job server at {self.base} did not answer "
                            f"{method} {path} within {seconds:.0f} s")
        if "http" in result:
            code, location, text = result["http"]
            self._refuse_redirect(code, location, path)
            raise HttpStatus(code, one_line(text))
        if "error" in result:
            exc = result["error"]
            reason = printable(str(getattr(exc, "reason", exc)))[:300]
            raise JobsError("SUB-E003", f"cannot reach the Ray job server at {self.base} ({reason})")
        raw = result["raw"]
        if len(raw) > limit:
            if limit == MAX_BODY:
                raise TooLarge(path)
            raise JobsError("SUB-E004", f"{self.base}{path} answered more than {limit >> 20} MiB: "
                            "not a Ray job server's answer")
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python goes
            raise JobsError("SUB-E004", f"{self.base}{path} answered, but not with JSON: it is not "
                            "a Ray job server") from None

    def _refuse_redirect(self, code: int, location: str, path: str) -> None:
        if 300 <= code < 400:
            raise JobsError("SUB-E004", f"{self.base}{path} redirected (HTTP {code}) to "
                            f"{printable(location)[:200]!r}: a Ray job server answers itself, so "
                            "nothing is sent on")

    def _fault(self, exc: "HttpStatus", path: str) -> JobsError:
        """A 5xx the call did not recognise: the server's own fault, said as such."""
        return JobsError("SUB-E003", f"the Ray job server at {self.base} failed on {path} "
                         f"(HTTP {exc.code}: {exc.text}): it is reachable but not well")

    def version(self) -> Dict[str, object]:
        """GET /api/version: proves the address is a Ray dashboard with the job server."""
        try:
            answer = self._call("GET", "/api/version")
        except HttpStatus as exc:
            if exc.code >= 500:
                raise self._fault(exc, "/api/version") from None
            raise JobsError("SUB-E004", f"{self.base} answered HTTP {exc.code} to /api/version: it "
                            "is not a Ray job server") from None
        if not isinstance(answer, dict) or "ray_version" not in answer:
            raise JobsError("SUB-E004", f"{self.base} is not a Ray job server (no ray_version in "
                            "/api/version)")
        return answer

    def submit(self, submission_id: str, entrypoint: str, runtime_env: dict,
               metadata: Dict[str, str]) -> str:
        body = {"entrypoint": entrypoint, "submission_id": submission_id,
                "runtime_env": runtime_env, "metadata": metadata}
        try:
            answer = self._call("POST", "/api/jobs/", body)
        except HttpStatus as exc:
            if "already exists" in exc.text:
                raise JobsError("SUB-E005", f"RUN_ID {submission_id} was already submitted to this "
                                "cluster") from None
            if exc.code >= 500:  # Ray says "already exists" with a 500 too: that is read first
                raise self._fault(exc, "/api/jobs/") from None
            raise JobsError("SUB-E006", f"the job server refused the job (HTTP {exc.code}: "
                            f"{exc.text})") from None
        if isinstance(answer, dict) and answer.get("submission_id"):
            return str(answer["submission_id"])
        return submission_id

    def _job(self, method: str, job_id: str, suffix: str = "", limit: int = MAX_ANSWER) -> object:
        """A call about one job: 404 means the cluster has no such job."""
        path = f"/api/jobs/{urllib.parse.quote(job_id)}{suffix}"
        try:
            return self._call(method, path, limit=limit)
        except HttpStatus as exc:
            if exc.code == 404:
                raise JobsError("SUB-E007", f"the cluster at {self.base} has no job {job_id}") from None
            if exc.code >= 500:
                raise self._fault(exc, path) from None
            raise JobsError("SUB-E006", f"{method} {path}: HTTP {exc.code}: {exc.text}") from None

    def status(self, job_id: str) -> Dict[str, object]:
        """The job's status record, its words printable (they reach the terminal)."""
        answer = self._job("GET", job_id)
        if not isinstance(answer, dict) or "status" not in answer:
            raise JobsError("SUB-E004", f"{self.base} sent a job status without 'status'")
        return {key: printable(value) if isinstance(value, str) else value
                for key, value in answer.items()}

    def logs(self, job_id: str) -> str:
        """The job's whole log so far, printable (TooLarge past MAX_BODY)."""
        answer = self._job("GET", job_id, "/logs", MAX_BODY)
        return printable(str(answer.get("logs", ""))) if isinstance(answer, dict) else ""

    def stop(self, job_id: str) -> bool:
        """True when the job was running and is being stopped; False when it had ended."""
        answer = self._job("POST", job_id, "/stop")
        return bool(answer.get("stopped")) if isinstance(answer, dict) else False


class HttpStatus(Exception):
    """An HTTP error answer, turned into a JobsError by the call that knows what it means."""

    def __init__(self, code: int, text: str):
        super().__init__(f"HTTP {code}: {text}")
        self.code = code
        self.text = text


ERROR_LINE = re.compile(r"^\w+(Error|Exception): ")


def one_line(text: str, limit: int = 300) -> str:
    """A server's error text on one line, cut to limit characters: a traceback's last
    `SomeError: ...` line, else its last line longer than one character."""
    lines = [line.strip() for line in text.strip().splitlines() if len(line.strip()) > 1]
    errors = [line for line in lines if ERROR_LINE.match(line)]
    line = printable((errors or lines or ["no message"])[-1])
    return line if len(line) <= limit else line[:limit] + "…"

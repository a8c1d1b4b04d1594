"""The Ray Jobs REST API of a Ray head's dashboard (http://<head>:8265), standard library only.

Four calls: POST /api/jobs/ (submit), GET /api/jobs/<id> (status), GET /api/jobs/<id>/logs
(the log so far) and POST /api/jobs/<id>/stop. Every failure becomes one JobsError whose text
is a single line: `(SUB-Ennn) what went wrong — what to do`.
"""
from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, Optional

TIMEOUT_S = 10  # one request; the head answers these in milliseconds
MAX_BODY = 64 * 1024 * 1024  # the largest answer read (a job's whole log comes in one answer)
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class JobsError(Exception):
    """One line: (SUB-Ennn) what went wrong — what to do."""

    def __init__(self, fid: str, text: str):
        super().__init__(f"({fid}) {text}")
        self.fid = fid


class TooLarge(Exception):
    """An answer longer than MAX_BODY bytes (a job log too long to fetch whole)."""


def parse_address(address: str) -> str:
    """The job server's base URL from RAY_ADDRESS, or a JobsError saying what form it needs."""
    want = "set RAY_ADDRESS=http://<head>:8265, the head's dashboard (job server) address"
    if not address:
        raise JobsError("SUB-E001", f"RAY_ADDRESS is not set — {want}")
    parts = urllib.parse.urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = " (ray:// is Ray Client's port, not the job server)" if parts.scheme == "ray" else ""
        raise JobsError("SUB-E002", f"RAY_ADDRESS={address!r} is not an http:// address{hint} — {want}")
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise JobsError("SUB-E002", f"RAY_ADDRESS={address!r} has a malformed port — {want}") from None
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise JobsError("SUB-E002", f"RAY_ADDRESS={address!r} has a path; the job server is at its "
                        f"root — {want}")
    return f"{parts.scheme}://{parts.netloc}"


class JobsClient:
    """The job server at base (from parse_address)."""

    def __init__(self, base: str, timeout: float = TIMEOUT_S):
        self.base = base
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Optional[dict] = None,
              limit: int = MAX_BODY) -> object:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read(limit + 1)
        except urllib.error.HTTPError as exc:
            text = exc.read(65536).decode("utf-8", "replace")
            raise HttpStatus(exc.code, one_line(text)) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise JobsError("SUB-E003", f"cannot reach the Ray job server at {self.base} ({reason}) "
                            "— check RAY_ADDRESS (http://<head>:8265) and that the head's "
                            "dashboard is up and reachable from this box") from None
        if len(raw) > limit:
            raise TooLarge(path)
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError:
            raise JobsError("SUB-E004", f"{self.base}{path} answered, but not with JSON: it is not "
                            "a Ray job server — set RAY_ADDRESS to the head's dashboard "
                            "(http://<head>:8265)") from None

    def version(self) -> Dict[str, object]:
        """GET /api/version: proves the address is a Ray dashboard with the job server."""
        try:
            answer = self._call("GET", "/api/version")
        except HttpStatus as exc:
            raise JobsError("SUB-E004", f"{self.base} answered HTTP {exc.code} to /api/version: it "
                            "is not a Ray job server — set RAY_ADDRESS to the head's dashboard "
                            "(http://<head>:8265)") from None
        if not isinstance(answer, dict) or "ray_version" not in answer:
            raise JobsError("SUB-E004", f"{self.base} is not a Ray job server (no ray_version in "
                            "/api/version) — set RAY_ADDRESS to the head's dashboard")
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
                                "cluster — set a new RUN_ID for every run, clone or retry (make "
                                f"logs RUN_ID={submission_id} shows that one)") from None
            raise JobsError("SUB-E006", f"the job server refused the job (HTTP {exc.code}: "
                            f"{exc.text}) — fix what it names and submit again") from None
        if isinstance(answer, dict) and answer.get("submission_id"):
            return str(answer["submission_id"])
        return submission_id

    def _job(self, method: str, job_id: str, suffix: str = "") -> object:
        """A call about one job: 404 means the cluster has no such job."""
        path = f"/api/jobs/{urllib.parse.quote(job_id)}{suffix}"
        try:
            return self._call(method, path)
        except HttpStatus as exc:
            if exc.code == 404:
                raise JobsError("SUB-E007", f"the cluster at {self.base} has no job {job_id} — "
                                "check RUN_ID and RAY_ADDRESS (make submit starts a job)") from None
            raise JobsError("SUB-E006", f"{method} {path}: HTTP {exc.code}: {exc.text}") from None

    def status(self, job_id: str) -> Dict[str, object]:
        answer = self._job("GET", job_id)
        if not isinstance(answer, dict) or "status" not in answer:
            raise JobsError("SUB-E004", f"{self.base} sent a job status without 'status' — set "
                            "RAY_ADDRESS to the head's dashboard")
        return answer

    def logs(self, job_id: str) -> str:
        """The job's whole log so far (TooLarge past MAX_BODY)."""
        answer = self._job("GET", job_id, "/logs")
        return str(answer.get("logs", "")) if isinstance(answer, dict) else ""

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
    line = (errors or lines or ["no message"])[-1]
    return line if len(line) <= limit else line[:limit] + "…"

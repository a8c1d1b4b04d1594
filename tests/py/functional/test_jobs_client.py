"""The Ray Jobs client against servers that misbehave (a real HTTP server here): a redirect is
refused and the other host never asked, a trickling answer ends at the call's deadline, bodies
are bounded, a 503 or a huge or deeply nested answer is one line with its finding id and exit 2
(never a traceback), and nothing the server says reaches the terminal as a control sequence."""
import http.server
import json
import threading
import time

import pytest

from prep import jobs_api, submit
from prep.jobs_api import JobsClient, JobsError
from twgrpo.run.catalog import CATALOG


class Hostile(http.server.BaseHTTPRequestHandler):
    """Answers by path: each test sets Hostile.answers[path] = callable(handler)."""
    answers = {}
    seen = []

    def do_GET(self):  # noqa: N802
        Hostile.seen.append(self.path)
        Hostile.answers.get(self.path, lambda h: h.send_error(404))(self)

    do_POST = do_GET

    def log_message(self, *args):
        pass

    def json(self, value, code=200):
        body = value if isinstance(value, bytes) else json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Quiet(http.server.ThreadingHTTPServer):
    """The client hangs up on a huge answer by design: the server's broken pipe is not the
    client's output, so it is not printed into the stderr the tests read."""

    def handle_error(self, request, client_address):
        pass


def serve():
    httpd = Quiet(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def server():
    Hostile.answers, Hostile.seen = {}, []
    httpd, base = serve()
    yield base
    httpd.shutdown()


VERSION = ("/api/version", lambda h: h.json({"ray_version": "2.49.2"}))
STATUS = "/api/jobs/exp-1"


def redirect(target):
    def answer(h):
        h.send_response(302)
        h.send_header("Location", target)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return answer


def test_a_redirect_to_another_host_is_refused_and_nothing_is_sent_there(server):
    other, other_base = serve()
    try:
        Hostile.answers["/api/version"] = redirect(f"{other_base}/api/version")
        with pytest.raises(JobsError, match=r"^\(SUB-E004\) .* redirected \(HTTP 302\)"):
            JobsClient(server).version()
        assert Hostile.seen == ["/api/version"]  # asked once, and the other host never
    finally:
        other.shutdown()


def test_an_answer_that_trickles_in_ends_at_the_calls_deadline(server):
    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(100000):  # a byte every 0.2 s: every read is within the socket timeout
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.2)
    Hostile.answers["/api/version"] = trickle
    caught = []

    def call():
        try:
            JobsClient(server, timeout=1, deadline=1.5).version()
        except JobsError as exc:
            caught.append(str(exc))
    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(30)  # a bound for the test itself; the client gives up at 1.5 s
    assert not caller.is_alive(), "the client is still reading a trickling answer"
    assert caught and caught[0].startswith("(SUB-E003)") and "did not answer" in caught[0]


@pytest.mark.parametrize("body", [json.dumps({"status": "RUNNING", "pad": "x" * (2 << 20)}).encode(),
                                  b"[" * 200_000 + b"]" * 200_000],
                         ids=["a 2 MiB status", "JSON nested 200,000 deep"])
def test_a_huge_or_deep_status_is_one_line_and_exit_2(server, capsys, body):
    Hostile.answers[STATUS] = lambda h: h.json(body)
    with pytest.raises(JobsError, match=r"^\(SUB-E004\)"):
        JobsClient(server).status("exp-1")
    code = submit.main(["stop", "--address", server, "--run-id", "exp-1"])
    err = capsys.readouterr().err
    assert code == 2 and "(SUB-E004)" in err and "Traceback" not in err
    assert err.splitlines()[1:] == [f"    HINT: {CATALOG['SUB-E004'][1]}"]  # one line, its HINT


def test_a_server_failing_with_503_is_named_as_the_servers_fault(server, capsys):
    Hostile.answers["/api/version"] = lambda h: h.json({"error": "busy"}, 503)
    with pytest.raises(JobsError, match=r"^\(SUB-E003\) .*failed on /api/version \(HTTP 503"):
        JobsClient(server).version()
    Hostile.answers[STATUS] = lambda h: h.json({"error": "busy"}, 503)
    code = submit.main(["logs", "--address", server, "--run-id", "exp-1"])
    assert code == 2 and "(SUB-E003)" in capsys.readouterr().err


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m\x9b6n"


def test_the_servers_words_reach_the_terminal_without_control_sequences(server, capsys):
    Hostile.answers[STATUS] = lambda h: h.json({"status": "FAILED", "message": f"oops {ESCAPES}"})
    Hostile.answers[STATUS + "/logs"] = lambda h: h.json({"logs": f"line one\n{ESCAPES}\tend\n"})
    assert submit.main(["logs", "--address", server, "--run-id", "exp-1"]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x9b" not in out + err and "\x07" not in out + err
    assert "line one\nred\tend\n" in out  # the words stay, newlines and tabs too
    assert JobsClient(server).status("exp-1")["message"] == "oops red"


def test_an_error_answer_is_printable_too(server):
    Hostile.answers["/api/jobs/"] = lambda h: h.json(f"ValueError: bad {ESCAPES}".encode(), 400)
    with pytest.raises(JobsError) as caught:
        JobsClient(server).submit("exp-1", "true", {}, {})
    assert "\x1b" not in str(caught.value) and "ValueError: bad red" in str(caught.value)


def test_answers_are_bounded_a_log_by_max_body(server, monkeypatch):
    monkeypatch.setattr(jobs_api, "MAX_BODY", 4 << 20)
    Hostile.answers[STATUS + "/logs"] = lambda h: h.json({"logs": "y" * (5 << 20)})
    with pytest.raises(jobs_api.TooLarge):
        JobsClient(server).logs("exp-1")


def test_a_500_that_says_already_exists_is_the_run_id_taken_not_a_server_fault(server):
    # Ray's job server answers a submission id it has seen with HTTP 500 and this text.
    Hostile.answers["/api/jobs/"] = lambda h: h.json(
        b"Traceback ...\nValueError: Job with submission_id exp-1 already exists. Please use a "
        b"different submission_id.", 500)
    with pytest.raises(JobsError, match=r"^\(SUB-E005\) RUN_ID exp-1 was already submitted"):
        JobsClient(server).submit("exp-1", "true", {}, {})
    Hostile.answers["/api/jobs/"] = lambda h: h.json(b"RuntimeError: the GCS is gone", 500)
    with pytest.raises(JobsError, match=r"^\(SUB-E003\) .*failed on /api/jobs/ \(HTTP 500: RuntimeError"):
        JobsClient(server).submit("exp-1", "true", {}, {})

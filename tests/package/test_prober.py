# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests of src/inferlab/prober.py, the continuity prober of the public route.

The summary maths on hand-made records, and real runs: the prober as its own process against a small threaded
HTTP server on 127.0.0.1 whose answers the test switches (ok, empty, 500, slow, trickling, gone), stopped by
SIGTERM or by ``--max-seconds``.
"""

import json
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.tests.unit.oldpython import require_python
from inferlab import prober

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "src" / "inferlab" / "prober.py"
KEY = "sk-inferlab-test-5f1c9a0e7d"


# --- hand-made records


def request(seq, mono, ok=True, latency=0.1, kind=None, backend="lab-a", message="boom"):
    return {"seq": seq, "sent_at": f"2026-11-30T10:00:{seq:02d}.000Z", "sent_mono": mono,
            "latency_s": latency, "status": 200 if ok else None, "ok": ok,
            "error": None if ok else {"kind": kind, "message": message}, "backend": backend if ok else None,
            "headers": {"x-inferlab-host": backend if ok else None}}


def started(mono=100.0):
    return {"event": "started", "url": "http://127.0.0.1:4000/v1/chat/completions", "model": "large",
            "interval_s": 0.5, "label": "exp", "pid": 4242, "at": "2026-11-30T10:00:00.000Z", "mono": mono}


def stopped(mono, reason="signal"):
    return {"event": "stopped", "reason": reason, "signal": "SIGTERM", "at": "2026-11-30T10:00:09.000Z",
            "mono": mono, "ticks": 6, "unfinished": 0}


def as_lines(*entries):
    return [json.dumps(entry) + "\n" for entry in entries]


# A run of six ticks, written in completion order (seq 3's connection error came back before seq 2's 500).
RUN = [started(100.0),
       request(0, 100.0, latency=0.1),
       request(1, 100.5, latency=0.2, backend="lab-b"),
       request(3, 101.5, ok=False, latency=0.01, kind="connection"),
       request(2, 101.0, ok=False, latency=0.9, kind="http", message="HTTP 500: upstream down"),
       request(4, 102.0, latency=0.3),
       request(5, 102.5, ok=False, latency=None, kind="overrun"),
       stopped(103.7)]


def test_summary_of_a_run():
    summary = prober.summarize(prober.parse_lines(as_lines(*RUN)), budget=0)
    assert summary == {
        "total": 6, "ok": 3, "failed": 3, "failed_by_kind": {"connection": 1, "http": 1, "overrun": 1},
        # completions 100.1, 100.7, 102.3; start 100.0, stop 103.7: the longest stretch without proof is the outage
        "worst_gap_s": 1.6,
        "first_failure": {"seq": 2, "sent_at": "2026-11-30T10:00:02.000Z",
                          "error": {"kind": "http", "message": "HTTP 500: upstream down"}},
        "last_failure": {"seq": 5, "sent_at": "2026-11-30T10:00:05.000Z", "error": {"kind": "overrun",
                                                                                    "message": "boom"}},
        "by_backend": {"lab-a": 2, "lab-b": 1},
        "latency_s": {"median": 0.2, "p99": pytest.approx(0.298), "max": 0.3},
        "budget": 0, "within_budget": False,
        "url": "http://127.0.0.1:4000/v1/chat/completions", "model": "large", "label": "exp", "interval_s": 0.5,
        "started_at": "2026-11-30T10:00:00.000Z", "stopped_at": "2026-11-30T10:00:09.000Z", "stop_reason": "signal",
        "truncated_lines": 0, "malformed_lines": []}


@pytest.mark.parametrize("budget, within", [(0, False), (2, False), (3, True), (10, True)])
def test_budget(budget, within):
    summary = prober.summarize(prober.parse_lines(as_lines(*RUN)), budget)
    assert (summary["budget"], summary["within_budget"]) == (budget, within)


def test_gap_to_the_stop_counts():
    """A route that dies for good after the last success: the gap runs to the stop line."""
    records = [started(10.0), request(0, 10.0, latency=0.5), request(1, 10.5, ok=False, kind="timeout"),
               stopped(20.0)]
    assert prober.summarize(records, 5)["worst_gap_s"] == 9.5


def test_no_success_at_all_is_one_gap_from_start_to_stop():
    records = [started(10.0), request(0, 10.0, ok=False, kind="connection"), stopped(12.25)]
    summary = prober.summarize(records, 0)
    assert (summary["worst_gap_s"], summary["by_backend"], summary["latency_s"]) == (
        2.25, {}, {"median": None, "p99": None, "max": None})


def test_answers_without_a_backend_header_are_counted_as_unknown():
    records = [started(1.0), request(0, 1.0, backend=None), request(1, 1.5, backend="lab-b"), stopped(2.0)]
    assert prober.summarize(records, 0)["by_backend"] == {"unknown": 1, "lab-b": 1}


def test_a_killed_prober_cut_last_line_is_reported_not_failed():
    lines = as_lines(*RUN[:6]) + ['{"seq":5,"sent_at":"2026-11-30T10:0']  # SIGKILL mid-write: no stop, no newline
    records = prober.parse_lines(lines)
    reason = records[-1].pop("reason")
    assert records[-1] == {"event": "unreadable", "line": 7, "cut": True, "text": '{"seq":5,"sent_at":"2026-11-30T10:0'}
    assert reason.startswith("not JSON (Unterminated string")
    summary = prober.summarize(records, 2)
    assert (summary["total"], summary["failed"], summary["within_budget"]) == (5, 2, True)
    assert (summary["truncated_lines"], summary["malformed_lines"]) == (1, [])
    assert (summary["stop_reason"], summary["stopped_at"]) == (None, None)
    assert summary["worst_gap_s"] == 1.6  # up to the last record's end (seq 4: 102.3)


def test_a_bad_line_in_the_middle_is_a_failure_with_its_line_number():
    lines = as_lines(*RUN[:3]) + ["garbage from a second writer\n"] + as_lines(*RUN[3:])
    summary = prober.summarize(prober.parse_lines(lines), 3)
    assert (summary["total"], summary["failed"], summary["within_budget"]) == (7, 4, False)
    assert summary["failed_by_kind"]["unreadable"] == 1
    assert summary["truncated_lines"] == 0
    assert [(bad["line"], bad["text"]) for bad in summary["malformed_lines"]] == [
        (4, "garbage from a second writer")]


@pytest.mark.parametrize("line, reason", [
    ("[1, 2]", "not a JSON object"),
    ('{"event": "restarted"}', "unknown event 'restarted'"),
    ('{"seq": "3", "ok": true, "sent_mono": 1.0}', "no seq (an integer >= 0)"),
    ('{"seq": -1, "ok": true, "sent_mono": 1.0}', "no seq (an integer >= 0)"),
    ('{"seq": true, "ok": true, "sent_mono": 1.0}', "no seq (an integer >= 0)"),
    ('{"seq": 3, "ok": "yes", "sent_mono": 1.0}', "no ok (true or false)"),
    ('{"seq": 3, "ok": true}', "no sent_mono (a number)"),
    ('{"seq": 3, "ok": true, "sent_mono": 1.0, "latency_s": "fast"}', "latency_s is not a number"),
    ('{"seq": 3, "ok": false, "sent_mono": 1.0, "error": "boom"}', "error is not {kind, message}"),
    ('{"seq": 3, "ok": false, "sent_mono": 1.0, "error": null}', "a failed request without an error"),
    ("", "not JSON (Expecting value: line 1 column 1 (char 0))"),
])
def test_lines_that_are_not_prober_lines(line, reason):
    records = prober.parse_lines([line + "\n", json.dumps(stopped(5.0)) + "\n"])
    assert records[0] == {"event": "unreadable", "line": 1, "cut": False, "reason": reason, "text": line}


def test_long_bad_lines_are_cut_in_the_report():
    [record] = prober.parse_lines(["x" * 1000 + "\n"])
    assert record["text"] == "x" * 300 + "... (cut at 300 characters)"


def test_nothing_at_all():
    summary = prober.summarize(prober.parse_lines([]), 0)
    assert {key: summary[key] for key in ("total", "ok", "failed", "worst_gap_s", "first_failure", "by_backend",
                                          "started_at", "stop_reason", "truncated_lines")} == {
        "total": 0, "ok": 0, "failed": 0, "worst_gap_s": None, "first_failure": None, "by_backend": {},
        "started_at": None, "stop_reason": None, "truncated_lines": 0}


@pytest.mark.parametrize("values, q, expected", [
    ([3.0], 99, 3.0), ([4, 1, 3, 2], 50, 2.5), ([1, 2, 3, 4, 5], 25, 2.0), (list(range(101)), 99, 99.0),
    ([0.0, 10.0], 99, 9.9),
])
def test_percentile_is_numpy_linear(values, q, expected):
    assert prober.percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing():
    assert prober.percentile([], 50) is None


# --- judging one answer, the URL, the key file


@pytest.mark.parametrize("status, body, ok, kind", [
    (200, '{"choices": [{"message": {"content": "OK"}}]}', True, None),
    (200, '{"choices": [{"message": {"content": null}}], "usage": {"completion_tokens": 4}}', True, None),
    (200, '{"choices": [{"message": {"content": ""}}], "usage": {"completion_tokens": 0}}', False, "malformed"),
    (200, '{"choices": [], "usage": {"completion_tokens": true}}', False, "malformed"),
    (200, '{"choices": {"message": "OK"}}', False, "malformed"),
    (200, '{"choices": ["OK"]}', False, "malformed"),
    (200, '["OK"]', False, "malformed"),
    (200, "<html>gateway login</html>", False, "malformed"),
    (500, '{"error": "upstream down"}', False, "http"),
    (401, "", False, "http"),
])
def test_judge_answer(status, body, ok, kind):
    judged_ok, error = prober.judge_answer(status, body)
    assert (judged_ok, error and error["kind"]) == (ok, kind)
    if kind:
        assert body in error["message"]


def test_judge_answer_cuts_long_bodies():
    _ok, error = prober.judge_answer(502, "e" * 5000)
    assert error["message"] == "HTTP 502: " + "e" * 300 + "... (cut at 300 characters)"


@pytest.mark.parametrize("url, host, port, path, shown", [
    ("http://127.0.0.1:4000", "127.0.0.1", 4000, "/v1/chat/completions", "http://127.0.0.1:4000/v1/chat/completions"),
    ("http://169.254.77.2:4000/v1/", "169.254.77.2", 4000, "/v1/chat/completions",
     "http://169.254.77.2:4000/v1/chat/completions"),
    ("https://gw.lab/llm", "gw.lab", 443, "/llm/v1/chat/completions", "https://gw.lab/llm/v1/chat/completions"),
    ("http://user:secret@gw.lab:8080", "gw.lab", 8080, "/v1/chat/completions",
     "http://gw.lab:8080/v1/chat/completions"),
])
def test_target(url, host, port, path, shown):
    target = prober.Target(url)
    assert (target.host, target.port, target.path, target.url) == (host, port, path, shown)


@pytest.mark.parametrize("url, message", [
    ("ftp://gw.lab", "--url must be a base URL like"),
    ("gw.lab:4000", "--url must be a base URL like"),
    ("http://gw.lab:99999", "--url has an invalid port"),
    ("http://gw.lab:4000/v1?model=x", "without query or fragment"),
])
def test_bad_urls(url, message):
    with pytest.raises(prober.ProberError, match=message):
        prober.Target(url)


def key_file(tmp_path, mode=0o600, text=KEY + "\n"):
    path = tmp_path / "api_key"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640])
def test_key_file_readable_by_owner_or_group(tmp_path, mode):
    assert prober.read_api_key(key_file(tmp_path, mode)) == KEY


@pytest.mark.parametrize("mode, text, message", [
    (0o644, KEY, "refusing API key file {path}: its mode 0644 lets other users read it; run chmod 600 {path}"),
    (0o602, KEY, "refusing API key file {path}: its mode 0602"),
    (0o600, "\n", "API key file {path} is empty"),
    (0o600, KEY + "\nsecond-key\n", "API key file {path} must hold one key"),
    (0o600, "Bearer " + KEY, "API key file {path} must hold one key"),
])
def test_bad_key_files(tmp_path, mode, text, message):
    path = key_file(tmp_path, mode, text)
    with pytest.raises(prober.ProberError) as raised:
        prober.read_api_key(str(path))
    assert str(raised.value).startswith(message.format(path=path))
    assert KEY not in str(raised.value)


def test_missing_key_file(tmp_path):
    with pytest.raises(prober.ProberError, match=f"cannot read API key file {tmp_path}/nothing: "):
        prober.read_api_key(str(tmp_path / "nothing"))


def test_scrub():
    assert prober.scrub(f"upstream said: bad token Bearer {KEY} ({KEY})", KEY) == \
        "upstream said: bad token Bearer [api key] ([api key])"
    assert prober.scrub("nothing to hide", None) == "nothing to hide"


# --- the command line on files


def run_cli(*args, python=sys.executable):
    return subprocess.run([python, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.fixture
def run_file(tmp_path):
    path = tmp_path / "continuity.jsonl"
    path.write_text("".join(as_lines(*RUN)))
    return path


def test_summary_cli(run_file):
    out = run_cli("summary", run_file, "--budget", "3", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == prober.summarize(prober.parse_lines(as_lines(*RUN)), 3)
    out = run_cli("summary", run_file)
    assert out.returncode == 1
    assert out.stdout.splitlines()[:5] == [
        f"continuity {run_file}: 6 requests, 3 failed (budget 0): OVER BUDGET; last failure seq 5 (overrun)",
        "  failed by kind: connection 1, http 1, overrun 1",
        "  first failure: seq 2 at 2026-11-30T10:00:02.000Z, http: HTTP 500: upstream down",
        "  last failure: seq 5 at 2026-11-30T10:00:05.000Z, overrun: boom",
        "  worst gap between successful answers: 1.600 s"]


@pytest.mark.parametrize("budget, rc, verdict", [("3", 0, "within budget"), ("2", 1, "OVER BUDGET")])
def test_check_cli(run_file, budget, rc, verdict):
    out = run_cli("check", run_file, "--budget", budget)
    assert (out.returncode, out.stdout) == (
        rc, f"continuity {run_file}: 6 requests, 3 failed (budget {budget}): {verdict}; last failure seq 5 "
            "(overrun)\n")


def test_check_cli_unreadable(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = run_cli("check", empty, "--budget", "0")
    assert (out.returncode, out.stderr) == (2, f"prober: {empty} holds no prober records (did the prober start?)\n")
    out = run_cli("check", tmp_path / "missing.jsonl", "--budget", "0")
    assert (out.returncode, out.stderr) == (
        2, f"prober: cannot read {tmp_path}/missing.jsonl: No such file or directory\n")


@pytest.mark.parametrize("args, message", [
    (["check", "x.jsonl"], "the following arguments are required: --budget"),
    (["check", "x.jsonl", "--budget", "-1"], "expected an integer >= 0, got '-1'"),
    (["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output", "o.jsonl", "--interval", "0"],
     "expected a positive number, got '0'"),
    (["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output", "o.jsonl", "--max-tokens", "0"],
     "expected an integer >= 1, got '0'"),
    (["run", "--url", "127.0.0.1:9", "--model", "m", "--output", "o.jsonl"], "--url must be a base URL like"),
])
def test_usage_errors(tmp_path, args, message):
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                         check=False, cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_run_refuses_to_overwrite_records(run_file):
    before = run_file.read_text()
    out = run_cli("run", "--url", "http://127.0.0.1:9", "--model", "m", "--output", run_file, "--max-seconds", "1")
    assert (out.returncode, out.stderr) == (
        2, f"prober: refusing to overwrite {run_file}: it already holds a prober's records\n")
    assert run_file.read_text() == before


# --- real runs against a small gateway


class Gateway:
    """An OpenAI-style endpoint on 127.0.0.1 whose answer the test switches through ``mode``.

    ``ok`` answers with content and an ``x-inferlab-host`` header; ``empty`` is a 200 without an answer; ``error``
    a 500 whose body echoes the Authorization header (as careless gateways do); ``slow`` answers after ``delay``;
    ``trickle`` sends the headers, then one byte of the body every 50 ms.
    """

    def __init__(self, mode="ok", delay=0.0):
        self.mode, self.delay = mode, delay
        self.seen = []  # (path, Authorization, body) per request
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                gateway.seen.append((self.path, self.headers.get("Authorization"), body))
                try:
                    gateway.answer(self)
                except OSError:
                    pass  # the prober hung up (a timeout, or it stopped)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, handler):
        mode = self.mode
        if mode == "slow":
            time.sleep(self.delay)
        if mode == "trickle":
            handler.send_response(200)
            handler.send_header("Content-Length", "100")
            handler.end_headers()
            for _byte in range(100):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.05)
            return
        status, payload = {
            "ok": (200, {"choices": [{"message": {"content": "OK"}}], "usage": {"completion_tokens": 1}}),
            "slow": (200, {"choices": [{"message": {"content": "OK"}}]}),
            "empty": (200, {"choices": [{"message": {"content": ""}}], "usage": {"completion_tokens": 0}}),
            "error": (500, {"error": f"upstream refused {handler.headers.get('Authorization')}"}),
        }[mode]
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-Inferlab-Host", "lab-b")
        handler.end_headers()
        handler.wfile.write(data)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateways():
    opened = []

    def open_one(**kwargs):
        opened.append(Gateway(**kwargs))
        return opened[-1]

    yield open_one
    for gateway in opened:
        gateway.close()


@pytest.fixture
def processes():
    """Probers a test started; killed by PID at the end if still running."""
    started_here = []
    yield started_here
    for process in started_here:
        if process.poll() is None:
            process.kill()
            process.wait()


def read_records(path):
    return [entry for entry in prober.parse_lines(path.read_text().splitlines(keepends=True))
            if entry.get("event") != "unreadable"]


def requests_of(records):
    return [entry for entry in records if "event" not in entry]


def wait_for(path, predicate, what, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and predicate(requests_of(read_records(path))):
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}; the file has:\n{path.read_text()}")


REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


def count(kind):
    return lambda requests: sum(1 for entry in requests if (entry["error"] or {}).get("kind") == kind) >= 3


def test_run_through_ok_empty_error_and_gone_then_sigterm(tmp_path, gateways, processes):
    gateway = gateways(mode="ok")
    output, stderr = tmp_path / "continuity.jsonl", tmp_path / "prober.stderr"
    interval = 0.05
    with open(stderr, "w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "inferlab.prober", "run", "--url", gateway.url, "--model", "large",
             "--output", str(output), "--interval", str(interval), "--timeout", "2",
             "--api-key-file", str(key_file(tmp_path)), "--header", "x-litellm-model-api-base",
             "--header", "X-Inferlab-Host", "--label", "unit test"], cwd=REPO_ROOT, stderr=err)
    processes.append(process)
    wait_for(output, lambda requests: sum(entry["ok"] for entry in requests) >= 5, "5 answers")
    gateway.mode = "empty"
    wait_for(output, count("malformed"), "3 empty answers")
    gateway.mode = "error"
    wait_for(output, count("http"), "3 HTTP 500s")
    gateway.close()
    # connections queued while the server shut down are reset when its socket closes; wait for one refused
    wait_for(output, lambda requests: count("connection")(requests) and any(
        (entry["error"] or {}).get("message") == REFUSED for entry in requests), "3 failed connections, one refused")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0

    text = output.read_text()
    records = read_records(output)
    assert len(records) == len(text.splitlines())  # every line whole
    first, last = records[0], records[-1]
    assert {key: first[key] for key in ("event", "url", "model", "interval_s", "label", "pid")} == {
        "event": "started", "url": gateway.url + "/chat/completions", "model": "large", "interval_s": interval,
        "label": "unit test", "pid": process.pid}
    assert {key: last[key] for key in ("event", "reason", "signal", "unfinished")} == {
        "event": "stopped", "reason": "signal", "signal": "SIGTERM", "unfinished": 0}

    requests = sorted(requests_of(records), key=lambda entry: entry["seq"])
    # the schedule held: every tick is there once, as many as the run lasted, each sent when it was due
    assert [entry["seq"] for entry in requests] == list(range(last["ticks"]))
    assert abs(last["ticks"] - (last["mono"] - first["mono"]) / interval) <= 2
    # the median tick left before the next one was due (half an interval, 25 ms, failed once beside make test's
    # labs on 2 busy CPUs: 26.6 ms)
    lateness = sorted(entry["sent_mono"] - first["mono"] - entry["seq"] * interval for entry in requests)
    assert lateness[len(lateness) // 2] < interval

    ok = [entry for entry in requests if entry["ok"]]
    assert {(entry["status"], entry["backend"], json.dumps(entry["headers"])) for entry in ok} == {
        (200, "lab-b", '{"x-litellm-model-api-base": null, "x-inferlab-host": "lab-b"}')}
    by_kind = {}
    for entry in requests:
        if not entry["ok"]:
            by_kind.setdefault(entry["error"]["kind"], []).append(entry)
    assert {entry["status"] for entry in by_kind["malformed"]} == {200}
    assert {entry["status"] for entry in by_kind["http"]} == {500}
    assert by_kind["http"][0]["error"]["message"] == \
        'HTTP 500: {"error": "upstream refused Bearer [api key]"}'  # the echoed key was scrubbed
    assert {entry["status"] for entry in by_kind["connection"]} == {None}
    # (those in flight or queued when the server went may say "reset by peer")
    assert REFUSED in {entry["error"]["message"] for entry in by_kind["connection"]}
    assert all(entry["latency_s"] >= 0 for entry in requests if entry["error"] is None or
               entry["error"]["kind"] != "overrun")
    assert all(entry["sent_at"].endswith("Z") and len(entry["sent_at"]) == 24 for entry in requests)

    # the key went only into the Authorization header
    assert {auth for _path, auth, _body in gateway.seen} == {f"Bearer {KEY}"}
    assert {path for path, _auth, _body in gateway.seen} == {"/v1/chat/completions"}
    assert all(set(body) == {"model", "messages", "max_tokens"} and body["max_tokens"] == 4 and
               body["model"] == "large" and body["messages"][0]["role"] == "user" for _p, _a, body in gateway.seen)
    log = stderr.read_text()
    assert KEY not in text and KEY not in log
    events = [json.loads(line)["event"] for line in log.splitlines()]
    assert events[0] == "failing" and events[-1] == "stopped"

    out = run_cli("summary", output, "--json")
    summary = json.loads(out.stdout)
    assert out.returncode == 1
    assert summary["total"] == last["ticks"] and summary["ok"] == len(ok)
    assert summary["failed_by_kind"]["malformed"] >= 3 and summary["failed_by_kind"]["connection"] >= 3
    assert summary["by_backend"] == {"lab-b": len(ok)}
    assert summary["stop_reason"] == "signal" and summary["truncated_lines"] == 0
    # from the last success to the stop: the 500s and the refused connections
    assert summary["worst_gap_s"] >= 6 * interval


def test_refuses_a_key_file_others_can_read(tmp_path, gateways):
    gateway = gateways(mode="ok")
    path = key_file(tmp_path, 0o644)
    out = run_cli("run", "--url", gateway.url, "--model", "large", "--output", tmp_path / "c.jsonl",
                  "--api-key-file", path)
    assert (out.returncode, out.stderr) == (
        2, f"prober: refusing API key file {path}: its mode 0644 lets other users read it; run chmod 600 {path}\n")
    assert gateway.seen == [] and not (tmp_path / "c.jsonl").exists()


def test_overrun_and_timeout_then_max_seconds(tmp_path, gateways):
    """Answers slower than the timeout pile up: past MAX_IN_FLIGHT the ticks are skipped as overruns. The interval
    is 0.1 s, not less: a loaded CI machine ran a 0.02 s schedule a tick late and skipped every tick as "behind its
    schedule" before eight requests were ever in flight."""
    gateway = gateways(mode="slow", delay=2.0)
    output = tmp_path / "continuity.jsonl"
    out = run_cli("run", "--url", gateway.url, "--model", "large", "--output", output, "--interval", "0.1",
                  "--timeout", "1.2", "--max-seconds", "1.5")
    assert out.returncode == 0, out.stderr
    records = read_records(output)
    requests = requests_of(records)
    kinds = {entry["error"]["kind"] for entry in requests}
    assert kinds == {"timeout", "overrun"}
    overruns = [entry for entry in requests if entry["error"]["kind"] == "overrun"]
    assert "8 requests still in flight, the most allowed: tick skipped" in {
        entry["error"]["message"] for entry in overruns}
    assert {(entry["status"], entry["latency_s"]) for entry in overruns} == {(None, None)}
    timeout = next(entry for entry in requests if entry["error"]["kind"] == "timeout")
    assert timeout["error"]["message"] == "no complete answer within 1.2 s"
    assert 1.2 <= timeout["latency_s"] < 2  # an answer (2 s) would not be a timeout
    assert records[-1]["reason"] == "max_seconds" and records[-1]["ticks"] == len(requests)


def test_answers_still_coming_at_the_stop_are_written_as_unanswered(tmp_path, gateways):
    """A body trickling in (each read within the timeout) outlives the stop; the stop does not wait forever (one
    more timeout). The first tick is due at the start, so it is sent however late the loop begins (a CI machine once
    began it after a 0.08 s deadline and sent nothing); the interval is wide enough that the loop is not a whole
    interval late. The timeout is wide too: with 0.3 s, a CI machine's answer headers came so late that the body's
    reads had 1 ms left, and the request timed out on its own before the stop."""
    gateway = gateways(mode="trickle")
    output = tmp_path / "continuity.jsonl"
    began = time.monotonic()
    out = run_cli("run", "--url", gateway.url, "--model", "large", "--output", output, "--interval", "0.25",
                  "--timeout", "2", "--max-seconds", "0.3")
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - began < 10  # two Python starts and the stop, on a busy machine
    records = read_records(output)
    requests = requests_of(records)
    # two requests start on time; a busy machine may start only the first before the stop
    unanswered = {"kind": "timeout", "message": "still unanswered when the prober stopped"}
    assert [(entry["seq"], entry["error"]) for entry in requests] == [(0, unanswered), (1, unanswered)][:len(requests)]
    assert records[-1]["unfinished"] == len(requests) >= 1 and records[-1]["reason"] == "max_seconds"


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_runs_on_old_python(tmp_path, gateways, version):
    """A copy of the file alone runs with whatever Python the host has (3.8 is ansible-core 2.19's oldest target)."""
    python = require_python(version)
    gateway = gateways(mode="ok")
    alone = tmp_path / "prober.py"
    alone.write_text(SCRIPT.read_text())
    output = tmp_path / "continuity.jsonl"
    # an interval a busy machine's scheduling does not overrun (a tick a whole interval late is a failure)
    out = subprocess.run([python, "-I", str(alone), "run", "--url", gateway.url, "--model", "large", "--output",
                          str(output), "--interval", "0.25", "--max-seconds", "0.6"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([python, "-I", str(alone), "check", str(output), "--budget", "0"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(f"continuity {output}: ") and " 0 failed (budget 0): within budget" in out.stdout
    assert read_records(output)[-1]["reason"] == "max_seconds"

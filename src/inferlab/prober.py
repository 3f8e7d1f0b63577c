# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The continuity prober: proof that production's public route kept answering while an experiment borrowed its GPUs.

One file of about 650 lines on purpose: it is copied and run on its own (any Python 3.8, the standard library, no
import of this package), so it cannot be split into modules.

It is started before anything is borrowed and stopped (by PID, in ``always:``) after the restore is verified::

    python3 -m inferlab.prober run --url BASE --model NAME --output FILE.jsonl [--interval 0.5] [--timeout 10]
                                   [--max-tokens 4] [--api-key-file PATH] [--header NAME ...]
                                   [--max-seconds 7200] [--label TEXT]
    python3 -m inferlab.prober summary FILE.jsonl [--budget 0] [--json]
    python3 -m inferlab.prober check FILE.jsonl --budget N

``run`` sends a small real request, ``POST BASE/v1/chat/completions`` (non-streaming), every ``--interval`` seconds
on a fixed schedule: tick ``k`` is due at ``start + k * interval`` whatever earlier requests are doing, each request
on its own thread. A tick is skipped and recorded as a failure of kind ``overrun`` when ``MAX_IN_FLIGHT`` requests
are still in flight, or when the prober itself fell a whole interval behind (a stalled host): either way nothing
proved the route during that tick. The output gets one JSON object per line, each written whole and flushed::

    {"event": "started", "url", "model", "interval_s", "timeout_s", "max_seconds", "headers", "label", "pid",
     "at", "mono"}
    {"seq", "sent_at", "sent_mono", "latency_s", "status", "ok", "error", "backend", "headers"}   (one per tick)
    {"event": "stopped", "reason": "signal"|"max_seconds", "signal", "at", "mono", "ticks", "unfinished"}

A request is ``ok`` when the answer is HTTP 200 and ``choices[0].message`` has content or ``usage.completion_tokens``
is above 0. ``error`` is ``{"kind": connection|timeout|http|malformed|overrun, "message"}`` or null. ``headers``
holds the ``--header`` names asked for (value or null) and ``backend`` the first of them present: which backend
served. ``sent_mono`` / ``mono`` are this host's monotonic clock, for gaps; ``sent_at`` / ``at`` are UTC.

SIGTERM or SIGINT (or ``--max-seconds``: an orphaned prober must not run forever) stops it: requests in flight get
up to ``--timeout`` more seconds, those still unanswered are written as ``timeout`` failures, then the ``stopped``
line. The API key (``--api-key-file``, which other users must not be able to read) is sent as
``Authorization: Bearer KEY`` and never written anywhere: it is scrubbed from error text. Problems and changes of
state (failing, recovered) go to stderr as JSON lines. ``http.client`` only, so no proxy from the environment.

``summary`` and ``check`` judge a file against a failure budget (``summarize``); ``check`` is the quick one the
experiment runs between stages, to stop early and go to the restore when the budget is spent.

Exit codes: 0 success (``run`` stopped cleanly; ``summary``/``check`` within budget); 1 ``run`` could not write
its output, or over budget; 2 usage error, refused start (bad URL, unsafe key file, existing output) or a file
that cannot be read or holds no prober records.

Standard library only, Python 3.8 or later, and nothing else from inferlab: the file may be copied alone to a host.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import select
import signal
import socket
import ssl
import stat
import sys
import threading
import time
from urllib.parse import urlsplit

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_HEADERS = ("x-litellm-model-api-base", "x-inferlab-host")
MAX_IN_FLIGHT = 8
TEXT_LIMIT = 300  # characters of a response body or a bad line kept in an error message
NO_BACKEND = "unknown"  # by_backend's key for answers that carried none of the --header names
EVENTS = ("started", "stopped")


class ProberError(Exception):
    """The prober cannot start as asked; nothing was sent."""


def utc_iso(epoch):
    """``2026-11-30T10:00:00.123Z``: the record's wall-clock time, to the millisecond."""
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(epoch))}.{int(epoch * 1000) % 1000:03d}Z"


def cut(text, limit=TEXT_LIMIT):
    if len(text) > limit:
        return f"{text[:limit]}... (cut at {limit} characters)"
    return text


def scrub(text, secret):
    """``text`` without ``secret``: a server may echo the Authorization header back in an error body."""
    return text.replace(secret, "[api key]") if secret else text


class Target:
    """Where requests go: a base URL ``http(s)://HOST:PORT[/PREFIX]``; a trailing ``/v1`` is dropped."""

    def __init__(self, url):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProberError(f"--url must be a base URL like http://169.254.77.2:4000, got {url!r}")
        try:
            port = parts.port
        except ValueError:
            raise ProberError(f"--url has an invalid port: {url!r}") from None
        if parts.query or parts.fragment:
            raise ProberError(f"--url must be a base URL without query or fragment, got {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or (443 if self.scheme == "https" else 80)
        prefix = parts.path.rstrip("/")
        self.path = (prefix[:-3] if prefix.endswith("/v1") else prefix) + "/v1/chat/completions"
        self.url = f"{self.scheme}://{parts.netloc.rpartition('@')[2]}{self.path}"  # never a password in the URL

    def connect(self, timeout):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def read_api_key(path):
    """The key in ``path`` (one line); refuses a file other users can access, as ssh does with a private key."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise ProberError(f"API key file {path} is not a regular file")
        if mode & 0o007:
            raise ProberError(f"refusing API key file {path}: its mode {stat.S_IMODE(mode):04o} lets other users "
                              f"read it; run chmod 600 {path}")
        with open(path, encoding="utf-8") as handle:
            key = handle.read().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ProberError(f"cannot read API key file {path}: {err}") from None
    if not key:
        raise ProberError(f"API key file {path} is empty")
    if not all(" " < char < "\x7f" for char in key):
        raise ProberError(f"API key file {path} must hold one key: printable ASCII on one line, no spaces")
    return key


def _integer(value) -> bool:
    """An int that is not a bool (JSON true is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def judge_answer(status, text):
    """``(ok, error)`` of an HTTP answer: a route that answers 200 with nothing in it does not serve clients."""
    if status != 200:
        return False, {"kind": "http", "message": f"HTTP {status}: {cut(text)}"}
    try:
        answer = json.loads(text)
    except ValueError:
        return False, {"kind": "malformed", "message": f"HTTP 200 with a body that is not JSON: {cut(text)}"}
    if not isinstance(answer, dict):
        return False, {"kind": "malformed", "message": f"HTTP 200 with a body that is not a JSON object: {cut(text)}"}
    choices = answer.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    usage = answer.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if (isinstance(content, str) and content) or (_integer(tokens) and tokens > 0):
        return True, None
    return False, {"kind": "malformed", "message": "HTTP 200 without an answer (no choices[0].message.content and "
                   f"no usage.completion_tokens > 0): {cut(text)}"}


def send_probe(target, body, request_headers, capture, timeout, started):
    """Send one request and judge it: ``{latency_s, status, ok, error, backend, headers}``.

    Never raises for what the route did. The connect, the wait for the answer and the body each get what is left
    of ``timeout`` counted from ``started`` (monotonic, when the tick sent it; the latency includes the connect).
    A body that trickles in, each read within the time left, can outlast it: the stop writes such a request as
    unanswered.
    """
    deadline = started + timeout
    result = {"latency_s": None, "status": None, "ok": False, "error": None, "backend": None,
              "headers": dict.fromkeys(capture)}
    conn = target.connect(timeout)
    try:
        conn.request("POST", target.path, body=body, headers=request_headers)
        conn.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        response = conn.getresponse()
        result["status"] = response.status
        for name in capture:
            result["headers"][name] = response.getheader(name)
        if conn.sock is not None:  # http.client drops it when the answer closes the connection
            conn.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        text = response.read().decode("utf-8", "replace")
    except socket.timeout:  # noqa: UP041 - not yet TimeoutError on Python 3.8 and 3.9
        result["error"] = {"kind": "timeout", "message": f"no complete answer within {timeout:g} s"}
    except OSError as err:
        result["error"] = {"kind": "connection", "message": f"{type(err).__name__}: {err}"}
    except http.client.HTTPException as err:
        result["error"] = {"kind": "malformed", "message": f"not an HTTP answer: {type(err).__name__}: {err}"}
    else:
        result["ok"], result["error"] = judge_answer(response.status, text)
    finally:
        conn.close()
    result["latency_s"] = round(time.monotonic() - started, 6)
    result["backend"] = next((value for value in result["headers"].values() if value is not None), None)
    return result


class StopSignal:
    """SIGTERM and SIGINT stop the prober; the wait between ticks wakes up at once when one comes.

    The handler only notes the signal (it must not take a lock the interrupted code may hold).
    ``signal.set_wakeup_fd`` writes to a pipe the moment a signal arrives, so ``wait`` (a ``select`` on that pipe)
    cannot miss one that came just before it started.
    """

    def __init__(self):
        self.name = None
        self._read_fd, self._write_fd = os.pipe()
        for fd in (self._read_fd, self._write_fd):
            os.set_blocking(fd, False)

    def install(self):
        signal.set_wakeup_fd(self._write_fd)
        signal.signal(signal.SIGTERM, self._note)
        signal.signal(signal.SIGINT, self._note)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed ssh session must not end the evidence

    def _note(self, signum, _frame):
        if self.name is None:
            self.name = signal.Signals(signum).name

    def wait(self, seconds):
        """Sleep up to ``seconds``; True when a stop signal has come."""
        if self.name is None and seconds > 0:
            select.select([self._read_fd], [], [], seconds)
        # the pipe is never drained: once a signal came, every later wait returns at once
        return self.name is not None


def log(event, **fields):
    record = {"time": utc_iso(time.time()), "event": event}
    record.update(fields)
    sys.stderr.write(json.dumps(record) + "\n")
    sys.stderr.flush()


class Prober:
    """Sends one request per tick and writes every outcome, in the order the outcomes come, to ``handle``."""

    def __init__(self, target, model, handle, interval, timeout, max_tokens, capture, api_key=None):
        self.target, self.model, self.handle = target, model, handle
        self.interval, self.timeout, self.max_tokens = interval, timeout, max_tokens
        self.capture = [name.lower() for name in capture]
        self.api_key = api_key
        self.headers = {"Content-Type": "application/json", "User-Agent": "inferlab-prober"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key
        self.write_error = None
        self._cond = threading.Condition()
        self._in_flight = {}  # seq -> its record, until written
        self._closed = False
        self._failing_since = None  # seq of the first failure of the current run of failures

    def _write(self, entry):
        """Write one line (with ``_cond`` held, so lines never interleave); say on stderr when the route changes."""
        if self._closed or self.write_error is not None:
            return
        try:
            self.handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
            self.handle.flush()
        except (OSError, ValueError) as err:
            self.write_error = str(err)
            log("error", message=f"cannot write the output: {err}")
            return
        if "seq" not in entry:
            return
        if not entry["ok"] and self._failing_since is None:
            self._failing_since = entry["seq"]
            log("failing", seq=entry["seq"], kind=entry["error"]["kind"], message=entry["error"]["message"])
        elif entry["ok"] and self._failing_since is not None:
            log("recovered", seq=entry["seq"], failing_since=self._failing_since)
            self._failing_since = None

    def _body(self, seq):
        prompt = f"inferlab continuity probe {seq}: reply with one word."
        return json.dumps({"model": self.model, "messages": [{"role": "user", "content": prompt}],
                           "max_tokens": self.max_tokens}).encode("utf-8")

    def _request(self, entry):
        result = send_probe(self.target, self._body(entry["seq"]), self.headers, self.capture, self.timeout,
                            entry["sent_mono"])
        if result["error"] is not None:
            result["error"]["message"] = scrub(result["error"]["message"], self.api_key)
        with self._cond:
            if self._in_flight.pop(entry["seq"], None) is None:
                return  # the prober stopped without it and wrote it as unanswered
            entry.update(result)
            self._write(entry)
            self._cond.notify_all()

    def _tick(self, seq, late):
        now = time.monotonic()
        entry = {"seq": seq, "sent_at": utc_iso(time.time()), "sent_mono": round(now, 6), "latency_s": None,
                 "status": None, "ok": False, "error": None, "backend": None,
                 "headers": dict.fromkeys(self.capture)}
        with self._cond:
            if late >= self.interval:
                skipped = (f"the prober ran {late:.3f} s behind its schedule (a stalled host or a stopped prober): "
                           "tick skipped")
            elif len(self._in_flight) >= MAX_IN_FLIGHT:
                skipped = f"{len(self._in_flight)} requests still in flight, the most allowed: tick skipped"
            else:
                self._in_flight[seq] = entry
                skipped = None
            if skipped:
                entry["error"] = {"kind": "overrun", "message": skipped}
                self._write(entry)
                return
        threading.Thread(target=self._request, args=(entry,), name=f"probe-{seq}", daemon=True).start()

    def run(self, stop, max_seconds, label=None):
        """Probe until ``stop`` says so or ``max_seconds`` have passed; the stop reason."""
        start = time.monotonic()
        with self._cond:
            self._write({"event": "started", "url": self.target.url, "model": self.model,
                         "interval_s": self.interval, "timeout_s": self.timeout, "max_seconds": max_seconds,
                         "headers": self.capture, "label": label, "pid": os.getpid(), "at": utc_iso(time.time()),
                         "mono": round(start, 6)})
        deadline = start + max_seconds
        seq = 0
        reason = None
        while self.write_error is None:
            if stop.wait(0):  # a prober that is always behind its schedule never sleeps in the wait below
                reason = "signal"
                break
            now = time.monotonic()
            due = start + seq * self.interval
            if due >= deadline:  # every tick due before the deadline is sent or written, even on a stalled host
                if stop.wait(max(deadline - now, 0)):
                    reason = "signal"
                    break
                reason = "max_seconds"
                break
            if due > now:
                if stop.wait(due - now):
                    reason = "signal"
                    break
                continue
            self._tick(seq, now - due)
            seq += 1
        self._finish(reason, stop.name, seq)
        return reason

    def _finish(self, reason, signal_name, ticks):
        """Give requests in flight up to ``timeout`` more seconds, write the rest as unanswered, then the end."""
        give_up = time.monotonic() + self.timeout
        with self._cond:
            while self._in_flight and time.monotonic() < give_up:
                self._cond.wait(give_up - time.monotonic())
            unfinished = sorted(self._in_flight.items())
            self._in_flight.clear()
            now = time.monotonic()
            for _seq, entry in unfinished:
                entry.update(latency_s=round(now - entry["sent_mono"], 6), error={
                    "kind": "timeout", "message": "still unanswered when the prober stopped"})
                self._write(entry)
            if reason is not None:
                self._write({"event": "stopped", "reason": reason, "signal": signal_name, "at": utc_iso(time.time()),
                             "mono": round(now, 6), "ticks": ticks, "unfinished": len(unfinished)})
            self._closed = True
        log("stopped", reason=reason or "write_error", signal=signal_name, ticks=ticks, unfinished=len(unfinished))


# --- judging a file


def percentile(values, q):
    """``numpy.percentile(values, q)`` with numpy's default method (``linear``); None for no values.
    (inferlab.analysis.stats has the same: this file runs alone, copied, on any Python 3.8, so it imports nothing of
    the package.)"""
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100.0
    low = int(math.floor(position))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _number(value):
    return type(value) in (int, float)


def _entry_problem(entry):
    """Why a decoded line is not a prober line; None when it is one."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    if "event" in entry:
        return None if entry["event"] in EVENTS else f"unknown event {entry['event']!r}"
    if not _integer(entry.get("seq")) or entry["seq"] < 0:
        return "no seq (an integer >= 0)"
    if not isinstance(entry.get("ok"), bool):
        return "no ok (true or false)"
    if not _number(entry.get("sent_mono")):
        return "no sent_mono (a number)"
    if entry.get("latency_s") is not None and not _number(entry["latency_s"]):
        return "latency_s is not a number"
    error = entry.get("error")
    if error is not None and not (isinstance(error, dict) and isinstance(error.get("kind"), str)):
        return "error is not {kind, message}"
    if not entry["ok"] and error is None:
        return "a failed request without an error"
    return None


def parse_lines(lines):
    """The lines of a prober file (newlines kept), decoded in file order.

    A line that is not a prober line becomes ``{"event": "unreadable", "line", "cut", "reason", "text"}`` rather
    than vanishing: ``cut`` when it is the last line and has no newline (a prober killed mid-write, or one still
    writing), which ``summarize`` reports; any other such line is a request whose outcome nobody can know.
    """
    lines = list(lines)
    entries = []
    for number, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        try:
            entry = json.loads(text)
        except ValueError as err:
            problem = f"not JSON ({err})"
        else:
            problem = _entry_problem(entry)
        if problem is None:
            entries.append(entry)
        else:
            entries.append({"event": "unreadable", "line": number, "reason": problem, "text": cut(text),
                            "cut": number == len(lines) and not line.endswith("\n")})
    return entries


def _failure(entry):
    return {"seq": entry["seq"], "sent_at": entry.get("sent_at"), "error": entry["error"]}


def worst_gap(successes, start, end):
    """The longest time without proof: between consecutive successful answers, from ``start`` to the first and
    from the last to ``end``; None when there is no time span at all."""
    points = sorted(point for point in [start] + list(successes) + [end] if point is not None)
    if len(points) < 2:
        return None
    return round(max(points[index + 1] - points[index] for index in range(len(points) - 1)), 6)


def summarize(records, budget):
    """The continuity summary of ``parse_lines``' output, judged against a failure budget.

    ``failed`` counts every request that did not prove the route, overruns included, and every unreadable line
    in the middle of the file (kind ``unreadable``); a cut last line is only reported (``truncated_lines``).
    ``by_backend`` and ``latency_s`` are over successful requests. ``worst_gap_s`` runs on completion times (sent +
    latency) from the start line to the stop line, or to the last record when there is none.
    """
    started = next((entry for entry in records if entry.get("event") == "started"), None)
    stopped = next((entry for entry in reversed(records) if entry.get("event") == "stopped"), None)
    requests = sorted((entry for entry in records if "event" not in entry), key=lambda entry: entry["seq"])
    unreadable = [entry for entry in records if entry.get("event") == "unreadable"]
    malformed = [entry for entry in unreadable if not entry["cut"]]
    successes = [entry for entry in requests if entry["ok"]]
    failures = [entry for entry in requests if not entry["ok"]]

    failed_by_kind = {}
    for entry in failures:
        failed_by_kind[entry["error"]["kind"]] = failed_by_kind.get(entry["error"]["kind"], 0) + 1
    if malformed:
        failed_by_kind["unreadable"] = len(malformed)
    by_backend = {}
    for entry in successes:
        backend = entry.get("backend") or NO_BACKEND
        by_backend[backend] = by_backend.get(backend, 0) + 1

    completions = [entry["sent_mono"] + entry["latency_s"] for entry in successes if entry["latency_s"] is not None]
    ends = [entry["sent_mono"] + (entry["latency_s"] or 0) for entry in requests]
    start = started.get("mono") if started else None
    if not _number(start):
        start = min((entry["sent_mono"] for entry in requests), default=None)
    end = stopped.get("mono") if stopped else None
    if not _number(end):
        end = max(ends, default=None)
    latencies = [entry["latency_s"] for entry in successes if entry["latency_s"] is not None]
    failed = len(failures) + len(malformed)
    return {
        "total": len(requests) + len(malformed), "ok": len(successes), "failed": failed,
        "failed_by_kind": failed_by_kind, "worst_gap_s": worst_gap(completions, start, end),
        "first_failure": _failure(failures[0]) if failures else None,
        "last_failure": _failure(failures[-1]) if failures else None,
        "by_backend": by_backend,
        "latency_s": {"median": percentile(latencies, 50), "p99": percentile(latencies, 99),
                      "max": max(latencies, default=None)},
        "budget": budget, "within_budget": failed <= budget,
        "url": started.get("url") if started else None, "model": started.get("model") if started else None,
        "label": started.get("label") if started else None,
        "interval_s": started.get("interval_s") if started else None,
        "started_at": started.get("at") if started else None, "stopped_at": stopped.get("at") if stopped else None,
        "stop_reason": stopped.get("reason") if stopped else None,
        "truncated_lines": len(unreadable) - len(malformed),
        "malformed_lines": [{"line": entry["line"], "reason": entry["reason"], "text": entry["text"]}
                            for entry in malformed],
    }


def load_summary(path, budget):
    """``summarize`` of the file at ``path``; ProberError when it cannot be read or holds no prober line."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            records = parse_lines(handle)
    except OSError as err:
        raise ProberError(f"cannot read {path}: {err.strerror or err}") from None
    if not any(entry.get("event") in EVENTS or "seq" in entry for entry in records):
        raise ProberError(f"{path} holds no prober records (did the prober start?)")
    return summarize(records, budget)


def _verdict(summary):
    return "within budget" if summary["within_budget"] else "OVER BUDGET"


def one_line(path, summary):
    line = (f"continuity {path}: {summary['total']} requests, {summary['failed']} failed "
            f"(budget {summary['budget']}): {_verdict(summary)}")
    last = summary["last_failure"]
    if last:
        line += f"; last failure seq {last['seq']} ({last['error']['kind']})"
    return line


def _seconds(value):
    return "-" if value is None else f"{value:.3f} s"


def _counts(counts):
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "none"


def describe(path, summary):
    """The summary as text for a person."""
    lines = [one_line(path, summary), f"  failed by kind: {_counts(summary['failed_by_kind'])}"]
    for which in ("first_failure", "last_failure"):
        failure = summary[which]
        if failure:
            lines.append(f"  {which.replace('_', ' ')}: seq {failure['seq']} at {failure['sent_at']}, "
                         f"{failure['error']['kind']}: {failure['error'].get('message')}")
    latency = summary["latency_s"]
    stop = summary["stop_reason"] or "no stop line: the prober was killed or is still running"
    lines += [f"  worst gap between successful answers: {_seconds(summary['worst_gap_s'])}",
              f"  served by backend: {_counts(summary['by_backend'])}",
              f"  latency: median {_seconds(latency['median'])}, p99 {_seconds(latency['p99'])}, "
              f"max {_seconds(latency['max'])}",
              f"  started {summary['started_at']}, stopped {summary['stopped_at']} ({stop})"]
    if summary["truncated_lines"]:
        lines.append("  the last line is cut (a prober killed mid-write, or still writing)")
    for bad in summary["malformed_lines"]:
        lines.append(f"  line {bad['line']} unreadable ({bad['reason']}): {bad['text']}")
    return "\n".join(lines)


# --- the command line


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _count(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value
    return parse


def build_parser():
    parser = argparse.ArgumentParser(prog="python3 -m inferlab.prober", description=__doc__.split("\n\n", 1)[0])
    commands = parser.add_subparsers(dest="command")
    commands.required = True
    run = commands.add_parser("run", help="probe the public route until stopped (foreground)")
    run.add_argument("--url", required=True, help="the gateway's base URL (http://HOST:PORT, /v1 optional)")
    run.add_argument("--model", required=True, help="the model (role) name clients ask for")
    run.add_argument("--output", required=True, help="the JSON-lines file to write (must not exist or be empty)")
    run.add_argument("--interval", type=_positive, default=0.5, help="seconds between requests (default 0.5)")
    run.add_argument("--timeout", type=_positive, default=10.0, help="seconds a request may take (default 10)")
    run.add_argument("--max-tokens", type=_count(1), default=4, help="max_tokens of each request (default 4)")
    run.add_argument("--api-key-file", help="a file holding the client API key (mode 0600)")
    run.add_argument("--header", action="append", dest="headers", metavar="NAME",
                     help="a response header to record; the first present names the backend (repeat; default: "
                     f"{', '.join(DEFAULT_HEADERS)})")
    run.add_argument("--max-seconds", type=_positive, default=7200.0, help="stop by itself after this long")
    run.add_argument("--label", help="a free text written in the started line")
    for name, text in (("summary", "summarize a prober file and judge it against the budget"),
                       ("check", "one line and an exit code: is the file within the budget?")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("file")
        sub.add_argument("--budget", type=_count(0), default=0 if name == "summary" else None,
                         required=(name == "check"), help="failed requests allowed")
        if name == "summary":
            sub.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def run(args):
    try:
        target = Target(args.url)
        api_key = read_api_key(args.api_key_file) if args.api_key_file else None
        if os.path.exists(args.output) and os.path.getsize(args.output) > 0:
            raise ProberError(f"refusing to overwrite {args.output}: it already holds a prober's records")
        handle = open(args.output, "a", encoding="utf-8")
    except ProberError as err:
        sys.stderr.write(f"prober: {err}\n")
        return EXIT_USAGE
    except OSError as err:
        sys.stderr.write(f"prober: cannot open {args.output}: {err.strerror or err}\n")
        return EXIT_USAGE
    stop = StopSignal()
    stop.install()
    with handle:
        prober = Prober(target, args.model, handle, args.interval, args.timeout, args.max_tokens,
                        args.headers or DEFAULT_HEADERS, api_key)
        prober.run(stop, args.max_seconds, args.label)
    return EXIT_FAILED if prober.write_error else EXIT_OK


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run(args)
    try:
        summary = load_summary(args.file, args.budget)
    except ProberError as err:
        sys.stderr.write(f"prober: {err}\n")
        return EXIT_USAGE
    if args.command == "check":
        print(one_line(args.file, summary))
    elif args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(describe(args.file, summary))
    return EXIT_OK if summary["within_budget"] else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

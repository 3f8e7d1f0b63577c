# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the gateway swap: the upstream-file edit, the LiteLLM calls against a loopback imitation, /proc parsing
on fixture trees, and the drained rolling restart on real processes (fake LiteLLM instances and a fake nginx master
that re-forks its workers on SIGHUP and lets the old ones linger, as nginx does)."""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as gs
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc, _ledger_undo
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger
from ansible_collections.inferlab.distributed.tests.unit.oldpython import require_python
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.gateway_fakes import (
    FAKE_NGINX,
    Gateway,
    Processes,
    alive,
    free_port,
    pid_of,
    read_events,
    start_fake_front,
    upstream_for,
    wait_for,
)

REPO_ROOT = Path(__file__).resolve().parents[4]
SOURCE = REPO_ROOT / "plugins" / "module_utils" / "_gateway_swap.py"
KEY = "sk-test-gateway"

FAKE_LITELLM = '''\
"""A stand-in for one LiteLLM proxy instance: /health/readiness, /v1/chat/completions and /fallback/<role> answered
from the JSON settings file on its argv (as LiteLLM 1.108.7 answers them); each start appends to the events file."""
import json, os, sys, urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

port, name, settings_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with open(settings_path) as handle:
    settings = json.load(handle)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorised(self):
        if self.headers.get("Authorization") == "Bearer " + settings["key"]:
            return True
        self.answer(401, {"error": {"message": "Authentication Error, invalid key", "code": "401"}})
        return False

    def do_GET(self):
        if self.path == "/health/readiness":
            return self.answer(200, {"status": "healthy", "db": "Not connected"})
        if self.path.startswith("/fallback/"):
            if self.authorised():
                role = urllib.parse.unquote(self.path[len("/fallback/"):])
                found = settings["fallbacks"].get(role)
                if found:
                    return self.answer(200, {"model": role, "fallback_models": found, "fallback_type": "general"})
                return self.answer(404, {"detail": {"error": "No general fallbacks configured for model '%s'" % role}})
            return None
        return self.answer(404, {"detail": "Not Found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path == "/v1/chat/completions" and self.authorised():
            status = settings.get("chat_status", 200)
            self.answer(status, {"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})


server = HTTPServer(("127.0.0.1", port), Handler)
with open(settings["events"], "a") as handle:
    handle.write(json.dumps({"event": "start", "name": name, "pid": os.getpid()}) + "\\n")
server.serve_forever()
'''

SLEEPER = '''\
import signal, sys, time
if sys.argv[1:] == ["ignore-term"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(1)
'''

FAKE_SYSTEMCTL = '''\
#!/bin/sh
echo "$@" >> {calls}
case "$2" in
  broken.service) echo "Job for broken.service failed because the control process exited with error code." >&2
                  exit 1 ;;
esac
exit 0
'''


# --- fixtures -----------------------------------------------------------------------------------------------------


@pytest.fixture
def cleanup(tmp_path):
    """Every process a test starts, by pid (gateway_fakes.Processes): ``cleanup.pids``, ``cleanup.pidfiles``,
    ``cleanup.popens``; killed at the end of the test."""
    processes = Processes(tmp_path)
    yield processes
    processes.kill_all()


@pytest.fixture
def scripts(tmp_path):
    """The fake programs, written into tmp_path (so their command lines name it)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    paths = {"litellm": folder / "fake-litellm.py", "nginx": folder / "nginx-fake-master.py",
             "sleeper": folder / "fake-litellm-sleeper.py"}
    paths["litellm"].write_text(FAKE_LITELLM)
    paths["nginx"].write_text(FAKE_NGINX)
    paths["sleeper"].write_text(SLEEPER)
    return paths


@pytest.fixture
def fake_instance(tmp_path, scripts, cleanup):
    """``fake_instance(name, fallbacks=..., chat_status=200, start=True)``: a process instance dict for a fake
    LiteLLM on a free loopback port (started through start_instance, so spawn_detached writes its pidfile)."""
    events = tmp_path / "events.jsonl"

    def make(name, fallbacks=None, chat_status=200, start=True, argv=None):
        port = free_port()
        settings = tmp_path / f"{name}.json"
        settings.write_text(json.dumps({"key": KEY, "fallbacks": fallbacks if fallbacks is not None else
                                        {"small": ["large"]}, "chat_status": chat_status, "events": str(events)}))
        instance = {"name": name, "url": f"http://127.0.0.1:{port}", "manager": "process",
                    "pidfile": str(tmp_path / "run" / f"{name}.pid"),
                    "start_argv": argv or [sys.executable, str(scripts["litellm"]), str(port), name, str(settings)],
                    "log": str(tmp_path / "logs" / f"{name}.log"), "match": "fake-litellm"}
        cleanup.pidfiles.append(instance["pidfile"])
        if start:
            gs.start_instance(instance)
            cleanup.pids.append(pid_of(instance))
            gs.wait_ready(instance["url"], 10, poll_s=0.02)
        return instance

    make.events = events
    return make


@pytest.fixture
def fake_front(tmp_path, scripts, cleanup):
    """``fake_front(upstream_text, workers=2, linger=0.0)``: a running fake nginx master (own session, killed as a
    process group at the end) and the front dict naming its upstream file and pidfile."""

    def make(upstream_text, workers=2, linger=0.0, events=None):
        return start_fake_front(scripts["nginx"], tmp_path / "front", upstream_text, cleanup, workers=workers,
                                linger=linger, events=events or tmp_path / "front-events.jsonl")

    return make


class LiteLLMImitation(BaseHTTPRequestHandler):
    """LiteLLM's answers to the calls the swap makes, for the HTTP tests (state on the server object)."""

    def log_message(self, *args):
        pass

    def answer(self, status, payload, content_type="application/json"):
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.server.seen.append({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization")})
        if self.path == "/health/readiness":
            status = self.server.readiness.pop(0) if self.server.readiness else 200
            return self.answer(status, {"status": "healthy" if status == 200 else "unhealthy"})
        if self.path == "/slow":
            time.sleep(0.6)
            return self.answer(200, {})
        if self.path.startswith("/fallback/"):
            received = (self.headers.get("Authorization") or "").replace("Bearer ", "")
            if received != KEY:
                return self.answer(401, {"error": {"message": f"Authentication Error, Received API Key = {received}",
                                                   "code": "401"}})
            role = self.path[len("/fallback/"):]
            answers = {
                "small": (200, {"model": "small", "fallback_models": ["large"], "fallback_type": "general"}),
                "none": (404, {"detail": {"error": "No general fallbacks configured for model 'none'"}}),
                "garbage": (200, "<html>proxy error page</html>"),
                "badlist": (200, {"model": "badlist", "fallback_models": "large"}),
                "other404": (404, {"detail": "Not Found"}),
                "broken": (500, {"detail": "Internal Server Error"}),
                "bad": (400, {"error": {"message": "Invalid fallback_type"}}),
                "a%2Fb": (200, {"model": "a/b", "fallback_models": ["c", "d"], "fallback_type": "general"}),
            }
            return self.answer(*answers.get(role, (404, {"detail": "Not Found"})))
        return self.answer(404, {"detail": "Not Found"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append({"method": "POST", "path": self.path, "auth": self.headers.get("Authorization"),
                                 "body": body.decode(), "content_type": self.headers.get("Content-Type")})
        if self.path == "/v1/chat/completions":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("x-litellm-model-api-base", "http://127.0.0.1:30000/v1")
            self.send_header("Set-Cookie", "a=1")
            self.send_header("Set-Cookie", "b=2")
            data = json.dumps({"object": "chat.completion", "choices": [{"message": {"content": "x" * 5000}}]})
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())
            return None
        return self.answer(404, {"detail": "Not Found"})


@pytest.fixture
def litellm():
    """A LiteLLM imitation on 127.0.0.1 (ephemeral port) in a thread; ``.url``, ``.seen``, ``.readiness``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), LiteLLMImitation)
    server.daemon_threads = True
    server.block_on_close = False
    server.seen = []
    server.readiness = []
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


# --- validation ---------------------------------------------------------------------------------------------------

PROCESS_INSTANCE = {"name": "litellm-a", "url": "http://169.254.77.1:4001/", "manager": "process",
                    "pidfile": "/run/litellm-a.pid", "start_argv": ["/opt/start-litellm", "a"],
                    "log": "/var/log/litellm-a.log", "match": "litellm"}
SYSTEMD_INSTANCE = {"name": "litellm-b", "url": "https://gw.example:8443", "manager": "systemd",
                    "unit": "litellm@b.service", "upstream_server": "gw-b:8443"}


def test_check_instance_normalises():
    assert gs.check_instance(PROCESS_INSTANCE) == dict(PROCESS_INSTANCE, url="http://169.254.77.1:4001",
                                                       upstream_server="169.254.77.1:4001")
    assert gs.check_instance(SYSTEMD_INSTANCE) == SYSTEMD_INSTANCE
    # an Ansible option list leaves the other manager's keys as None
    loose = dict(SYSTEMD_INSTANCE, pidfile=None, start_argv=None, log=None, match=None, upstream_server=None)
    assert gs.check_instance(loose)["upstream_server"] == "gw.example:8443"
    assert gs.check_instance(dict(SYSTEMD_INSTANCE, url="http://[fe80::1]", upstream_server=None))[
        "upstream_server"] == "[fe80::1]:80"


@pytest.mark.parametrize(("change", "message"), [
    ({"name": ""}, 'needs "name"'),
    ({"manager": "docker"}, '"manager" must be one of process, systemd'),
    ({"url": "http://169.254.77.1:4001/v1"}, "without a path (no /v1)"),
    ({"url": "ftp://x:1"}, "must be an http:// or https:// URL"),
    ({"url": "http://x:notaport"}, "invalid port"),
    ({"pidfile": "litellm-a.pid"}, '"pidfile" must be an absolute path'),
    ({"start_argv": "/opt/start-litellm a"}, '"start_argv" must be a non-empty list of strings'),
    ({"start_argv": []}, '"start_argv" must be a non-empty list of strings'),
    ({"log": None}, '"log" must be an absolute path'),
    ({"match": " "}, '"match" (a substring of its command line) must be a non-empty string'),
    ({"unit": "litellm@a.service"}, "unit belong to another manager than process"),
    ({"upstream_server": "a:1 down"}, '"upstream_server" must be the address'),
    ({"colour": "blue"}, "unknown keys colour"),
])
def test_check_instance_refuses(change, message):
    with pytest.raises(gs.GatewayError, match=re.escape(message)):
        gs.check_instance(dict(PROCESS_INSTANCE, **change))


def test_check_instance_refuses_a_bad_unit_and_a_missing_url():
    with pytest.raises(gs.GatewayError, match='"unit" must be a systemd unit name'):
        gs.check_instance(dict(SYSTEMD_INSTANCE, unit="-litellm"))
    with pytest.raises(gs.GatewayError, match='needs "url"'):
        gs.check_instance({k: v for k, v in SYSTEMD_INSTANCE.items() if k != "url"})


def test_check_front():
    assert gs.check_front({}) == {} and gs.check_front(None) == {}
    assert gs.check_front({"kind": None, "upstream_file": None, "pidfile": None}) == {}
    front = {"kind": "nginx", "upstream_file": "/etc/nginx/upstream.conf", "pidfile": "/run/nginx.pid"}
    assert gs.check_front(front) == front
    with pytest.raises(gs.GatewayError, match='"kind" must be one of nginx'):
        gs.check_front(dict(front, kind="haproxy"))
    with pytest.raises(gs.GatewayError, match='"upstream_file" must be an absolute path'):
        gs.check_front(dict(front, upstream_file="upstream.conf"))
    with pytest.raises(gs.GatewayError, match="unknown keys port"):
        gs.check_front(dict(front, port=80))


# --- mark_down ----------------------------------------------------------------------------------------------------

UPSTREAM = """\
# the gateway's instances (server 10.0.0.1:4001 is A)
upstream litellm {
    server 10.0.0.1:4001 max_fails=1 fail_timeout=10s;
\tserver\t10.0.0.1:4002\tweight=2;  # B; not server 10.0.0.1:4001
    server 10.0.0.1:40011;
    keepalive 16;
}
"""


@pytest.mark.parametrize(("text", "server", "expected"), [
    pytest.param("server 10.0.0.1:4001;\n", "10.0.0.1:4001", "server 10.0.0.1:4001 down;\n", id="bare"),
    pytest.param(UPSTREAM, "10.0.0.1:4001",
                 UPSTREAM.replace("fail_timeout=10s;", "fail_timeout=10s down;"), id="params_and_comments"),
    pytest.param(UPSTREAM, "10.0.0.1:4002", UPSTREAM.replace("weight=2;", "weight=2 down;"), id="tabs"),
    pytest.param(UPSTREAM, "10.0.0.1:40011", UPSTREAM.replace("40011;", "40011 down;"), id="longer_port"),
    pytest.param("upstream u { server a:1; server b:2 backup; }", "b:2",
                 "upstream u { server a:1; server b:2 backup down; }", id="one_line_block"),
    pytest.param("server a:1;\r\nserver b:2 ;\r\n", "b:2", "server a:1;\r\nserver b:2  down;\r\n", id="crlf"),
    pytest.param("server unix:/run/litellm-a.sock;\nserver a:1;\n", "unix:/run/litellm-a.sock",
                 "server unix:/run/litellm-a.sock down;\nserver a:1;\n", id="unix_socket"),
])
def test_mark_down(text, server, expected):
    assert gs.mark_down(text, server) == expected


@pytest.mark.parametrize(("text", "server", "message"), [
    pytest.param("", "a:1", 'no "server a:1 ...;" line', id="empty"),
    pytest.param("# server a:1;\n  #server a:1;\n", "a:1", 'no "server a:1 ...;" line', id="only_commented"),
    pytest.param("server a:10;\nserver a:1.5;\n", "a:1", 'no "server a:1 ...;" line', id="prefix_only"),
    pytest.param("server_name a:1;\n", "a:1", 'no "server a:1 ...;" line', id="server_name"),
    pytest.param("server a:1\n    weight=2;\n", "a:1", "must sit on one line", id="split_statement"),
    pytest.param("server a:1;\nserver a:1 backup;\n", "a:1", '2 "server a:1" lines', id="two_matches"),
    pytest.param("server a:1 max_fails=1 down;\n", "a:1", "already marked down", id="already_down"),
    pytest.param("server a:1;\n", "", "non-empty address", id="no_server"),
])
def test_mark_down_refuses(text, server, message):
    with pytest.raises(gs.GatewayError, match=re.escape(message)):
        gs.mark_down(text, server)


# --- HTTP against a LiteLLM imitation ---------------------------------------------------------------------------


def test_http_request_sends_json_and_the_key_and_reads_everything(litellm):
    result = gs.http_request("POST", litellm.url + "/v1/chat/completions", key=KEY, body={"model": "small"})
    assert result["status"] == 200
    assert result["headers"]["x-litellm-model-api-base"] == "http://127.0.0.1:30000/v1"
    assert result["headers"]["set-cookie"] == "a=1, b=2"
    assert len(result["body"]) == 4000 and result["body"].startswith('{"object": "chat.completion"')
    assert 0 < result["elapsed_s"] < 10
    seen = litellm.seen[-1]
    assert (seen["auth"], seen["content_type"], json.loads(seen["body"])) == (
        f"Bearer {KEY}", "application/json", {"model": "small"})


def test_http_request_errors_are_results_and_no_key_means_no_header(litellm):
    result = gs.http_request("GET", litellm.url + "/fallback/small")
    assert result["status"] == 401 and "Authentication Error" in result["body"]
    assert litellm.seen[-1]["auth"] is None
    assert result["headers"]["content-type"] == "application/json"


def test_http_request_never_uses_a_proxy(litellm, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert gs.http_request("GET", litellm.url + "/health/readiness")["status"] == 200


def test_http_request_connection_errors_name_the_url(litellm):
    closed = f"http://127.0.0.1:{free_port()}/health/readiness"
    with pytest.raises(gs.GatewayError, match=re.escape(f"GET {closed} failed:") + ".*refused"):
        gs.http_request("GET", closed)
    with pytest.raises(gs.GatewayError, match=re.escape(f"GET {litellm.url}/slow failed:") + ".*timed out"):
        gs.http_request("GET", litellm.url + "/slow", key=KEY, timeout=0.2)
    with pytest.raises(gs.GatewayError, match="only http:// and https://"):
        gs.http_request("GET", "file:///etc/passwd")


def test_wait_ready(litellm):
    litellm.readiness[:] = [503, 503]
    assert 0 <= gs.wait_ready(litellm.url, 5, poll_s=0.02) < 5
    assert [s["path"] for s in litellm.seen] == ["/health/readiness"] * 3
    litellm.readiness[:] = [503] * 1000
    with pytest.raises(gs.GatewayError, match=r"did not answer 200 within 0.3s; last answer: HTTP 503: .*unhealthy"):
        gs.wait_ready(litellm.url + "/", 0.3, poll_s=0.02)
    with pytest.raises(gs.GatewayError, match=r"did not answer 200 within 0.2s; last answer: .*refused"):
        gs.wait_ready(f"http://127.0.0.1:{free_port()}", 0.2, poll_s=0.02)
    with pytest.raises(gs.GatewayError, match=r"will not become ready: it died \(last answer: HTTP 503"):
        gs.wait_ready(litellm.url, 30, poll_s=0.02, failed=lambda: "it died")


@pytest.mark.parametrize(("role", "expected"), [("small", ["large"]), ("none", []), ("a/b", ["c", "d"])])
def test_fallback_models(litellm, role, expected):
    assert gs.fallback_models(litellm.url, role, KEY) == expected


@pytest.mark.parametrize(("role", "key", "message"), [
    ("small", "sk-wrong", "answered HTTP 401 (wrong API key?): {\"error\": {\"message\": \"Authentication Error, "
                          "Received API Key = <key>\""),
    ("broken", KEY, 'answered HTTP 500: {"detail": "Internal Server Error"}'),
    ("bad", KEY, "answered HTTP 400: "),
    ("garbage", KEY, 'without a "fallback_models" list of model names: <html>proxy error page</html>'),
    ("badlist", KEY, 'without a "fallback_models" list'),
    ("other404", KEY, "answered 404, not LiteLLM's \"no general fallbacks configured\""),
])
def test_fallback_models_refuses(litellm, role, key, message):
    with pytest.raises(gs.GatewayError, match=re.escape(message)) as caught:
        gs.fallback_models(litellm.url, role, key)
    assert "sk-wrong" not in str(caught.value)


def test_fallback_models_quotes_the_role(litellm):
    gs.fallback_models(litellm.url, "a/b", KEY)
    assert litellm.seen[-1]["path"] == "/fallback/a%2Fb"


def test_chat_once(litellm):
    result = gs.chat_once(litellm.url + "/", "small", KEY)
    assert result["status"] == 200
    assert json.loads(litellm.seen[-1]["body"]) == {
        "model": "small", "messages": [{"role": "user", "content": "inferlab gateway warm-up"}], "max_tokens": 4}
    assert litellm.seen[-1]["path"] == "/v1/chat/completions"


def test_read_key(tmp_path):
    path = tmp_path / "key"
    path.write_text("  sk-secret-1  \nsecond line\n")
    assert gs.read_key(str(path)) == "sk-secret-1"
    path.write_text("\n")
    with pytest.raises(gs.GatewayError, match=re.escape(f"the API key file {path} is empty")):
        gs.read_key(str(path))
    with pytest.raises(gs.GatewayError, match=re.escape(f"cannot read the API key file {tmp_path / 'absent'}")):
        gs.read_key(str(tmp_path / "absent"))
    with pytest.raises(gs.GatewayError, match=re.escape(f"cannot read the API key file {tmp_path}")):
        gs.read_key(str(tmp_path))


# --- /proc: fixture trees -----------------------------------------------------------------------------------------


def proc_entry(root, pid, comm, state, ppid, cmdline, start_time=1000):
    folder = root / str(pid)
    folder.mkdir(parents=True)
    # fields 3-9, then 10-21 (12 fields), then 22 = start_time, then the rest
    fields = [state, ppid, pid, pid, 0, -1, 4194560] + [0] * 12 + [start_time] + [0] * 30
    (folder / "stat").write_text(f"{pid} ({comm}) " + " ".join(map(str, fields)) + "\n")
    (folder / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in cmdline))


@pytest.fixture
def procfs(tmp_path):
    root = tmp_path / "proc"
    proc_entry(root, 100, "nginx", "S", 1, ["nginx: master process /usr/sbin/nginx"])
    proc_entry(root, 101, "nginx: worker (1) ) x", "S", 100, ["nginx: worker process"])
    proc_entry(root, 102, "nginx", "R", 100, ["nginx: worker process"])
    proc_entry(root, 103, "nginx", "Z", 100, [])
    proc_entry(root, 104, "cache (100) S 100", "S", 1, ["nginx: cache manager"])
    proc_entry(root, 200, "sleep", "S", 1, ["sleep", "1000"])
    (root / "self").mkdir()
    (root / "1000").mkdir()  # a process that vanished while being listed: no stat
    return root


def test_front_workers_on_a_fixture_tree(procfs):
    assert gs.front_workers(100, str(procfs)) == {101, 102}
    assert gs.front_workers(1, str(procfs)) == {100, 104, 200}
    assert gs.front_workers(999, str(procfs)) == set()


def test_stop_instance_on_a_fixture_tree(tmp_path, procfs):
    instance = dict(PROCESS_INSTANCE, pidfile=str(tmp_path / "a.pid"))
    assert gs.stop_instance(instance, procfs_root=str(procfs)) == (
        f"litellm-a already stopped: pidfile {tmp_path / 'a.pid'} is absent or empty")
    Path(instance["pidfile"]).write_text("4321\n")
    assert gs.stop_instance(instance, procfs_root=str(procfs)) == (
        f"litellm-a already stopped: pid 4321 from {tmp_path / 'a.pid'} does not run")
    assert not Path(instance["pidfile"]).exists()
    Path(instance["pidfile"]).write_text("103\n")
    assert "already stopped: pid 103" in gs.stop_instance(instance, procfs_root=str(procfs))
    Path(instance["pidfile"]).write_text("not a pid\n")
    with pytest.raises(gs.GatewayError, match="does not hold a pid"):
        gs.stop_instance(instance, procfs_root=str(procfs))


def test_stop_instance_refuses_a_foreign_pid_on_a_fixture_tree(tmp_path, procfs):
    """The fixture says pid 200 runs `sleep 1000`: refused before any signal (the real pid 200 is not touched)."""
    instance = dict(PROCESS_INSTANCE, pidfile=str(tmp_path / "a.pid"))
    Path(instance["pidfile"]).write_text("200\n")
    with pytest.raises(gs.GatewayError, match=r'pid 200 .* runs "sleep 1000", which does not contain "litellm": '
                                              "not signalling it"):
        gs.stop_instance(instance, procfs_root=str(procfs))
    assert Path(instance["pidfile"]).read_text() == "200\n"


# --- processes: start and stop ------------------------------------------------------------------------------------


def sleeper_instance(tmp_path, scripts, cleanup, *args):
    instance = {"name": "sleepy", "url": "http://127.0.0.1:9", "manager": "process",
                "pidfile": str(tmp_path / "run" / "sleepy.pid"),
                "start_argv": [sys.executable, str(scripts["sleeper"]), *args],
                "log": str(tmp_path / "logs" / "sleepy.log"), "match": "fake-litellm"}
    cleanup.pidfiles.append(instance["pidfile"])
    return instance


def test_start_and_stop_a_process_instance(tmp_path, scripts, cleanup):
    instance = sleeper_instance(tmp_path, scripts, cleanup)
    message = gs.start_instance(instance)
    pid = pid_of(instance)
    cleanup.pids.append(pid)
    assert message == f"started sleepy as pid {pid} (log {instance['log']})"
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")[:-1]
    assert sorted(e.split(b"=")[0] for e in environ) == [b"HOME", b"LANG", b"PATH"]
    assert b"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in environ
    assert _ledger_proc.read_proc_stat(pid)["pgrp"] == pid  # spawn_detached: a session (and group) of its own
    with pytest.raises(gs.GatewayError, match=f"sleepy already runs as pid {pid}"):
        gs.start_instance(instance)

    message = gs.stop_instance(instance, timeout_s=30)
    assert re.fullmatch(rf"stopped sleepy \(process group {pid}\) with SIGTERM in \d+\.\ds", message)
    assert not alive(pid)
    assert _ledger_proc.SPAWNED[pid].returncode == -signal.SIGTERM  # reaped, no zombie left
    assert not Path(instance["pidfile"]).exists()
    assert gs.stop_instance(instance) == f"sleepy already stopped: pidfile {instance['pidfile']} is absent or empty"


def ignores_sigterm(pid):
    """Whether the process has set SIGTERM to be ignored (SigIgn in /proc/PID/status, a bit per signal)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_stop_instance_kills_after_the_timeout(tmp_path, scripts, cleanup):
    instance = sleeper_instance(tmp_path, scripts, cleanup, "ignore-term")
    gs.start_instance(instance)
    pid = pid_of(instance)
    cleanup.pids.append(pid)
    wait_for(lambda: "ignore-term" in " ".join(_ledger_proc.read_proc_cmdline(pid) or []), "the sleeper")
    wait_for(lambda: ignores_sigterm(pid), "the sleeper's SIGTERM handler")
    message = gs.stop_instance(instance, timeout_s=0.3)
    assert message == f"stopped sleepy (process group {pid}) with SIGKILL: still running 0.3s after SIGTERM"
    assert not alive(pid)


def test_stop_instance_refuses_a_real_pid_without_match(tmp_path, cleanup):
    proc = subprocess.Popen(["sleep", "30"])
    cleanup.popens.append(proc)
    pidfile = tmp_path / "a.pid"
    pidfile.write_text(f"{proc.pid}\n")
    instance = dict(PROCESS_INSTANCE, pidfile=str(pidfile))
    wait_for(lambda: _ledger_proc.read_proc_cmdline(proc.pid) == ["sleep", "30"], "sleep")
    with pytest.raises(gs.GatewayError, match=f'pid {proc.pid} .* runs "sleep 30", which does not contain'):
        gs.stop_instance(instance)
    time.sleep(0.05)
    assert proc.poll() is None
    proc.kill()


def test_start_instance_that_cannot_start(tmp_path, cleanup):
    instance = dict(PROCESS_INSTANCE, pidfile=str(tmp_path / "a.pid"), log=str(tmp_path / "a.log"),
                    start_argv=[str(tmp_path / "no-such-program")])
    with pytest.raises(gs.GatewayError, match=r"cannot start litellm-a \(.*no-such-program\)"):
        gs.start_instance(instance)


class FakeSystemctl:
    def __init__(self, folder):
        self.path = folder / "fake-systemctl"
        self.calls_file = folder / "systemctl-calls"
        self.path.write_text(FAKE_SYSTEMCTL.format(calls=self.calls_file))
        self.path.chmod(0o755)

    def __str__(self):
        return str(self.path)

    def calls(self):
        return self.calls_file.read_text().splitlines()


@pytest.fixture
def systemctl(tmp_path):
    """A stand-in for systemctl that records its argv; a unit named broken.service fails as systemd says."""
    return FakeSystemctl(tmp_path)


def test_systemd_instances(systemctl):
    unit = dict(SYSTEMD_INSTANCE, unit="litellm@b.service")
    assert gs.stop_instance(unit, systemctl=str(systemctl)) == (
        f"stop litellm@b.service: done ({systemctl} stop litellm@b.service)")
    assert gs.start_instance(unit, systemctl=str(systemctl)).startswith("start litellm@b.service: done")
    with pytest.raises(gs.GatewayError, match=re.escape(f"{systemctl} stop broken.service exited 1: Job for "
                                                        "broken.service failed because the control process")):
        gs.stop_instance(dict(unit, unit="broken.service"), systemctl=str(systemctl))
    with pytest.raises(gs.GatewayError, match="start broken.service exited 1"):
        gs.start_instance(dict(unit, unit="broken.service"), systemctl=str(systemctl))
    assert systemctl.calls() == [
        "stop litellm@b.service", "start litellm@b.service", "stop broken.service", "start broken.service"]


def test_rolling_restart_of_a_systemd_instance(litellm, systemctl):
    """No front, one unit: systemctl stop and start, then the instance (the imitation) must be ready, answer the
    warm-up and carry the expected fallbacks."""
    unit = dict(SYSTEMD_INSTANCE, url=litellm.url, upstream_server=None)
    lines = []
    steps = gs.rolling_restart([unit], {}, KEY, "small", ["large"], systemctl=str(systemctl), log=lines.append)
    assert systemctl.calls() == ["stop litellm@b.service", "start litellm@b.service"]
    assert len(steps) == 1
    step = steps[0]
    assert set(step) == {"instance", "drained", "stopped", "started", "ready_s", "warmup_status", "warmup_attempts",
                         "fallbacks", "seconds"}
    assert (step["instance"], step["drained"], step["warmup_status"], step["fallbacks"]) == (
        "litellm-b", False, 200, ["large"])
    assert step["stopped"].startswith("stop litellm@b.service: done")
    assert lines[-1] == "litellm-b: warm-up answered 200; fallbacks for small: ['large']"
    with pytest.raises(gs.GatewayError, match=re.escape("instance litellm-b carries fallbacks ['large'], "
                                                        "expected []")) as caught:
        gs.rolling_restart([unit], {}, KEY, "small", [], systemctl=str(systemctl))
    assert caught.value.restore is None and caught.value.steps[0]["fallbacks"] == ["large"]


# --- the front: reload on a fake nginx master ---------------------------------------------------------------------


def test_reload_front_waits_for_the_old_workers(fake_front):
    front, master = fake_front("server 127.0.0.1:1;\n", workers=2, linger=0.4)
    old = gs.front_workers(master.pid)
    result = gs.reload_front(front, timeout_s=30)
    assert result["master_pid"] == master.pid
    assert result["old_workers"] == sorted(old)
    assert result["seconds"] >= 0.4  # the old workers lingered, finishing their "requests"
    assert not any(alive(pid) for pid in old)
    assert len(result["new_workers"]) == 2 and not set(result["new_workers"]) & old
    assert gs.front_workers(master.pid) == set(result["new_workers"])


def test_reload_front_times_out_naming_the_old_workers(fake_front):
    front, master = fake_front("server 127.0.0.1:1;  # reject: nginx refuses this configuration\n")
    old = sorted(gs.front_workers(master.pid))
    message = f"nginx (master {master.pid}) still runs old workers {old[0]}, {old[1]} 0.3s after the reload"
    with pytest.raises(gs.GatewayError, match=re.escape(message) + ".*nginx rejected the new configuration"):
        gs.reload_front(front, timeout_s=0.3)


def test_reload_front_refuses_what_is_not_nginx(tmp_path, cleanup):
    pidfile = tmp_path / "nginx.pid"
    front = {"kind": "nginx", "upstream_file": str(tmp_path / "upstream.conf"), "pidfile": str(pidfile)}
    with pytest.raises(gs.GatewayError, match="is absent or empty: nginx does not run"):
        gs.reload_front(front)
    proc = subprocess.Popen(["sleep", "30"])
    cleanup.popens.append(proc)
    wait_for(lambda: _ledger_proc.read_proc_cmdline(proc.pid) == ["sleep", "30"], "sleep")
    pidfile.write_text(f"{proc.pid}\n")
    with pytest.raises(gs.GatewayError, match=f'pid {proc.pid} from .* runs "sleep 30", not nginx'):
        gs.reload_front(front)
    time.sleep(0.05)
    assert proc.poll() is None  # a SIGHUP would have ended it
    proc.kill()
    proc.wait(timeout=5)
    with pytest.raises(gs.GatewayError, match=f"the nginx master \\(pid {proc.pid}, from .*\\) does not run"):
        gs.reload_front(front)


# --- the rolling restart, end to end on loopback ----------------------------------------------------------------


def test_rolling_restart_drains_each_instance(tmp_path, fake_instance, fake_front):
    first, second = fake_instance("litellm-a"), fake_instance("litellm-b")
    text = upstream_for(first, second)
    front, master = fake_front(text, linger=0.1, events=fake_instance.events)
    os.chmod(front["upstream_file"], 0o640)
    before = {i["name"]: pid_of(i) for i in (first, second)}
    original = Path(front["upstream_file"]).read_bytes()
    lines = []

    steps = gs.rolling_restart([first, second], front, KEY, "small", ["large"], ready_timeout_s=60,
                               drain_timeout_s=30, log=lines.append)

    assert Path(front["upstream_file"]).read_bytes() == original
    assert stat.S_IMODE(os.stat(front["upstream_file"]).st_mode) == 0o640
    after = {i["name"]: pid_of(i) for i in (first, second)}
    assert all(after[name] != before[name] and alive(after[name]) for name in after)
    assert not any(alive(pid) for pid in before.values())
    assert [s["instance"] for s in steps] == ["litellm-a", "litellm-b"]
    for step in steps:
        assert step["drained"] is True and step["warmup_status"] == 200 and step["fallbacks"] == ["large"]
        assert "with SIGTERM" in step["stopped"] and step["started"].startswith(f"started {step['instance']} as pid")
        assert step["ready_s"] < 5 and step["seconds"] >= step["ready_s"]
    # the order that makes it lossless: each instance is out of the upstream list (and the old nginx workers are
    # gone) before it stops, and back only once it is ready and proven
    down = {name: gs.mark_down(text, gs.check_instance(i)["upstream_server"])
            for name, i in (("a", first), ("b", second))}
    events = [e for e in read_events(fake_instance.events) if e["event"] in ("reload", "start")][2:]
    assert [(e["event"], e.get("upstream") or e.get("name")) for e in events] == [
        ("reload", down["a"]), ("start", "litellm-a"), ("reload", text),
        ("reload", down["b"]), ("start", "litellm-b"), ("reload", text)]
    assert [e["pid"] for e in events if e["event"] == "start"] == [after["litellm-a"], after["litellm-b"]]
    assert lines[0].startswith(f"litellm-a: marked down in {front['upstream_file']}; nginx reloaded")


@pytest.mark.parametrize(("chat_status", "expect", "message"), [
    pytest.param(200, ["other"], "instance litellm-a carries fallbacks ['large'], expected ['other']", id="mismatch"),
    pytest.param(500, ["large"], "instance litellm-a: the warm-up request for small answered HTTP 500", id="warmup"),
])
def test_rolling_restart_failure_restores_the_front(fake_instance, fake_front, chat_status, expect, message):
    first, second = fake_instance("litellm-a", chat_status=chat_status), fake_instance("litellm-b")
    text = upstream_for(first, second)
    front, master = fake_front(text, events=fake_instance.events)
    untouched = pid_of(second)
    with pytest.raises(gs.GatewayError, match=re.escape(message)) as caught:
        gs.rolling_restart([first, second], front, KEY, "small", expect, ready_timeout_s=10, drain_timeout_s=30)
    assert Path(front["upstream_file"]).read_text() == text
    assert caught.value.restore == f"restored the upstream file {front['upstream_file']} and reloaded nginx"
    assert [s["instance"] for s in caught.value.steps] == ["litellm-a"]
    assert caught.value.steps[0]["drained"] is True
    reloads = [e["upstream"] for e in read_events(fake_instance.events) if e["event"] == "reload"]
    assert reloads[-1] == text and len(reloads) == 2
    assert pid_of(second) == untouched and alive(untouched)


def test_rolling_restart_checks_everything_before_changing_anything(tmp_path, fake_instance):
    first, second = fake_instance("litellm-a", start=False), fake_instance("litellm-b", start=False)
    upstream = tmp_path / "upstream.conf"
    front = {"kind": "nginx", "upstream_file": str(upstream), "pidfile": str(tmp_path / "nginx.pid")}
    upstream.write_text(upstream_for(first).replace("    keepalive", "    server 10.9.9.9:4000;\n    keepalive"))
    with pytest.raises(gs.GatewayError, match=r"instance litellm-b: no \"server 127\.0\.0\.1:\d+ \.\.\.;\" line"):
        gs.rolling_restart([first, second], front, KEY, "small", [])
    upstream.write_text(upstream_for(first))
    with pytest.raises(gs.GatewayError, match="would leave no server up"):
        gs.rolling_restart([first], front, KEY, "small", [])
    upstream.write_text(upstream_for(first, second).replace("10s;", "10s down;", 1))
    with pytest.raises(gs.GatewayError, match="already marked down"):
        gs.rolling_restart([first, second], front, KEY, "small", [])
    with pytest.raises(gs.GatewayError, match="two instances share the name litellm-a"):
        gs.rolling_restart([first, first], {}, KEY, "small", [])
    with pytest.raises(gs.GatewayError, match="expect_fallback must be a list"):
        gs.rolling_restart([first], {}, KEY, "small", "large")
    assert not Path(first["pidfile"]).exists() and not fake_instance.events.exists()


def test_single_instance_restart_without_front(fake_instance):
    instance = fake_instance("litellm-a", fallbacks={})
    before = pid_of(instance)
    steps = gs.rolling_restart([instance], {}, KEY, "small", [], ready_timeout_s=60, drain_timeout_s=30)
    assert steps[0]["drained"] is False and steps[0]["fallbacks"] == []
    assert pid_of(instance) != before and alive(pid_of(instance))


def test_rolling_restart_stops_waiting_for_an_instance_that_exited(tmp_path, fake_instance):
    argv = [sys.executable, "-c", "import sys; sys.exit(3)", "fake-litellm"]
    instance = fake_instance("litellm-a", start=False, argv=argv)
    started = time.monotonic()
    with pytest.raises(gs.GatewayError, match=r"will not become ready: litellm-a \(pid \d+\) exited \(exit status "
                                              r"3\); see its log"):
        gs.rolling_restart([instance], {}, KEY, "small", [], ready_timeout_s=30)
    assert time.monotonic() - started < 15  # not the 30 s ready timeout


# --- the standalone copy ------------------------------------------------------------------------------------------


def test_source_imports_nothing_from_ansible_but_the_guarded_ledger():
    source = SOURCE.read_text()
    imports = re.findall(r"^\s*(?:from|import)\s+ansible\S*.*$", source, re.MULTILINE)
    assert [line.strip() for line in imports] == [
        "from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base, _ledger_proc"]
    assert "import inferlab_ledger_base as _ledger_base" in source
    assert "import inferlab_ledger_proc as _ledger_proc" in source


STANDALONE_DRIVER = '''\
import json, sys
sys.path.insert(0, sys.argv[1])
import inferlab_gateway_swap as gs
assert gs._ledger_proc.__name__ == "inferlab_ledger_proc", gs._ledger_proc.__name__
instance = json.loads(sys.argv[2])
steps = gs.rolling_restart([instance], {}, sys.argv[3], "small", ["large"], ready_timeout_s=60, drain_timeout_s=30)
print(json.dumps({"steps": steps, "marked": gs.mark_down("server a:1;", "a:1")}))
'''


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_standalone_copy_on_old_python(tmp_path, fake_instance, version):
    """The host copy, beside the ledger's, run by the host's Python (3.8 is ansible-core 2.19's oldest target)."""
    python = require_python(version)
    folder = tmp_path / "state" / "bin"
    folder.mkdir(parents=True)
    install_ledger(folder)
    shutil.copy(SOURCE, folder / "inferlab_gateway_swap.py")
    (folder / "driver.py").write_text(STANDALONE_DRIVER)
    instance = fake_instance("litellm-a")
    before = pid_of(instance)
    out = subprocess.run([python, "-I", str(folder / "driver.py"), str(folder), json.dumps(instance), KEY],
                         capture_output=True, text=True, timeout=120, cwd=str(tmp_path), check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["marked"] == "server a:1 down;"
    assert result["steps"][0]["fallbacks"] == ["large"] and "with SIGTERM" in result["steps"][0]["stopped"]
    assert pid_of(instance) != before and alive(pid_of(instance))


# --- the ledger kind gateway_config -------------------------------------------------------------------------------

LEDGER_HOST = "lab-gw"
DROP = object()  # a key left out of the params
FRONT = {"kind": "nginx", "upstream_file": "/srv/gw/nginx/upstream.conf", "pidfile": "/srv/gw/run/nginx.pid"}
CHANGE = {"kind": "litellm", "config_path": "/srv/gw/litellm.yaml", "original_sha256": "a" * 64,
          "backup_path": "/srv/gw/state/backup/litellm.yaml.2026-11-30T101500Z-ab12", "instances": [PROCESS_INSTANCE],
          "front": FRONT, "admin_key_file": "/srv/gw/master.key", "public_model": "small", "original_fallbacks": [],
          "ready_timeout_s": 90, "drain_timeout_s": 30,
          "front_backup_path": "/srv/gw/state/backup/upstream.conf.2026-11-30T101500Z-ab12",
          "front_original_sha256": "b" * 64}


def test_gateway_config_params_are_checked_and_normalised(tmp_path):
    line = _ledger_core.record(str(tmp_path / "ledger"), LEDGER_HOST, "gateway_config", CHANGE, run_id="run1")
    params = line["params"]
    assert (line["kind"], line["state"]) == ("gateway_config", "pending")
    assert params["instances"] == [gs.check_instance(PROCESS_INSTANCE)]
    assert params["instances"][0]["url"] == "http://169.254.77.1:4001"
    assert (params["ready_timeout_s"], params["drain_timeout_s"]) == (90.0, 30.0)
    assert {k: v for k, v in params.items() if k != "instances"} == {
        k: v for k, v in CHANGE.items() if k != "instances"}
    without_front = dict(CHANGE, front={})
    for key in ("front_backup_path", "front_original_sha256", "original_fallbacks", "ready_timeout_s"):
        del without_front[key]
    params = _ledger_core.record(str(tmp_path / "ledger"), LEDGER_HOST, "gateway_config", without_front)["params"]
    assert (params["front"], params["original_fallbacks"], params["ready_timeout_s"]) == ({}, [], 60.0)


@pytest.mark.parametrize(("change", "message"), [
    pytest.param({"original_sha256": "abc"}, "\"original_sha256\" must be a hex sha256, got 'abc'", id="short_sha"),
    pytest.param({"original_sha256": "A" * 64}, '"original_sha256" must be a hex sha256', id="uppercase_sha"),
    pytest.param({"original_sha256": DROP}, "\"original_sha256\" must be a hex sha256, got None", id="no_sha"),
    pytest.param({"front_original_sha256": "z" * 64}, '"front_original_sha256" must be a hex sha256',
                 id="bad_front_sha"),
    pytest.param({"config_path": "litellm.yaml"}, "config_path must be an absolute path, got 'litellm.yaml'",
                 id="relative_config"),
    pytest.param({"backup_path": "backup/litellm.yaml.1"}, "backup_path must be an absolute path",
                 id="relative_backup"),
    pytest.param({"admin_key_file": "master.key"}, "admin_key_file must be an absolute path", id="relative_key"),
    pytest.param({"front_backup_path": "upstream.conf.1"}, "front_backup_path must be an absolute path",
                 id="relative_front_backup"),
    pytest.param({"front": dict(FRONT, upstream_file="upstream.conf")}, '"upstream_file" must be an absolute path',
                 id="relative_upstream"),
    pytest.param({"colour": "blue", "size": 1}, "unknown params for a gateway_config entry: colour, size",
                 id="unknown_keys"),
    pytest.param({"front_original_sha256": DROP},
                 'a gateway_config entry with a front needs "front_original_sha256"', id="front_without_sha"),
    pytest.param({"kind": "nginx"}, "gateway kind must be \"litellm\", got 'nginx'", id="kind"),
    pytest.param({"instances": []}, '"instances" must be a non-empty list', id="no_instances"),
    pytest.param({"instances": [dict(PROCESS_INSTANCE, pidfile="a.pid")]}, '"pidfile" must be an absolute path',
                 id="bad_instance"),
    pytest.param({"public_model": ""}, "public_model must be a non-empty string", id="no_public_model"),
    pytest.param({"original_fallbacks": "large"}, "expect_fallback must be a list", id="fallbacks_not_a_list"),
    pytest.param({"original_models": "small"}, '"original_models" must be a non-empty list of model roles, got '
                 "'small'", id="models_not_a_list"),
    pytest.param({"original_models": []}, '"original_models" must be a non-empty list', id="models_empty"),
    pytest.param({"original_models": ["small", ""]}, '"original_models" must be a non-empty list',
                 id="models_empty_name"),
    pytest.param({"drain_timeout_s": "soon"}, "\"drain_timeout_s\" must be a number of seconds, got 'soon'",
                 id="timeout"),
])
def test_gateway_config_params_refused(tmp_path, change, message):
    params = {k: v for k, v in dict(CHANGE, **change).items() if v is not DROP}
    with pytest.raises(_ledger_core.LedgerError, match=re.escape(message)):
        _ledger_core.record(str(tmp_path / "ledger"), LEDGER_HOST, "gateway_config", params)
    assert not (tmp_path / "ledger").exists()


@pytest.fixture
def gateway(tmp_path):
    """A loopback gateway (gateway_fakes.Gateway): backends, fake LiteLLM instances, a fake nginx front."""
    made = Gateway(tmp_path, Processes(tmp_path))
    yield made
    made.close()


def gateway_change(gateway, stamp="2026-11-30T101500Z-ab12"):
    """The params the gateway_fallback module records for this gateway, before it writes anything."""
    backup = gateway.ledger_dir.parent / "backup"
    upstream = gateway.front["upstream_file"]
    return {"kind": "litellm", "config_path": str(gateway.config_path),
            "original_sha256": _ledger_core.sha256_file(str(gateway.config_path)),
            "backup_path": str(backup / f"litellm.yaml.{stamp}"), "instances": gateway.instances,
            "front": gateway.front, "admin_key_file": str(gateway.key_file), "public_model": "small",
            "original_fallbacks": [], "ready_timeout_s": 10, "drain_timeout_s": 5,
            "front_backup_path": str(backup / f"upstream.conf.{stamp}"),
            "front_original_sha256": _ledger_core.sha256_file(upstream)}


def test_undo_of_a_pending_gateway_config_that_changed_nothing(gateway):
    """A run killed after recording `pending` and before writing anything: no backup, the original config, every
    instance reporting the original fallbacks. The undo proves that and restarts nothing."""
    original = gateway.write_config()
    gateway.add_instance("litellm-a")
    gateway.add_instance("litellm-b")
    gateway.add_front()
    upstream = Path(gateway.front["upstream_file"]).read_bytes()
    ledger_dir = str(gateway.ledger_dir)
    params = gateway_change(gateway)
    entry = _ledger_core.record(ledger_dir, LEDGER_HOST, "gateway_config", params, run_id="run1")
    before = gateway.pids()

    result = _ledger_undo.undo(ledger_dir, LEDGER_HOST)

    assert result["undone"] == [entry["id"]] and result["failed"] == []
    assert result["details"][0]["message"] == (
        f"the config {gateway.config_path} is the original; the upstream file {gateway.front['upstream_file']} is "
        "the original; every instance already runs it")
    assert gateway.pids() == before and all(alive(pid) for pid in before.values())
    assert gateway.reloads() == []
    assert gateway.config_path.read_bytes() == original
    assert Path(gateway.front["upstream_file"]).read_bytes() == upstream
    assert not Path(params["backup_path"]).exists() and not Path(params["front_backup_path"]).exists()
    states = [line["state"] for line in _ledger_core.read_ledger(ledger_dir, LEDGER_HOST)[0]]
    assert states == ["pending", "undone"]


@pytest.mark.parametrize("version", ["current", "3.8"])
def test_standalone_undo_of_an_interrupted_swap(gateway, version):
    """The rolling restart was killed after litellm-a came back with the fallback and before it was put back in the
    upstream file: the config is the new one and the upstream file still marks litellm-a down. The ledger script,
    run alone on the host (beside inferlab_gateway_swap.py, as the restore runs it), puts both files back byte for
    byte, reloads the front, and restarts litellm-a only."""
    python = sys.executable if version == "current" else require_python(version)
    original = gateway.write_config()
    first = gateway.add_instance("litellm-a")
    gateway.add_instance("litellm-b")
    front = gateway.add_front()
    upstream = Path(front["upstream_file"]).read_bytes()
    ledger_dir = str(gateway.ledger_dir)
    # what the module does: pending, the backups, the new config, applied
    params = gateway_change(gateway)
    entry = _ledger_core.record(ledger_dir, LEDGER_HOST, "gateway_config", params, run_id="run1")
    Path(params["backup_path"]).parent.mkdir(parents=True)
    gs._ledger_base.write_atomic(params["backup_path"], original, mode=0o600)
    gs._ledger_base.write_atomic(params["front_backup_path"], upstream, mode=0o600)
    gs._ledger_base.write_atomic(str(gateway.config_path), gateway.config_text(fallback=True).encode())
    _ledger_core.mark(ledger_dir, LEDGER_HOST, entry["id"], "applied", run_id="run1")
    # the rolling restart, as far as litellm-a's restart
    down = gs.mark_down(upstream.decode(), gs.check_instance(first)["upstream_server"])
    gs._ledger_base.write_atomic(front["upstream_file"], down.encode())
    gs.reload_front(front, 5)
    gs.stop_instance(first, 5)
    gs.start_instance(first)
    gs.wait_ready(first["url"], 10, poll_s=0.02)
    assert gateway.fallbacks() == {"litellm-a": ["large"], "litellm-b": []}
    before = gateway.pids()

    folder = gateway.ledger_dir.parent / "bin"
    folder.mkdir()
    install_ledger(folder)
    shutil.copy(SOURCE, folder / "inferlab_gateway_swap.py")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}  # no PYTHONPATH: the copies alone
    out = subprocess.run([python, str(folder / "inferlab_ledger.py"), "undo", "--ledger-dir", ledger_dir, "--host",
                          LEDGER_HOST, "--json"], capture_output=True, text=True, timeout=60, env=env,
                         cwd=str(gateway.dir), check=False)

    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["undone"] == [entry["id"]] and result["failed"] == []
    assert result["details"][0]["message"] == (
        f"the config {gateway.config_path} restored from {params['backup_path']}; the upstream file "
        f"{front['upstream_file']} restored from {params['front_backup_path']}; restarted litellm-a with it")
    assert gateway.config_path.read_bytes() == original
    assert stat.S_IMODE(gateway.config_path.stat().st_mode) == 0o640
    assert Path(front["upstream_file"]).read_bytes() == upstream
    after = gateway.pids()
    assert after["litellm-a"] != before["litellm-a"] and alive(after["litellm-a"])
    assert after["litellm-b"] == before["litellm-b"] and alive(after["litellm-b"])
    assert gateway.fallbacks() == {"litellm-a": [], "litellm-b": []}
    # the front: put back, then litellm-a drained and put back again
    assert gateway.reloads()[-3:] == [upstream.decode(), down, upstream.decode()]
    states = [line["state"] for line in _ledger_core.read_ledger(ledger_dir, LEDGER_HOST)[0]]
    assert states == ["pending", "applied", "undone"]


def test_the_warm_up_waits_out_a_backend_coming_back():
    answers = iter([{'status': 503, 'body': 'circuits open'}, {'status': None, 'body': ''},
                    {'status': 200, 'body': 'ok'}])
    answer, attempts = gs.warm_up('http://x', 'small', 'k', 10, interval_s=0.01,
                                  chat=lambda url, model, key: next(answers))
    assert (answer['status'], attempts) == (200, 3)


def test_the_warm_up_gives_up_at_its_deadline_and_does_not_retry_a_client_error():
    calls = []

    def chat(url, model, key):
        calls.append(1)
        return {'status': 503, 'body': 'down'}
    answer, attempts = gs.warm_up('http://x', 'small', 'k', 0.05, interval_s=0.02, chat=chat)
    assert answer['status'] == 503 and attempts == len(calls) and 1 <= attempts <= 4
    answer, attempts = gs.warm_up('http://x', 'small', 'k', 10, interval_s=0.01,
                                  chat=lambda url, model, key: {'status': 401, 'body': 'no'})
    assert (answer['status'], attempts) == (401, 1)


def test_listed_models(gateway):
    gateway.write_config()
    instance = gateway.add_instance("litellm-a")
    assert gs.listed_models(instance["url"] + "/", gateway.key) == ["small", "large"]
    # LiteLLM without a database answers a key it does not know with 400 "No connected db."
    with pytest.raises(gs.GatewayError, match=r"/v1/models answered HTTP 400: .*No connected db") as caught:
        gs.listed_models(instance["url"], "sk-wrong")
    assert "sk-wrong" not in str(caught.value)


def test_undo_of_added_roles_restarts_the_instances_that_serve_them(gateway):
    """A change that added a role leaves the public role's fallbacks as they were, so they cannot tell the original
    config from the changed one. An entry that recorded the original's roles (original_models) is undone by
    restarting every instance that still lists another role."""
    original = gateway.write_config()
    gateway.add_instance("litellm-a")
    gateway.add_instance("litellm-b")
    front = gateway.add_front()
    upstream = Path(front["upstream_file"]).read_bytes()
    ledger_dir = str(gateway.ledger_dir)
    params = dict(gateway_change(gateway), original_models=["small", "large"])
    entry = _ledger_core.record(ledger_dir, LEDGER_HOST, "gateway_config", params, run_id="run1")
    Path(params["backup_path"]).parent.mkdir(parents=True)
    gs._ledger_base.write_atomic(params["backup_path"], original, mode=0o600)
    gs._ledger_base.write_atomic(params["front_backup_path"], upstream, mode=0o600)
    solo = ("  - model_name: solo-lab-b\n    litellm_params:\n      model: openai/small-model\n"
            f"      api_base: {gateway.backends['small'].api_base}\n      api_key: none\n")
    changed = original.decode().replace("litellm_settings:", solo + "litellm_settings:", 1)
    gs._ledger_base.write_atomic(str(gateway.config_path), changed.encode())
    _ledger_core.mark(ledger_dir, LEDGER_HOST, entry["id"], "applied", run_id="run1")
    gs.rolling_restart(gateway.instances, front, gateway.key, "small", [], ready_timeout_s=60, drain_timeout_s=30)
    assert {i["name"]: gs.listed_models(i["url"], gateway.key) for i in gateway.instances} == {
        "litellm-a": ["small", "large", "solo-lab-b"], "litellm-b": ["small", "large", "solo-lab-b"]}
    before = gateway.pids()

    result = _ledger_undo.undo(ledger_dir, LEDGER_HOST)

    assert result["undone"] == [entry["id"]] and result["failed"] == []
    assert result["details"][0]["message"].endswith("restarted litellm-a, litellm-b with it")
    assert gateway.config_path.read_bytes() == original
    assert Path(front["upstream_file"]).read_bytes() == upstream
    after = gateway.pids()
    assert all(after[name] != before[name] and alive(after[name]) for name in after)
    assert {i["name"]: gs.listed_models(i["url"], gateway.key) for i in gateway.instances} == {
        "litellm-a": ["small", "large"], "litellm-b": ["small", "large"]}

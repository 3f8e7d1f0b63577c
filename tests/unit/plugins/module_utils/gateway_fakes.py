# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Loopback fakes of the gateway, shared by the tests of _gateway_swap, of the ledger's gateway_config kind and of
the gateway_fallback module. Nothing here talks to anything but 127.0.0.1 servers started by the test itself.

- ``FAKE_NGINX``: a stand-in for an nginx master (pidfile, workers re-forked on SIGHUP, old workers lingering);
  ``start_fake_front`` runs one and returns the front dict.
- ``FAKE_LITELLM``: a stand-in for one LiteLLM 1.108.7 proxy instance started as ``litellm --config FILE --host
  127.0.0.1 --port PORT``. Like LiteLLM it reads its YAML config once, at start: the model roles and their
  ``api_base`` from ``model_list``, the general fallbacks from ``litellm_settings.fallbacks`` (and
  ``router_settings.fallbacks``), the master key from ``general_settings.master_key`` (``os.environ/NAME`` too).
  It answers as the lab measured LiteLLM 1.108.7 (``/health/readiness``, ``/v1/models``, a wrong key without a
  database: HTTP 400 "No connected db.", ``/v1/chat/completions`` with the ``x-litellm-*`` headers, an unknown model,
  ``GET /fallback/<role>``). A chat request is really forwarded to the role's backend (with the deployment's model
  name: ``openai/small-model`` sends ``small-model``); a backend that refuses makes it try the role's general
  fallbacks in order, as LiteLLM does.
- ``Backend``: one OpenAI-compatible model server (the role's ``api_base``) in a thread of the test process.
- ``Gateway``: the lab's gateway in small: two backends (``small``, ``large``), a 0600 master key file, a config file,
  N fake LiteLLM instances started from a start script that reads the key file (like the lab's ``start-litellm``)
  and, optionally, a fake nginx front listing them.
- ``Processes``: every process a test starts, killed by its pid at the end.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as gs
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc

FAKE_NGINX = '''\
"""A stand-in for an nginx master: writes its pidfile, forks workers; on SIGHUP it reads the upstream file (a file
containing "reject" is a configuration nginx refuses: it keeps its old workers), forks new workers and sends SIGQUIT
to the old ones, which linger (finishing their in-flight requests) before they exit. Reloads go to the events file."""
import json, os, signal, sys, time

pidfile, count, upstream, events, linger = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
flags = {"hup": False, "term": False}
signal.signal(signal.SIGHUP, lambda signum, frame: flags.update(hup=True))
signal.signal(signal.SIGTERM, lambda signum, frame: flags.update(term=True))
# blocked here, so inherited blocked by each worker until its handler is set: a worker not yet scheduled after the
# fork would otherwise die at once of a SIGQUIT, not linger (seen on a loaded machine)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGQUIT})


def worker():
    quitting = {"now": False}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, lambda signum, frame: quitting.update(now=True))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGQUIT})  # a SIGQUIT sent before now waited, blocked
    while not quitting["now"]:
        time.sleep(0.01)
    time.sleep(linger)


def spawn():
    pid = os.fork()
    if pid == 0:
        try:
            worker()
        finally:
            os._exit(0)
    return pid


def record(event):
    with open(events, "a") as handle:
        handle.write(json.dumps(event) + "\\n")


current = [spawn() for index in range(count)]
with open(pidfile + ".tmp", "w") as handle:
    handle.write("%d\\n" % os.getpid())
os.rename(pidfile + ".tmp", pidfile)
while not flags["term"]:
    if flags["hup"]:
        flags["hup"] = False
        with open(upstream) as handle:
            text = handle.read()
        if "reject" in text:
            record({"event": "rejected"})
        else:
            record({"event": "reload", "upstream": text})
            old, current = current, [spawn() for index in range(count)]
            for pid in old:
                os.kill(pid, signal.SIGQUIT)
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
    time.sleep(0.01)
for pid in current:
    os.kill(pid, signal.SIGTERM)
'''

FAKE_LITELLM = '''\
"""A stand-in for one LiteLLM 1.108.7 proxy instance: litellm --config FILE --host 127.0.0.1 --port PORT.

The config is read once, at start (a changed file needs a restart, as with LiteLLM). Only 127.0.0.1 is served and
only 127.0.0.1 backends are contacted."""
import argparse, json, os, sys, urllib.error, urllib.parse, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--host", required=True)
parser.add_argument("--port", type=int, required=True)
args = parser.parse_args()
if args.host != "127.0.0.1":
    sys.exit("this fake serves on 127.0.0.1 only")
with open(args.config) as handle:
    config = yaml.safe_load(handle)
general = config.get("general_settings") or {}
master_key = general["master_key"]
if master_key.startswith("os.environ/"):
    master_key = os.environ[master_key[len("os.environ/"):]]
has_db = bool(general.get("database_url"))
deployments = {}
for entry in config["model_list"]:
    params = entry["litellm_params"]
    deployments.setdefault(entry["model_name"], []).append((params["api_base"], params["model"].split("/", 1)[-1]))
fallbacks = {}
for section in ("litellm_settings", "router_settings"):
    for item in (config.get(section) or {}).get("fallbacks") or []:
        for role, targets in item.items():
            fallbacks.setdefault(role, []).extend(targets)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def forward(api_base, body):
    """POST the request to one backend; its answer (status, payload), or None when it cannot serve."""
    if urllib.parse.urlsplit(api_base).hostname != "127.0.0.1":
        return None
    request = urllib.request.Request(api_base.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with opener.open(request, timeout=5) as response:
            return response.getcode(), json.loads(response.read())
    except (OSError, ValueError):
        return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, payload, headers=()):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorised(self):
        given = self.headers.get("Authorization") or ""
        key = given[len("Bearer "):] if given.startswith("Bearer ") else ""
        if key == master_key:
            return True
        if not key:
            self.answer(401, {"error": {"message": "Authentication Error, No api key passed in.",
                                        "type": "auth_error", "param": "None", "code": "401"}})
        elif has_db:
            # LiteLLM shortens the key it echoes; echoing it whole is the worst case for whoever quotes the body
            self.answer(401, {"error": {"message": "Authentication Error, Invalid proxy server token passed. "
                                                   "Received API Key = %s" % key,
                                        "type": "auth_error", "param": "None", "code": "401"}})
        else:
            self.answer(400, {"error": {"message": "No connected db.", "type": "no_db_connection", "param": None,
                                        "code": "400"}})
        return False

    def do_GET(self):
        if self.path == "/health/readiness":
            return self.answer(200, {"status": "healthy", "db": "Not connected"})
        if self.path in ("/v1/models", "/models"):
            if self.authorised():
                self.answer(200, {"data": [{"id": role, "object": "model", "created": 1677610602,
                                            "owned_by": "openai"} for role in deployments], "object": "list"})
            return None
        if self.path.startswith("/fallback/"):
            if self.authorised():
                role = urllib.parse.unquote(self.path[len("/fallback/"):])
                if fallbacks.get(role):
                    return self.answer(200, {"model": role, "fallback_models": fallbacks[role],
                                             "fallback_type": "general"})
                self.answer(404, {"detail": {"error": "No general fallbacks configured for model '%s'" % role}})
            return None
        return self.answer(404, {"detail": "Not Found"})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path not in ("/v1/chat/completions", "/chat/completions"):
            return self.answer(404, {"detail": "Not Found"})
        if not self.authorised():
            return None
        body = json.loads(raw)
        model = body.get("model")
        if model not in deployments:
            return self.answer(400, {"error": {"message": "/chat/completions: Invalid model name passed in model=%s. "
                                                          "Call `/v1/models` to view available models for your key."
                                                          % model, "type": "None", "param": "None", "code": "400"}})
        for attempt, role in enumerate([model] + fallbacks.get(model, [])):
            for api_base, backend_model in deployments.get(role, []):
                served = forward(api_base, dict(body, model=backend_model))
                if served is not None:
                    return self.answer(served[0], served[1], headers=(
                        ("x-litellm-model-api-base", api_base), ("x-litellm-model-group", role),
                        ("x-litellm-attempted-fallbacks", str(attempt))))
        message = ("litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.. "
                   "Received Model Group=%s\\nAvailable Model Group Fallbacks=%s" % (model, fallbacks.get(model)))
        return self.answer(500, {"error": {"message": message, "type": None, "param": None, "code": "500"}})


server = ThreadingHTTPServer((args.host, args.port), Handler)
server.daemon_threads = True
server.serve_forever()
'''

# like the lab's start-litellm: the master key comes from its 0600 file, never from the command line
START_LITELLM = '''\
#!/bin/sh
set -eu
LITELLM_MASTER_KEY="$(cat '{key_file}')"
export LITELLM_MASTER_KEY
exec '{python}' '{fake}' --config '{config}' --host 127.0.0.1 --port "$1"
'''

# the lab's config (roles/lab/templates/gateway/litellm.yaml.j2) with loopback backends
CONFIG = '''\
# The test gateway's LiteLLM config: comments and layout must come back byte for byte after the fallback.
model_list:
  - model_name: small
    litellm_params:
      model: openai/small-model
      api_base: {small}
      api_key: none
  - model_name: large
    litellm_params:
      model: openai/large-model
      api_base: {large}
      api_key: none
litellm_settings:
  context_window_fallbacks: [{{"small": ["large"]}}]
{fallbacks}router_settings:
  num_retries: 0
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
{database}'''


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(pid):
    info = _ledger_proc.read_proc_stat(pid)
    return info is not None and info["state"] not in ("Z", "X")


def wait_for(condition, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def pid_of(instance):
    return int(Path(instance["pidfile"]).read_text())


def read_events(path):
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


class Processes:
    """Every process a test starts, by pid: ``pids`` (killed as a process group when it leads one), ``pidfiles``
    (whatever pid they name at the end) and ``popens``. Only processes whose command line mentions ``tmp_path`` are
    killed, so a reused pid is never touched; each is reaped when it is our child (the processes a standalone script
    started are not: init reaps them)."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.pids = []
        self.pidfiles = []
        self.popens = []

    def kill_all(self):
        pids = list(self.pids) + [p.pid for p in self.popens]
        for pidfile in self.pidfiles:
            try:
                pids.append(int(Path(pidfile).read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
        for pid in pids:
            if alive(pid) and str(self.tmp_path) in " ".join(_ledger_proc.read_proc_cmdline(pid) or []):
                try:
                    if _ledger_proc.read_proc_stat(pid)["pgrp"] == pid:
                        os.killpg(pid, signal.SIGKILL)
                    else:
                        os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc = _ledger_proc.SPAWNED.pop(pid, None)
            if proc is not None:
                proc.wait(timeout=10)
        for proc in self.popens:
            proc.wait(timeout=10)


def start_fake_front(script, folder, upstream_text, processes, workers=2, linger=0.0, events=None):
    """A running fake nginx master (own session, killed as a process group at the end) whose upstream file is
    ``folder/upstream.conf``; returns ``(front dict, Popen)``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    upstream = folder / "upstream.conf"
    upstream.write_text(upstream_text)
    pidfile = folder / "nginx.pid"
    events = events or folder / "front-events.jsonl"
    proc = subprocess.Popen([sys.executable, str(script), str(pidfile), str(workers), str(upstream), str(events),
                             str(linger)], start_new_session=True)
    processes.popens.append(proc)
    wait_for(lambda: pidfile.exists() and len(gs.front_workers(proc.pid)) == workers, "the fake nginx master")
    return {"kind": "nginx", "upstream_file": str(upstream), "pidfile": str(pidfile)}, proc


def upstream_for(*instances):
    """An nginx upstream file listing the instances, as the lab writes it."""
    lines = ["# the gateway front (inferlab lab)", "upstream litellm {"]
    lines += [f"    server {gs.check_instance(i)['upstream_server']} max_fails=1 fail_timeout=10s;" for i in instances]
    lines += ["    keepalive 8;", "}", ""]
    return "\n".join(lines)


class _BackendHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.requests.append({"path": self.path, "model": body.get("model")})
        if self.path != "/v1/chat/completions":
            status, payload = 404, {"detail": "Not Found"}
        else:
            status, payload = 200, {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": f"ok from {self.server.name}"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Backend:
    """One model server behind the gateway on 127.0.0.1 (an OpenAI-compatible ``POST /v1/chat/completions``) in a
    thread; ``api_base`` is what the gateway config names. ``stop()`` closes its port, so the gateway meets a refused
    connection, as when the primary is paused; ``start()`` opens the same port again."""

    def __init__(self, name):
        self.name = name
        self.requests = []
        self.port = 0
        self.server = None
        self.start()
        self.api_base = f"http://127.0.0.1:{self.port}/v1"

    def start(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), _BackendHandler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.server.name = self.name
        self.server.requests = self.requests
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=5)
            self.server = None


class Gateway:
    """A LiteLLM gateway on loopback, laid out like the lab's (``tmp_path/gw``): backends ``small`` and ``large``,
    the master key in a 0600 file, the config (``write_config``), instances started from a start script
    (``add_instance``) and a fake nginx front (``add_front``); ``close()`` stops all of it."""

    PUBLIC, TARGET = "small", "large"

    def __init__(self, tmp_path, processes, key="sk-gw-master-0123456789"):
        self.tmp_path = tmp_path
        self.processes = processes
        self.dir = tmp_path / "gw"
        self.bin = self.dir / "bin"
        self.bin.mkdir(parents=True)
        self.fake = self.bin / "fake-litellm.py"
        self.fake.write_text(FAKE_LITELLM)
        self.nginx = self.bin / "nginx-fake-master.py"
        self.nginx.write_text(FAKE_NGINX)
        self.key = key
        self.key_file = self.dir / "master.key"
        self.key_file.write_text(key + "\n")
        self.key_file.chmod(0o600)
        self.config_path = self.dir / "litellm.yaml"
        self.ledger_dir = self.dir / "state" / "ledger"
        self.backends = {"small": Backend("small"), "large": Backend("large")}
        self.instances = []
        self.front = {}
        self.front_proc = None
        self.front_events = self.dir / "front" / "events.jsonl"

    def config_text(self, fallback=False, database=False):
        return CONFIG.format(small=self.backends["small"].api_base, large=self.backends["large"].api_base,
                             fallbacks='  fallbacks: [{"small": ["large"]}]\n' if fallback else "",
                             database="  database_url: postgresql://127.0.0.1:5432/litellm\n" if database else "")

    def write_config(self, fallback=False, database=False, mode=0o640):
        """Write the config file; returns its bytes."""
        data = self.config_text(fallback, database).encode()
        self.config_path.write_bytes(data)
        self.config_path.chmod(mode)
        return data

    def add_instance(self, name, start=True):
        """A process instance dict (started through start_instance, so spawn_detached writes its pidfile)."""
        port = free_port()
        script = self.bin / f"start-fake-litellm-{name}"
        script.write_text(START_LITELLM.format(key_file=self.key_file, python=sys.executable, fake=self.fake,
                                               config=self.config_path))
        instance = {"name": name, "url": f"http://127.0.0.1:{port}", "manager": "process",
                    "pidfile": str(self.dir / "run" / f"{name}.pid"), "start_argv": ["/bin/sh", str(script), str(port)],
                    "log": str(self.dir / "logs" / f"{name}.log"), "match": "fake-litellm"}
        self.processes.pidfiles.append(instance["pidfile"])
        if start:
            gs.start_instance(instance)
            self.processes.pids.append(pid_of(instance))
            gs.wait_ready(instance["url"], 10, poll_s=0.02,
                          failed=lambda: None if alive(pid_of(instance)) else Path(instance["log"]).read_text())
        self.instances.append(instance)
        return instance

    def add_front(self, workers=1, linger=0.0):
        self.front, self.front_proc = start_fake_front(self.nginx, self.dir / "front", upstream_for(*self.instances),
                                                       self.processes, workers=workers, linger=linger,
                                                       events=self.front_events)
        return self.front

    def pids(self):
        return {i["name"]: pid_of(i) for i in self.instances}

    def fallbacks(self):
        """What each instance reports for ``GET /fallback/small`` now."""
        return {i["name"]: gs.fallback_models(i["url"], self.PUBLIC, self.key) for i in self.instances}

    def reloads(self):
        return [e["upstream"] for e in read_events(self.front_events) if e["event"] == "reload"]

    def close(self):
        self.processes.kill_all()
        for backend in self.backends.values():
            backend.stop()

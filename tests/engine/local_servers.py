"""Engine processes on loopback for the engine's tests and its bench: started by PID, each in a session of its own,
readiness read from the kernel's socket table or /health, and stopped in the order llama.cpp needs (llama-server
before the RPC servers it uses: an RPC server that goes first makes llama-server abort on its way out)."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from ansible_collections.inferlab.distributed.plugins.plugin_utils._llamacpp_launch import (
    rpc_server_argv,
    server_argv,
)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port):
    """Whether a socket listens on 127.0.0.1:port, from /proc/net/tcp (no connection made: llama.cpp's RPC server
    serves one client at a time, and a probe would be one)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A" and local == f"0100007F:{port:04X}":
            return True
    return False


def http(url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback only)
        raw = response.read().decode()
    return json.loads(raw) if raw.startswith(("{", "[")) else raw


class Servers:
    """Processes started for one test (or one bench mode), each in a session of its own; stop() ends them newest
    first."""

    def __init__(self, bin_dir, tmp_path):
        self.bin_dir, self.tmp_path, self.started = bin_dir, tmp_path, []

    def start(self, argv, log):
        handle = open(self.tmp_path / log, "wb")
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        handle.close()
        proc.log = self.tmp_path / log
        self.started.append(proc)
        return proc

    def rpc_server(self):
        port = free_port()
        argv = rpc_server_argv({"bin_dir": str(self.bin_dir), "host": "127.0.0.1", "port": port})
        proc = self.start(argv, log=f"rpc-{port}.log")
        # its stdout is a file, so block-buffered: what it prints comes late; the kernel's socket table does not
        wait_for(lambda: listening(port) or proc.poll() is not None, f"the RPC server to listen on {port}")
        assert proc.poll() is None, proc.log.read_text()
        proc.endpoint = f"127.0.0.1:{port}"
        return proc

    def llama_server(self, model, rpc, draft=None, **changes):
        """llama-server on the command line the llamacpp filters build (roles use the same); changes replace spec
        keys (None leaves an option out)."""
        port = free_port()
        spec = {"bin_dir": str(self.bin_dir), "model_path": str(model), "host": "127.0.0.1", "port": port,
                "rpc": [r.endpoint for r in rpc], "threads": 1, "context_length": 4096,
                # the slots' prompt cache, which a client can erase (with a slot save path), and none in host memory,
                # which it cannot
                "slot_save_path": str(self.tmp_path), "cache_ram_mib": 0}
        if draft:
            spec["draft"] = {"model_path": str(draft), "max_tokens": 4}
        proc = self.start(server_argv(dict(spec, **changes)), log=f"server-{port}.log")
        proc.url = f"http://127.0.0.1:{port}"
        return proc

    def wait_ready(self, server):
        def ready():
            if server.poll() is not None:
                return True
            try:
                return http(server.url + "/health", timeout=2).get("status") == "ok"
            except (OSError, urllib.error.HTTPError, ValueError):
                return False
        wait_for(ready, "llama-server's /health")
        assert server.poll() is None, server.log.read_text()[-3000:]

    def stop(self):
        for proc in reversed(self.started):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)


def wait_for(condition, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the labserver tests: the lab model's config, an SSE reader, a handle on a server process, and two
ranks' TP links in process (exchange_steps)."""

from __future__ import annotations

import http.client
import io
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

from inferlab.lab.server.tp import KIND_DECODE, KIND_PREFILL, Link, NcclLog

SRC = Path(__file__).resolve().parents[3] / "src"
MODEL = "lab-qwen-small"
LAB_MODEL_CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
                    "num_hidden_layers": 24, "max_position_embeddings": 32768}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def parse_sse(raw: bytes) -> list:
    """The events of a finished SSE body: parsed JSON objects, and the literal ``[DONE]``."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), f"not an SSE data event: {block[:80]!r}"
        data = block[len("data: "):]
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


class LabServer:
    """One labserver process; ``port`` is its HTTP port (rank 1 opens none)."""

    def __init__(self, proc: subprocess.Popen, port: int, log: Path, pidfile: Path):
        self.proc, self.port, self.log, self.pidfile = proc, port, log, pidfile

    def request(self, method, path, body=None, headers=None, timeout=10):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None):
        status, _headers, raw = self.request(method, path, body, headers)
        assert status == 200, (status, raw)
        return json.loads(raw)

    def metric(self, name: str, **labels) -> float:
        """The sum of a metric's samples whose labels include ``labels``."""
        text = self.request("GET", "/metrics")[2].decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def wait_ready(self, timeout=15) -> None:
        """Until the pidfile is there (the server writes it once it serves; TP rank 0 once rank 1 joined)."""
        deadline = time.monotonic() + timeout
        while not (self.pidfile.is_file() and self.pidfile.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"labserver did not start (rc {self.proc.poll()}):\n{self.log.read_text()}")
            time.sleep(0.02)

    def wait_exit(self, timeout=10) -> int:
        return self.proc.wait(timeout=timeout)

    def log_text(self) -> str:
        return self.log.read_text()


LO = ("lo", "127.0.0.1")


def linked_pair(env):
    """Rank 0's and rank 1's Link over a loopback TCP connection, each logging to its own buffer."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _addr = server.accept()
    logs = (io.StringIO(), io.StringIO())
    return [Link(sock, rank, LO, NcclLog(rank, env, stream=logs[rank])) for rank, sock in ((0, accepted),
                                                                                           (1, client))], logs


def exchange_steps(env, payloads):
    """Rank 0 runs one exchange per payload while rank 1 answers them; the two ranks' log texts."""
    (rank0, rank1), logs = linked_pair(env)
    stop = threading.Event()
    answered = []
    follower = threading.Thread(target=lambda: [answered.append(rank1.serve_step(stop)) for _step in payloads])
    follower.start()
    try:
        for number, payload in enumerate(payloads):
            rank0.exchange(KIND_PREFILL if number == 0 else KIND_DECODE, payload)
    finally:
        follower.join(timeout=10)
        rank0.close()
        rank1.close()
    assert answered == [True] * len(payloads)
    return logs[0].getvalue(), logs[1].getvalue()

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Real lab servers on 127.0.0.1 for the labserver tests: subprocesses run with ``python -S`` (no site-packages, so
the server is proven standard-library only), ephemeral ports, killed by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from labservers import LAB_MODEL_CONFIG, MODEL, SRC, LabServer, free_port


@pytest.fixture
def model_dir(tmp_path):
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(LAB_MODEL_CONFIG))
    return path


@pytest.fixture
def start_server(tmp_path, model_dir):
    """``start_server(*flags, env=None, wait=True)``: a labserver; waits for its pidfile (ready) unless told not to."""
    procs = []

    def start(*flags, env=None, wait=True, port=None, name=None):
        port = port or free_port()
        name = name or f"server{len(procs)}"
        log, pidfile = tmp_path / f"{name}.log", tmp_path / f"{name}.pid"
        argv = [sys.executable, "-S", "-m", "inferlab.lab.server", "--model-path", str(model_dir),
                "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port),
                "--lab-pidfile", str(pidfile), *map(str, flags)]
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_"))}
        environ.update(PYTHONPATH=str(SRC), **(env or {}))
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=environ)
        procs.append(proc)
        server = LabServer(proc, port, log, pidfile)
        if wait:
            server.wait_ready()
        return server

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)

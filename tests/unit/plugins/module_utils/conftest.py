"""Fixtures shared by the change ledger's tests (test_ledger*.py)."""

import os
import signal

import pytest


@pytest.fixture
def ledger_dir(tmp_path):
    return str(tmp_path / "ledger")


@pytest.fixture
def procs():
    """Processes a test starts; whatever is still running at the end is killed by its PID (its process group when
    it was started in a session of its own, ``proc.own_group``) and reaped."""
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL) if getattr(proc, "own_group", False) else proc.kill()
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

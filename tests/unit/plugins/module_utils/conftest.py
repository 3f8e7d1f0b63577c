"""Fixtures shared by the change ledger's tests (test_ledger*.py) and by the persistence snapshot's
(test_persistence*.py)."""

import os
import signal

import pytest

from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.test_persistence import persistence_root


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


@pytest.fixture
def root(tmp_path):
    """A copy of the persistence fixture root debian12 (test_persistence.py's ``persistence_root``)."""
    return persistence_root('debian12', tmp_path / 'root')


@pytest.fixture
def dkms_root(tmp_path):
    """A copy of the persistence fixture root debian12_dkms."""
    return persistence_root('debian12_dkms', tmp_path / 'dkms_root')

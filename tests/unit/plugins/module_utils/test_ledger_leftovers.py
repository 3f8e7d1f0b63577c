"""``_ledger.leftovers``: the processes of undone ``process`` entries that still run, found by the ledger's identity
(pid and start time, process group) on real processes, never by a command line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger

HOST = "lab-a"


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def start(procs, argv, own_group=False):
    proc = subprocess.Popen(argv, start_new_session=own_group)
    proc.own_group = own_group
    procs.append(proc)
    wait_for(lambda: _ledger.read_proc_cmdline(proc.pid) == argv)
    return proc


def recorded(ledger_dir, pid, state="undone", **extra):
    entry = _ledger.record(ledger_dir, HOST, "process", {**_ledger.process_identity(pid), **extra})["id"]
    _ledger.mark(ledger_dir, HOST, entry, "applied")
    if state == "undone":
        _ledger.mark(ledger_dir, HOST, entry, "undone")
    return entry


def test_an_undone_entry_whose_process_still_runs_is_a_leftover(procs, ledger_dir):
    proc = start(procs, ["sleep", "301"])
    entry = recorded(ledger_dir, proc.pid)
    assert _ledger.leftovers(ledger_dir, HOST) == [{
        "id": entry, "kind": "process", "pid": proc.pid, "cmdline": ["sleep", "301"],
        "message": f'"sleep 301" still runs (the recorded process) although entry {entry} is undone'}]


def test_a_child_that_outlived_its_recorded_group_leader_is_a_leftover(procs, ledger_dir):
    # the leader (sh) forks a child into its own process group, then is killed alone: the child stays
    leader = start(procs, ["sh", "-c", "sleep 302 & wait"], own_group=True)
    wait_for(lambda: len(_ledger._group_members(leader.pid, "/proc")) == 2)
    entry = recorded(ledger_dir, leader.pid, process_group=True)
    child = [pid for pid in _ledger._group_members(leader.pid, "/proc") if pid != leader.pid][0]
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait()
    found = _ledger.leftovers(ledger_dir, HOST)
    assert [(f["id"], f["pid"], f["cmdline"]) for f in found] == [(entry, child, ["sleep", "302"])]
    assert f"(a member of the recorded process group {leader.pid})" in found[0]["message"]


def test_what_the_ledger_never_recorded_or_still_holds_open_is_not_a_leftover(procs, ledger_dir):
    # a production-like multi-node server the restore resumed: never recorded by this ledger
    start(procs, [sys.executable, "-c", "import time; time.sleep(303)", "--nnodes", "2"])
    opened = start(procs, ["sleep", "304"])
    recorded(ledger_dir, opened.pid, state="applied")  # open: the undo reports it, not the leftover scan
    stopped = start(procs, ["sleep", "305"])
    recorded(ledger_dir, stopped.pid)
    stopped.kill()
    stopped.wait()
    assert _ledger.leftovers(ledger_dir, HOST) == []


def test_a_reused_pid_is_not_a_leftover(procs, ledger_dir):
    proc = start(procs, ["sleep", "306"])
    identity = _ledger.process_identity(proc.pid)
    entry = _ledger.record(ledger_dir, HOST, "process", {**identity, "start_time": identity["start_time"] - 1})["id"]
    _ledger.mark(ledger_dir, HOST, entry, "undone")
    assert _ledger.leftovers(ledger_dir, HOST) == []


def test_an_empty_or_missing_ledger_has_no_leftovers(ledger_dir):
    assert _ledger.leftovers(ledger_dir, HOST) == []


@pytest.mark.parametrize("line", ['{"id": "x", "kind": "process"', "not json"])
def test_a_cut_last_line_is_skipped(ledger_dir, line, procs):
    proc = start(procs, ["sleep", "307"])
    entry = recorded(ledger_dir, proc.pid)
    with open(_ledger.ledger_path(ledger_dir, HOST), "a") as handle:
        handle.write(line)
    assert [f["id"] for f in _ledger.leftovers(ledger_dir, HOST)] == [entry]
    assert json.loads(open(_ledger.ledger_path(ledger_dir, HOST)).readline())["id"] == entry

"""``_ledger_undo.leftovers``: what undone entries started that still runs, found by the ledger's identity, never by a
command line: ``process`` entries (pid and start time, process group) on real processes; ``systemd_unit`` and
``container`` entries through ``systemctl is-active`` and ``ENGINE container inspect``, answered here as systemd and
docker answer (the real systemd path runs in molecule ``kernel``'s guest)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_base,
    _ledger_core,
    _ledger_proc,
    _ledger_undo,
)

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
    wait_for(lambda: _ledger_proc.read_proc_cmdline(proc.pid) == argv)
    return proc


def recorded(ledger_dir, pid, state="undone", kind="process", **extra):
    entry = _ledger_core.record(ledger_dir, HOST, kind, {**_ledger_proc.process_identity(pid), **extra})["id"]
    _ledger_core.mark(ledger_dir, HOST, entry, "applied")
    if state == "undone":
        _ledger_core.mark(ledger_dir, HOST, entry, "undone")
    return entry


def test_an_undone_entry_whose_process_still_runs_is_a_leftover(procs, ledger_dir):
    proc = start(procs, ["sleep", "301"])
    entry = recorded(ledger_dir, proc.pid)
    assert _ledger_undo.leftovers(ledger_dir, HOST) == [{
        "id": entry, "kind": "process", "pid": proc.pid, "what": str(proc.pid), "cmdline": ["sleep", "301"],
        "message": f'"sleep 301" still runs (the recorded process) although entry {entry} is undone'}]


def test_an_undone_sampler_whose_process_still_runs_is_a_leftover(procs, ledger_dir):
    proc = start(procs, ["sleep", "308"])
    entry = recorded(ledger_dir, proc.pid, kind="sampler")
    assert _ledger_undo.leftovers(ledger_dir, HOST) == [{
        "id": entry, "kind": "sampler", "pid": proc.pid, "what": str(proc.pid), "cmdline": ["sleep", "308"],
        "message": f'"sleep 308" still runs (the recorded process) although entry {entry} is undone'}]


def test_a_child_that_outlived_its_recorded_group_leader_is_a_leftover(procs, ledger_dir):
    # the leader (sh) forks a child into its own process group, then is killed alone: the child stays
    leader = start(procs, ["sh", "-c", "sleep 302 & wait"], own_group=True)
    wait_for(lambda: len(_ledger_proc.group_members(leader.pid, "/proc")) == 2)
    entry = recorded(ledger_dir, leader.pid, process_group=True)
    child = [pid for pid in _ledger_proc.group_members(leader.pid, "/proc") if pid != leader.pid][0]
    # the forked child is a copy of sh until it has exec'd sleep: wait for the exec, not only the fork
    wait_for(lambda: _ledger_proc.read_proc_cmdline(child) == ["sleep", "302"])
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait()
    found = _ledger_undo.leftovers(ledger_dir, HOST)
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
    assert _ledger_undo.leftovers(ledger_dir, HOST) == []


def test_a_reused_pid_is_not_a_leftover(procs, ledger_dir):
    proc = start(procs, ["sleep", "306"])
    identity = _ledger_proc.process_identity(proc.pid)
    entry = _ledger_core.record(ledger_dir, HOST, "process", {**identity,
                                                              "start_time": identity["start_time"] - 1})["id"]
    _ledger_core.mark(ledger_dir, HOST, entry, "undone")
    assert _ledger_undo.leftovers(ledger_dir, HOST) == []


def test_an_empty_or_missing_ledger_has_no_leftovers(ledger_dir):
    assert _ledger_undo.leftovers(ledger_dir, HOST) == []


@pytest.mark.parametrize("line", ['{"id": "x", "kind": "process"', "not json"])
def test_a_cut_last_line_is_skipped(ledger_dir, line, procs):
    proc = start(procs, ["sleep", "307"])
    entry = recorded(ledger_dir, proc.pid)
    with open(_ledger_core.ledger_path(ledger_dir, HOST), "a") as handle:
        handle.write(line)
    assert [f["id"] for f in _ledger_undo.leftovers(ledger_dir, HOST)] == [entry]
    assert json.loads(open(_ledger_core.ledger_path(ledger_dir, HOST)).readline())["id"] == entry


class Commands:
    """A run_command for UndoContext: answers ``(rc, stdout, stderr)`` by the argv's tail, records every argv."""

    def __init__(self, answers):
        self.answers, self.argvs = answers, []

    def __call__(self, argv, timeout):
        self.argvs.append(argv)
        answer = self.answers[tuple(argv[1:])]
        if isinstance(answer, Exception):
            raise answer
        return answer


def managed(ledger_dir, kind, params, state="undone"):
    entry = _ledger_core.record(ledger_dir, HOST, kind, params)["id"]
    _ledger_core.mark(ledger_dir, HOST, entry, "applied")
    if state == "undone":
        _ledger_core.mark(ledger_dir, HOST, entry, "undone")
    return entry


def context(answers):
    commands = Commands(answers)
    ctx = _ledger_undo.UndoContext(systemctl_command=["/bin/systemctl"],
                                   container_commands={"docker": ["/usr/bin/docker"], "podman": ["/usr/bin/podman"]},
                                   run_command=commands)
    return ctx, commands


def test_an_undone_unit_still_active_and_a_container_still_running_are_leftovers(ledger_dir):
    unit = managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0", "pid": 812})
    gone = managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank1"})
    container = managed(ledger_dir, "container", {"engine": "docker", "name": "rank0"})
    removed = managed(ledger_dir, "container", {"engine": "podman", "name": "rank1"})
    ctx, commands = context({
        ("is-active", "inferlab-rank0.service"): (0, "active\n", ""),
        # systemctl prints the state and exits 3 for every state but active
        ("is-active", "inferlab-rank1.service"): (3, "inactive\n", ""),
        ("container", "inspect", "-f", "{{.State.Status}}", "rank0"): (0, "running\n", ""),
        ("container", "inspect", "-f", "{{.State.Status}}", "rank1"):
            (125, "", "Error: no such container rank1\n"),
    })
    found = _ledger_undo.leftovers(ledger_dir, HOST, ctx=ctx)
    assert found == [
        {"id": unit, "kind": "systemd_unit", "pid": 812, "unit": "inferlab-rank0.service",
         "what": "unit inferlab-rank0.service",
         "message": f"unit inferlab-rank0.service is still active although entry {unit} is undone"},
        {"id": container, "kind": "container", "pid": None, "engine": "docker", "name": "rank0",
         "what": "docker container rank0",
         "message": f"docker container rank0 is still running although entry {container} is undone"},
    ]
    assert gone not in str(found) and removed not in str(found)
    assert len(commands.argvs) == 4


def test_a_unit_or_container_that_an_open_entry_names_again_is_not_a_leftover(ledger_dir):
    managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0"})
    managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0.service"}, state="applied")  # started again
    managed(ledger_dir, "container", {"engine": "docker", "name": "rank0"})
    managed(ledger_dir, "container", {"engine": "docker", "name": "rank0"}, state="applied")
    ctx, commands = context({})
    assert _ledger_undo.leftovers(ledger_dir, HOST, ctx=ctx) == [] and commands.argvs == []


def test_a_state_that_cannot_be_read_is_reported_not_passed(ledger_dir):
    unit = managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0"})
    ctx, _commands = context({("is-active", "inferlab-rank0.service"):
                              _ledger_core.UndoError("/bin/systemctl is-active inferlab-rank0.service could not run: "
                                                     "timed out after 60 seconds")})
    [found] = _ledger_undo.leftovers(ledger_dir, HOST, ctx=ctx)
    assert found["id"] == unit and found["what"] == "unit inferlab-rank0.service"
    assert found["message"].startswith("cannot tell whether unit inferlab-rank0.service still runs: ")


def test_a_container_engine_that_cannot_answer_is_reported_not_passed(ledger_dir):
    container = managed(ledger_dir, "container", {"engine": "docker", "name": "rank0"})
    ctx, _commands = context({("container", "inspect", "-f", "{{.State.Status}}", "rank0"):
                              (1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                                      "Is the docker daemon running?\n")})
    [found] = _ledger_undo.leftovers(ledger_dir, HOST, ctx=ctx)
    assert found["id"] == container and found["what"] == "docker container rank0"
    assert found["message"].startswith("cannot tell whether docker container rank0 still runs: ")
    assert "Cannot connect to the Docker daemon" in found["message"]


def test_a_host_without_systemctl_or_the_engine_has_no_unit_or_container_leftovers(ledger_dir, monkeypatch):
    managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0"})
    managed(ledger_dir, "container", {"engine": "podman", "name": "rank0"})
    monkeypatch.setenv("PATH", str(ledger_dir))
    monkeypatch.setattr(_ledger_base, "COMMAND_DIRS", (str(ledger_dir),))
    ctx = _ledger_undo.UndoContext(run_command=Commands({}))
    assert _ledger_undo.leftovers(ledger_dir, HOST, ctx=ctx) == []


def test_a_unit_started_and_undone_twice_is_one_leftover_under_its_newest_entry(ledger_dir):
    managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0"})
    newest = managed(ledger_dir, "systemd_unit", {"unit": "inferlab-rank0"})
    ctx, commands = context({("is-active", "inferlab-rank0.service"): (0, "active\n", "")})
    assert [f["id"] for f in _ledger_undo.leftovers(ledger_dir, HOST, ctx=ctx)] == [newest]
    assert len(commands.argvs) == 1

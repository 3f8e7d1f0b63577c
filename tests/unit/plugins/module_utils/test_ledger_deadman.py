"""Tests of the dead man's switch of the change ledger (``_ledger_watch.deadman`` and ``inferlab_ledger.py
deadman``): on a fake clock, then the script itself on real processes."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_cli,
    _ledger_core,
    _ledger_proc,
    _ledger_undo,
    _ledger_watch,
)
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import ledger_script

REPO_ROOT = Path(__file__).resolve().parents[4]
HOST = "lab-a"
LOG_LINE_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ inferlab_ledger\[\d+\]: ")


class FakeTime:
    """The clocks of the dead man's switch: ``sleep`` advances both; ``at(seconds, action)`` runs ``action`` once
    the switch has slept that long; ``jump(seconds)`` steps the wall clock alone."""

    START = 5000.0

    def __init__(self):
        self.mono = self.START
        self.wall = 1_800_000_000.0
        self.events = []

    @property
    def elapsed(self):
        return self.mono - self.START

    def monotonic(self):
        return self.mono

    def time(self):
        return self.wall

    def sleep(self, seconds):
        assert self.elapsed < 3600, "the dead man's switch never ended"
        self.mono += seconds
        self.wall += seconds
        for event in [e for e in self.events if e[0] <= self.elapsed]:
            self.events.remove(event)
            event[1]()

    def at(self, seconds, action):
        self.events.append((seconds, action))

    def jump(self, seconds):
        self.wall += seconds


def touch(path, clock):
    """Renew: what the controller does to the renew file, at the (fake) wall-clock time of the host."""
    path.touch()
    os.utime(path, (clock.wall, clock.wall))


def renew_every(clock, path, period, until):
    for step in range(1, int(until // period) + 1):
        clock.at(step * period, lambda: touch(path, clock))


def lines_of(ledger_dir, host=HOST):
    return [json.loads(line) for line in Path(_ledger_core.ledger_path(ledger_dir, host)).read_text().splitlines()]


def state_of(ledger_dir, entry_id):
    return [line for line in lines_of(ledger_dir) if line["id"] == entry_id][-1]["state"]


def file_change(tmp_path, ledger_dir, name, content, run_id=None):
    """A recorded change of file `name` the way a role makes it: back up, record pending, write, mark applied."""
    path = tmp_path / name
    path.write_text("original")
    backup = tmp_path / "backup" / name
    backup.parent.mkdir(exist_ok=True)
    shutil.copy2(path, backup)
    line = _ledger_core.record(ledger_dir, HOST, "file", {"path": str(path), "backup": str(backup)}, run_id=run_id)
    path.write_text(content)
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", run_id=run_id)
    return line["id"]


def run_deadman(ledger_dir, renew, clock, deadline=10, **kwargs):
    return _ledger_watch.deadman(ledger_dir, HOST, str(renew), deadline, poll_s=1, clock=clock, sleep=clock.sleep,
                                 **kwargs)


# --- the function, on a fake clock --------------------------------------------------------------------------------


def test_fires_after_the_deadline_and_restores_a_file_entry(tmp_path, ledger_dir, capsys):
    entry = file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    touch(renew, clock)

    result = run_deadman(ledger_dir, renew, clock)

    assert 10 < clock.elapsed <= 11
    assert result["fired"] is True and result["refused"] is False and result["failed"] == []
    assert result["reason"] == f"{renew} was not renewed for 11.00s, past the deadline of 10s (its mtime is 11.00s old)"
    assert result["undo"]["undone"] == [entry]
    assert (tmp_path / "conf").read_text() == "original"
    assert state_of(ledger_dir, entry) == "undone"
    assert not renew.exists(), "the renew file outlived the switch"
    log = capsys.readouterr().err.splitlines()
    assert log and all(LOG_LINE_RE.match(line) for line in log)
    assert any("firing: " in line for line in log)
    assert any(f"undone {entry} (file): restored" in line for line in log)


def test_renewals_keep_it_quiet_and_it_undoes_newest_first(tmp_path, ledger_dir):
    first = file_change(tmp_path, ledger_dir, "a", "changed")
    second = file_change(tmp_path, ledger_dir, "b", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    touch(renew, clock)
    renew_every(clock, renew, 4, until=40)

    result = run_deadman(ledger_dir, renew, clock)

    assert 50 < clock.elapsed <= 51, "it fired before the renewals stopped, or long after the deadline"
    assert result["fired"] is True
    assert result["undo"]["undone"] == [second, first]
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text() == "original"


def test_a_missing_renew_file_counts_from_its_start(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    result = run_deadman(ledger_dir, renew, clock, deadline=3)
    assert 3 < clock.elapsed <= 4
    assert result["reason"] == f"{renew} is absent: not renewed for 4.00s, past the deadline of 3s"
    assert (tmp_path / "conf").read_text() == "original"


def test_a_stale_renew_file_counts_from_its_start(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    clock.jump(-3600)
    touch(renew, clock)  # left by an earlier run, an hour ago
    clock.jump(3600)
    run_deadman(ledger_dir, renew, clock)
    assert 10 < clock.elapsed <= 11


def test_a_wall_clock_step_forward_does_not_fire_it_early(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    touch(renew, clock)
    renew_every(clock, renew, 4, until=20)
    clock.at(21, lambda: clock.jump(3600))  # NTP steps the clock: the last renewal now looks an hour old

    result = run_deadman(ledger_dir, renew, clock)

    assert 30 < clock.elapsed <= 31, "a wall-clock step made it fire early"
    assert "was not renewed for 11.00s" in result["reason"]


def test_a_wall_clock_step_back_does_not_stop_it(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    touch(renew, clock)
    renew_every(clock, renew, 4, until=20)
    clock.at(21, lambda: clock.jump(-3600))  # the last renewal now looks an hour in the future

    result = run_deadman(ledger_dir, renew, clock)

    assert 30 < clock.elapsed <= 31
    assert "in the future: the wall clock went back" in result["reason"]
    assert (tmp_path / "conf").read_text() == "original"


def test_a_disarm_file_makes_it_exit_without_undoing(tmp_path, ledger_dir, capsys):
    entry = file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    clock = FakeTime()
    touch(renew, clock)
    disarm = tmp_path / "renew.disarm"
    clock.at(5, disarm.touch)
    before = lines_of(ledger_dir)

    result = run_deadman(ledger_dir, renew, clock)

    assert clock.elapsed == 5
    assert result == {"fired": False, "reason": f"disarmed: {disarm} exists", "changed": False,
                      "message": f"disarmed: {disarm} exists: nothing undone"}
    assert (tmp_path / "conf").read_text() == "changed"
    assert lines_of(ledger_dir) == before and state_of(ledger_dir, entry) == "applied"
    assert "nothing undone" in capsys.readouterr().err


def test_its_own_entry_is_skipped_and_marked_undone(procs, tmp_path, ledger_dir):
    # a live process stands in for the switch itself: undoing its entry would kill it
    proc = subprocess.Popen(["sleep", "300"])
    procs.append(proc)
    while _ledger_proc.read_proc_cmdline(proc.pid) != ["sleep", "300"]:
        time.sleep(0.01)
    own = _ledger_core.record(ledger_dir, HOST, "process", _ledger_proc.process_identity(proc.pid), run_id="run1")["id"]
    _ledger_core.mark(ledger_dir, HOST, own, "applied", run_id="run1")
    entry = file_change(tmp_path, ledger_dir, "conf", "changed", run_id="run1")
    clock = FakeTime()

    result = run_deadman(ledger_dir, tmp_path / "renew", clock, run_id="run1", self_id=own)

    assert result["undo"]["undone"] == [entry]
    assert [d["id"] for d in result["undo"]["details"]] == [entry]
    assert result["self"] == {"id": own, "marked": True, "previous": "applied"}
    assert result["failed"] == [] and f"marked its own entry {own} undone (was applied)" in result["message"]
    time.sleep(0.1)
    assert proc.poll() is None, "the switch undid its own process entry"
    own_last = [line for line in lines_of(ledger_dir) if line["id"] == own][-1]
    assert own_last["state"] == "undone" and "error" not in own_last and own_last["run_id"] == "run1"
    assert _ledger_core.status(ledger_dir, HOST)["open"] == []


def test_the_sigterm_handler_of_the_caller_is_put_back(tmp_path, ledger_dir):
    def mine(signum, frame):
        raise AssertionError("not called")

    before = signal.signal(signal.SIGTERM, mine)
    try:
        run_deadman(ledger_dir, tmp_path / "renew", FakeTime())
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_unknown_own_entry_is_a_failure(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    result = run_deadman(ledger_dir, tmp_path / "renew", FakeTime(), self_id="20261130T101500Z-process-dead")
    assert result["undo"]["failed"] == [] and (tmp_path / "conf").read_text() == "original"
    assert result["self"]["id"] == "20261130T101500Z-process-dead" and "no entry" in result["self"]["error"]
    assert [f["id"] for f in result["failed"]] == ["20261130T101500Z-process-dead"]


def test_a_ledger_locked_by_another_run_is_not_undone(tmp_path, ledger_dir, capsys):
    own = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": str(tmp_path / "deadman.pid"),
                                                            "cmdline": ["deadman"]}, run_id="run1")["id"]
    entry = file_change(tmp_path, ledger_dir, "conf", "changed", run_id="run1")
    _ledger_core.acquire_lock(ledger_dir, HOST, "run2", controller="ctl1", pid=4242)
    before = lines_of(ledger_dir)

    result = run_deadman(ledger_dir, tmp_path / "renew", FakeTime(), run_id="run1", self_id=own)

    assert result["fired"] is True and result["refused"] is True and result["error"] == "LockError"
    assert result["undo"] is None and result["self"] is None
    assert "but it undid nothing: ledger for lab-a is locked by run run2 (controller ctl1, pid 4242" in (
        result["message"])
    assert (tmp_path / "conf").read_text() == "changed"
    assert lines_of(ledger_dir) == before and state_of(ledger_dir, entry) == "applied"
    assert state_of(ledger_dir, own) == "pending"
    log = capsys.readouterr().err
    assert "warning: the lock is held by run run2" in log and "refused: ledger for lab-a is locked" in log


def test_a_lock_of_the_run_that_armed_it_is_fine(tmp_path, ledger_dir):
    own = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": str(tmp_path / "deadman.pid"),
                                                            "cmdline": ["deadman"]}, run_id="run1")["id"]
    entry = file_change(tmp_path, ledger_dir, "conf", "changed", run_id="run1")
    _ledger_core.acquire_lock(ledger_dir, HOST, "run1", controller="ctl1", pid=4242)  # the run that died

    result = run_deadman(ledger_dir, tmp_path / "renew", FakeTime(), run_id="run1", self_id=own)

    assert result["refused"] is False and result["undo"]["undone"] == [entry] and result["failed"] == []
    assert result["self"] == {"id": own, "marked": True, "previous": "pending"}
    assert (tmp_path / "conf").read_text() == "original"
    assert _ledger_core.read_lock(ledger_dir, HOST)[0]["run_id"] == "run1"  # left for the next run's restore to break


def test_without_a_run_id_only_an_unlocked_ledger_is_undone(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    _ledger_core.acquire_lock(ledger_dir, HOST, "run1", controller="ctl1", pid=4242)
    result = run_deadman(ledger_dir, tmp_path / "renew", FakeTime())
    assert result["refused"] is True and "armed without --run-id" in result["message"]
    assert (tmp_path / "conf").read_text() == "changed"

    _ledger_core.release_lock(ledger_dir, HOST, run_id="run1")
    result = run_deadman(ledger_dir, tmp_path / "renew", FakeTime())
    assert result["refused"] is False and result["failed"] == []
    assert (tmp_path / "conf").read_text() == "original"


def test_main_exits_1_when_an_undo_fails(tmp_path, ledger_dir, capsys):
    entry = file_change(tmp_path, ledger_dir, "conf", "changed")
    shutil.rmtree(tmp_path / "backup")
    rc = _ledger_cli.main(["deadman", "--ledger-dir", ledger_dir, "--host", HOST, "--renew-file",
                           str(tmp_path / "renew"),
                           "--deadline", "0.05", "--poll", "0.01", "--json"])
    assert rc == _ledger_cli.EXIT_UNDO_FAILED
    result = json.loads(capsys.readouterr().out)
    assert result["fired"] is True and [f["id"] for f in result["failed"]] == [entry]
    assert state_of(ledger_dir, entry) == "undo_failed"


@pytest.mark.parametrize("args", [["--deadline", "0"], ["--deadline", "-1"], ["--deadline", "x"],
                                  ["--deadline", "5", "--poll", "0"], []])
def test_main_usage_errors(tmp_path, ledger_dir, capsys, args):
    with pytest.raises(SystemExit) as err:
        _ledger_cli.main(["deadman", "--ledger-dir", ledger_dir, "--host", HOST, "--renew-file", str(tmp_path / "r"),
                          *args])
    assert err.value.code == _ledger_cli.EXIT_USAGE
    said = capsys.readouterr().err
    assert "inferlab_ledger.py deadman: error: " in said and ("--deadline" in said or "--poll" in said)


# --- the script, on real processes --------------------------------------------------------------------------------


def deadman_argv(ledger_dir, renew, deadline, *extra):
    return [sys.executable, "-I", str(ledger_script()), "deadman", "--ledger-dir", ledger_dir, "--host", HOST,
            "--renew-file",
            str(renew), "--deadline", str(deadline), "--poll", "0.1", "--json", *extra]


def test_the_script_fires_and_restores_without_a_controller(procs, tmp_path, ledger_dir):
    entry = file_change(tmp_path, ledger_dir, "conf", "changed", run_id="run1")
    _ledger_core.acquire_lock(ledger_dir, HOST, "run1", controller="ctl1", pid=4242)  # the controller died holding it
    argv = deadman_argv(ledger_dir, tmp_path / "renew", 0.5, "--run-id", "run1", "--self-id", "SELF")
    pidfile = tmp_path / "deadman.pid"
    # recorded before it starts, the way the process manager records it (pidfile and command line)
    own = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": str(pidfile), "cmdline": argv},
                              run_id="run1")["id"]
    argv[argv.index("SELF")] = own
    _ledger_core.mark(ledger_dir, HOST, own, "applied", params={"cmdline": argv}, run_id="run1")
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(proc)
    pidfile.write_text(f"{proc.pid}\n")

    out, err = proc.communicate(timeout=10)

    assert proc.returncode == 0, err
    assert 0.5 < time.monotonic() - started < 10
    result = json.loads(out)
    assert result["fired"] is True and result["failed"] == [] and result["refused"] is False
    assert result["reason"].startswith(f"{tmp_path / 'renew'} is absent: not renewed for 0.")
    assert result["undo"]["undone"] == [entry]
    assert result["self"] == {"id": own, "marked": True, "previous": "applied"}
    assert (tmp_path / "conf").read_text() == "original"
    assert _ledger_core.status(ledger_dir, HOST)["open"] == []
    assert err and all(LOG_LINE_RE.match(line) for line in err.splitlines())


def test_sigterm_from_the_undo_of_its_entry_disarms_the_script(procs, tmp_path, ledger_dir):
    entry = file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    renew.touch()
    proc = subprocess.Popen(deadman_argv(ledger_dir, renew, 30), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    procs.append(proc)
    assert "armed for the ledger of lab-a" in proc.stderr.readline()  # the SIGTERM handler is in place
    own = _ledger_core.record(ledger_dir, HOST, "process", _ledger_proc.process_identity(proc.pid))["id"]

    undone = _ledger_undo.undo(ledger_dir, HOST, ids=[own])  # what restore.yml does with its process entry

    assert undone["failed"] == [] and f"stopped pid {proc.pid}" in undone["details"][0]["message"]
    assert "with SIGTERM" in undone["details"][0]["message"]
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["fired"] is False and "disarmed by SIGTERM" in result["reason"]
    assert "nothing undone" in err
    assert (tmp_path / "conf").read_text() == "changed"
    assert state_of(ledger_dir, entry) == "applied"


def test_a_disarm_file_stops_the_script(procs, tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "conf", "changed")
    renew = tmp_path / "renew"
    proc = subprocess.Popen(deadman_argv(ledger_dir, renew, 30)[:-1], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    procs.append(proc)
    assert "armed for" in proc.stderr.readline()
    (tmp_path / "renew.disarm").touch()
    out, _err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out == f"disarmed: {renew}.disarm exists: nothing undone\n"
    assert (tmp_path / "conf").read_text() == "changed"
    assert not renew.exists() and not (tmp_path / "renew.disarm").exists()


CGROUP_FIXTURES = REPO_ROOT / "tests" / "unit" / "fixtures" / "proc-cgroup"


@pytest.mark.parametrize("pid, unit", [
    (100, "inferlab-deadman-run1.service"),
    (200, "run-u42.service"),
    (300, "session-3.scope"),
    (400, None),
    (500, "docker-0b1c.scope"),
    (600, None),
])
def test_own_systemd_unit_reads_the_cgroup_file(pid, unit):
    assert _ledger_proc.own_systemd_unit(pid, str(CGROUP_FIXTURES)) == unit


def test_the_kind_of_an_entry_id():
    assert _ledger_core.kind_of_id(_ledger_core.new_id("systemd_unit")) == "systemd_unit"
    assert _ledger_core.kind_of_id("20261130T101502Z-process-3fa9") == "process"


def test_its_own_systemd_unit_entry_is_found_by_the_unit_it_runs_in(ledger_dir):
    other = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-rank0"})
    own = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-deadman-run1"})
    assert _ledger_watch.own_entry(ledger_dir, HOST, pid=100, procfs_root=str(CGROUP_FIXTURES)) == own["id"]
    assert _ledger_watch.own_entry(ledger_dir, HOST, pid=300, procfs_root=str(CGROUP_FIXTURES)) is None
    _ledger_core.mark(ledger_dir, HOST, own["id"], "undone")
    assert _ledger_watch.own_entry(ledger_dir, HOST, pid=100, procfs_root=str(CGROUP_FIXTURES)) is None
    assert other["id"] != own["id"]


def test_a_switch_running_as_a_systemd_unit_never_stops_its_own_unit(tmp_path, ledger_dir, monkeypatch):
    """It was started without its own entry id; when it fires, `systemctl stop` goes to every other unit only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "systemctl.calls"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    rank = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-rank0"}, run_id="run1")["id"]
    _ledger_core.mark(ledger_dir, HOST, rank, "applied", run_id="run1")
    own = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-deadman-run1"}, run_id="run1")["id"]
    _ledger_core.mark(ledger_dir, HOST, own, "applied", run_id="run1")
    # this process plays the switch: pid 100 of the fixture tree runs in inferlab-deadman-run1.service
    fixture = tmp_path / "proc"
    shutil.copytree(CGROUP_FIXTURES / "100", fixture / str(os.getpid()))

    result = run_deadman(ledger_dir, tmp_path / "renew", FakeTime(), run_id="run1", procfs_root=str(fixture))

    assert calls.read_text().splitlines() == ["stop inferlab-rank0.service", "reset-failed inferlab-rank0.service"]
    assert result["undo"]["undone"] == [rank]
    assert result["self"] == {"id": own, "marked": True, "previous": "applied"}
    assert state_of(ledger_dir, own) == "undone" and _ledger_core.status(ledger_dir, HOST)["open"] == []


def test_its_own_entry_is_found_by_its_pid_when_no_id_is_given(ledger_dir):
    entry = _ledger_core.record(ledger_dir, HOST, 'process', {'pid': os.getpid(), 'start_time': 1, 'cmdline': 'x'})
    other = _ledger_core.record(ledger_dir, HOST, 'process', {'pid': os.getpid() + 100000, 'start_time': 1,
                                                              'cmdline': 'y'})
    assert _ledger_watch.own_entry(ledger_dir, HOST) == entry['id']
    assert _ledger_watch.own_entry(ledger_dir, HOST, pid=os.getpid() + 100000) == other['id']
    assert _ledger_watch.own_entry(ledger_dir, HOST, pid=1) is None

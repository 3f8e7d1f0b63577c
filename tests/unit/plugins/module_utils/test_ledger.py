"""Tests of the change ledger: format, lock, undo of every kind, and the script entry point on real processes."""

import ast
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_base,
    _ledger_cli,
    _ledger_core,
    _ledger_proc,
    _ledger_settings,
    _ledger_undo,
)
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger, ledger_files, ledger_script
from ansible_collections.inferlab.distributed.tests.unit.oldpython import require_python
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import COLLECTIONS_DIR

REPO_ROOT = Path(__file__).resolve().parents[4]
HOST = "lab-a"
ID_RE = re.compile(r"^\d{8}T\d{6}Z-(process|file)-\d+\.\d+\.\d+$")
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def lines_of(ledger_dir, host=HOST):
    return [json.loads(line) for line in Path(_ledger_core.ledger_path(ledger_dir, host)).read_text().splitlines()]


def run_script(*args):
    """Run the ledger script as the restore playbook does on a host."""
    proc = subprocess.run([sys.executable, str(ledger_script()), *args], capture_output=True, text=True, timeout=60,
                          check=False)
    return proc.returncode, proc.stdout, proc.stderr


def start(procs, argv, **kwargs):
    proc = subprocess.Popen(argv, **kwargs)
    proc.own_group = bool(kwargs.get("start_new_session"))
    procs.append(proc)
    # wait until the child has exec'd, so /proc/PID/cmdline and start_time describe it and not the forked parent
    deadline = time.monotonic() + 10
    while _ledger_proc.read_proc_cmdline(proc.pid) != list(argv):
        assert time.monotonic() < deadline, f"{argv} did not start"
        time.sleep(0.01)
    return proc


def file_change(tmp_path, ledger_dir, name, content, run_id=None):
    """Make a recorded change of file `name` the way a role does: back up, record pending, write, mark applied."""
    path = tmp_path / name
    backup = tmp_path / "backup" / f"{name}.{os.urandom(3).hex()}"
    if path.exists():
        backup.parent.mkdir(exist_ok=True)
        shutil.copy2(path, backup)
        params = {"path": str(path), "backup": str(backup)}
    else:
        params = {"path": str(path), "existed": False}
    line = _ledger_core.record(ledger_dir, HOST, "file", params, run_id=run_id)
    path.write_text(content)
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", run_id=run_id)
    return line["id"]


# --- format -------------------------------------------------------------------------------------------------------


def test_record_mark_round_trip(tmp_path, ledger_dir):
    target = tmp_path / "conf"
    line = _ledger_core.record(ledger_dir, HOST, "file", {"path": str(target), "existed": False}, run_id="run1")
    assert ID_RE.match(line["id"])
    changed, marked, previous = _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", run_id="run1")
    assert (changed, previous) == (True, "pending")

    written = lines_of(ledger_dir)
    assert [entry["state"] for entry in written] == ["pending", "applied"]
    for entry in written:
        assert set(entry) == {"id", "time", "kind", "params", "state", "run_id"}
        assert entry["id"] == line["id"]
        assert entry["kind"] == "file"
        assert entry["params"] == {"path": str(target), "existed": False}
        assert TIME_RE.match(entry["time"])
        assert entry["run_id"] == "run1"

    current = _ledger_core.status(ledger_dir, HOST)
    assert [e["state"] for e in current["entries"]] == ["applied"]
    assert current["open"] == [line["id"]]
    assert current["problems"] == []
    assert stat.S_IMODE(os.stat(_ledger_core.ledger_path(ledger_dir, HOST)).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(ledger_dir).st_mode) == 0o700


def test_ids_are_unique(tmp_path, ledger_dir):
    ids = {_ledger_core.record(ledger_dir, HOST, "file", {"path": f"/tmp/x{i}",
                                                          "existed": False})["id"] for i in range(50)}
    assert len(ids) == 50


IDS_PER_WRITER = 3000
WRITERS = 4
# a writer process: waits for the word on stdin, so that every writer makes its ids in the same seconds, then prints
# them, one a line
ID_WRITER = f"""
import sys
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
sys.stdin.readline()
print("\\n".join(_ledger_core.new_id("process") for _ in range({IDS_PER_WRITER})))
"""


def test_ids_of_concurrent_writers_never_collide():
    """Processes that make ids at once never make the same one (16 random bits a second made equal ones here)."""
    env = dict(os.environ, PYTHONPATH=str(COLLECTIONS_DIR))
    writers = [subprocess.Popen([sys.executable, "-c", ID_WRITER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=env) for _writer in range(WRITERS)]
    try:
        for writer in writers:
            writer.stdin.write("go\n")
            writer.stdin.flush()
        outputs = [writer.communicate(timeout=60)[0].split() for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    ids = [entry_id for output in outputs for entry_id in output]
    assert len(ids) == WRITERS * IDS_PER_WRITER
    assert len(set(ids)) == len(ids)
    assert {_ledger_core.kind_of_id(entry_id) for entry_id in ids} == {"process"}


def test_a_ledger_with_ids_of_the_older_format_still_reads_marks_and_undoes(tmp_path, ledger_dir):
    path = tmp_path / "written"
    path.write_text("new")
    old = {"id": "20261130T101501Z-file-0c1d", "time": "2026-11-30T10:15:01Z", "kind": "file",
           "params": {"path": str(path), "existed": False}, "state": "pending"}
    os.makedirs(ledger_dir, mode=0o700)
    Path(_ledger_core.ledger_path(ledger_dir, HOST)).write_text(json.dumps(old) + "\n")

    _ledger_core.mark(ledger_dir, HOST, old["id"], "applied")
    newer = _ledger_core.record(ledger_dir, HOST, "file", {"path": str(tmp_path / "other"), "existed": False})
    assert _ledger_core.status(ledger_dir, HOST)["open"] == [old["id"], newer["id"]]
    assert _ledger_core.kind_of_id(old["id"]) == "file"
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [newer["id"], old["id"]] and result["failed"] == []
    assert not path.exists()


def test_truncated_last_line_is_reported_and_the_next_write_is_not_merged(tmp_path, ledger_dir):
    file_change(tmp_path, ledger_dir, "a", "new")
    path = _ledger_core.ledger_path(ledger_dir, HOST)
    with open(path, "a") as handle:
        handle.write('{"id": "20261130T101500Z-file-dead", "time": "2026-11-30T1')  # writer killed mid-line

    entries, problems = _ledger_core.read_ledger(ledger_dir, HOST)
    assert len(entries) == 2
    assert len(problems) == 1 and "line 3: truncated last line" in problems[0]

    second = _ledger_core.record(ledger_dir, HOST, "file", {"path": str(tmp_path / "b"), "existed": False})
    entries, problems = _ledger_core.read_ledger(ledger_dir, HOST)
    assert [e["id"] for e in entries][-1] == second["id"]
    assert len(problems) == 1 and "line 3: not valid JSON" in problems[0]

    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"] == []
    assert len(result["undone"]) == 2
    assert "ledger problems" in result["message"]


def test_malformed_lines_are_skipped(ledger_dir):
    os.makedirs(ledger_dir)
    Path(_ledger_core.ledger_path(ledger_dir, HOST)).write_text(
        '[1, 2]\n{"id": "x", "time": "t", "kind": "file", "params": {}, "state": "bogus"}\n\n'
        '{"id": "y", "time": "t", "kind": "file", "params": {"path": "/nonexistent/y", "existed": false}, '
        '"state": "applied"}\n'
    )
    entries, problems = _ledger_core.read_ledger(ledger_dir, HOST)
    assert [e["id"] for e in entries] == ["y"]
    assert any("not a JSON object" in p for p in problems)
    assert any("unknown state 'bogus'" in p for p in problems)


def test_a_line_that_reopens_an_undone_entry_is_a_problem_not_a_reopened_entry(tmp_path, ledger_dir):
    # a file the change created, undone; an `applied` line for it appended afterwards (not by inferlab's writers),
    # then a file created later at that path by someone else: the next undo must not delete it
    entry_id = file_change(tmp_path, ledger_dir, "made", "x")
    _ledger_undo.undo(ledger_dir, HOST)
    [undone] = [line for line in lines_of(ledger_dir) if line["state"] == "undone"]
    with open(_ledger_core.ledger_path(ledger_dir, HOST), "a") as handle:
        handle.write(json.dumps({**undone, "state": "applied"}) + "\n")
    (tmp_path / "made").write_text("someone else's file\n")
    entries, problems = _ledger_core.read_ledger(ledger_dir, HOST)
    assert [e["state"] for e in entries] == ["pending", "applied", "undone"]
    [problem] = problems
    assert f"entry {entry_id} goes from undone back to applied" in problem and "ignored" in problem
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [] and result["problems"] == [problem]
    assert (tmp_path / "made").read_text() == "someone else's file\n"
    assert _ledger_core.status(ledger_dir, HOST)["open"] == []


def test_unknown_kind_fails_at_record_time(ledger_dir):
    with pytest.raises(_ledger_core.LedgerError,
                       match=r"unknown ledger kind 'tc_profil': known kinds are build_dir, container, driver_param, "
                             r"file, gateway_config, kernel_module, nic_setting, "
                             r"process, sampler, service_pause, sysctl, systemd_unit, tc_profile"):
        _ledger_core.record(ledger_dir, HOST, "tc_profil", {"dev": "thunderbolt0"})
    assert not os.path.exists(_ledger_core.ledger_path(ledger_dir, HOST))


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("process", {"pid": 42}, "needs \"start_time\""),
        ("process", {"cmdline": "sleep 1"}, "needs \"pid\""),
        ("process", {"pidfile": "/run/x.pid"}, "needs \"cmdline\""),
        ("process", {"pidfile": "rel.pid", "cmdline": "x"}, "absolute path"),
        ("process", {"pid": "abc", "start_time": 1}, "\"pid\" must be an integer"),
        ("process", {"pid": 42, "start_time": 1, "signal": 9}, "unknown params for a process entry: signal"),
        ("file", {"path": "/etc/x"}, "needs \"backup\""),
        ("file", {"path": "/etc/x", "backup": "/b", "existed": False}, "not both"),
        ("file", {"path": "etc/x", "existed": False}, "absolute path"),
        ("file", {"path": "/etc/x", "backup": "/etc/x"}, "cannot be the file itself"),
    ],
)
def test_bad_params_fail_at_record_time(ledger_dir, kind, params, message):
    with pytest.raises(_ledger_core.LedgerError, match=re.escape(message)):
        _ledger_core.record(ledger_dir, HOST, kind, params)


def test_bad_host_name(ledger_dir):
    with pytest.raises(_ledger_core.LedgerError, match="invalid ledger host name"):
        _ledger_core.ledger_path(ledger_dir, "../etc/passwd")


def test_mark_transitions(tmp_path, ledger_dir):
    entry_id = file_change(tmp_path, ledger_dir, "a", "x")
    assert _ledger_core.mark(ledger_dir, HOST, entry_id, "applied")[0] is False  # already applied: no line written
    assert len(lines_of(ledger_dir)) == 2
    assert _ledger_core.mark(ledger_dir, HOST, entry_id, "undone")[0] is True
    with pytest.raises(_ledger_core.LedgerError, match="is undone and cannot be marked applied"):
        _ledger_core.mark(ledger_dir, HOST, entry_id, "applied")
    with pytest.raises(_ledger_core.LedgerError, match="no entry 'nope'"):
        _ledger_core.mark(ledger_dir, HOST, "nope", "applied")


def test_mark_merges_params(ledger_dir):
    line = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": "/run/s.pid", "cmdline": ["s"]})
    changed, marked, _previous = _ledger_core.mark(ledger_dir, HOST, line["id"], "applied",
                                                   params={"pid": 123, "start_time": 9})
    assert changed
    assert marked["params"]["pid"] == 123 and marked["params"]["pidfile"] == "/run/s.pid"
    assert lines_of(ledger_dir)[-1]["params"] == marked["params"]


def test_check_mode_writes_nothing(tmp_path, ledger_dir):
    line = _ledger_core.record(ledger_dir, HOST, "file", {"path": str(tmp_path / "a"), "existed": False},
                               check_mode=True)
    assert ID_RE.match(line["id"])
    assert not os.path.exists(ledger_dir)
    entry_id = file_change(tmp_path, ledger_dir, "b", "x")
    result = _ledger_undo.undo(ledger_dir, HOST, check_mode=True)
    assert result["changed"] and result["undone"] == [entry_id]
    assert (tmp_path / "b").exists()
    assert len(lines_of(ledger_dir)) == 2


# --- lock ---------------------------------------------------------------------------------------------------------


def test_lock_acquire_reacquire_release(ledger_dir):
    first = _ledger_core.acquire_lock(ledger_dir, HOST, "run1", controller="ctl1", pid=4242)
    assert first["changed"] and first["lock"]["run_id"] == "run1" and first["held_before"] is False
    holder = json.loads(Path(_ledger_core.lock_path(ledger_dir, HOST)).read_text())
    assert set(holder) == {"run_id", "controller", "pid", "time"}
    assert (holder["controller"], holder["pid"]) == ("ctl1", 4242)

    again = _ledger_core.acquire_lock(ledger_dir, HOST, "run1", controller="ctl1", pid=9999)
    assert again["changed"] is False and again["lock"]["pid"] == 4242 and again["held_before"] is True

    with pytest.raises(_ledger_core.LockError, match="held by run run1"):
        _ledger_core.release_lock(ledger_dir, HOST, run_id="run2")
    assert _ledger_core.release_lock(ledger_dir, HOST, run_id="run1")["changed"] is True
    assert not os.path.exists(_ledger_core.lock_path(ledger_dir, HOST))
    assert _ledger_core.release_lock(ledger_dir, HOST, run_id="run1")["changed"] is False


def test_the_same_run_id_from_another_controller_is_another_run(ledger_dir):
    # two controllers whose runs started in the same second once got the same id, and the second took the first's
    # lock as its own
    _ledger_core.acquire_lock(ledger_dir, HOST, "20261130T101500Z-experiment", controller="ctl1", pid=4242)
    with pytest.raises(_ledger_core.LockError) as err:
        _ledger_core.acquire_lock(ledger_dir, HOST, "20261130T101500Z-experiment", controller="ctl2", pid=4242)
    assert "locked by run 20261130T101500Z-experiment (controller ctl1, pid 4242" in str(err.value)
    assert "taken from controller ctl1, not from this controller ctl2; two runs may not share an id" in str(err.value)
    assert err.value.holder["controller"] == "ctl1"
    assert json.loads(Path(_ledger_core.lock_path(ledger_dir, HOST)).read_text())["controller"] == "ctl1"


def test_lock_conflict_names_the_holder(ledger_dir):
    _ledger_core.acquire_lock(ledger_dir, HOST, "20261130T101500Z-experiment", controller="ctl1", pid=4242)
    since = json.loads(Path(_ledger_core.lock_path(ledger_dir, HOST)).read_text())["time"]
    with pytest.raises(_ledger_core.LockError) as err:
        _ledger_core.acquire_lock(ledger_dir, HOST, "20261130T110000Z-restore", controller="ctl1", pid=5555)
    assert str(err.value) == (
        f"ledger for lab-a is locked by run 20261130T101500Z-experiment (controller ctl1, pid 4242, since {since}); "
        "wait for it, or if that run is dead, run playbooks/restore.yml with ledger_break_stale_lock=true"
    )
    # another run may not write into the ledger either
    with pytest.raises(_ledger_core.LockError, match="locked by run 20261130T101500Z-experiment"):
        _ledger_core.record(ledger_dir, HOST, "file", {"path": "/x", "existed": False},
                            run_id="20261130T110000Z-restore")
    with pytest.raises(_ledger_core.LockError, match="locked by run 20261130T101500Z-experiment"):
        _ledger_undo.undo(ledger_dir, HOST, run_id="20261130T110000Z-restore")


def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_break_stale_lock_of_a_dead_holder(ledger_dir):
    me = socket.gethostname()
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller=me, pid=dead_pid())
    result = _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller=me, pid=os.getpid(), break_stale=True)
    assert result["changed"]
    assert result["took_over"]["run_id"] == "old" and result["held_before"] is False
    assert "took over the stale ledger lock of lab-a from run old" in result["message"]
    assert json.loads(Path(_ledger_core.lock_path(ledger_dir, HOST)).read_text())["run_id"] == "new"
    assert os.listdir(ledger_dir) == ["lab-a.lock"]  # no temporary file left


def test_break_stale_refuses_a_live_holder(ledger_dir):
    me = socket.gethostname()
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller=me, pid=os.getpid())
    with pytest.raises(_ledger_core.LockError, match=f"not breaking it: pid {os.getpid()} is still alive"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller=me, pid=1, break_stale=True)


def test_break_stale_refuses_another_controller(ledger_dir):
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller="ctl-elsewhere", pid=dead_pid())
    with pytest.raises(_ledger_core.LockError,
                       match="taken from controller ctl-elsewhere, not from this controller ctl1"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl1", pid=1, break_stale=True)


def test_break_stale_takes_over_a_holder_whose_pid_now_names_another_process(ledger_dir):
    """The lock records the holder's start time: a live pid that started at another time is a reused pid, and the
    holder is dead (a pid alone would keep the lock forever)."""
    me = socket.gethostname()
    mine = _ledger_proc.read_proc_stat(os.getpid())["start_time"]
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller=me, pid=os.getpid(), start_time=mine + 1)
    result = _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller=me, pid=1, break_stale=True)
    assert result["took_over"]["start_time"] == mine + 1
    _ledger_core.release_lock(ledger_dir, HOST, run_id="new")
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller=me, pid=os.getpid(), start_time=mine)
    with pytest.raises(_ledger_core.LockError, match=f"not breaking it: pid {os.getpid()} is still alive"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller=me, pid=1, break_stale=True)


def test_two_controllers_with_one_hostname_are_told_apart_by_machine_id(ledger_dir):
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller="ctl1", pid=dead_pid(), machine_id="a" * 32)
    with pytest.raises(_ledger_core.LockError, match=f"taken from controller ctl1 \\(machine id {'a' * 32}\\), "
                                                     f"not from this controller ctl1 \\(machine id {'b' * 32}\\)"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl1", pid=1, break_stale=True,
                                  holder_alive=False, machine_id="b" * 32)
    with pytest.raises(_ledger_core.LockError, match="two runs may not share an id"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller="ctl1", pid=1, machine_id="b" * 32)
    # the same machine under another hostname (renamed) is the same controller
    result = _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl1-renamed", pid=1, break_stale=True,
                                       holder_alive=False, machine_id="a" * 32)
    assert result["took_over"]["machine_id"] == "a" * 32 and result["lock"]["machine_id"] == "a" * 32


def test_break_stale_with_liveness_checked_by_the_caller(ledger_dir):
    # the module runs on the host; the role checks the pid on the controller and passes holder_alive
    _ledger_core.acquire_lock(ledger_dir, HOST, "old", controller="ctl-remote", pid=4242)
    with pytest.raises(_ledger_core.LockError, match="cannot be checked on"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl-remote", pid=1, break_stale=True)
    with pytest.raises(_ledger_core.LockError, match="still alive"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl-remote", pid=1, break_stale=True,
                                  holder_alive=True)
    result = _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl-remote", pid=1, break_stale=True,
                                       holder_alive=False)
    assert result["took_over"]["pid"] == 4242


def test_malformed_lock_file(ledger_dir):
    os.makedirs(ledger_dir)
    Path(_ledger_core.lock_path(ledger_dir, HOST)).write_text("")  # killed between O_EXCL create and write
    with pytest.raises(_ledger_core.LockError, match="empty or malformed .*ledger_break_stale_lock=true"):
        _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl1", pid=1)
    result = _ledger_core.acquire_lock(ledger_dir, HOST, "new", controller="ctl1", pid=1, break_stale=True)
    assert "empty or malformed" in result["took_over"]["problem"]


# --- undo ---------------------------------------------------------------------------------------------------------


def test_undo_runs_in_reverse_order(tmp_path, ledger_dir):
    conf = tmp_path / "conf"
    conf.write_text("original")
    first = file_change(tmp_path, ledger_dir, "conf", "first change")
    second = file_change(tmp_path, ledger_dir, "conf", "second change")
    created = file_change(tmp_path, ledger_dir, "new", "made by the run")

    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [created, second, first]
    assert result["failed"] == [] and result["changed"] is True
    # forward order would leave "first change"
    assert conf.read_text() == "original"
    assert not (tmp_path / "new").exists()
    assert [e["state"] for e in lines_of(ledger_dir)[-3:]] == ["undone"] * 3


def test_undo_is_idempotent(tmp_path, ledger_dir):
    empty = _ledger_undo.undo(ledger_dir, HOST)
    assert (empty["changed"], empty["undone"], empty["failed"]) == (False, [], [])
    assert "empty ledger" in empty["message"]
    assert not os.path.exists(ledger_dir)

    entry_id = file_change(tmp_path, ledger_dir, "a", "x")
    assert _ledger_undo.undo(ledger_dir, HOST)["undone"] == [entry_id]
    count = len(lines_of(ledger_dir))
    again = _ledger_undo.undo(ledger_dir, HOST)
    assert (again["changed"], again["undone"], again["skipped"]) == (False, [], [entry_id])
    assert len(lines_of(ledger_dir)) == count


def test_undo_only_selected_ids(tmp_path, ledger_dir):
    one = file_change(tmp_path, ledger_dir, "one", "x")
    two = file_change(tmp_path, ledger_dir, "two", "x")
    assert _ledger_undo.undo(ledger_dir, HOST, ids=[one])["undone"] == [one]
    assert (tmp_path / "two").exists() and not (tmp_path / "one").exists()
    assert _ledger_core.status(ledger_dir, HOST)["open"] == [two]
    with pytest.raises(_ledger_core.LedgerError, match="no entry nope"):
        _ledger_undo.undo(ledger_dir, HOST, ids=["nope"])


def test_file_undo_restores_content_and_mode(tmp_path, ledger_dir):
    conf = tmp_path / "conf"
    conf.write_text("original\n")
    conf.chmod(0o640)
    entry_id = file_change(tmp_path, ledger_dir, "conf", "changed\n")
    conf.chmod(0o666)
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [entry_id]
    assert conf.read_text() == "original\n"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o640
    assert "restored" in result["details"][0]["message"]
    assert [p.name for p in tmp_path.iterdir() if "inferlab-restore" in p.name] == []


def test_file_undo_never_writes_through_a_link_planted_at_a_temporary_name(tmp_path, ledger_dir):
    """A link planted where a restore used to write its copy (``.NAME.inferlab-restore.PID``, a name anyone could
    predict) is not followed: the file it points at keeps its bytes, and the target is restored all the same."""
    conf = tmp_path / "conf"
    conf.write_text("original\n")
    entry_id = file_change(tmp_path, ledger_dir, "conf", "changed\n")
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    planted = tmp_path / f".conf.inferlab-restore.{os.getpid()}"
    planted.symlink_to(victim)

    assert _ledger_undo.undo(ledger_dir, HOST)["undone"] == [entry_id]
    assert victim.read_text() == "not yours\n"
    assert conf.read_text() == "original\n" and not conf.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if "inferlab-restore" in p.name] == [planted.name]


def test_file_undo_of_a_created_file(tmp_path, ledger_dir):
    entry_id = file_change(tmp_path, ledger_dir, "made", "x")
    assert (tmp_path / "made").exists()
    assert _ledger_undo.undo(ledger_dir, HOST)["undone"] == [entry_id]
    assert not (tmp_path / "made").exists()


def test_pending_file_entry_whose_change_never_happened(tmp_path, ledger_dir):
    # the run was killed between "pending" and the write
    _ledger_core.record(ledger_dir, HOST, "file", {"path": str(tmp_path / "never"), "existed": False})
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"] == [] and len(result["undone"]) == 1
    assert "it was never written" in result["details"][0]["message"]


def test_missing_backup_is_an_undo_failure(tmp_path, ledger_dir):
    conf = tmp_path / "conf"
    conf.write_text("original")
    good = file_change(tmp_path, ledger_dir, "other", "x")
    bad = file_change(tmp_path, ledger_dir, "conf", "changed")
    backup = lines_of(ledger_dir)[-1]["params"]["backup"]
    os.unlink(backup)

    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [good]  # one failure does not stop the others
    assert result["failed"] == [{"id": bad, "kind": "file", "error": (
        f"backup {backup} of {conf} is missing, so the file cannot be restored; restore {conf} by hand")}]
    assert "1 failed" in result["message"]
    last = [e for e in lines_of(ledger_dir) if e["id"] == bad][-1]
    assert last["state"] == "undo_failed" and "is missing" in last["error"]
    assert conf.read_text() == "changed"

    # undo_failed stays open: a later undo tries again
    retry = _ledger_undo.undo(ledger_dir, HOST)
    assert [f["id"] for f in retry["failed"]] == [bad]
    Path(backup).write_text("original")
    assert _ledger_undo.undo(ledger_dir, HOST)["undone"] == [bad]
    assert conf.read_text() == "original"


def test_unknown_kind_in_the_ledger_is_an_undo_failure(ledger_dir):
    _ledger_core.append_line(ledger_dir, HOST, {"id": "x1", "time": "2026-11-30T10:00:00Z", "kind": "from_the_future",
                                                "params": {}, "state": "applied"})
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"][0]["error"].startswith("unknown kind 'from_the_future'")


def test_every_kind_is_declared_with_its_check_and_its_undo():
    for name, kind in _ledger_core.KINDS.items():
        assert kind.name == name and callable(kind.check) and callable(kind.undo), name
        assert kind.leftovers is None or callable(kind.leftovers), name


# --- process kind -------------------------------------------------------------------------------------------------


def test_read_proc_stat_with_odd_comm(tmp_path):
    (tmp_path / "77").mkdir()
    fields = ["S", "1", "77", "77"] + ["0"] * 15 + ["123456"] + ["0"] * 30
    (tmp_path / "77" / "stat").write_text("77 (a) b) c) " + " ".join(fields) + "\n")
    (tmp_path / "77" / "cmdline").write_bytes(b"python3\0-m\0server\0")
    expected = {"state": "S", "ppid": 1, "pgrp": 77, "start_time": 123456}
    assert _ledger_proc.read_proc_stat(77, str(tmp_path)) == expected
    assert _ledger_proc.process_identity(77, str(tmp_path)) == {
        "pid": 77, "start_time": 123456, "cmdline": ["python3", "-m", "server"]}
    assert _ledger_proc.read_proc_stat(78, str(tmp_path)) is None


@pytest.mark.parametrize("kind", ["process", "sampler"])
def test_process_undo_via_the_script(procs, ledger_dir, kind):
    proc = start(procs, ["sleep", "300"])
    identity = _ledger_proc.process_identity(proc.pid)
    line = _ledger_core.record(ledger_dir, HOST, kind, identity, run_id="run1")
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", run_id="run1")

    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0, err
    result = json.loads(out)
    assert result["undone"] == [line["id"]] and result["failed"] == []
    assert f"stopped pid {proc.pid} (\"sleep 300\") with SIGTERM" in result["details"][0]["message"]
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert lines_of(ledger_dir)[-1]["state"] == "undone"

    rc, out, _err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0 and json.loads(out)["changed"] is False


def test_process_undo_never_kills_a_reused_pid(procs, ledger_dir):
    proc = start(procs, ["sleep", "300"])
    identity = _ledger_proc.process_identity(proc.pid)
    identity["start_time"] -= 1  # the recorded process was an earlier one with this pid
    line = _ledger_core.record(ledger_dir, HOST, "process", identity)

    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0, err
    result = json.loads(out)
    assert result["undone"] == [line["id"]]
    assert "now belongs to another process" in result["details"][0]["message"]
    time.sleep(0.2)
    assert proc.poll() is None, "undo killed a process that merely reused the pid"


def test_pending_process_of_a_killed_run_is_undone(procs, ledger_dir):
    # the run recorded "pending", started the process, and died before marking it applied
    proc = start(procs, ["sleep", "300"])
    line = _ledger_core.record(ledger_dir, HOST, "process", _ledger_proc.process_identity(proc.pid), run_id="dead-run")
    assert lines_of(ledger_dir)[-1]["state"] == "pending"

    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0, err
    assert json.loads(out)["undone"] == [line["id"]]
    assert proc.wait(timeout=10) == -signal.SIGTERM


def test_pending_process_known_by_its_pidfile(procs, tmp_path, ledger_dir):
    pidfile = tmp_path / "server.pid"
    argv = ["sleep", "300"]
    line = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": str(pidfile), "cmdline": argv})
    proc = start(procs, argv)
    pidfile.write_text(f"{proc.pid}\n")  # started and wrote its pidfile; the run died before "applied"

    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0, err
    result = json.loads(out)
    assert result["undone"] == [line["id"]]
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert not pidfile.exists()


def test_pending_process_known_by_its_pidfile_that_names_another_program(procs, tmp_path, ledger_dir):
    pidfile = tmp_path / "server.pid"
    _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": str(pidfile), "cmdline": ["my-server", "--port", "1"]})
    other = start(procs, ["sleep", "301"])
    pidfile.write_text(str(other.pid))
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert "not \"my-server --port 1\": nothing to kill" in result["details"][0]["message"]
    assert other.poll() is None


def test_pending_process_that_never_started(tmp_path, ledger_dir):
    _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": str(tmp_path / "never.pid"), "cmdline": "server"})
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"] == []
    assert "it was never started" in result["details"][0]["message"]


def test_process_that_already_exited(ledger_dir):
    proc = subprocess.Popen(["sleep", "0"])
    identity = {"pid": proc.pid, "start_time": _ledger_proc.read_proc_stat(proc.pid)["start_time"],
                "cmdline": "sleep 0"}
    proc.wait()
    _ledger_core.record(ledger_dir, HOST, "process", identity)
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"] == [] and "had already exited" in result["details"][0]["message"]


def test_process_ignoring_sigterm_gets_sigkill(procs, ledger_dir):
    argv = [sys.executable, "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
            "time.sleep(300)"]
    proc = start(procs, argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    params = dict(_ledger_proc.process_identity(proc.pid), stop_timeout=0.3)
    _ledger_core.record(ledger_dir, HOST, "process", params)
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"] == []
    assert "with SIGKILL" in result["details"][0]["message"]
    assert proc.wait(timeout=10) == -signal.SIGKILL


def test_process_group_undo_stops_the_children(procs, ledger_dir):
    argv = ["sh", "-c", "sleep 300 & sleep 300 & wait"]
    proc = start(procs, argv, start_new_session=True)
    deadline = time.monotonic() + 10
    while len(_ledger_proc.group_members(proc.pid, "/proc")) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    children = [p for p in _ledger_proc.group_members(proc.pid, "/proc") if p != proc.pid]
    params = dict(_ledger_proc.process_identity(proc.pid), process_group=True)
    _ledger_core.record(ledger_dir, HOST, "process", params)
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"] == []
    assert f"stopped process group {proc.pid}" in result["details"][0]["message"]
    proc.wait(timeout=10)
    assert [c for c in children if _ledger_proc.pid_alive(c)] == []


# --- the script ---------------------------------------------------------------------------------------------------


def test_script_exit_codes_and_text(tmp_path, ledger_dir):
    conf = tmp_path / "conf"
    conf.write_text("original")
    entry_id = file_change(tmp_path, ledger_dir, "conf", "changed")
    os.unlink(lines_of(ledger_dir)[-1]["params"]["backup"])

    rc, out, _err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 1
    result = json.loads(out)
    assert set(result) >= {"changed", "undone", "failed", "skipped", "message"}
    assert result["failed"][0]["id"] == entry_id

    rc, out, _err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST)
    assert rc == 1 and out.startswith("undid 0 of 1 open changes on lab-a; 1 failed")

    rc, out, _err = run_script("status", "--ledger-dir", ledger_dir, "--host", HOST)
    assert rc == 0 and f"undo_failed {entry_id}" in out and "lock: free" in out

    _ledger_core.acquire_lock(ledger_dir, HOST, "run1", controller="ctl1", pid=4242)
    rc, out, _err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--run-id", "run2", "--json")
    assert rc == 3 and "locked by run run1 (controller ctl1, pid 4242" in json.loads(out)["message"]
    rc, out, _err = run_script("status", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0 and json.loads(out)["lock"]["run_id"] == "run1"
    rc, out, _err = run_script("unlock", "--ledger-dir", ledger_dir, "--host", HOST, "--run-id", "run2")
    assert rc == 3 and out.startswith("error: not releasing")
    rc, out, _err = run_script("unlock", "--ledger-dir", ledger_dir, "--host", HOST, "--run-id", "run1", "--json")
    assert rc == 0 and json.loads(out)["changed"] is True

    rc, _out, err = run_script("undo", "--host", HOST)
    assert rc == 2 and "--ledger-dir" in err


def test_script_reports_a_crash_with_its_own_exit_code(monkeypatch, capsys, ledger_dir):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(_ledger_core, "status", broken)
    assert _ledger_cli.main(["status", "--ledger-dir", ledger_dir, "--host", HOST,
                             "--json"]) == _ledger_cli.EXIT_CRASHED
    result = json.loads(capsys.readouterr().out)
    assert result["message"] == "status crashed: boom" and "RuntimeError: boom" in result["traceback"]


def test_version_prints_the_stamp_beside_the_script(tmp_path):
    alone = install_ledger(tmp_path / "bin")
    script = [sys.executable, "-I", str(alone), "version"]
    out = subprocess.run([*script, "--json"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 3 and json.loads(out.stdout)["message"].startswith(
        f"cannot read the version stamp {tmp_path}/bin/inferlab_host.json: [Errno 2]")
    stamp = {"collection": "inferlab.distributed", "version": "0.3.0", "files": ["inferlab_ledger.py"]}
    (tmp_path / "bin" / "inferlab_host.json").write_text(json.dumps(stamp))
    out = subprocess.run(script, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout == f"inferlab.distributed 0.3.0: 1 file in {tmp_path}/bin\n"
    result = json.loads(subprocess.run([*script, "--json"], capture_output=True, text=True, timeout=60,
                                       check=True).stdout)
    assert {k: result[k] for k in stamp} == stamp and result["changed"] is False
    (tmp_path / "bin" / "inferlab_host.json").write_text("[]")
    out = subprocess.run(script, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 3 and "malformed version stamp" in out.stdout


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_script_runs_alone_on_old_python(procs, tmp_path, ledger_dir, version):
    """The host's copies alone, run by whatever Python the host has (3.8 is ansible-core 2.19's oldest)."""
    python = require_python(version)
    alone = install_ledger(tmp_path / "bin")
    proc = start(procs, ["sleep", "300"])
    line = _ledger_core.record(ledger_dir, HOST, "process", _ledger_proc.process_identity(proc.pid))
    out = subprocess.run([python, "-I", str(alone), "undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json"],
                         capture_output=True, text=True, timeout=60, cwd=str(tmp_path), check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["undone"] == [line["id"]]
    assert proc.wait(timeout=10) == -signal.SIGTERM


def test_the_conventions_table_lists_the_registrys_kinds_in_its_order():
    text = (REPO_ROOT / "docs" / "CONVENTIONS.md").read_text()
    section = text.split("\n## Change ledger\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| (.+?) \| (.+?) \|$", section, re.M)
    assert [kind for kind, _by, _undo in rows] == list(_ledger_core.KINDS)
    assert all(by.strip() and undo.strip() for _kind, by, undo in rows)


def test_the_host_files_import_ansible_only_where_they_fall_back_to_their_host_names():
    """On a host the files run alone: an import of the collection is only ever tried, with the host's name of the
    same module as its ImportError fallback."""
    for source, _name in ledger_files():
        tree = ast.parse(source.read_text())
        guarded = {id(node) for handler in ast.walk(tree) if isinstance(handler, ast.Try)
                   and any(isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in handler.handlers)
                   for node in handler.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(name.split(".")[0] in ("ansible", "ansible_collections") for name in names):
                    assert id(node) in guarded, f"{source.name}:{node.lineno}"


def test_the_host_files_import_each_other_one_way_and_only_what_the_role_installs():
    """No cycle among the installed files (the core reaches the kinds through the registry, never the reverse), and
    every host name a file imports is installed beside it."""
    installed = {name[:-3] for _source, name in ledger_files()}
    graph = {}
    for source, name in ledger_files():
        tree = ast.parse(source.read_text())
        graph[name[:-3]] = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                            for alias in node.names if alias.name.startswith("inferlab_")}
        assert graph[name[:-3]] <= installed, name
    done = set()
    while len(done) < len(graph):
        ready = {name for name, imports in graph.items() if name not in done and imports <= done}
        assert ready, f"an import cycle among {sorted(set(graph) - done)}"
        done |= ready


# --- tc_profile kind ----------------------------------------------------------------------------------------------

TC_FIXTURES = REPO_ROOT / "tests" / "unit" / "fixtures" / "tc"

FAKE_TC = '''#!{python}
"""A stand-in for tc: shows {state} (a recorded `tc -j qdisc show`), and `qdisc del ... root` resets it to the
kernel default as the real tc does; every call is appended to {calls}."""
import json, sys
args = sys.argv[1:]
with open({calls!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
state = open({state!r}).read()
if args[:4] == ["-j", "qdisc", "show", "dev"]:
    if args[4] != "tb0":
        sys.stderr.write('Cannot find device "%s"\\n' % args[4])
        sys.exit(1)
    sys.stdout.write(state)
elif args[:2] == ["qdisc", "del"] and args[-1] == "root":
    if json.loads(state)[0]["handle"] == "0:":
        sys.stderr.write("Error: Cannot delete qdisc with handle of zero.\\n")
        sys.exit(2)
    open({state!r}, "w").write(open({clean!r}).read())
else:
    sys.exit(99)
'''


@pytest.fixture
def fake_tc(tmp_path):
    """``(tc path, set_state(fixture name), calls())``: a stateful fake tc on recorded real output."""
    state, calls = tmp_path / "tc_state.json", tmp_path / "tc_calls.jsonl"
    tc = tmp_path / "fake_tc"
    tc.write_text(FAKE_TC.format(python=sys.executable, state=str(state), calls=str(calls),
                                 clean=str(TC_FIXTURES / "clean_veth.json")))
    tc.chmod(0o755)

    def set_state(name):
        state.write_text((TC_FIXTURES / f"{name}.json").read_text())

    def made():
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

    return str(tc), set_state, made


def tc_ctx(tc):
    return _ledger_undo.UndoContext(tc_command=[tc])


def test_tc_profile_check_normalises_params(ledger_dir):
    line = _ledger_core.record(ledger_dir, HOST, "tc_profile",
                               {"interface": "thunderbolt0", "profile": "lossy", "rate_mbit": "1000",
                                "pfifo_limit": 10})
    assert line["params"] == {"interface": "thunderbolt0", "profile": "lossy", "handle": "1ab:", "rate_mbit": 1000,
                              "pfifo_limit": 10}
    assert re.match(r"^\d{8}T\d{6}Z-tc_profile-\d+\.\d+\.\d+$", line["id"])


@pytest.mark.parametrize(("params", "message"), [
    ({"profile": "tx_cliff"}, '"interface" of a tc_profile entry must be an interface name'),
    ({"interface": "a/b", "profile": "tx_cliff"}, "must be an interface name"),
    ({"interface": "x" * 16, "profile": "tx_cliff"}, "must be an interface name"),
    ({"interface": "tb0", "profile": "clean"}, "clean is the absence of a profile, nothing to record"),
    ({"interface": "tb0"}, '"profile" of a tc_profile entry must be one of tx_cliff, lossy'),
    ({"interface": "tb0", "profile": "lossy", "handle": "0:"}, '"handle" of a tc_profile entry must be a qdisc'),
    ({"interface": "tb0", "profile": "lossy", "handle": "1ab"}, "must be a qdisc handle"),
    ({"interface": "tb0", "profile": "lossy", "rate_mbit": 0}, '"rate_mbit" must be at least 1'),
    ({"interface": "tb0", "profile": "lossy", "dev": "tb0"}, "unknown params for a tc_profile entry: dev"),
])
def test_tc_profile_bad_params(ledger_dir, params, message):
    with pytest.raises(_ledger_core.LedgerError, match=re.escape(message)):
        _ledger_core.record(ledger_dir, HOST, "tc_profile", params)


@pytest.mark.parametrize("profile", ["tx_cliff", "lossy"])
def test_tc_profile_undo_removes_our_root_qdisc(ledger_dir, fake_tc, profile):
    tc, set_state, made = fake_tc
    set_state(profile)
    line = _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb0", "profile": profile})
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied")
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=tc_ctx(tc))
    assert result["undone"] == [line["id"]] and not result["failed"]
    assert result["details"][0]["message"].startswith(f"removed the {profile} profile from tb0 (tbf 1ab: root")
    assert made() == [["-j", "qdisc", "show", "dev", "tb0"], ["qdisc", "del", "dev", "tb0", "root"]]
    # idempotent: a second undo has nothing open, and tc is not called again
    assert _ledger_undo.undo(ledger_dir, HOST, ctx=tc_ctx(tc))["changed"] is False
    assert len(made()) == 2


@pytest.mark.parametrize("state", ["clean_veth", "clean_pfifo_fast"])
def test_tc_profile_pending_entry_whose_change_never_happened(ledger_dir, fake_tc, state):
    tc, set_state, made = fake_tc
    set_state(state)
    line = _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb0", "profile": "tx_cliff"})
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=tc_ctx(tc))
    assert result["undone"] == [line["id"]]
    assert "no tx_cliff profile on tb0 (the kernel default root qdisc" in result["details"][0]["message"]
    assert "nothing to remove" in result["details"][0]["message"]
    assert made() == [["-j", "qdisc", "show", "dev", "tb0"]]


@pytest.mark.parametrize("state", ["foreign_htb", "foreign_tbf_auto_handle", "foreign_child"])
def test_tc_profile_undo_never_deletes_a_foreign_root_qdisc(ledger_dir, fake_tc, state):
    tc, set_state, made = fake_tc
    set_state(state)
    line = _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb0", "profile": "lossy"})
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=tc_ctx(tc))
    assert [f["id"] for f in result["failed"]] == [line["id"]]
    error = result["failed"][0]["error"]
    assert error.startswith("tb0 has a root qdisc inferlab did not make (")
    assert "not deleting it" in error and "tc qdisc del dev tb0 root" in error
    assert made() == [["-j", "qdisc", "show", "dev", "tb0"]]
    assert _ledger_core.status(ledger_dir, HOST)["entries"][0]["state"] == "undo_failed"


def test_tc_profile_undo_when_the_interface_is_gone(ledger_dir, fake_tc):
    tc, set_state, _made = fake_tc
    set_state("tx_cliff")
    _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb9", "profile": "tx_cliff"})
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=tc_ctx(tc))
    assert not result["failed"]
    assert result["details"][0]["message"] == "tb9 no longer exists, and its qdiscs went with it: nothing to remove"


@pytest.mark.parametrize(("tc_command", "message"), [
    (["/nonexistent/tc"], "/nonexistent/tc -j qdisc show dev tb0 could not run"),
    ([sys.executable, "-c", "print('qdisc noqueue 0: root')"], "printed something that is not JSON"),
    ([sys.executable, "-c", "print('{}')"], "printed dict, expected a list of qdiscs"),
    ([sys.executable, "-c", "import sys; sys.stderr.write('RTNETLINK answers: busy'); sys.exit(2)"],
     "exited 2: RTNETLINK answers: busy"),
])
def test_tc_profile_undo_failures(ledger_dir, tc_command, message):
    _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb0", "profile": "tx_cliff"})
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=_ledger_undo.UndoContext(tc_command=tc_command))
    assert message in result["failed"][0]["error"]


def test_tc_profile_undo_through_the_script_with_its_tc_option(ledger_dir, fake_tc):
    tc, set_state, made = fake_tc
    set_state("lossy")
    line = _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb0", "profile": "lossy"})
    out = subprocess.run([sys.executable, "-I", str(ledger_script()), "undo", "--ledger-dir", ledger_dir, "--host",
                          HOST,
                          "--tc", tc, "--json"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["undone"] == [line["id"]]
    assert made()[-1] == ["qdisc", "del", "dev", "tb0", "root"]


def test_tc_is_found_in_sbin_by_default(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    found = [os.path.join(d, "tc") for d in _ledger_settings.TC_SBIN if os.access(os.path.join(d, "tc"), os.X_OK)]
    if not found:
        with pytest.raises(_ledger_core.UndoError, match="tc is not installed on this host"):
            _ledger_settings._tc_argv(_ledger_undo.UndoContext())
    else:
        assert _ledger_settings._tc_argv(_ledger_undo.UndoContext()) == [found[0]]
    assert _ledger_settings._tc_argv(_ledger_undo.UndoContext(tc_command=("ip", "netns", "exec", "x", "tc"))) == [
        "ip", "netns", "exec", "x", "tc"]


# --- systemd_unit and container kinds -----------------------------------------------------------------------------


class FakeCommands:
    """A ctx.run_command that answers each call with the next recorded ``(argv, rc, stdout, stderr)`` and checks the
    argv; ``timeouts`` keeps the timeout each call was given."""

    def __init__(self, calls):
        self.calls = list(calls)
        self.timeouts = []

    def __call__(self, argv, timeout):
        assert self.calls, f"unexpected call {argv}"
        expected, rc, out, err = self.calls.pop(0)
        assert argv == expected
        self.timeouts.append(timeout)
        return rc, out, err


def fake_ctx(calls):
    commands = FakeCommands(calls)
    ctx = _ledger_undo.UndoContext(systemctl_command=["systemctl"],
                                   container_commands={"docker": ["docker"], "podman": ["podman"]},
                                   run_command=commands)
    return ctx, commands


def test_systemd_unit_and_container_checks_normalise_params(ledger_dir):
    line = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-rank0"})
    assert line["params"] == {"unit": "inferlab-rank0.service", "stop_timeout": 90.0}
    assert re.match(r"^\d{8}T\d{6}Z-systemd_unit-\d+\.\d+\.\d+$", line["id"])
    line = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-rank0.service",
                                                                  "stop_timeout": "30",
                                                                  "command": ["systemd-run", "--", "sleep", "30"]})
    assert line["params"] == {"unit": "inferlab-rank0.service", "stop_timeout": 30.0,
                              "command": ["systemd-run", "--", "sleep", "30"]}
    line = _ledger_core.record(ledger_dir, HOST, "container", {"engine": "podman", "name": "rank0"})
    assert line["params"] == {"engine": "podman", "name": "rank0", "stop_timeout": 10.0}
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", params={"pid": "4321", "start_time": 77})
    assert lines_of(ledger_dir)[-1]["params"] == {"engine": "podman", "name": "rank0", "stop_timeout": 10.0,
                                                  "pid": 4321, "start_time": 77}


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("systemd_unit", {}, '"unit" must be a service unit name'),
    ("systemd_unit", {"unit": "a b"}, '"unit" must be a service unit name'),
    ("systemd_unit", {"unit": "-a"}, '"unit" must be a service unit name'),
    ("systemd_unit", {"unit": "a/b.service"}, '"unit" must be a service unit name'),
    ("systemd_unit", {"unit": "inferlab.scope"}, '"unit" must be a service unit name'),
    ("systemd_unit", {"unit": "x" * 250}, '"unit" must be a service unit name'),
    ("systemd_unit", {"unit": "u", "stop_timeout": -1},
     '"stop_timeout" must be a finite number of seconds, not negative, got -1'),
    ("container", {"engine": "docker", "name": "r0", "stop_timeout": "inf"},
     '"stop_timeout" must be a finite number of seconds, not negative, got \'inf\''),
    ("process", {"pid": 1, "start_time": 1, "stop_timeout": float("nan")},
     '"stop_timeout" must be a finite number of seconds, not negative, got nan'),
    ("systemd_unit", {"unit": "u", "command": "systemd-run sleep"}, '"command" of a systemd_unit entry must be'),
    ("systemd_unit", {"unit": "u", "command": []}, '"command" of a systemd_unit entry must be'),
    ("systemd_unit", {"unit": "u", "pid": 0}, '"pid" must be at least 1'),
    ("systemd_unit", {"unit": "u", "signal": 9}, "unknown params for a systemd_unit entry: signal"),
    ("container", {"name": "r0"}, '"engine" of a container entry must be one of docker, podman'),
    ("container", {"engine": "nerdctl", "name": "r0"}, '"engine" of a container entry must be one of'),
    ("container", {"engine": "docker"}, "a container name must match [A-Za-z0-9][A-Za-z0-9_.-]*"),
    ("container", {"engine": "docker", "name": "-r0"}, "a container name must match"),
    ("container", {"engine": "docker", "name": "r 0"}, "a container name must match"),
    ("container", {"engine": "docker", "name": "r0", "start_time": "x"}, '"start_time" must be an integer'),
    ("container", {"engine": "docker", "name": "r0", "image": "i"}, "unknown params for a container entry: image"),
])
def test_systemd_unit_and_container_bad_params(ledger_dir, kind, params, message):
    with pytest.raises(_ledger_core.LedgerError, match=re.escape(message)):
        _ledger_core.record(ledger_dir, HOST, kind, params)


SYSTEMCTL_NOT_LOADED = "Failed to stop inferlab-r0.service: Unit inferlab-r0.service not loaded.\n"
RESET_NOT_LOADED = "Failed to reset failed state of unit inferlab-r0.service: Unit inferlab-r0.service not loaded.\n"
NO_SYSTEMD = ("System has not been booted with systemd as init system (PID 1). Can't operate.\n"
              "Failed to connect to bus: Host is down\n")


@pytest.mark.parametrize(("calls", "message"), [
    ([(["systemctl", "stop", "inferlab-r0.service"], 0, "", ""),
      (["systemctl", "reset-failed", "inferlab-r0.service"], 1, "", RESET_NOT_LOADED)],
     "stopped unit inferlab-r0.service"),
    ([(["systemctl", "stop", "inferlab-r0.service"], 0, "", ""),
      (["systemctl", "reset-failed", "inferlab-r0.service"], 0, "", "")],
     "stopped unit inferlab-r0.service"),
    # a pending entry whose run died before systemd-run, or a unit that exited and was collected
    ([(["systemctl", "stop", "inferlab-r0.service"], 5, "", SYSTEMCTL_NOT_LOADED)],
     "unit inferlab-r0.service is not loaded (never started, or exited and collected): nothing to stop"),
    ([(["systemctl", "stop", "inferlab-r0.service"], 1, "", NO_SYSTEMD)],
     "this host does not run systemd, so no unit inferlab-r0.service can be running: nothing to stop"),
])
def test_systemd_unit_undo(ledger_dir, calls, message):
    line = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-r0", "stop_timeout": 30})
    ctx, commands = fake_ctx(calls)
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)
    assert result["undone"] == [line["id"]] and not result["failed"]
    assert result["details"][0]["message"] == message
    assert not commands.calls
    assert commands.timeouts[0] == 30 + _ledger_base.COMMAND_GRACE
    assert _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)["changed"] is False


@pytest.mark.parametrize(("calls", "message"), [
    ([(["systemctl", "stop", "inferlab-r0.service"], 1, "",
       "Failed to stop inferlab-r0.service: Access denied\n")],
     "systemctl stop inferlab-r0.service exited 1: Failed to stop inferlab-r0.service: Access denied"),
    ([(["systemctl", "stop", "inferlab-r0.service"], 0, "", ""),
      (["systemctl", "reset-failed", "inferlab-r0.service"], 1, "", "Failed to connect to bus\n")],
     "stopped unit inferlab-r0.service, but systemctl reset-failed inferlab-r0.service exited 1: Failed to connect "
     "to bus"),
])
def test_systemd_unit_undo_failures(ledger_dir, calls, message):
    _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-r0"})
    ctx, _commands = fake_ctx(calls)
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)
    assert result["failed"][0]["error"] == message
    assert lines_of(ledger_dir)[-1]["state"] == "undo_failed"


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_container_undo_stops_and_removes(ledger_dir, engine):
    line = _ledger_core.record(ledger_dir, HOST, "container", {"engine": engine, "name": "rank0", "stop_timeout": 2.5})
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", params={"pid": 4321, "start_time": 5})
    ctx, commands = fake_ctx([([engine, "stop", "-t", "3", "rank0"], 0, "rank0\n", ""),
                              ([engine, "rm", "rank0"], 0, "rank0\n", "")])
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)
    assert result["undone"] == [line["id"]]
    assert result["details"][0]["message"] == f"stopped and removed {engine} container rank0"
    assert commands.timeouts == [2.5 + _ledger_base.COMMAND_GRACE, 60]
    assert not commands.calls


@pytest.mark.parametrize(("engine", "rc", "err"), [
    ("docker", 1, "Error response from daemon: No such container: rank0\n"),
    ("podman", 125, 'Error: no container with name or ID "rank0" found: no such container\n'),
])
def test_container_undo_when_there_is_no_such_container(ledger_dir, engine, rc, err):
    line = _ledger_core.record(ledger_dir, HOST, "container", {"engine": engine, "name": "rank0"})
    ctx, commands = fake_ctx([([engine, "stop", "-t", "10", "rank0"], rc, "", err)])
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)
    assert result["undone"] == [line["id"]]
    assert result["details"][0]["message"] == (
        f"no {engine} container rank0 (never created, or already removed): nothing to stop")
    assert not commands.calls


def test_container_removed_between_stop_and_rm_is_fine(ledger_dir):
    line = _ledger_core.record(ledger_dir, HOST, "container", {"engine": "docker", "name": "rank0"})
    ctx, _commands = fake_ctx([(["docker", "stop", "-t", "10", "rank0"], 0, "rank0\n", ""),
                               (["docker", "rm", "rank0"], 1, "", "Error response from daemon: No such container: "
                                                                  "rank0\n")])
    assert _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)["undone"] == [line["id"]]


@pytest.mark.parametrize(("calls", "message"), [
    ([(["docker", "stop", "-t", "10", "rank0"], 1, "",
       "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n")],
     "docker stop -t 10 rank0 exited 1: Cannot connect to the Docker daemon"),
    ([(["docker", "stop", "-t", "10", "rank0"], 0, "rank0\n", ""),
      (["docker", "rm", "rank0"], 1, "", "Error response from daemon: removal of container rank0 is already in "
                                         "progress\n")],
     "stopped docker container rank0, but docker rm rank0 exited 1: Error response from daemon: removal"),
])
def test_container_undo_failures(ledger_dir, calls, message):
    _ledger_core.record(ledger_dir, HOST, "container", {"engine": "docker", "name": "rank0"})
    ctx, _commands = fake_ctx(calls)
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)
    assert result["failed"][0]["error"].startswith(message)
    assert lines_of(ledger_dir)[-1]["state"] == "undo_failed"


def test_a_missing_manager_command_is_an_undo_failure(ledger_dir, monkeypatch):
    monkeypatch.setattr(_ledger_base, "COMMAND_DIRS", ())
    monkeypatch.setenv("PATH", "/nonexistent")
    _ledger_core.record(ledger_dir, HOST, "container", {"engine": "podman", "name": "rank0"})
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["failed"][0]["error"] == (
        "podman is not installed on this host (the podman CLI), so container rank0 cannot be stopped; install it or "
        "stop it by hand, then run the undo again")


def test_the_command_runner_of_the_context_runs_tc_too(ledger_dir, fake_tc):
    tc, set_state, made = fake_tc
    set_state("clean_veth")
    _ledger_core.record(ledger_dir, HOST, "tc_profile", {"interface": "tb0", "profile": "tx_cliff"})
    seen = []

    def run_command(argv, timeout):
        seen.append(argv)
        return 0, "[]", ""

    result = _ledger_undo.undo(ledger_dir, HOST, ctx=_ledger_undo.UndoContext(tc_command=[tc], run_command=run_command))
    assert not result["failed"]
    assert seen == [[tc, "-j", "qdisc", "show", "dev", "tb0"]]
    assert made() == [], "the fake tc ran although the context's runner was given"


FAKE_MANAGER = """#!{python}
import json, sys
with open({calls!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["stop"] and sys.argv[-1].startswith("gone"):
    sys.stderr.write({absent!r})
    sys.exit({absent_rc})
print(sys.argv[-1])
"""


def fake_manager(tmp_path, name, absent, absent_rc):
    calls = tmp_path / f"{name}_calls.jsonl"
    path = tmp_path / name
    path.write_text(FAKE_MANAGER.format(python=sys.executable, calls=str(calls), absent=absent, absent_rc=absent_rc))
    path.chmod(0o755)
    return str(path), lambda: [json.loads(x) for x in calls.read_text().splitlines()] if calls.exists() else []


def test_systemd_unit_and_container_undo_through_the_script(tmp_path, ledger_dir):
    systemctl, systemctl_calls = fake_manager(tmp_path, "systemctl", "Unit gone.service not loaded.\n", 5)
    docker, docker_calls = fake_manager(tmp_path, "docker", "Error: No such container: gone\n", 1)
    podman, podman_calls = fake_manager(tmp_path, "podman", "Error: no such container\n", 125)
    ids = [_ledger_core.record(ledger_dir, HOST, kind, params)["id"] for kind, params in (
        ("systemd_unit", {"unit": "inferlab-r0"}),
        ("systemd_unit", {"unit": "gone"}),
        ("container", {"engine": "docker", "name": "r1", "stop_timeout": 30}),
        ("container", {"engine": "podman", "name": "gone"}))]
    out = subprocess.run([sys.executable, "-I", str(ledger_script()), "undo", "--ledger-dir", ledger_dir, "--host",
                          HOST,
                          "--systemctl", systemctl, "--docker", docker, "--podman", podman, "--json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["undone"] == list(reversed(ids))
    assert [d["message"] for d in result["details"]] == [
        "no podman container gone (never created, or already removed): nothing to stop",
        "stopped and removed docker container r1",
        "unit gone.service is not loaded (never started, or exited and collected): nothing to stop",
        "stopped unit inferlab-r0.service"]
    assert systemctl_calls() == [["stop", "gone.service"], ["stop", "inferlab-r0.service"],
                                 ["reset-failed", "inferlab-r0.service"]]
    assert docker_calls() == [["stop", "-t", "30", "r1"], ["rm", "r1"]]
    assert podman_calls() == [["stop", "-t", "10", "gone"]]


def test_build_dir_undo_removes_the_marked_directory(tmp_path, ledger_dir):
    build = tmp_path / "build" / "tbnet-candidate"
    entry = _ledger_core.record(ledger_dir, HOST, "build_dir", {"path": str(build) + "/", "purpose": "candidate"})
    assert entry["params"]["path"] == str(build)
    (build / "module").mkdir(parents=True)
    (build / _ledger_settings.BUILD_DIR_MARKER).write_text("")
    (build / "module" / "thunderbolt-net.ko").write_bytes(b"\x7fELF")
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [entry["id"]] and not build.exists()
    assert result["details"][0]["message"] == f"removed the build directory {build}"
    # twice, and for a pending entry whose directory was never made: nothing to remove
    entry = _ledger_core.record(ledger_dir, HOST, "build_dir", {"path": str(build)})
    assert _ledger_undo.undo(ledger_dir, HOST)["details"][0]["message"] == f"removed nothing: {build} is absent"


def test_build_dir_undo_leaves_an_unmarked_directory_alone(tmp_path, ledger_dir):
    build = tmp_path / "someone-elses"
    build.mkdir()
    (build / "notes.txt").write_text("mine")
    _ledger_core.record(ledger_dir, HOST, "build_dir", {"path": str(build)})
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert "no .inferlab-build-dir marker: not the directory inferlab made" in result["failed"][0]["error"]
    assert (build / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("path, message", [
    ("relative/dir", "must be an absolute path"),
    ("/build", "at least two levels deep"),
    ("/lib/modules/6.1.0-57-amd64/extra", "may not be under /lib/modules"),
    ("/usr/lib/modules/6.1.0-57-amd64/updates", "may not be under /usr/lib/modules"),
    ("/boot/tbnet", "may not be under /boot"),
    ("/etc/modprobe.d/x", "may not be under /etc"),
    ("/var/log/inferlab-build", "may not be under /var/log"),
    ("/root/.ssh/build", "may not be inside a .ssh directory"),
    ("/home/ops/.gnupg/build", "may not be inside a .gnupg directory"),
    ("/var/lib/dpkg/build", "may not be under /var/lib/dpkg"),
])
def test_build_dir_refuses_system_trees(ledger_dir, path, message):
    with pytest.raises(_ledger_core.LedgerError, match=message):
        _ledger_core.record(ledger_dir, HOST, "build_dir", {"path": path})
    assert not os.path.exists(_ledger_core.ledger_path(ledger_dir, HOST))


@pytest.mark.parametrize("path", ["/var/lib/inferlab/build/tbnet", "/root/.ansible/tmp/molecule.x/state/build/tbnet",
                                  "/home/ops/inferlab/build/tbnet", "/tmp/inferlab-build/tbnet"])
def test_build_dir_accepts_a_state_directory_or_a_users_workspace(ledger_dir, path):
    """A state directory under /var/lib (the default), or in a user's workspace (molecule's under /root/.ansible)."""
    assert _ledger_core.record(ledger_dir, HOST, "build_dir", {"path": path})["params"]["path"] == path


def test_a_restore_killed_in_the_middle_of_its_undo_then_run_again_finishes_it(procs, ledger_dir):
    """The host's part of a restore is killed (SIGKILL) while it waits on a process that ignores SIGTERM; the entry
    it had undone reads undone, the others still open. A second undo stops the stubborn one (SIGKILL after its stop
    timeout) and the first one, and leaves nothing open."""
    first = start(procs, ["sleep", "300"])
    stubborn_argv = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                     "time.sleep(300)"]
    stubborn = start(procs, stubborn_argv)
    last = start(procs, ["sleep", "301"])
    ids = []
    for proc in (first, stubborn, last):
        line = _ledger_core.record(ledger_dir, HOST, "process",
                                   dict(_ledger_proc.process_identity(proc.pid), stop_timeout=2))
        _ledger_core.mark(ledger_dir, HOST, line["id"], "applied")
        ids.append(line["id"])

    undo = subprocess.Popen([sys.executable, str(ledger_script()), "undo", "--ledger-dir", ledger_dir, "--host", HOST,
                             "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # newest first: `last` is stopped and marked undone, then the undo waits 2 s on `stubborn` before its SIGKILL
    deadline = time.monotonic() + 20
    while {line["id"]: line["state"] for line in lines_of(ledger_dir)}.get(ids[2]) != "undone":
        assert time.monotonic() < deadline and undo.poll() is None, "the undo did not get to the stubborn process"
        time.sleep(0.02)
    undo.kill()
    undo.wait()
    states = {line["id"]: line["state"] for line in lines_of(ledger_dir)}
    assert [states[i] for i in ids] == ["applied", "applied", "undone"]
    assert stubborn.poll() is None and first.poll() is None

    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0, err
    assert json.loads(out)["undone"] == [ids[1], ids[0]]
    assert stubborn.wait(timeout=10) == -signal.SIGKILL and first.wait(timeout=10) == -signal.SIGTERM
    assert {line["id"]: line["state"] for line in lines_of(ledger_dir)} == dict.fromkeys(ids, "undone")

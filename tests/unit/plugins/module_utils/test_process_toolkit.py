# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the process toolkit's parts that its callers test only through their own messages: the bounded runner,
signals and waits, the labelled lines of /proc, the exit of a spawned child and the end of a log."""

import os
import pwd
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc


def test_run_bounded_runs_in_the_c_locale_with_no_stdin():
    rc, out, err = proc.run_bounded([sys.executable, "-c", "import os, sys; print(os.environ['LC_ALL']);"
                                     "print(repr(sys.stdin.read())); sys.exit(3)"])
    assert (rc, out, err) == (3, "C\n''\n", "")


def test_run_bounded_kills_a_command_past_its_timeout():
    started = time.monotonic()
    with pytest.raises(proc.CommandTimedOut) as caught:
        proc.run_bounded(["sleep", "30"], timeout=0.2)
    assert caught.value.died and caught.value.pid > 0
    assert str(caught.value) == "Command '['sleep', '30']' timed out after 0.2 seconds"
    assert isinstance(caught.value, subprocess.TimeoutExpired)
    assert time.monotonic() - started < 1 + proc.KILL_WAIT_S


def test_run_bounded_raises_oserror_for_a_missing_program(tmp_path):
    with pytest.raises(OSError):
        proc.run_bounded([str(tmp_path / "absent")])


def test_send_signal_and_wait_gone():
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert proc.leads_group(child.pid)
        assert proc.send_signal(child.pid, signal.SIGTERM, group=True)
        assert proc.wait_gone(lambda: child.poll() is None, 5)
    finally:
        child.kill()
        child.wait()
    assert proc.send_signal(child.pid, signal.SIGTERM) is False
    assert proc.wait_gone(lambda: True, 0.05, poll_interval=0.01) is False


def test_labelled_lines_of_proc(tmp_path):
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1764490000\n")
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text("Name:\tx\nUid:\t1000\t1001\t1001\t1001\n")
    assert proc.boot_time(str(tmp_path)) == 1764490000
    assert proc.read_proc_uid(42, str(tmp_path)) == 1001
    assert proc.read_proc_uid(43, str(tmp_path)) is None
    assert proc.started_at(os.sysconf("SC_CLK_TCK") * 10, str(tmp_path)) == 1764490010
    (tmp_path / "stat").write_text("btime soon\n")
    assert proc.boot_time(str(tmp_path)) is None and proc.started_at(0, str(tmp_path)) is None


def test_a_pidfile_error_says_what_it_found(tmp_path):
    pidfile = tmp_path / "x.pid"
    pidfile.write_text("not a pid\n")
    with pytest.raises(proc.PidfileError) as caught:
        proc.read_pidfile(str(pidfile))
    assert (caught.value.pidfile, caught.value.text, caught.value.os_error) == (str(pidfile), "not a pid", None)
    with pytest.raises(proc.PidfileError) as caught:
        proc.read_pidfile(str(tmp_path))  # a directory
    assert isinstance(caught.value.os_error, OSError) and caught.value.text is None


def test_the_exit_of_a_spawned_child(tmp_path):
    pid = proc.spawn_detached(["sh", "-c", "exit 4"], {"PATH": proc.BASE_PATH}, str(tmp_path / "l.log"),
                              str(tmp_path / "p.pid"))
    try:
        proc.SPAWNED[pid].wait(timeout=10)
        assert proc.spawned_returncode(pid) == 4
        assert proc.spawned_exit(pid) == "exited with status 4"
    finally:
        proc.SPAWNED.pop(pid, None)
    assert proc.spawned_returncode(pid) is None and proc.spawned_exit(pid) is None


def test_service_environment_is_clean():
    assert proc.service_environment() == {"PATH": proc.BASE_PATH, "LANG": "C.UTF-8",
                                          "HOME": pwd.getpwuid(os.geteuid()).pw_dir}


def test_read_log_end(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"l{i}\n" for i in range(30)))
    size = log.stat().st_size
    assert proc.read_log_end(str(log), 2) == "l28\nl29"
    assert proc.read_log_end(str(log), 2, start=size) == ""
    assert proc.read_log_end(str(log), 2, start=size + 100) == "l28\nl29"  # truncated meanwhile: from its start
    assert proc.read_log_end(str(log), 0) == ""
    assert proc.read_log_end(str(log), 50, max_bytes=8) == "l28\nl29"
    assert proc.file_size(str(log)) == size and proc.file_size(str(tmp_path / "absent")) == 0
    with pytest.raises(OSError):
        proc.read_log_end(str(tmp_path / "absent"), 2)

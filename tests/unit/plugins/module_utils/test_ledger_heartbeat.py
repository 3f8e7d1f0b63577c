# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heartbeat of the dead man's switches (``_ledger_heartbeat``): ``renew`` renews on input only and never
creates the renew file; ``heartbeat``, run as the installed ledger script, renews through real ``renew`` processes
while a watched process lives, and stops (closing their input) when it dies or on SIGTERM; its restart of a child
that ended. The renew commands the experiment builds: plugin_utils/test_heartbeat_children.py; the lookup that finds
the playbook process to watch: lookup/test_playbook_process.py."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_heartbeat as hb
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import ledger_script

OLD = 1_000_000_000  # an mtime long past


def aged(path):
    path.write_text("")
    os.utime(path, (OLD, OLD))
    return path


def test_renew_touches_the_file_for_each_line_and_never_creates_it(tmp_path):
    renew_file = aged(tmp_path / "deadman.renew")
    result = hb.renew_on_input(str(renew_file), io.StringIO("\n\n\n"))
    assert (result["renewals"], result["missing"]) == (3, 0)
    assert renew_file.stat().st_mtime > OLD
    renew_file.unlink()  # the switch is gone (disarmed or fired): renewals find nothing and create nothing
    result = hb.renew_on_input(str(renew_file), io.StringIO("\n\n"))
    assert (result["renewals"], result["missing"]) == (0, 2) and not renew_file.exists()
    assert result["message"].endswith("2 found no renew file (no switch armed); the heartbeat ended its input")


def wait_until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_installed_renew_renews_while_its_input_is_open_and_returns_at_its_end(tmp_path):
    renew_file = aged(tmp_path / "deadman.renew")
    child = subprocess.Popen([sys.executable, "-I", str(ledger_script()), "renew", "--renew-file", str(renew_file),
                              "--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child.stdin.write(b"\n")
    child.stdin.flush()
    wait_until(lambda: renew_file.stat().st_mtime > OLD)
    out, _err = child.communicate(b"\n", timeout=10)
    assert child.returncode == 0 and json.loads(out)["renewals"] == 2


def heartbeat_argv(watched, renew_file, interval="0.1"):
    child = {"name": "lab-a", "argv": [sys.executable, "-I", str(ledger_script()), "renew", "--renew-file",
                                       str(renew_file)]}
    start_time = proc.read_proc_stat(watched.pid)["start_time"]
    return [sys.executable, "-I", str(ledger_script()), "heartbeat", "--watch-pid", str(watched.pid),
            "--watch-start-time", str(start_time), "--interval", interval, "--child", json.dumps(child), "--json"]


def renew_children(heartbeat_pid):
    """The renew processes the heartbeat started (its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            info = proc.read_proc_stat(int(entry.name))
            if info and info["ppid"] == heartbeat_pid and info["state"] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


@pytest.fixture
def running(tmp_path):
    """A watched process (`sleep`), the heartbeat of the installed script watching it, and the renew file its one
    renew process renews, once the first renewal landed; both processes killed at the end, whatever happened."""
    renew_file = aged(tmp_path / "deadman.renew")
    watched = subprocess.Popen(["sleep", "60"])
    beat = subprocess.Popen(heartbeat_argv(watched, renew_file), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: renew_file.stat().st_mtime > OLD)
        yield watched, beat, renew_file
    finally:
        watched.kill()
        beat.kill()


def test_the_heartbeat_renews_while_the_playbook_lives_and_stops_when_it_dies(running):
    watched, beat, renew_file = running
    first = renew_file.stat().st_mtime_ns
    wait_until(lambda: renew_file.stat().st_mtime_ns != first)  # a second beat
    assert len(renew_children(beat.pid)) == 1
    watched.kill()
    watched.wait()
    out, err = beat.communicate(timeout=10)  # within a tick of the death, its child's input closed
    result = json.loads(out)
    assert beat.returncode == 0 and result["reason"] == f"the playbook (pid {watched.pid}) ended"
    assert result["beats"] >= 2 and result["restarts"] == 0
    assert b"the switches are no longer renewed" in err
    last = renew_file.stat().st_mtime_ns
    time.sleep(0.3)
    assert renew_file.stat().st_mtime_ns == last


def test_sigterm_stops_the_heartbeat_and_its_renew_processes(running):
    _watched, beat, _renew_file = running
    children = renew_children(beat.pid)
    beat.send_signal(signal.SIGTERM)
    out, _err = beat.communicate(timeout=10)
    assert json.loads(out)["reason"] == "stopped by SIGTERM (the undo of its process entry)"
    assert children and all(proc.read_proc_stat(pid) is None for pid in children)


def test_a_heartbeat_whose_playbook_is_gone_at_its_start_ends_at_once(tmp_path):
    watched = subprocess.Popen(["true"])
    watched.wait()
    done = subprocess.run(heartbeat_argv_for_gone(watched.pid, tmp_path), capture_output=True, timeout=10, check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["beats"] == 0


def heartbeat_argv_for_gone(pid, tmp_path):
    child = {"name": "lab-a", "argv": ["true"]}
    return [sys.executable, "-I", str(ledger_script()), "heartbeat", "--watch-pid", str(pid), "--watch-start-time",
            "1", "--interval", "1", "--child", json.dumps(child), "--json"]


class Input(io.BytesIO):
    """A child's stdin that keeps what was written, closed or not."""

    def __init__(self):
        super().__init__()
        self.written = b""

    def write(self, data):
        self.written += data
        return super().write(data)


class Handle:
    """A renew process that ends after `lives` polls."""

    def __init__(self, lives):
        self.lives, self.returncode = lives, None
        self.stdin = Input()

    def poll(self):
        self.lives -= 1
        if self.lives < 0:
            self.returncode = 255
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode

    def kill(self):
        self.returncode = -9


def test_a_renew_process_that_ended_is_started_again_at_the_next_beat(monkeypatch):
    clock = {"now": 0.0, "alive": 6}  # six looks at the playbook: three beats a second apart, a tick between
    started = []

    def spawn(argv):
        started.append(Handle(lives=0))  # each ends before the next beat
        return started[-1]

    def alive(pid, start_time, procfs_root):
        clock["alive"] -= 1
        return clock["alive"] >= 0

    monkeypatch.setattr(hb, "playbook_alive", alive)
    result = hb.heartbeat(1, 1, [{"name": "lab-a", "argv": ["renew"]}], 1.0,
                          sleep=lambda seconds: clock.update(now=clock["now"] + seconds), clock=lambda: clock["now"],
                          spawn=spawn)
    assert (result["beats"], result["restarts"], len(started)) == (3, 2, 3)
    assert [h.stdin.written for h in started] == [b"\n", b"\n", b"\n"]
    assert result["reason"] == "the playbook (pid 1) ended"

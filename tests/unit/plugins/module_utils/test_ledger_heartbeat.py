# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heartbeat of the dead man's switches (``_ledger_heartbeat``): ``renew`` renews on input only, answers each
line and never creates the renew file; ``heartbeat``, run as the installed ledger script, renews through real
``renew`` processes while a watched process lives, counts the renewals they confirm, keeps each host's last renewal
and last error in its status file, stops (closing their input) within a tick of its death, on SIGTERM, or once the
run's journal stalls, and starts again a child that ended; ``judge``, the run's reading of that status. The renew
commands the experiment builds: plugin_utils/test_renew_command.py; the lookup that finds the playbook process to
watch: lookup/test_playbook_process.py."""

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


def test_renew_touches_the_file_for_each_line_answers_each_and_never_creates_it(tmp_path):
    renew_file = aged(tmp_path / "deadman.renew")
    answers = []
    result = hb.renew_on_input(str(renew_file), io.StringIO("\n\n\n"), acknowledge=answers.append)
    assert (result["renewals"], result["missing"]) == (3, 0) and answers == [hb.ACK_RENEWED] * 3
    assert renew_file.stat().st_mtime > OLD
    renew_file.unlink()  # the switch is gone (disarmed or fired): renewals find nothing and create nothing
    result = hb.renew_on_input(str(renew_file), io.StringIO("\n\n"), acknowledge=answers.append)
    assert (result["renewals"], result["missing"]) == (0, 2) and not renew_file.exists()
    assert answers[3:] == [hb.ACK_NO_RENEW_FILE] * 2
    assert result["message"].endswith("2 found no renew file (no switch armed); the heartbeat ended its input")


def wait_until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_installed_renew_answers_each_line_while_its_input_is_open_and_returns_at_its_end(tmp_path):
    renew_file = aged(tmp_path / "deadman.renew")
    child = subprocess.Popen([sys.executable, "-I", str(ledger_script()), "renew", "--renew-file", str(renew_file),
                              "--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child.stdin.write(b"\n")
    child.stdin.flush()
    assert child.stdout.readline() == b"renewed\n"  # answered at once, not at the end of input
    assert renew_file.stat().st_mtime > OLD
    out, _err = child.communicate(b"\n", timeout=10)
    *answers, summary = out.decode().splitlines()
    assert child.returncode == 0 and answers == ["renewed"] and json.loads(summary)["renewals"] == 2


def renew_child(name, renew_file):
    return {"name": name, "argv": [sys.executable, "-I", str(ledger_script()), "renew", "--renew-file",
                                   str(renew_file)]}


def heartbeat_argv(watched, children, status_file, interval="0.1", *extra):
    start_time = proc.read_proc_stat(watched.pid)["start_time"]
    argv = [sys.executable, "-I", str(ledger_script()), "heartbeat", "--watch-pid", str(watched.pid),
            "--watch-start-time", str(start_time), "--interval", interval, "--status-file", str(status_file),
            "--run-id", "r1", "--json", *extra]
    for child in children:
        argv += ["--child", json.dumps(child)]
    return argv


def renew_children(heartbeat_pid):
    """The renew processes the heartbeat started (its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            info = proc.read_proc_stat(int(entry.name))
            if info and info["ppid"] == heartbeat_pid and info["state"] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def status(path):
    return hb.read_status(str(path))


class Beat:
    """A watched process (`sleep`) and the heartbeat of the installed script watching it, both killed at the end,
    whatever happened."""

    def __init__(self, tmp_path, children, interval="0.1", *extra):
        self.status_file = tmp_path / "heartbeat.json"
        self.watched = subprocess.Popen(["sleep", "60"])
        # a process group of its own, as managed_process starts it (the undo signals that group)
        self.process = subprocess.Popen(heartbeat_argv(self.watched, children, self.status_file, interval, *extra),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def status(self):
        return status(self.status_file)

    def host(self, name):
        current = self.status()
        return current["hosts"][name] if current else {}

    def finish(self, timeout=10):
        out, err = self.process.communicate(timeout=timeout)
        return json.loads(out), err

    def kill(self):
        self.watched.kill()
        self.process.kill()
        self.watched.wait()
        self.process.wait()


@pytest.fixture
def beats(tmp_path):
    started = []

    def start(children, interval="0.1", *extra):
        started.append(Beat(tmp_path, children, interval, *extra))
        return started[-1]

    yield start
    for beat in started:
        beat.kill()


@pytest.fixture
def running(tmp_path, beats):
    """A heartbeat renewing one renew file, once the first renewal landed."""
    renew_file = aged(tmp_path / "deadman.renew")
    beat = beats([renew_child("lab-a", renew_file)])
    wait_until(lambda: renew_file.stat().st_mtime > OLD)
    return beat, renew_file


def test_the_heartbeat_renews_while_the_playbook_lives_and_stops_when_it_dies(running):
    beat, renew_file = running
    first = renew_file.stat().st_mtime_ns
    wait_until(lambda: renew_file.stat().st_mtime_ns != first)  # a second beat
    wait_until(lambda: beat.host("lab-a").get("renewals", 0) >= 2)  # confirmed, and in the status file
    assert len(renew_children(beat.process.pid)) == 1
    beat.watched.kill()
    beat.watched.wait()
    result, err = beat.finish()  # within a tick of the death, its child's input closed
    assert beat.process.returncode == 0 and result["reason"] == f"the playbook (pid {beat.watched.pid}) ended"
    assert result["renewals"]["lab-a"] >= 2 and result["restarts"] == 0
    assert b"the switches are no longer renewed" in err
    final = beat.status()
    assert not final["running"] and final["reason"] == result["reason"]
    assert final["hosts"]["lab-a"]["renewals"] == result["renewals"]["lab-a"]
    assert final["hosts"]["lab-a"]["last_error"] is None
    last = renew_file.stat().st_mtime_ns
    time.sleep(0.3)
    assert renew_file.stat().st_mtime_ns == last


def test_the_heartbeat_stops_within_a_tick_of_the_playbooks_death_not_at_its_next_beat(tmp_path, beats):
    """The watched process dies right after a renewal, with the next beat six ticks away: the heartbeat must notice
    at its next tick (WATCH_TICK_S), not at that beat, and renew nothing more."""
    interval_s = 6 * hb.WATCH_TICK_S
    renew_file = aged(tmp_path / "deadman.renew")
    beat = beats([renew_child("lab-a", renew_file)], str(interval_s))
    wait_until(lambda: beat.host("lab-a").get("renewals") == 1)
    renewed = renew_file.stat().st_mtime_ns
    died = time.monotonic()
    beat.watched.kill()
    beat.watched.wait()
    result, _err = beat.finish(timeout=3 * interval_s)
    stopped_after = time.monotonic() - died
    assert result["reason"] == f"the playbook (pid {beat.watched.pid}) ended" and result["renewals"] == {"lab-a": 1}
    assert stopped_after / interval_s < 0.5, f"stopped {stopped_after:.1f}s after the death: at a beat, not a tick"
    assert renew_file.stat().st_mtime_ns == renewed


def test_sigterm_stops_the_heartbeat_and_its_renew_processes(running):
    beat, _renew_file = running
    children = renew_children(beat.process.pid)
    beat.process.send_signal(signal.SIGTERM)
    result, _err = beat.finish()
    assert result["reason"] == "stopped by SIGTERM (the undo of its process entry)"
    assert children and all(proc.read_proc_stat(pid) is None for pid in children)
    assert beat.status()["reason"] == result["reason"]


def test_sigterm_to_the_heartbeats_process_group_reaches_the_heartbeat_alone(running):
    """The undo of the heartbeat's process entry signals its whole process group. Its renew processes are in groups
    of their own, so that SIGTERM never races the heartbeat to end them (an exit it would record as a lost
    connection): the heartbeat ends them itself, and no host has an error."""
    beat, _renew_file = running
    children = renew_children(beat.process.pid)
    assert children and all(proc.read_proc_stat(pid)["pgrp"] == pid for pid in children)
    os.killpg(beat.process.pid, signal.SIGTERM)
    result, _err = beat.finish()
    assert result["reason"] == "stopped by SIGTERM (the undo of its process entry)"
    assert all(proc.read_proc_stat(pid) is None for pid in children)
    assert beat.status()["hosts"]["lab-a"]["last_error"] is None


def test_a_heartbeat_whose_playbook_is_gone_at_its_start_ends_at_once(tmp_path):
    watched = subprocess.Popen(["true"])
    watched.wait()
    child = {"name": "lab-a", "argv": ["true"]}
    done = subprocess.run([sys.executable, "-I", str(ledger_script()), "heartbeat", "--watch-pid", str(watched.pid),
                           "--watch-start-time", "1", "--interval", "1", "--child", json.dumps(child), "--json"],
                          capture_output=True, timeout=10, check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["renewals"] == {"lab-a": 0}


REFUSED = "ssh: connect to host gpu-b port 22: Connection refused"


def test_a_host_the_heartbeat_cannot_reach_is_named_with_its_reason_and_fails_the_check(tmp_path, beats):
    """A renew command that ends at once (ssh refused: exit 255) and one that cannot start: each host's error is in
    the status file, and the check fails naming both, while the host that renews passes."""
    renew_file = aged(tmp_path / "deadman.renew")
    refused = {"name": "gpu-b", "argv": [sys.executable, "-c", f"import sys; sys.stderr.write({REFUSED!r} + '\\n');"
                                                               " sys.exit(255)"]}
    missing = {"name": "gpu-c", "argv": [str(tmp_path / "no-such-ssh"), "gpu-c"]}
    beat = beats([renew_child("lab-a", renew_file), refused, missing])
    wait_until(lambda: beat.host("gpu-b").get("last_error") and beat.host("gpu-c").get("last_error")
               and beat.host("lab-a").get("renewals"))
    assert beat.host("gpu-b")["last_error"] == f"its renew process exited 255: {REFUSED}"
    assert beat.host("gpu-b")["renewals"] == 0
    assert beat.host("gpu-c")["last_error"].startswith(f"cannot start its renew process {tmp_path}/no-such-ssh: ")
    failed, waiting = hb.judge(beat.status(), time.time(), within_s=900, run_id="r1")
    assert [line.split(":", maxsplit=1)[0] for line in failed] == ["gpu-b", "gpu-c"] and waiting == []
    assert failed[0].startswith(f"gpu-b: its renew process exited 255: {REFUSED}; no renewal confirmed in ")
    wait_until(lambda: beat.host("gpu-b")["restarts"] >= 2)  # tried again at each beat, and still named
    assert hb.judge(beat.status(), time.time(), within_s=900, run_id="r1")[0][0].startswith("gpu-b: its renew")


def test_renewals_are_counted_from_the_answers_not_from_the_lines_written(tmp_path, beats):
    """A renew process that reads every line and answers none (an old script, a wrapper that swallows its output)
    confirms nothing: after several lines written it has no renewal, and the check fails it once due."""
    written = tmp_path / "lines"
    silent = {"name": "gpu-b", "argv": ["sh", "-c", f"while read line; do echo x >> {written}; done"]}
    renew_file = aged(tmp_path / "deadman.renew")
    beat = beats([renew_child("lab-a", renew_file), silent])
    wait_until(lambda: written.exists() and len(written.read_text().split()) >= 3
               and beat.host("lab-a").get("renewals", 0) >= 3)
    assert beat.host("gpu-b")["renewals"] == 0 and beat.host("gpu-b")["last_renewal"] is None
    current = beat.status()
    assert hb.judge(current, current["started"] + 0.01, within_s=1, run_id="r1") == (
        [], ["gpu-b: its first renewal is not confirmed yet"])
    now = current["hosts"]["lab-a"]["last_renewal"]  # lab-a has just renewed; gpu-b's first renewal is overdue
    failed, _waiting = hb.judge(current, now, within_s=(now - current["started"]) / 2, run_id="r1")
    assert len(failed) == 1 and failed[0].startswith("gpu-b: no renewal confirmed in ")
    assert failed[0].endswith("s (its renew process answers nothing)")


def test_a_renew_process_that_ended_is_started_again_at_the_next_beat(tmp_path, beats):
    once = {"name": "lab-a", "argv": ["sh", "-c", "read line && echo renewed && exit 3"]}
    beat = beats([once])
    wait_until(lambda: beat.host("lab-a").get("restarts", 0) >= 2 and beat.host("lab-a")["renewals"] >= 3)
    assert beat.host("lab-a")["last_error"] == "its renew process exited 3 (no error output)"
    # renewed since its last exit: a blip, not a failure
    current = beat.status()
    assert hb.judge(current, current["hosts"]["lab-a"]["last_renewal"], within_s=1, run_id="r1") == ([], [])


def test_a_journal_that_does_not_move_stops_the_heartbeat_and_says_why(tmp_path, beats):
    """A controller alive but hung: the run's journal has not moved for longer than its bound, so the heartbeat
    stops (the switches are left to fire), and the check names that as the reason."""
    journal = tmp_path / "fragments" / "journal"
    journal.mkdir(parents=True)
    aged(journal / "pause.json")
    os.utime(journal, (OLD, OLD))
    renew_file = aged(tmp_path / "deadman.renew")
    beat = beats([renew_child("lab-a", renew_file)], "0.1", "--journal-dir", str(journal), "--journal-stall", "0.5")
    result, _err = beat.finish()
    assert result["reason"].startswith(f"the run's journal ({journal}) has not moved for ")
    assert result["reason"].endswith("past its bound of 0.5s (the longest stage): the controller looks hung, so the "
                                     "switches are left to fire")
    assert result["renewals"]["lab-a"] >= 1  # it renewed while the bound, counted from its start, held
    assert proc.read_proc_stat(beat.watched.pid) is not None  # the playbook lives on: the journal stopped it
    failed, _waiting = hb.judge(beat.status(), time.time(), within_s=900, run_id="r1")
    assert failed == [f"heartbeat: it stopped: {result['reason']}"]


def test_a_journal_that_moves_keeps_the_heartbeat_renewing(tmp_path, beats):
    journal = tmp_path / "journal"
    journal.mkdir()
    renew_file = aged(tmp_path / "deadman.renew")
    beat = beats([renew_child("lab-a", renew_file)], "0.1", "--journal-dir", str(journal), "--journal-stall", "0.5")
    # a stage's entry each time the heartbeat renewed twice more: it goes on well past the bound
    for stage in range(8):
        seen = beat.host("lab-a").get("renewals", 0)
        wait_until(lambda seen=seen: beat.host("lab-a").get("renewals", 0) >= seen + 2)
        (journal / f"{stage}.json").write_text("{}")
    assert beat.process.poll() is None and beat.status()["running"]


def status_of(**changes):
    now = 1000.0
    current = {"format": hb.STATUS_FORMAT, "run_id": "r1", "pid": os.getpid(),
               "start_time": proc.read_proc_stat(os.getpid())["start_time"], "started": now - 100, "running": True,
               "reason": None, "hosts": {"lab-a": {"renewals": 9, "last_renewal": now - 10, "last_error": None,
                                                   "last_error_time": None, "restarts": 0}}}
    current.update(changes)
    return current


def test_the_check_names_what_keeps_a_switch_at_risk():
    assert hb.judge(status_of(), 1000.0, within_s=30, run_id="r1") == ([], [])
    stale = {"lab-a": {"renewals": 9, "last_renewal": 900.0, "last_error": "its renew process exited 255: refused",
                       "last_error_time": 950.0, "restarts": 3}}
    assert hb.judge(status_of(hosts=stale), 1000.0, within_s=30) == ([
        "lab-a: its renew process exited 255: refused; the last confirmed renewal was 100s ago"], [])
    assert hb.judge(status_of(running=False, reason="the playbook (pid 7) ended"), 1000.0, within_s=30) == (
        ["heartbeat: it stopped: the playbook (pid 7) ended"], [])
    assert hb.judge(status_of(start_time=1), 1000.0, within_s=30) == ([
        f"heartbeat: its process (pid {os.getpid()}) is gone without a word (killed?)"], [])
    assert hb.judge(None, 1000.0, within_s=30, run_id="r1") == (
        [], ["heartbeat: nothing from the heartbeat of this run yet (no status file)"])
    assert hb.judge(status_of(run_id="r0"), 1000.0, within_s=30, run_id="r1") == (
        [], ["heartbeat: nothing from the heartbeat of this run yet (the status of run r0)"])


def test_a_status_file_that_is_not_one_is_refused(tmp_path):
    path = tmp_path / "heartbeat.json"
    path.write_text('{"hosts": []}')
    with pytest.raises(ValueError, match="is not a heartbeat status"):
        hb.read_status(str(path))
    assert hb.read_status(str(tmp_path / "none.json")) is None

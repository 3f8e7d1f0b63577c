# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the ledger kind ``service_pause``: its params check, and its undo (start the service again) on real
processes that write their own pidfile like the lab's original replicas, through fake systemctl / docker / podman,
and through the standalone script (on old Pythons too).

Every process a test starts is killed by its pid at the end of the test: the ones started here, the ones the undo
spawned in this process (``_ledger_proc.SPAWNED``) and the ones the standalone script started (found by their pidfile
and checked by their command line)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_base,
    _ledger_core,
    _ledger_proc,
    _ledger_running,
    _ledger_undo,
)
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger, ledger_script
from ansible_collections.inferlab.distributed.tests.unit.oldpython import require_python

REPO_ROOT = Path(__file__).resolve().parents[4]
HOST = "lab-a"

# A stand-in for an original replica: it writes its own pidfile once up, logs its mode and directory to stdout, and
# removes its pidfile on SIGTERM (as the lab server does).
REPLICA = textwrap.dedent('''\
    import os, signal, sys, time
    pidfile = sys.argv[1]
    if os.environ.get("REPLICA_FAIL"):
        print("fatal: " + os.environ["REPLICA_FAIL"], flush=True)
        sys.exit(3)
    def bye(signum, frame):
        try:
            with open(pidfile) as handle:
                if handle.read().strip() == str(os.getpid()):
                    os.unlink(pidfile)
        except OSError:
            pass
        print("replica stopping", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    print("replica up mode=%s cwd=%s" % (os.environ.get("MODE"), os.getcwd()), flush=True)
    with open(pidfile + ".tmp", "w") as handle:
        handle.write("%d\\n" % os.getpid())
    os.replace(pidfile + ".tmp", pidfile)
    while True:
        time.sleep(1)
''')


class Replicas:
    """Starts replicas in ``tmp_path`` and, at the end, kills every process of the test by its pid."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.script = tmp_path / "replica.py"
        self.script.write_text(REPLICA)
        self.workdir = tmp_path / "srv"
        self.workdir.mkdir()
        self.started = []
        self.pidfiles = []
        self.known = set(_ledger_proc.SPAWNED)

    def start(self, name="original-a", env=None):
        pidfile = self.tmp_path / "run" / f"{name}.pid"
        pidfile.parent.mkdir(exist_ok=True)
        log = self.tmp_path / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        argv = [sys.executable, str(self.script), str(pidfile), "--port", "0"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MODE": "prod", "API_TOKEN": "s3cr3t-value"} \
            if env is None else env
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, env=env, cwd=str(self.workdir), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.started.append(proc)
        self.pidfiles.append(pidfile)
        wait_for(pidfile.exists, f"{name} did not write its pidfile")
        return proc, argv, env, pidfile, log

    def cleanup(self):
        for proc in self.started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for pid in set(_ledger_proc.SPAWNED) - self.known:
            proc = _ledger_proc.SPAWNED.pop(pid)
            if proc.poll() is None:
                os.killpg(pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for pidfile in self.pidfiles:  # started by the standalone script: not our children
            try:
                pid = int(pidfile.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if str(self.script) in (_ledger_proc.read_proc_cmdline(pid) or []):
                os.kill(pid, signal.SIGKILL)
                wait_for(lambda pid=pid: not _ledger_proc.pid_alive(pid), f"pid {pid} survived SIGKILL")


@pytest.fixture
def replicas(tmp_path):
    made = Replicas(tmp_path)
    yield made
    made.cleanup()


def wait_for(predicate, message, timeout=10):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message
        time.sleep(0.02)


def read_service(pid, pidfile):
    """The params of a process service_pause entry, read from /proc as the paused_service module reads them."""
    out = os.readlink(f"/proc/{pid}/fd/1")
    environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
                   if "=" in item)
    return {"manager": "process", "name": "original-a", "pidfile": str(pidfile),
            "argv": _ledger_proc.read_proc_cmdline(pid), "environment": environ,
            "working_dir": os.readlink(f"/proc/{pid}/cwd"), "log_path": out if os.path.isfile(out) else os.devnull,
            "pid": pid, "start_time": _ledger_proc.read_proc_stat(pid)["start_time"], "start_timeout": 10}


def pause(ledger_dir, proc, pidfile, run_id="run1"):
    """Record pending, stop with SIGTERM, mark applied: what the module does."""
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", read_service(proc.pid, pidfile), run_id=run_id)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", params={"how": "SIGTERM"}, run_id=run_id)
    return line["id"]


def lines_of(ledger_dir):
    return [json.loads(x) for x in Path(_ledger_core.ledger_path(ledger_dir, HOST)).read_text().splitlines()]


def run_script(*args, python=sys.executable, script=None):
    proc = subprocess.run([python, "-I", str(script or ledger_script()), *args], capture_output=True, text=True,
                          timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


# --- params -------------------------------------------------------------------------------------------------------


PROCESS = {"manager": "process", "name": "original-a", "pidfile": "/run/a.pid", "argv": ["/usr/bin/server", "-p", "1"],
           "environment": {"PATH": "/usr/bin", "EMPTY": ""}, "working_dir": "/srv", "log_path": "/dev/null"}


def test_check_normalises_params(ledger_dir):
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", PROCESS)
    assert line["params"] == dict(PROCESS, start_timeout=30.0)
    assert re.match(r"^\d{8}T\d{6}Z-service_pause-\d+\.\d+\.\d+$", line["id"])
    _ledger_core.mark(ledger_dir, HOST, line["id"], "applied", params={"how": "SIGKILL"})
    assert lines_of(ledger_dir)[-1]["params"]["how"] == "SIGKILL"
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", {"manager": "systemd", "name": "small",
                                                                   "unit": "sglang-small", "start_timeout": "5",
                                                                   "pid": "77", "start_time": 9})
    assert line["params"] == {"manager": "systemd", "name": "small", "unit": "sglang-small.service",
                              "start_timeout": 5.0, "pid": 77, "start_time": 9}
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", {"manager": "podman", "name": "small",
                                                                   "container": "sglang-small"})
    assert line["params"] == {"manager": "podman", "name": "small", "container": "sglang-small", "start_timeout": 30.0}


@pytest.mark.parametrize(("params", "message"), [
    ({"name": "a"}, '"manager" of a service_pause entry must be one of process, systemd, docker, podman, got None'),
    (dict(PROCESS, manager="supervisord"), '"manager" of a service_pause entry must be one of'),
    (dict(PROCESS, unit="a.service"), "unknown params for a service_pause (manager process) entry: unit"),
    ({"manager": "systemd", "name": "a", "unit": "a", "argv": ["x"]},
     "unknown params for a service_pause (manager systemd) entry: argv"),
    ({"manager": "docker", "name": "a", "container": "a", "image": "i"},
     "unknown params for a service_pause (manager docker) entry: image"),
    (dict(PROCESS, name=""), '"name" of a service_pause entry must be the name of the service'),
    (dict(PROCESS, name="a\nb"), '"name" of a service_pause entry must be'),
    ({k: v for k, v in PROCESS.items() if k != "pidfile"}, '"pidfile" of a service_pause entry must be an absolute'),
    (dict(PROCESS, working_dir="srv"), '"working_dir" of a service_pause entry must be an absolute path'),
    (dict(PROCESS, log_path=None), '"log_path" of a service_pause entry must be an absolute path'),
    (dict(PROCESS, argv=[]), '"argv" of a service_pause entry must be the command'),
    (dict(PROCESS, argv="server -p 1"), '"argv" of a service_pause entry must be the command'),
    (dict(PROCESS, argv=["", "x"]), '"argv" of a service_pause entry must be the command'),
    ({k: v for k, v in PROCESS.items() if k != "environment"}, '"environment" of a service_pause entry must map'),
    (dict(PROCESS, environment={"A": 1}), '"environment" of a service_pause entry must map'),
    (dict(PROCESS, environment={"A=B": "1"}), '"environment" of a service_pause entry must map'),
    (dict(PROCESS, pid=12), 'a service_pause entry with pid 12 needs "start_time"'),
    (dict(PROCESS, pid=0, start_time=1), '"pid" must be at least 1'),
    (dict(PROCESS, start_timeout=-1), '"start_timeout" must be a finite number of seconds, not negative'),
    (dict(PROCESS, how="a\nb"), '"how" of a service_pause entry must be a one-line note'),
    ({"manager": "systemd", "name": "a"}, '"unit" must be a service unit name'),
    ({"manager": "systemd", "name": "a", "unit": "a.socket"}, '"unit" must be a service unit name'),
    ({"manager": "docker", "name": "a"}, "a container name must match"),
    ({"manager": "podman", "name": "a", "container": "-x"}, "a container name must match"),
])
def test_bad_params(ledger_dir, params, message):
    with pytest.raises(_ledger_core.LedgerError, match=re.escape(message)):
        _ledger_core.record(ledger_dir, HOST, "service_pause", params)


def test_a_bad_environment_is_refused_without_quoting_its_values(ledger_dir):
    with pytest.raises(_ledger_core.LedgerError) as raised:
        _ledger_core.record(ledger_dir, HOST, "service_pause", dict(PROCESS, environment={"TOKEN": 12345678}))
    assert "12345678" not in str(raised.value)


# --- the process manager, for real --------------------------------------------------------------------------------


def test_pause_then_undo_starts_the_same_process_again(replicas, ledger_dir):
    proc, argv, env, pidfile, log = replicas.start()
    entry_id = pause(ledger_dir, proc, pidfile)
    assert not pidfile.exists(), "the replica removes its own pidfile on SIGTERM"

    result = _ledger_undo.undo(ledger_dir, HOST, run_id="run1")
    assert result["undone"] == [entry_id] and not result["failed"], result
    pid = int(pidfile.read_text())
    assert pid != proc.pid
    assert result["details"][0]["message"] == f"started service original-a again: pid {pid}, output to {log}"
    assert _ledger_proc.read_proc_cmdline(pid) == argv
    environ = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    assert dict(item.split("=", 1) for item in environ if item) == env
    assert os.readlink(f"/proc/{pid}/cwd") == str(replicas.workdir)
    assert os.readlink(f"/proc/{pid}/fd/1") == str(log)
    assert os.getpgid(pid) == pid, "the restarted service leads a process group of its own"
    wait_for(lambda: log.read_text().count("replica up") == 2, "the restarted replica did not log")
    assert log.read_text().splitlines() == [f"replica up mode=prod cwd={replicas.workdir}", "replica stopping",
                                            f"replica up mode=prod cwd={replicas.workdir}"]
    assert [x["state"] for x in lines_of(ledger_dir)] == ["pending", "applied", "undone"]

    again = _ledger_undo.undo(ledger_dir, HOST)
    assert again["changed"] is False and _ledger_proc.pid_alive(pid)


def test_undo_through_the_script_outlives_it(replicas, ledger_dir):
    proc, argv, _env, pidfile, _log = replicas.start()
    entry_id = pause(ledger_dir, proc, pidfile)
    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json")
    assert rc == 0, out + err
    assert json.loads(out)["undone"] == [entry_id]
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    assert _ledger_proc.pid_alive(pid), "the service died with the script"
    assert _ledger_proc.read_proc_cmdline(pid) == argv, "the service died with the script"


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_the_script_alone_on_old_python_starts_the_service_again(replicas, tmp_path, ledger_dir, version):
    python = require_python(version)
    alone = install_ledger(tmp_path / "bin")
    proc, argv, _env, pidfile, _log = replicas.start()
    entry_id = pause(ledger_dir, proc, pidfile)
    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--json", python=python,
                              script=alone)
    assert rc == 0, out + err
    assert json.loads(out)["undone"] == [entry_id]
    assert _ledger_proc.read_proc_cmdline(int(pidfile.read_text())) == argv


def test_pending_entry_whose_stop_never_happened_is_already_running(replicas, ledger_dir):
    proc, _argv, _env, pidfile, _log = replicas.start()
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", read_service(proc.pid, pidfile), run_id="dead-run")
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [line["id"]]
    assert result["details"][0]["message"] == (
        f"service original-a is already running (pid {proc.pid}): nothing to start")
    assert proc.poll() is None and int(pidfile.read_text()) == proc.pid
    assert set(_ledger_proc.SPAWNED) == replicas.known, "a second copy was started"


def test_the_recorded_process_still_running_without_its_pidfile_is_already_running(replicas, ledger_dir):
    proc, _argv, _env, pidfile, _log = replicas.start()
    _ledger_core.record(ledger_dir, HOST, "service_pause", read_service(proc.pid, pidfile))
    pidfile.unlink()
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert f"is already running (pid {proc.pid})" in result["details"][0]["message"]
    assert not pidfile.exists()


def test_a_stale_pidfile_naming_another_program_does_not_count_as_running(replicas, ledger_dir):
    proc, argv, _env, pidfile, _log = replicas.start()
    pause(ledger_dir, proc, pidfile)
    pidfile.write_text(f"{os.getpid()}\n")  # alive, but this test, not the service
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert not result["failed"] and result["details"][0]["message"].startswith("started service original-a again")
    assert _ledger_proc.read_proc_cmdline(int(pidfile.read_text())) == argv


def test_a_garbage_pidfile_is_written_anew(replicas, ledger_dir):
    proc, argv, _env, pidfile, _log = replicas.start()
    pause(ledger_dir, proc, pidfile)
    pidfile.write_text("not a pid\n")
    assert not _ledger_undo.undo(ledger_dir, HOST)["failed"]
    assert _ledger_proc.read_proc_cmdline(int(pidfile.read_text())) == argv


def test_a_service_that_dies_at_once_fails_quoting_its_log(replicas, ledger_dir):
    proc, _argv, env, pidfile, log = replicas.start()
    line = _ledger_core.record(ledger_dir, HOST, "service_pause",
                               dict(read_service(proc.pid, pidfile), environment=dict(env, REPLICA_FAIL="no GPU left")))
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    started = time.monotonic()
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert time.monotonic() - started < 5, "the undo waited for the whole start timeout"
    error = result["failed"][0]["error"]
    assert re.match(r"^service original-a was started again \(pid \d+\) but exited with status 3 after \d+\.\ds; "
                    r"removed pidfile .*original-a\.pid; last lines of its output \(.*original-a\.log\):\n", error)
    assert error.endswith("\nfatal: no GPU left") and "replica stopping" not in error, "quote only the new output"
    assert "s3cr3t" not in error and "--port" not in error
    assert not pidfile.exists()
    assert lines_of(ledger_dir)[-1]["state"] == "undo_failed" and lines_of(ledger_dir)[-1]["id"] == line["id"]
    assert "fatal: no GPU left" in log.read_text()


def test_a_working_directory_that_is_gone_is_an_undo_failure(replicas, tmp_path, ledger_dir):
    proc, _argv, _env, pidfile, _log = replicas.start()
    params = dict(read_service(proc.pid, pidfile), working_dir=str(tmp_path / "gone"))
    _ledger_core.record(ledger_dir, HOST, "service_pause", params)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    error = _ledger_undo.undo(ledger_dir, HOST)["failed"][0]["error"]
    assert error.startswith(f"cannot start service original-a again ({sys.executable} in {tmp_path / 'gone'}): ")
    assert "No such file or directory" in error and error.endswith("; start it by hand")


def test_output_to_dev_null(replicas, ledger_dir):
    proc, _argv, _env, pidfile, _log = replicas.start()
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", dict(read_service(proc.pid, pidfile),
                                                                       log_path=os.devnull))
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    result = _ledger_undo.undo(ledger_dir, HOST)
    assert result["undone"] == [line["id"]]
    pid = int(pidfile.read_text())
    assert os.readlink(f"/proc/{pid}/fd/1") == os.devnull
    assert result["details"][0]["message"].endswith("output to /dev/null")


def test_log_tail_of_dev_null_and_of_a_truncated_log(tmp_path):
    assert _ledger_running._log_tail(os.devnull, 0) == "(none: its output went to /dev/null)"
    log = tmp_path / "x.log"
    log.write_text("".join(f"l{i}\n" for i in range(30)))
    assert _ledger_running._log_tail(str(log), 10_000) == "\n".join(f"l{i}" for i in range(10, 30))
    assert _ledger_running._log_tail(str(log), log.stat().st_size) == "(nothing)"
    assert _ledger_running._log_tail(str(tmp_path / "absent"), 0).startswith("(cannot read it: ")


# --- systemd and containers: the commands, through the context's command runner ----------------------------------


class FakeCommands:
    """A ctx.run_command answering each call with the next recorded ``(argv, rc, stdout, stderr)``."""

    def __init__(self, calls):
        self.calls = list(calls)

    def __call__(self, argv, timeout):
        assert self.calls, f"unexpected call {argv}"
        expected, rc, out, err = self.calls.pop(0)
        assert argv == expected
        return rc, out, err


def undo_with(ledger_dir, params, calls):
    line = _ledger_core.record(ledger_dir, HOST, "service_pause", params)
    commands = FakeCommands(calls)
    ctx = _ledger_undo.UndoContext(systemctl_command=["systemctl"], poll_interval=0.01,
                                   container_commands={"docker": ["docker"], "podman": ["podman"]},
                                   run_command=commands)
    result = _ledger_undo.undo(ledger_dir, HOST, ctx=ctx)
    assert not commands.calls, f"calls expected but not made: {commands.calls}"
    detail = result["details"][0]
    assert detail["id"] == line["id"]
    return detail


UNIT = {"manager": "systemd", "name": "small", "unit": "sglang-small"}
IS_ACTIVE = ["systemctl", "is-active", "sglang-small.service"]
START_UNIT = ["systemctl", "start", "sglang-small.service"]


@pytest.mark.parametrize(("calls", "message"), [
    ([(IS_ACTIVE, 3, "inactive\n", ""), (START_UNIT, 0, "", ""), (IS_ACTIVE, 0, "active\n", "")],
     "started unit sglang-small.service again"),
    ([(IS_ACTIVE, 3, "failed\n", ""), (START_UNIT, 0, "", ""), (IS_ACTIVE, 3, "activating\n", ""),
      (IS_ACTIVE, 3, "activating\n", ""), (IS_ACTIVE, 0, "active\n", "")],
     "started unit sglang-small.service again"),
    # a pending entry whose stop never happened
    ([(IS_ACTIVE, 0, "active\n", "")], "unit sglang-small.service is already active: nothing to start"),
])
def test_unit_undo(ledger_dir, calls, message):
    detail = undo_with(ledger_dir, UNIT, calls)
    assert (detail["result"], detail["message"]) == ("undone", message)


@pytest.mark.parametrize(("params", "calls", "message"), [
    (UNIT, [(IS_ACTIVE, 3, "inactive\n", ""),
            (START_UNIT, 5, "", "Failed to start sglang-small.service: Unit sglang-small.service not found.\n")],
     "systemctl start sglang-small.service exited 5: Failed to start sglang-small.service: Unit "
     "sglang-small.service not found. (see journalctl -u sglang-small.service)"),
    (UNIT, [(IS_ACTIVE, 3, "inactive\n", ""), (START_UNIT, 0, "", ""), (IS_ACTIVE, 3, "failed\n", "")],
     "unit sglang-small.service is failed after systemctl start sglang-small.service (see journalctl -u "
     "sglang-small.service)"),
    (dict(UNIT, start_timeout=0), [(IS_ACTIVE, 3, "inactive\n", ""), (START_UNIT, 0, "", ""),
                                   (IS_ACTIVE, 3, "activating\n", "")],
     "unit sglang-small.service is still activating 0.0s after systemctl start sglang-small.service"),
    (UNIT, [(IS_ACTIVE, 1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n")],
     "systemctl is-active sglang-small.service exited 1: System has not been booted with systemd"),
])
def test_unit_undo_failures(ledger_dir, params, calls, message):
    detail = undo_with(ledger_dir, params, calls)
    assert detail["result"] == "undo_failed"
    assert detail["message"].startswith(message), detail["message"]


def inspect(engine):
    return [engine, "container", "inspect", "-f", "{{.State.Status}}", "small"]


@pytest.mark.parametrize("engine", ["docker", "podman"])
@pytest.mark.parametrize(("states", "message"), [
    (["exited", "running"], "started {engine} container small again"),
    (["exited", "restarting", "running"], "started {engine} container small again"),
    (["running"], "{engine} container small is already running: nothing to start"),
])
def test_container_undo(ledger_dir, engine, states, message):
    calls = [(inspect(engine), 0, states[0] + "\n", "")]
    if len(states) > 1:
        calls.append(([engine, "start", "small"], 0, "small\n", ""))
        calls += [(inspect(engine), 0, state + "\n", "") for state in states[1:]]
    detail = undo_with(ledger_dir, {"manager": engine, "name": "small", "container": "small"}, calls)
    assert (detail["result"], detail["message"]) == ("undone", message.format(engine=engine))


@pytest.mark.parametrize(("engine", "calls", "message"), [
    ("docker", [(inspect("docker"), 1, "", "Error: No such container: small\n")],
     "there is no docker container small any more (removed while paused?), so it cannot be started again"),
    ("podman", [(inspect("podman"), 125, "", 'Error: no container with name or ID "small" found: no such '
                                             'container\n')],
     "there is no podman container small any more"),
    ("docker", [(inspect("docker"), 0, "exited\n", ""),
                (["docker", "start", "small"], 1, "", "Error response from daemon: driver failed\n")],
     "docker start small exited 1: Error response from daemon: driver failed"),
    ("docker", [(inspect("docker"), 0, "exited\n", ""), (["docker", "start", "small"], 0, "small\n", ""),
                (inspect("docker"), 0, "exited\n", "")],
     "docker container small is exited after docker start small (see docker logs small)"),
    ("docker", [(inspect("docker"), 0, "", "")], "docker container inspect -f {{.State.Status}} small printed ''"),
])
def test_container_undo_failures(ledger_dir, engine, calls, message):
    detail = undo_with(ledger_dir, {"manager": engine, "name": "small", "container": "small"}, calls)
    assert detail["result"] == "undo_failed"
    assert detail["message"].startswith(message), detail["message"]


def test_a_missing_systemctl_is_an_undo_failure(ledger_dir, monkeypatch):
    monkeypatch.setattr(_ledger_base, "COMMAND_DIRS", ())
    monkeypatch.setenv("PATH", "/nonexistent")
    _ledger_core.record(ledger_dir, HOST, "service_pause", UNIT)
    assert _ledger_undo.undo(ledger_dir, HOST)["failed"][0]["error"] == (
        "systemctl is not installed on this host (package systemd), so unit sglang-small.service cannot be started "
        "again; install it or start the service by hand, then run the undo again")


# --- systemd and containers: fake binaries, through the standalone script ----------------------------------------

FAKE_MANAGER = '''#!{python}
"""A stateful stand-in for systemctl, docker or podman: {state} holds whether the service runs; every call is
appended to {calls}."""
import json, sys
args = sys.argv[1:]
with open({calls!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
running = open({state!r}).read().strip() == "running"
if args[0] == "is-active":
    print("active" if running else "inactive")
    sys.exit(0 if running else 3)
if args[:2] == ["container", "inspect"]:
    print("running" if running else "exited")
    sys.exit(0)
if args[0] == "start":
    open({state!r}, "w").write("running")
    sys.exit(0)
sys.exit(99)
'''


def fake_manager(tmp_path, name, state):
    calls, state_file = tmp_path / f"{name}_calls.jsonl", tmp_path / f"{name}_state"
    state_file.write_text(state)
    path = tmp_path / name
    path.write_text(FAKE_MANAGER.format(python=sys.executable, calls=str(calls), state=str(state_file)))
    path.chmod(0o755)
    return str(path), lambda: [json.loads(x) for x in calls.read_text().splitlines()] if calls.exists() else []


def test_unit_and_container_undo_through_the_script(tmp_path, ledger_dir):
    systemctl, systemctl_calls = fake_manager(tmp_path, "systemctl", "stopped")
    docker, docker_calls = fake_manager(tmp_path, "docker", "stopped")
    podman, podman_calls = fake_manager(tmp_path, "podman", "running")  # its stop never happened
    ids = [_ledger_core.record(ledger_dir, HOST, "service_pause", params)["id"] for params in (
        UNIT, {"manager": "docker", "name": "big", "container": "sglang-big"},
        {"manager": "podman", "name": "tiny", "container": "sglang-tiny"})]
    rc, out, err = run_script("undo", "--ledger-dir", ledger_dir, "--host", HOST, "--systemctl", systemctl,
                              "--docker", docker, "--podman", podman, "--json")
    assert rc == 0, out + err
    result = json.loads(out)
    assert result["undone"] == list(reversed(ids))
    assert [d["message"] for d in result["details"]] == [
        "podman container sglang-tiny is already running: nothing to start",
        "started docker container sglang-big again",
        "started unit sglang-small.service again"]
    assert systemctl_calls() == [["is-active", "sglang-small.service"], ["start", "sglang-small.service"],
                                 ["is-active", "sglang-small.service"]]
    inspect_big = ["container", "inspect", "-f", "{{.State.Status}}", "sglang-big"]
    assert docker_calls() == [inspect_big, ["start", "sglang-big"], inspect_big]
    assert podman_calls() == [["container", "inspect", "-f", "{{.State.Status}}", "sglang-tiny"]]


def test_registry_has_the_kind():
    assert _ledger_core.KINDS["service_pause"] is _ledger_running.SERVICE_PAUSE
    assert _ledger_running.SERVICE_PAUSE.undo is _ledger_running._undo_service_pause
    assert "service_pause" in _ledger_core.__doc__

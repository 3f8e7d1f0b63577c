# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the managed_process module through main().

systemd, docker and podman are command builders: their cases are in test_managed_process.yaml, with every
run_command call mocked (argv, rc, output). The process manager is tested for real: it spawns `sleep` and short
Python programs in a temporary directory and stops them through the ledger, and every pid it starts is killed at
the end of its test.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc, _ledger_undo
from ansible_collections.inferlab.distributed.plugins.module_utils import _process_manager as pm
from ansible_collections.inferlab.distributed.plugins.modules import managed_process
from ansible_collections.inferlab.distributed.tests.unit.module_docs import documented_options
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module, set_module_args

HERE = Path(__file__).resolve().parent
CASES = yaml.safe_load((HERE / "test_managed_process.yaml").read_text())
HOST = "lab-a"
OMIT = object()  # an option left out, as Ansible's omit does
BINARIES = {"systemctl": "/usr/bin/systemctl", "systemd-run": "/usr/bin/systemd-run", "docker": "/usr/bin/docker",
            "podman": "/usr/bin/podman"}


def fill(value, tmp):
    """``value`` with ``{tmp}`` replaced in every string, keys included."""
    if isinstance(value, str):
        return value.replace("{tmp}", tmp)
    if isinstance(value, list):
        return [fill(v, tmp) for v in value]
    if isinstance(value, dict):
        return {fill(k, tmp): fill(v, tmp) for k, v in value.items()}
    return value


class RunCommandMock:
    """Answers each run_command call with the next recorded one, checking its argv, LC_ALL=C and that no ~ or $VAR
    in an argument is expanded."""

    def __init__(self, calls):
        self.calls = list(calls)

    def __call__(self, args, environ_update=None, expand_user_and_vars=True, **kwargs):
        assert self.calls, f"unexpected call {args}"
        call = self.calls.pop(0)
        assert list(args) == call["command"]
        assert (environ_update or {}).get("LC_ALL") == "C", "commands must run with LC_ALL=C"
        assert expand_user_and_vars is False, "arguments must not be expanded"
        return call["rc"], call.get("out", ""), call.get("err", "")


@pytest.fixture
def binaries(monkeypatch):
    def get_bin_path(module, arg, required=False, opt_dirs=None):
        assert required
        return BINARIES[arg]
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)


def install(monkeypatch, calls):
    mock = RunCommandMock(calls)

    def run_command(module, args, **kwargs):  # a plain function, so that it binds as a method
        return mock(args, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return mock


def make_procfs(root, start_times):
    for pid, start_time in start_times.items():
        fields = ["S", "1", str(pid), str(pid)] + ["0"] * 15 + [str(start_time)] + ["0"] * 30
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} (server) " + " ".join(fields) + "\n")


def seed(ledger_dir, entries):
    ids = []
    for entry in entries:
        line = _ledger_core.record(ledger_dir, HOST, entry["kind"], entry["params"])
        if entry["state"] != "pending":
            _ledger_core.mark(ledger_dir, HOST, line["id"], "applied")
        if entry["state"] == "undone":
            _ledger_core.mark(ledger_dir, HOST, line["id"], "undone")
        ids.append(line["id"])
    return ids


def ledger_view(ledger_dir):
    return _ledger_core.status(ledger_dir, HOST)["entries"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_module(case, tmp_path, binaries, monkeypatch):
    case = fill(case, str(tmp_path))
    ledger_dir = str(tmp_path / "ledger")
    make_procfs(tmp_path / "proc", case.get("procfs", {}))
    for path, content in case.get("files", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    seeded = seed(ledger_dir, case.get("ledger", []))
    mock = install(monkeypatch, case["mocks"]["run_command"])
    args = dict(ledger_dir=ledger_dir, ledger_host=HOST, procfs_root=str(tmp_path / "proc"), run_id="run1",
                startup_check_s=0)
    args.update(case["input"])

    failed, result = run_module(managed_process.main, args)

    expected = dict(case["output"])
    assert failed == expected.pop("failed", False), result
    assert not mock.calls, f"calls expected but not made: {mock.calls}"
    if "msg_contains" in expected:
        assert expected.pop("msg_contains") in result["msg"], result["msg"]
    if "msg_lacks" in expected:
        assert expected.pop("msg_lacks") not in result["msg"], result["msg"]
    if "unit_text_contains" in expected:
        assert expected.pop("unit_text_contains") in result["unit_text"]
    entries = ledger_view(ledger_dir)
    assert [[e["kind"], e["state"]] for e in entries] == expected.pop("ledger")
    if "ledger_params" in expected:
        assert [e["params"] for e in entries] == expected.pop("ledger_params")
    new = [e["id"] for e in entries if e["id"] not in seeded]
    if "entry" in expected:
        entry = expected.pop("entry")
        assert result["entry_id"] == (new[-1] if entry == "new" else None if entry is None else seeded[entry])
    if "undone" in expected:
        assert result["undone"] == [seeded[i] for i in expected.pop("undone")]
    for key, value in expected.items():
        assert result[key] == value, (key, result)


def test_systemd_returns_its_unit_text(tmp_path, binaries, monkeypatch):
    show = [BINARIES["systemctl"], "show", "-p", "ActiveState,MainPID", "inferlab-r0.service"]
    install(monkeypatch, [{"command": show, "rc": 0, "out": "MainPID=0\nActiveState=inactive\n"}])
    failed, result = run_module(managed_process.main, dict(
        name="r0", manager="systemd", argv=["/usr/bin/sleep", "30"], environment={"A": "1", "NCCL_DEBUG": "INFO"},
        working_dir="/srv", systemd_properties=["MemoryMax=1G"], stop_timeout_s=2.5, ledger_dir=str(tmp_path / "l"),
        ledger_host=HOST, run_id="r", _ansible_check_mode=True, _ansible_diff=True))
    assert not failed, result.get("msg", result)
    env_file = str(tmp_path / "env" / "inferlab-r0.service.env")
    assert result["unit_text"] == pm.systemd_unit_text("inferlab-r0", ["/usr/bin/sleep", "30"], env_file, "/srv",
                                                       ["MemoryMax=1G"], None, 2.5)
    assert f"TimeoutStopSec=2500ms\nMemoryMax=1G\nEnvironmentFile={env_file}\nWorkingDirectory=/srv\n" in (
        result["unit_text"])
    assert result["diff"] == {"before": {"state": "stopped", "pid": None},
                              "after": {"state": "started", "pid": None, "command": result["command"]}}
    # check mode writes nothing: no ledger, no environment file
    assert not (tmp_path / "l").exists() and not (tmp_path / "env").exists()


CANARY = "hf_inferlab_canary_7f3a9c"
SHOW = [BINARIES["systemctl"], "show", "-p", "ActiveState,MainPID", "inferlab-r0.service"]
STOP = [BINARIES["systemctl"], "stop", "inferlab-r0.service"]
RESET = [BINARIES["systemctl"], "reset-failed", "inferlab-r0.service"]


def systemd_run(env_file):
    return [BINARIES["systemd-run"], "--unit=inferlab-r0.service", "--collect", "--property=KillMode=control-group",
            "--property=TimeoutStopSec=30s", f"--property=EnvironmentFile={env_file}", "--", "/usr/bin/sleep", "30"]


def start_r0(ledger_dir, environment, secret=None, **extra):
    return run_module(managed_process.main, dict(
        name="r0", manager="systemd", argv=["/usr/bin/sleep", "30"], environment=environment,
        secret_environment=secret or {}, ledger_dir=str(ledger_dir), ledger_host=HOST, run_id="r",
        startup_check_s=0, **extra))


def test_no_result_argv_or_ledger_line_shows_an_environment_value(tmp_path, binaries, monkeypatch):
    """A secret in secret_environment or environment reaches the unit through its 0600 environment file, never a
    result (the command, the unit text, the diff, the ledger's view, the echo of the arguments), the command line
    that starts it, or the ledger."""
    env_file = tmp_path / "env" / "inferlab-r0.service.env"
    mock = install(monkeypatch, [{"command": SHOW, "rc": 0, "out": "MainPID=0\nActiveState=inactive\n"},
                                 {"command": systemd_run(str(env_file)), "rc": 0},
                                 {"command": SHOW, "rc": 0, "out": "MainPID=0\nActiveState=active\n"}])
    ledger_dir = tmp_path / "l"
    failed, result = start_r0(ledger_dir, {"NCCL_DEBUG": "INFO", "OTHER": CANARY + "2"}, {"HF_TOKEN": CANARY},
                              _ansible_diff=True)
    assert not failed, result.get("msg", result)
    assert not mock.calls
    assert CANARY not in json.dumps(result)
    assert result["invocation"]["module_args"]["environment"] == {"NCCL_DEBUG": "INFO", "OTHER": "<redacted>"}
    assert CANARY not in Path(_ledger_core.ledger_path(str(ledger_dir), HOST)).read_text()
    assert env_file.read_text() == f'HF_TOKEN="{CANARY}"\nNCCL_DEBUG="INFO"\nOTHER="{CANARY}2"\n'
    assert os.stat(env_file).st_mode & 0o777 == 0o600 and os.stat(env_file.parent).st_mode & 0o777 == 0o700
    assert [(e["kind"], e["state"], e["params"].get("path")) for e in ledger_view(str(ledger_dir))] == [
        ("file", "applied", str(env_file)), ("systemd_unit", "applied", None)]


def test_the_environment_file_decides_a_restart_and_goes_with_the_stop(tmp_path, binaries, monkeypatch):
    env_file = tmp_path / "env" / "inferlab-r0.service.env"
    ledger_dir = tmp_path / "l"
    make_procfs(tmp_path / "proc", {4321: 81234})
    running = {"command": SHOW, "rc": 0, "out": "MainPID=4321\nActiveState=active\n"}
    stopped = {"command": SHOW, "rc": 0, "out": "MainPID=0\nActiveState=inactive\n"}
    install(monkeypatch, [stopped, {"command": systemd_run(str(env_file)), "rc": 0}, running])
    assert not start_r0(ledger_dir, {"A": "1"}, procfs_root=str(tmp_path / "proc"))[0]
    # the same environment: nothing changes
    install(monkeypatch, [running])
    failed, result = start_r0(ledger_dir, {"A": "1"}, procfs_root=str(tmp_path / "proc"))
    assert not failed and not result["changed"]
    # another value, same command line: the file tells, so the unit and its file go and come back
    install(monkeypatch, [running, {"command": STOP, "rc": 0}, {"command": RESET, "rc": 0},
                          {"command": systemd_run(str(env_file)), "rc": 0}, running])
    failed, result = start_r0(ledger_dir, {"A": "2"}, procfs_root=str(tmp_path / "proc"))
    assert not failed and result["changed"], result
    assert env_file.read_text() == 'A="2"\n'
    assert [(e["kind"], e["state"]) for e in ledger_view(str(ledger_dir))] == [
        ("file", "undone"), ("systemd_unit", "undone"), ("file", "applied"), ("systemd_unit", "applied")]
    # the stop is the undo of both: the unit first, then its file
    mock = install(monkeypatch, [running, {"command": STOP, "rc": 0}, {"command": RESET, "rc": 0}])
    failed, result = run_module(managed_process.main, dict(
        name="r0", manager="systemd", state="stopped", ledger_dir=str(ledger_dir), ledger_host=HOST, run_id="r",
        procfs_root=str(tmp_path / "proc")))
    assert not failed and result["changed"], result
    assert not mock.calls and not env_file.exists()
    assert {e["state"] for e in ledger_view(str(ledger_dir))} == {"undone"}


def test_an_environment_file_no_entry_records_is_not_overwritten(tmp_path, binaries, monkeypatch):
    env_file = tmp_path / "env" / "inferlab-r0.service.env"
    env_file.parent.mkdir()
    env_file.write_text("SOMEONE=else\n")
    install(monkeypatch, [{"command": SHOW, "rc": 0, "out": "MainPID=0\nActiveState=inactive\n"}])
    failed, result = start_r0(tmp_path / "l", {"A": "1"})
    assert failed and result["msg"] == (
        f"{env_file} exists but no open entry in the ledger of {HOST} records it, so it was not written by inferlab "
        "for unit inferlab-r0.service; remove it or pick another name")
    assert env_file.read_text() == "SOMEONE=else\n"
    assert not ledger_view(str(tmp_path / "l"))


def test_a_variable_in_both_environments_is_refused(tmp_path, binaries):
    failed, result = run_module(managed_process.main, dict(
        name="r0", manager="systemd", argv=["/usr/bin/sleep", "30"], secret_environment={"HF_TOKEN": CANARY},
        environment={"HF_TOKEN": "x"}, ledger_dir=str(tmp_path / "l"), ledger_host=HOST, run_id="r"))
    assert failed and result["msg"] == "HF_TOKEN set in both environment and secret_environment; set each in one"
    assert CANARY not in json.dumps(result)


# --- the process manager, for real --------------------------------------------------------------------------------


@pytest.fixture
def proc_args(tmp_path):
    """Module args for a process named t1 in tmp_path; every process spawned in the test is killed at its end."""
    args = dict(name="t1", argv=["sleep", "30"], log_path=str(tmp_path / "logs" / "t1.log"),
                pidfile=str(tmp_path / "run" / "t1.pid"), ledger_dir=str(tmp_path / "ledger"), ledger_host=HOST,
                run_id="run1", startup_check_s=0.2, stop_timeout_s=5)
    known = set(_ledger_proc.SPAWNED)
    yield args
    for pid in set(_ledger_proc.SPAWNED) - known:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _ledger_proc.SPAWNED.pop(pid).wait(timeout=10)


def ledger_lines(args):
    path = Path(args["ledger_dir"]) / f"{HOST}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_process_start_idempotence_and_stop_through_the_ledger(proc_args):
    failed, started = run_module(managed_process.main, proc_args)
    assert not failed, started
    pid = started["pid"]
    assert started["changed"] is True and started["state"] == "started"
    assert started["command"] == ["sleep", "30"] and started["log_path"] == proc_args["log_path"]
    assert started["start_time"] == _ledger_proc.process_identity(pid)["start_time"]
    assert Path(proc_args["pidfile"]).read_text() == f"{pid}\n"
    assert _ledger_proc.read_proc_cmdline(pid) == ["sleep", "30"]
    assert os.getpgid(pid) == pid
    lines = ledger_lines(proc_args)
    assert [(x["id"], x["state"]) for x in lines] == [(started["entry_id"], "pending"),
                                                      (started["entry_id"], "applied")]
    assert lines[0]["params"] == {"pidfile": proc_args["pidfile"], "cmdline": ["sleep", "30"], "stop_timeout": 5.0,
                                  "process_group": True}
    assert lines[1]["params"] == dict(lines[0]["params"], pid=pid, start_time=started["start_time"])
    assert lines[0]["run_id"] == "run1"

    failed, again = run_module(managed_process.main, proc_args)
    assert not failed and again["changed"] is False
    assert (again["pid"], again["entry_id"], again["start_time"]) == (pid, started["entry_id"], started["start_time"])
    assert len(ledger_lines(proc_args)) == 2, "an unchanged start wrote to the ledger"

    stop_args = dict(proc_args, state="stopped", argv=None, run_id=None)
    failed, stopped = run_module(managed_process.main, stop_args)
    assert not failed, stopped
    assert stopped["changed"] is True and stopped["undone"] == [started["entry_id"]]
    assert _ledger_proc.SPAWNED[pid].wait(timeout=10) == -signal.SIGTERM
    assert [x["state"] for x in ledger_lines(proc_args)] == ["pending", "applied", "undone"]
    assert not Path(proc_args["pidfile"]).exists()

    failed, again = run_module(managed_process.main, stop_args)
    assert not failed and again["changed"] is False and again["undone"] == []
    assert len(ledger_lines(proc_args)) == 3


def test_status_reads_only_and_names_a_dead_process_by_its_recorded_pid(proc_args):
    status_args = dict(proc_args, state="status", argv=None, run_id=None)
    failed, before = run_module(managed_process.main, status_args)
    assert not failed and (before["changed"], before["running"], before["pid"]) == (False, False, None)
    assert ledger_lines(proc_args) == [], "a status read wrote to the ledger"

    _failed, started = run_module(managed_process.main, proc_args)
    failed, alive = run_module(managed_process.main, status_args)
    assert not failed and (alive["changed"], alive["running"]) == (False, True)
    assert (alive["pid"], alive["entry_id"]) == (started["pid"], started["entry_id"])

    os.killpg(started["pid"], signal.SIGKILL)
    _ledger_proc.SPAWNED[started["pid"]].wait(timeout=10)
    failed, dead = run_module(managed_process.main, status_args)
    assert not failed and (dead["changed"], dead["running"], dead["pid"]) == (False, False, started["pid"])
    assert [x["state"] for x in ledger_lines(proc_args)] == ["pending", "applied"], "status must never undo"


def test_status_quotes_failure_lines_of_its_log_file(proc_args):
    _failed, started = run_module(managed_process.main, proc_args)
    patterns = [r"Traceback \(most recent call last\)", "NCCL WARN"]
    status_args = dict(proc_args, state="status", argv=None, run_id=None, log_failure_patterns=patterns)
    failed, clean = run_module(managed_process.main, status_args)
    assert not failed and (clean["running"], clean["failure_lines"]) == (True, [])

    with open(proc_args["log_path"], "a") as log:
        log.write("loading\nTraceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: boom\n"
                  "NCCL WARN socket closed\n")
    failed, logged = run_module(managed_process.main, status_args)
    assert not failed and logged["running"] is True and logged["pid"] == started["pid"]
    assert logged["failure_lines"] == ["Traceback (most recent call last): ... RuntimeError: boom",
                                       "NCCL WARN socket closed"]
    failed, tail_only = run_module(managed_process.main, dict(status_args, log_scan_lines=1))
    assert not failed and tail_only["failure_lines"] == ["NCCL WARN socket closed"]

    failed, result = run_module(managed_process.main, dict(status_args, log_path=None))
    assert failed and result["msg"] == ("log_failure_patterns needs the log of process t1 (pidfile "
                                        f"{proc_args['pidfile']}): set log_path")


def test_another_argv_or_environment_restarts_the_process(proc_args):
    _failed, first = run_module(managed_process.main, dict(proc_args, environment={"MODE": "baseline"}))
    failed, second = run_module(managed_process.main, dict(proc_args, environment={"MODE": "nextn"}))
    assert not failed and second["changed"] is True
    assert second["undone"] == [first["entry_id"]] and second["pid"] != first["pid"]
    assert _ledger_proc.SPAWNED[first["pid"]].wait(timeout=10) == -signal.SIGTERM
    assert pm.read_proc_environ(second["pid"])["MODE"] == "nextn"
    failed, third = run_module(managed_process.main, dict(proc_args, argv=["sleep", "31"],
                                                          environment={"MODE": "nextn"}))
    assert not failed and third["changed"] is True and third["undone"] == [second["entry_id"]]
    assert [x["state"] for x in ledger_lines(proc_args)] == ["pending", "applied", "undone"] * 2 + [
        "pending", "applied"]


def test_a_process_that_exits_at_once_fails_quoting_its_log(proc_args):
    Path(proc_args["log_path"]).parent.mkdir(parents=True)
    Path(proc_args["log_path"]).write_text("output of an earlier run\n")
    argv = ["sh", "-c", "for i in $(seq 1 50); do echo line $i; done; echo 'fatal: no GPU' >&2; exit 3"]
    started = time.monotonic()
    failed, result = run_module(managed_process.main, dict(proc_args, argv=argv, startup_check_s=10))
    assert failed
    assert time.monotonic() - started < 8, "the startup check waited for its full time"
    assert "did not stay up for 10.0s after its start (exited with status 3)" in result["msg"]
    assert result["log_tail"] == [f"line {i}" for i in range(12, 51)] + ["fatal: no GPU"]
    assert result["msg"].endswith("\n".join(result["log_tail"]))
    assert "earlier run" not in result["msg"]
    # the entry stays open for the restore, whose undo finds the process gone and removes the pidfile
    assert [x["state"] for x in ledger_lines(proc_args)] == ["pending", "applied"]
    undo = _ledger_undo.undo(proc_args["ledger_dir"], HOST)
    assert undo["undone"] == [result["entry_id"]] and "had already exited" in undo["details"][0]["message"]


def test_a_program_that_cannot_start_fails_and_leaves_a_harmless_pending_entry(proc_args):
    failed, result = run_module(managed_process.main, dict(proc_args, argv=["/nonexistent/server"]))
    assert failed and "cannot start /nonexistent/server" in result["msg"]
    assert [x["state"] for x in ledger_lines(proc_args)] == ["pending"]
    undo = _ledger_undo.undo(proc_args["ledger_dir"], HOST)
    assert "it was never started" in undo["details"][0]["message"]


def test_check_mode_changes_nothing(proc_args):
    failed, result = run_module(managed_process.main, dict(proc_args, _ansible_check_mode=True, _ansible_diff=True))
    assert not failed and result["changed"] is True and result["pid"] is None
    assert result["diff"] == {"before": {"state": "stopped", "pid": None},
                              "after": {"state": "started", "pid": None, "command": ["sleep", "30"]}}
    assert not Path(proc_args["ledger_dir"]).exists()
    assert not Path(proc_args["pidfile"]).exists() and not Path(proc_args["log_path"]).exists()

    _failed, started = run_module(managed_process.main, proc_args)
    failed, result = run_module(managed_process.main, dict(proc_args, state="stopped", _ansible_check_mode=True))
    assert not failed and result["changed"] is True and result["undone"] == [started["entry_id"]]
    assert _ledger_proc.pid_alive(started["pid"]) and len(ledger_lines(proc_args)) == 2


def test_a_process_under_the_pidfile_without_a_ledger_entry_is_not_ours(proc_args):
    pid = pm.spawn_detached(["sleep", "30"], {}, proc_args["log_path"], proc_args["pidfile"])
    for state in ("started", "stopped"):
        failed, result = run_module(managed_process.main, dict(proc_args, state=state))
        assert failed, state
        assert result["msg"].startswith(f"process t1 (pidfile {proc_args['pidfile']}) runs (pid {pid}) but has no "
                                        "open entry in the ledger of lab-a")
    assert _ledger_proc.pid_alive(pid)
    assert ledger_lines(proc_args) == []


def test_a_stale_pidfile_naming_another_program_is_replaced(proc_args):
    Path(proc_args["pidfile"]).parent.mkdir(parents=True)
    Path(proc_args["pidfile"]).write_text(f"{os.getpid()}\n")  # this test's own pid: alive, not `sleep 30`
    failed, result = run_module(managed_process.main, proc_args)
    assert not failed and result["changed"] is True and result["pid"] != os.getpid()


def test_the_ledger_lock_of_another_run_refuses_the_start(proc_args):
    _ledger_core.acquire_lock(proc_args["ledger_dir"], HOST, "other-run", controller="ctl", pid=1)
    failed, result = run_module(managed_process.main, proc_args)
    assert failed and "ledger for lab-a is locked by run other-run" in result["msg"]
    assert not Path(proc_args["pidfile"]).exists()


@pytest.mark.parametrize(("args", "message"), [
    (dict(name="rank 0"), "name must match [A-Za-z0-9][A-Za-z0-9_.-]*"),
    (dict(name="-x"), "name must match"),
    (dict(name="a/b"), "name must match"),
    (dict(run_id=OMIT), "state is started but all of the following are missing: run_id"),
    (dict(pidfile=OMIT), "manager is process but all of the following are missing: pidfile"),
    (dict(log_path=None), "manager=process state=started needs log_path"),
    (dict(argv=None), "manager=process state=started needs argv"),
    (dict(argv=[""]), "argv must be a non-empty list of strings"),
    (dict(environment={"A-B": "1"}), "environment variable name 'A-B'"),
    (dict(environment={"FLAG": True}), "environment variable FLAG must be a string or a number"),
    (dict(stop_timeout_s=-1), "stop_timeout_s must be a finite number of seconds, not negative, got -1.0"),
    (dict(stop_timeout_s=float("inf")), "stop_timeout_s must be a finite number of seconds, not negative, got inf"),
    (dict(stop_timeout_s=float("nan")), "stop_timeout_s must be a finite number of seconds, not negative, got nan"),
    (dict(startup_check_s=-1), "startup_check_s must be a finite number of seconds, not negative, got -1.0"),
    (dict(manager="docker"), "manager=docker state=started needs image"),
    (dict(manager="systemd", unit="x y"), '"unit" must be a service unit name'),
    (dict(manager="systemd", systemd_properties=["KillMode=none"]), "property KillMode is always control-group"),
    (dict(manager="podman", image="i", volumes=["models"]), "a volume must read SRC:DST"),
])
def test_bad_options(proc_args, binaries, args, message):
    args = {k: v for k, v in dict(proc_args, **args).items() if v is not OMIT}
    failed, result = run_module(managed_process.main, args)
    assert failed and message in result["msg"], result["msg"]
    assert ledger_lines(proc_args) == []


def test_argument_spec_matches_documentation():
    options = documented_options(managed_process)  # its ledger options from the ledger doc fragment
    with set_module_args({"name": "x", "ledger_dir": "/l", "ledger_host": "h", "pidfile": "/p", "state": "stopped"}):
        spec = managed_process.build_module().argument_spec

    def shape(opts):
        return {name: (o["type"], o.get("default"), o.get("required", False), tuple(o.get("choices", ())),
                       o.get("elements")) for name, o in opts.items()}

    assert shape(options) == shape(spec)


def test_documentation_parses_and_every_return_says_when():
    yaml.safe_load(managed_process.EXAMPLES)
    returns = yaml.safe_load(managed_process.RETURN)
    assert set(returns) == {"state", "running", "pid", "start_time", "command", "unit_text", "entry_id", "undone",
                            "log_path", "log_tail", "failure_lines"}
    assert all("returned" in r for r in returns.values())


def test_a_secret_reaches_the_process_and_no_result_or_ledger_line(proc_args):
    args = dict(proc_args, secret_environment={"HF_TOKEN": CANARY}, environment={"NCCL_DEBUG": "INFO"})
    failed, started = run_module(managed_process.main, args)
    assert not failed, started
    environ = Path(f"/proc/{started['pid']}/environ").read_bytes().split(b"\0")
    assert f"HF_TOKEN={CANARY}".encode() in environ and b"NCCL_DEBUG=INFO" in environ
    assert CANARY not in json.dumps(started)
    # the process manager records the command line, not the environment: the secret stays in the process alone
    assert CANARY not in Path(args["ledger_dir"], f"{HOST}.jsonl").read_text()
    failed, again = run_module(managed_process.main, args)
    assert not failed and again["changed"] is False  # the secret counts in "runs as asked"

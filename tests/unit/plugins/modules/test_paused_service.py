# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the paused_service module through main().

The process manager is tested for real: a replica (a short Python program that writes its own pidfile, like the
lab's original replicas) is paused and resumed. systemd, docker and podman are stateful fake binaries in tmp_path
that record their argv. Missing and malformed /proc files come from procfs trees built in tmp_path around a live
pid, in check mode, so nothing is signalled. Every process a test starts is killed by its pid at its end.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc
from ansible_collections.inferlab.distributed.plugins.modules import paused_service
from ansible_collections.inferlab.distributed.tests.unit.module_docs import documented_options
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module, set_module_args

HOST = "lab-a"
OMIT = object()  # an option left out, as Ansible's omit does

REPLICA = textwrap.dedent('''\
    import os, signal, sys, time
    pidfile = sys.argv[1]
    def bye(signum, frame):
        try:
            with open(pidfile) as handle:
                if handle.read().strip() == str(os.getpid()):
                    os.unlink(pidfile)
        except OSError:
            pass
        print("replica stopping", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if os.environ.get("IGNORE_TERM") else bye)
    print("replica up mode=%s cwd=%s" % (os.environ.get("MODE"), os.getcwd()), flush=True)
    with open(pidfile + ".tmp", "w") as handle:
        handle.write("%d\\n" % os.getpid())
    os.replace(pidfile + ".tmp", pidfile)
    while True:
        time.sleep(1)
''')


def wait_for(predicate, message, timeout=10):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message
        time.sleep(0.02)


class Service:
    """One replica named original-a in tmp_path: ``start()`` runs it; ``args`` are the module's. At the end every
    process of the test is killed by its pid: the replicas started here and what the module spawned."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.script = tmp_path / "replica.py"
        self.script.write_text(REPLICA)
        self.workdir = tmp_path / "srv"
        self.workdir.mkdir()
        self.pidfile = tmp_path / "run" / "original-a.pid"
        self.pidfile.parent.mkdir()
        self.log = tmp_path / "logs" / "original-a.log"
        self.log.parent.mkdir()
        self.argv = [sys.executable, str(self.script), str(self.pidfile), "--api-key", "argv-secret"]
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MODE": "prod", "API_TOKEN": "env-secret"}
        self.ledger_dir = str(tmp_path / "ledger")
        self.args = dict(name="original-a", pidfile=str(self.pidfile), ledger_dir=self.ledger_dir, ledger_host=HOST,
                         run_id="run1", stop_timeout_s=5, start_timeout_s=10)
        self.started = []
        self.known = set(_ledger_proc.SPAWNED)

    def start(self, **env):
        with open(self.log, "ab") as out:
            proc = subprocess.Popen(self.argv, env=dict(self.env, **env), cwd=str(self.workdir), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.started.append(proc)
        wait_for(self.pidfile.exists, "the replica did not write its pidfile")
        return proc

    def lines(self):
        path = Path(self.ledger_dir) / f"{HOST}.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

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


@pytest.fixture
def service(tmp_path):
    made = Service(tmp_path)
    yield made
    made.cleanup()


def environ_of(pid):
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if item)


# --- the process manager, for real --------------------------------------------------------------------------------


def test_pause_and_resume_restore_the_same_process(service):
    proc = service.start()
    failed, paused = run_module(paused_service.main, dict(service.args, _ansible_diff=True))
    assert not failed, paused
    assert (paused["changed"], paused["state"], paused["pid"], paused["how"]) == (True, "paused", proc.pid, "SIGTERM")
    assert proc.wait(timeout=10) == 0, "the replica's own SIGTERM handler ends it"
    assert paused["environment_names"] == ["API_TOKEN", "MODE", "PATH"]
    assert paused["log_path"] == str(service.log)
    assert paused["diff"] == {"before": {"state": "running"}, "after": {"state": "paused"}}
    assert paused["message"] == (f"paused service original-a (pidfile {service.pidfile}): SIGTERM, pid {proc.pid}; "
                                 f"ledger entry {paused['entry_id']}")
    assert "env-secret" not in json.dumps(paused) and "argv-secret" not in json.dumps(paused)
    lines = service.lines()
    assert [(x["id"], x["state"], x["run_id"]) for x in lines] == [(paused["entry_id"], "pending", "run1"),
                                                                   (paused["entry_id"], "applied", "run1")]
    assert lines[0]["params"] == {
        "manager": "process", "name": "original-a", "pidfile": str(service.pidfile), "argv": service.argv,
        "environment": service.env, "working_dir": str(service.workdir), "log_path": str(service.log),
        "pid": proc.pid, "start_time": lines[0]["params"]["start_time"], "start_timeout": 10.0}
    assert lines[1]["params"] == dict(lines[0]["params"], how="SIGTERM")

    failed, again = run_module(paused_service.main, service.args)
    assert not failed, again
    assert (again["changed"], again["how"], again["entry_id"], again["pid"]) == (
        False, "already paused", paused["entry_id"], proc.pid)
    assert len(service.lines()) == 2, "an unchanged pause wrote to the ledger"

    failed, resumed = run_module(paused_service.main, dict(service.args, state="resumed", _ansible_diff=True))
    assert not failed, resumed
    pid = resumed["pid"]
    assert (resumed["changed"], resumed["how"], resumed["undone"]) == (True, "started", [paused["entry_id"]])
    assert resumed["diff"] == {"before": {"state": "paused"}, "after": {"state": "running"}}
    assert pid == int(service.pidfile.read_text()) and pid != proc.pid
    assert _ledger_proc.read_proc_cmdline(pid) == service.argv
    assert environ_of(pid) == service.env
    assert os.readlink(f"/proc/{pid}/cwd") == str(service.workdir)
    assert os.readlink(f"/proc/{pid}/fd/1") == str(service.log)
    wait_for(lambda: service.log.read_text().count("replica up") == 2, "the resumed replica did not log")
    assert service.log.read_text().splitlines() == [f"replica up mode=prod cwd={service.workdir}", "replica stopping",
                                                    f"replica up mode=prod cwd={service.workdir}"]
    assert [x["state"] for x in service.lines()] == ["pending", "applied", "undone"]

    failed, nothing = run_module(paused_service.main, dict(service.args, state="resumed", _ansible_diff=True))
    assert not failed and (nothing["changed"], nothing["how"], nothing["undone"]) == (False, "nothing to resume", [])
    assert nothing["message"] == "nothing to resume: no open service_pause entry for original-a in the ledger of lab-a"
    assert "diff" not in nothing

    # the resumed service pauses again, and comes back again
    failed, second = run_module(paused_service.main, service.args)
    assert not failed and second["changed"] is True and second["pid"] == pid and second["how"] == "SIGTERM"
    assert _ledger_proc.SPAWNED[pid].wait(timeout=10) == 0
    failed, back = run_module(paused_service.main, dict(service.args, state="resumed"))
    assert not failed and back["undone"] == [second["entry_id"]] and _ledger_proc.pid_alive(back["pid"])


def test_resume_needs_no_run_id_and_no_pidfile(service):
    service.start()
    _failed, paused = run_module(paused_service.main, service.args)
    args = {k: v for k, v in service.args.items() if k not in ("run_id", "pidfile")}
    failed, resumed = run_module(paused_service.main, dict(args, state="resumed"))
    assert not failed and resumed["undone"] == [paused["entry_id"]]


def test_a_service_ignoring_sigterm_is_killed_and_resumed(service):
    proc = service.start(IGNORE_TERM="1")
    failed, paused = run_module(paused_service.main, dict(service.args, stop_timeout_s=0.3))
    assert not failed and paused["how"] == "SIGKILL"
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert not service.pidfile.exists(), "the pause removes the pidfile of the process it killed"
    assert service.lines()[-1]["params"]["how"] == "SIGKILL"
    failed, resumed = run_module(paused_service.main, dict(service.args, state="resumed"))
    assert not failed and _ledger_proc.read_proc_cmdline(resumed["pid"]) == service.argv
    assert environ_of(resumed["pid"])["IGNORE_TERM"] == "1"


def test_check_mode_changes_nothing(service):
    proc = service.start()
    failed, result = run_module(paused_service.main, dict(service.args, _ansible_check_mode=True, _ansible_diff=True))
    assert not failed, result.get("msg", result)
    assert (result["changed"], result["entry_id"], result["pid"], result["how"]) == (True, None, proc.pid, None)
    assert result["environment_names"] == ["API_TOKEN", "MODE", "PATH"]
    assert result["diff"] == {"before": {"state": "running"}, "after": {"state": "paused"}}
    time.sleep(0.1)
    assert proc.poll() is None and not Path(service.ledger_dir).exists()

    _failed, paused = run_module(paused_service.main, service.args)
    proc.wait(timeout=10)
    failed, result = run_module(paused_service.main, dict(service.args, state="resumed", _ansible_check_mode=True))
    assert not failed and result["changed"] is True and result["undone"] == [paused["entry_id"]]
    assert not service.pidfile.exists() and set(_ledger_proc.SPAWNED) == service.known, "check mode started it"
    assert [x["state"] for x in service.lines()] == ["pending", "applied"]


def read_service(pid, pidfile):
    out = os.readlink(f"/proc/{pid}/fd/1")
    return {"manager": "process", "name": "original-a", "pidfile": str(pidfile),
            "argv": _ledger_proc.read_proc_cmdline(pid), "environment": environ_of(pid),
            "working_dir": os.readlink(f"/proc/{pid}/cwd"), "log_path": out, "pid": pid,
            "start_time": _ledger_proc.read_proc_stat(pid)["start_time"]}


def test_resume_of_a_pending_entry_whose_stop_never_happened(service):
    proc = service.start()
    # a run recorded the pause and was killed before the stop
    line = _ledger_core.record(service.ledger_dir, HOST, "service_pause", read_service(proc.pid, service.pidfile),
                               run_id="dead-run")
    failed, again = run_module(paused_service.main, service.args)
    assert not failed and again["changed"] is True and again["how"] == "SIGTERM", "a running service is paused"
    proc.wait(timeout=10)
    failed, resumed = run_module(paused_service.main, dict(service.args, state="resumed"))
    assert not failed, resumed
    assert resumed["undone"] == [again["entry_id"], line["id"]]
    assert resumed["how"] == "started"
    assert resumed["message"].endswith(f"; service original-a is already running (pid {resumed['pid']}): nothing "
                                       "to start")
    assert len(set(_ledger_proc.SPAWNED) - service.known) == 1, "started twice"


def test_resume_when_it_already_runs(service):
    proc = service.start()
    line = _ledger_core.record(service.ledger_dir, HOST, "service_pause", read_service(proc.pid, service.pidfile),
                               run_id="dead-run")
    failed, resumed = run_module(paused_service.main, dict(service.args, state="resumed"))
    assert not failed, resumed
    assert (resumed["changed"], resumed["how"], resumed["undone"], resumed["pid"]) == (
        True, "already running", [line["id"]], proc.pid)
    assert proc.poll() is None and set(_ledger_proc.SPAWNED) == service.known


def test_a_resume_that_fails_quotes_the_log_and_leaves_the_entry_open(service):
    proc = service.start()
    _failed, paused = run_module(paused_service.main, service.args)
    proc.wait(timeout=10)
    service.script.unlink()  # the service cannot start any more
    failed, result = run_module(paused_service.main, dict(service.args, state="resumed"))
    assert failed
    assert result["msg"].startswith(f"could not resume service original-a: undid 0 of 1 open changes on lab-a; 1 "
                                    f"failed: {paused['entry_id']}: service original-a was started again (pid ")
    assert "exited with status 2" in result["msg"] and "No such file or directory" in result["msg"]
    assert "env-secret" not in result["msg"] and "argv-secret" not in result["msg"]
    assert result["failures"][0]["id"] == paused["entry_id"]
    assert service.lines()[-1]["state"] == "undo_failed"
    # still paused: pausing again changes nothing
    failed, again = run_module(paused_service.main, service.args)
    assert not failed and again["changed"] is False and again["how"] == "already paused"


@pytest.mark.parametrize("pidfile", ["absent", "dead", "garbage"])
def test_a_service_that_is_not_running_cannot_be_paused(service, pidfile):
    if pidfile == "dead":
        gone = subprocess.Popen(["true"])
        gone.wait()
        service.pidfile.write_text(f"{gone.pid}\n")
        message = f"(pidfile {service.pidfile}: pid {gone.pid} is not running)"
    elif pidfile == "garbage":
        service.pidfile.write_text("garbage\n")
    failed, result = run_module(paused_service.main, service.args)
    assert failed
    if pidfile == "garbage":
        assert result["msg"] == (f"service original-a cannot be paused: pidfile {service.pidfile} does not hold a pid: "
                                 "'garbage'")
    else:
        message = message if pidfile == "dead" else f"(pidfile {service.pidfile}: absent or empty)"
        assert result["msg"] == f"service original-a is not running {message}: nothing to pause"
    assert service.lines() == []


def test_another_run_holding_the_lock_refuses_pause_and_resume(service):
    proc = service.start()
    _failed, paused = run_module(paused_service.main, service.args)
    proc.wait(timeout=10)
    _ledger_core.acquire_lock(service.ledger_dir, HOST, "other-run", controller="ctl", pid=1)
    failed, result = run_module(paused_service.main, dict(service.args, state="resumed"))
    assert failed and "ledger for lab-a is locked by run other-run (controller ctl, pid 1" in result["msg"]
    assert not service.pidfile.exists() and set(_ledger_proc.SPAWNED) == service.known

    _ledger_core.release_lock(service.ledger_dir, HOST, run_id="other-run")
    run_module(paused_service.main, dict(service.args, state="resumed"))
    pid = int(service.pidfile.read_text())
    _ledger_core.acquire_lock(service.ledger_dir, HOST, "other-run", controller="ctl", pid=1)
    failed, result = run_module(paused_service.main, service.args)
    assert failed and "ledger for lab-a is locked by run other-run" in result["msg"]
    time.sleep(0.1)
    assert _ledger_proc.pid_alive(pid), "paused although the lock is another run's"
    assert [x["state"] for x in service.lines()] == ["pending", "applied", "undone"]
    assert paused["entry_id"] == service.lines()[0]["id"]


# --- missing and malformed /proc files (procfs trees around a live pid, check mode) ---------------------------------


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def procfs_tree(root, pid, start_time=5000, btime=None, stat="ok", cmdline=b"/usr/bin/server\0--port\0001\0",
                environ=b"PATH=/usr/bin\0TOKEN=x\0", cwd="/srv", stdout="/dev/null", uid=None):
    """``<root>/<pid>`` as /proc has it; None leaves a file out."""
    proc_dir = root / str(pid)
    (proc_dir / "fd").mkdir(parents=True)
    (root / "stat").write_text(f"cpu  1 2 3\nbtime {btime or int(time.time()) - 100000}\nprocesses 9\n")
    fields = ["S", "1", str(pid), str(pid)] + ["0"] * 15 + [str(start_time)] + ["0"] * 30
    (proc_dir / "stat").write_text(f"{pid} (server) " + " ".join(fields) + "\n" if stat == "ok" else stat)
    uid = os.geteuid() if uid is None else uid
    status = f"Name:\tserver\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n".encode() if uid != "missing" else None
    for name, content in (("cmdline", cmdline), ("environ", environ), ("status", status)):
        if content is not None:
            (proc_dir / name).write_bytes(content)
    for name, target in (("cwd", cwd), ("fd/1", stdout)):
        if target is not None:
            os.symlink(target, proc_dir / name)
    return root


@pytest.mark.parametrize(("tree", "message"), [
    (dict(environ=None), "service original-a: cannot read the environment of pid {pid} ({root}/{pid}/environ), "
                         "which starting it again needs; run as root or as the user of the service. Nothing was "
                         "paused"),
    (dict(cwd=None), "service original-a: cannot read the working directory of pid {pid} ({root}/{pid}/cwd: No such "
                     "file or directory); nothing was paused"),
    (dict(cwd="/srv/old (deleted)"), "service original-a: the working directory of pid {pid} is gone (/srv/old "
                                     "(deleted)), so it could not be started again; nothing was paused"),
    (dict(cmdline=b""), "service original-a: pid {pid} has an empty command line ({root}/{pid}/cmdline: a kernel "
                        "thread, or a process exiting), so it could not be started again; nothing was paused"),
    (dict(cmdline=None), "service original-a: pid {pid} exited while it was being read; nothing was paused"),
    (dict(uid=os.geteuid() + 1000), "service original-a: pid {pid} runs as uid {other}, not as uid {me} that runs "
                                    "this module and would run its restart; pause it as its own user, or manage it "
                                    "with systemd. Nothing was paused"),
    (dict(uid="missing"), "service original-a: cannot read the user of pid {pid} ({root}/{pid}/status); nothing "
                          "was paused"),
    (dict(stat="{pid} (server"), "cannot read {root}/{pid}/stat: ValueError: "),
    (dict(stat=""), "cannot read {root}/{pid}/stat: ValueError: "),
    # btime "now" is read when the test runs, not when it is collected: a slow suite reached this case more than
    # 100 s after collection, when a start 100 s after that boot was no longer after the pidfile
    (dict(start_time=100 * os.sysconf("SC_CLK_TCK"), btime="now"),
     "service original-a is not running (pidfile {pidfile}: pid {pid} belongs to a process started after the "
     "pidfile was written, so the service died and its pid was reused): nothing to pause"),
])
def test_unreadable_or_malformed_proc_files(service, sleeper, tmp_path, tree, message):
    if tree.get("btime") == "now":
        tree = dict(tree, btime=int(time.time()))
    root = procfs_tree(tmp_path / "proc", sleeper.pid, **{k: v.replace("{pid}", str(sleeper.pid))
                                                          if isinstance(v, str) else v for k, v in tree.items()})
    service.pidfile.write_text(f"{sleeper.pid}\n")
    failed, result = run_module(paused_service.main, dict(service.args, procfs_root=str(root),
                                                          _ansible_check_mode=True))
    assert failed, result
    expected = message.format(pid=sleeper.pid, root=root, pidfile=service.pidfile, other=os.geteuid() + 1000,
                              me=os.geteuid())
    assert result["msg"].startswith(expected), result["msg"]
    assert sleeper.poll() is None and service.lines() == []


@pytest.mark.parametrize(("stdout", "log_path"), [
    ("pipe:[48213]", "/dev/null"),
    ("socket:[1234]", "/dev/null"),
    (None, "/dev/null"),  # stdout closed
    ("{tmp}/gone.log (deleted)", "/dev/null"),
    ("{tmp}/service.log", "{tmp}/service.log"),
])
def test_where_the_output_goes(service, sleeper, tmp_path, stdout, log_path):
    (tmp_path / "service.log").write_text("")
    stdout = stdout.replace("{tmp}", str(tmp_path)) if stdout else None
    root = procfs_tree(tmp_path / "proc", sleeper.pid, stdout=stdout)
    service.pidfile.write_text(f"{sleeper.pid}\n")
    failed, result = run_module(paused_service.main, dict(service.args, procfs_root=str(root),
                                                          _ansible_check_mode=True))
    assert not failed, result.get("msg", result)
    assert result["log_path"] == log_path.replace("{tmp}", str(tmp_path))
    assert result["environment_names"] == ["PATH", "TOKEN"] and result["pid"] == sleeper.pid
    assert sleeper.poll() is None and not Path(service.ledger_dir).exists()


# --- systemd and containers: stateful fake binaries ---------------------------------------------------------------

FAKE_MANAGER = '''#!{python}
"""A stand-in for systemctl, docker or podman. {state} holds running, stopped or absent (no such container); every
call is appended to {calls}. {flags} may hold "transient" or "autoremove"."""
import json, sys
args = sys.argv[1:]
with open({calls!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
state = open({state!r}).read().strip()
flags = open({flags!r}).read()
running = state == "running"
pid = {pid} if running else 0
if args[0] == "show":
    print("ActiveState=%s\\nMainPID=%d\\nTransient=%s" % ("active" if running else "inactive", pid,
                                                          "yes" if "transient" in flags else "no"))
elif args[0] == "is-active":
    print("active" if running else "inactive")
    sys.exit(0 if running else 3)
elif args[:2] == ["container", "inspect"]:
    if state == "absent":
        sys.stderr.write("Error: No such container: %s\\n" % args[-1])
        sys.exit(1)
    fmt = args[3]
    if fmt == "{{{{.State.Running}}}} {{{{.State.Pid}}}}":
        print("%s %d" % ("true" if running else "false", pid))
    elif fmt == "{{{{.HostConfig.AutoRemove}}}}":
        print("true" if "autoremove" in flags else "false")
    elif fmt == "{{{{.State.Status}}}}":
        print("running" if running else "exited")
    else:
        sys.exit(98)
elif args[0] == "stop":
    open({state!r}, "w").write("stopped")
elif args[0] == "start":
    open({state!r}, "w").write("running")
else:
    sys.exit(99)
'''


class FakeManager:
    def __init__(self, tmp_path, name, state="running", flags=""):
        self.calls_file = tmp_path / f"{name}_calls.jsonl"
        self.state_file = tmp_path / f"{name}_state"
        self.state_file.write_text(state)
        flags_file = tmp_path / f"{name}_flags"
        flags_file.write_text(flags)
        self.path = tmp_path / name
        self.path.write_text(FAKE_MANAGER.format(python=sys.executable, calls=str(self.calls_file),
                                                 state=str(self.state_file), flags=str(flags_file), pid=os.getpid()))
        self.path.chmod(0o755)

    def calls(self):
        calls = [json.loads(x) for x in self.calls_file.read_text().splitlines()] if self.calls_file.exists() else []
        self.calls_file.unlink(missing_ok=True)
        return calls

    def state(self):
        return self.state_file.read_text()


def test_systemd_pause_and_resume(service, tmp_path):
    systemctl = FakeManager(tmp_path, "systemctl")
    args = dict(service.args, manager="systemd", unit="sglang-small", systemctl=str(systemctl.path), pidfile=OMIT)
    args = {k: v for k, v in args.items() if v is not OMIT}
    show = ["show", "-p", "ActiveState,MainPID,Transient", "sglang-small.service"]

    failed, paused = run_module(paused_service.main, args)
    assert not failed, paused
    assert (paused["changed"], paused["how"], paused["pid"]) == (True, "systemctl stop", os.getpid())
    assert "environment_names" not in paused
    assert systemctl.calls() == [show, ["stop", "sglang-small.service"]]
    params = service.lines()[-1]["params"]
    assert params == {"manager": "systemd", "name": "original-a", "unit": "sglang-small.service", "pid": os.getpid(),
                      "start_time": _ledger_proc.read_proc_stat(os.getpid())["start_time"], "start_timeout": 10.0,
                      "how": "systemctl stop"}

    failed, again = run_module(paused_service.main, args)
    assert not failed and again["changed"] is False and again["how"] == "already paused"
    assert systemctl.calls() == [show]

    failed, resumed = run_module(paused_service.main, dict(args, state="resumed"))
    assert not failed, resumed
    assert (resumed["changed"], resumed["how"], resumed["pid"]) == (True, "started", os.getpid())
    assert resumed["message"] == "started unit sglang-small.service again"
    assert systemctl.calls() == [["is-active", "sglang-small.service"], ["start", "sglang-small.service"],
                                 ["is-active", "sglang-small.service"],
                                 ["show", "-p", "ActiveState,MainPID", "sglang-small.service"]]
    assert systemctl.state() == "running"


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_container_pause_and_resume(service, tmp_path, engine):
    binary = FakeManager(tmp_path, engine)
    args = {k: v for k, v in service.args.items() if k != "pidfile"}
    args.update(manager=engine, container="sglang-small", stop_timeout_s=2.5, **{engine: str(binary.path)})
    running = ["container", "inspect", "-f", "{{.State.Running}} {{.State.Pid}}", "sglang-small"]

    failed, paused = run_module(paused_service.main, args)
    assert not failed, paused
    assert (paused["changed"], paused["how"], paused["pid"]) == (True, f"{engine} stop", os.getpid())
    assert binary.calls() == [running, ["container", "inspect", "-f", "{{.HostConfig.AutoRemove}}", "sglang-small"],
                              ["stop", "-t", "3", "sglang-small"]]
    assert service.lines()[-1]["params"]["container"] == "sglang-small"

    failed, again = run_module(paused_service.main, args)
    assert not failed and again["changed"] is False and binary.calls() == [running]

    failed, resumed = run_module(paused_service.main, dict(args, state="resumed"))
    assert not failed and resumed["message"] == f"started {engine} container sglang-small again"
    status = ["container", "inspect", "-f", "{{.State.Status}}", "sglang-small"]
    assert binary.calls() == [status, ["start", "sglang-small"], status, running]
    assert resumed["pid"] == os.getpid()


def test_a_container_defaults_to_the_service_name(service, tmp_path):
    docker = FakeManager(tmp_path, "docker")
    args = dict(service.args, manager="docker", docker=str(docker.path), _ansible_check_mode=True)
    failed, result = run_module(paused_service.main, args)
    assert not failed and result["changed"] is True
    assert docker.calls()[0][-1] == "original-a" and docker.state() == "running"
    assert service.lines() == []


@pytest.mark.parametrize(("manager", "state", "flags", "message"), [
    ("systemd", "running", "transient",
     "unit original-a.service of service original-a is transient (systemd-run): stopping it unloads it, so systemctl "
     "start could not resume it; nothing was paused"),
    ("systemd", "stopped", "", "service original-a is not running (unit original-a.service is inactive): nothing to "
                               "pause"),
    ("docker", "running", "autoremove", "docker container original-a of service original-a was started with --rm: "
                                        "stopping it removes it, so it could not be resumed; nothing was paused"),
    ("podman", "absent", "", "service original-a is not running (there is no podman container original-a): nothing "
                             "to pause"),
    ("docker", "stopped", "", "service original-a is not running (docker container original-a is not running): "
                              "nothing to pause"),
])
def test_services_that_cannot_be_paused(service, tmp_path, manager, state, flags, message):
    binary = FakeManager(tmp_path, "systemctl" if manager == "systemd" else manager, state=state, flags=flags)
    args = dict(service.args, manager=manager, **{"systemctl" if manager == "systemd" else manager: str(binary.path)})
    failed, result = run_module(paused_service.main, args)
    assert failed and result["msg"] == message
    assert binary.state() == state and service.lines() == []


def test_a_failed_stop_leaves_the_entry_pending(service, tmp_path):
    systemctl = FakeManager(tmp_path, "systemctl")
    systemctl.path.write_text(systemctl.path.read_text().replace(
        'elif args[0] == "stop":\n', 'elif args[0] == "stop":\n    sys.stderr.write("Access denied\\n")\n'
                                     '    sys.exit(4)\n'))
    failed, result = run_module(paused_service.main, dict(service.args, manager="systemd",
                                                          systemctl=str(systemctl.path)))
    assert failed and result["rc"] == 4
    assert result["msg"] == (
        f"could not stop service original-a (unit original-a.service) (ledger entry {result['entry_id']} stays "
        f"pending: its undo starts the service again if it is down): {systemctl.path} stop original-a.service "
        "exited 4: Access denied")
    assert [x["state"] for x in service.lines()] == ["pending"]


# --- options and documentation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (dict(name=""), "name must be the name of the service (one line, not empty), got ''"),
    (dict(name="a\nb"), "name must be the name of the service"),
    (dict(stop_timeout_s=-1), "stop_timeout_s must be a finite number of seconds, not negative, got -1.0"),
    (dict(start_timeout_s=float("inf")), "start_timeout_s must be a finite number of seconds, not negative, got inf"),
    (dict(pidfile=OMIT), "manager=process state=paused needs pidfile"),
    (dict(run_id=OMIT), "state is paused but all of the following are missing: run_id"),
    (dict(manager="systemd", unit="a b"), '"unit" must be a service unit name'),
    (dict(manager="docker", container="-x"), "a container name must match"),
    (dict(manager="podman", name="original a"), "a container name must match"),
    (dict(state="stopped"), "value of state must be one of: paused, resumed"),
])
def test_bad_options(service, args, message):
    args = {k: v for k, v in dict(service.args, **args).items() if v is not OMIT}
    failed, result = run_module(paused_service.main, args)
    assert failed and message in result["msg"], result["msg"]
    assert service.lines() == []


def test_argument_spec_matches_documentation():
    options = documented_options(paused_service)  # its ledger options from the ledger doc fragment
    with set_module_args({"name": "x", "ledger_dir": "/l", "ledger_host": "h", "state": "resumed"}):
        spec = paused_service.build_module().argument_spec

    def shape(opts):
        return {name: (o["type"], o.get("default"), o.get("required", False), tuple(o.get("choices", ())),
                       o.get("elements")) for name, o in opts.items()}

    assert shape(options) == shape(spec)


def test_documentation_parses_and_every_return_says_when():
    yaml.safe_load(paused_service.EXAMPLES)
    returns = yaml.safe_load(paused_service.RETURN)
    assert set(returns) == {"state", "entry_id", "pid", "how", "message", "environment_names", "log_path", "undone"}
    assert all("returned" in r for r in returns.values())

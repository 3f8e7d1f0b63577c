# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the process managers: the exact argv and unit text of the command builders, the parsers of what
systemctl and the container engines print, and spawn_detached on real processes."""

import os
import pwd
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc
from ansible_collections.inferlab.distributed.plugins.module_utils import _process_manager as pm

REPO_ROOT = Path(__file__).resolve().parents[4]
HOST = "lab-a"
SGLANG = ["/opt/sglang/bin/python", "-m", "sglang.launch_server", "--tp", "2"]


@pytest.fixture
def spawned():
    """Pids spawn_detached starts in a test; each is killed (its whole process group) and reaped at the end."""
    pids = []
    yield pids
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc = _ledger_proc.SPAWNED.pop(pid, None)
        if proc is not None:
            proc.wait(timeout=10)


def spawn(spawned, tmp_path, argv, environment=None, **kwargs):
    pid = pm.spawn_detached(argv, environment or {}, str(tmp_path / "logs" / "p.log"),
                            str(tmp_path / "run" / "p.pid"), **kwargs)
    spawned.append(pid)
    return pid


# --- systemd: exact argv and unit text --------------------------------------------------------------------------

SYSTEMD_CASES = [
    pytest.param(
        dict(unit="inferlab-rank0", argv=["sleep", "30"]),
        ["systemd-run", "--unit=inferlab-rank0.service", "--collect", "--property=KillMode=control-group",
         "--property=TimeoutStopSec=30s", "--", "sleep", "30"],
        id="minimal"),
    pytest.param(
        dict(unit="inferlab-rank0.service", argv=SGLANG,
             env_file="/var/lib/inferlab/env/inferlab-rank0.service.env",
             working_dir="/srv/sglang", properties=["MemoryMax=100G", "LimitMEMLOCK=infinity"],
             log_path="/var/lib/inferlab/logs/rank0.log", stop_timeout=45, systemd_run="/usr/bin/systemd-run"),
        ["/usr/bin/systemd-run", "--unit=inferlab-rank0.service", "--collect", "--property=KillMode=control-group",
         "--property=TimeoutStopSec=45s", "--property=MemoryMax=100G", "--property=LimitMEMLOCK=infinity",
         "--property=EnvironmentFile=/var/lib/inferlab/env/inferlab-rank0.service.env",
         "--working-directory=/srv/sglang",
         "--property=StandardOutput=append:/var/lib/inferlab/logs/rank0.log",
         "--property=StandardError=append:/var/lib/inferlab/logs/rank0.log",
         "--", *SGLANG],
        id="everything"),
    pytest.param(
        dict(unit="watchdog", argv=["python3", "-c", "print('$HOME 100%')"], stop_timeout=2.5),
        ["systemd-run", "--unit=watchdog.service", "--collect", "--property=KillMode=control-group",
         "--property=TimeoutStopSec=2500ms", "--", "python3", "-c", "print('$HOME 100%')"],
        id="fractional_timeout_and_no_shell_quoting_in_argv"),
]


@pytest.mark.parametrize(("kwargs", "expected"), SYSTEMD_CASES)
def test_systemd_run_argv(kwargs, expected):
    assert pm.systemd_run_argv(**kwargs) == expected


UNIT_TEXT_CASES = [
    pytest.param(
        dict(unit="inferlab-rank0", argv=["sleep", "30"]),
        """\
# /run/systemd/transient/inferlab-rank0.service
# This is a transient unit file, created programmatically via the systemd API. Do not edit.
[Unit]
Description=sleep 30
CollectMode=inactive-or-failed

[Service]
KillMode=control-group
TimeoutStopSec=30s
ExecStart="sleep" "30"
""",
        id="minimal"),
    pytest.param(
        dict(unit="inferlab-rank0", argv=SGLANG, env_file="/var/lib/inferlab/env/inferlab-rank0.service.env",
             working_dir="/srv", properties=["MemoryMax=100G"], log_path="/var/log/r0.log", stop_timeout=45),
        """\
# /run/systemd/transient/inferlab-rank0.service
# This is a transient unit file, created programmatically via the systemd API. Do not edit.
[Unit]
Description=/opt/sglang/bin/python -m sglang.launch_server --tp 2
CollectMode=inactive-or-failed

[Service]
KillMode=control-group
TimeoutStopSec=45s
MemoryMax=100G
EnvironmentFile=/var/lib/inferlab/env/inferlab-rank0.service.env
WorkingDirectory=/srv
StandardOutput=append:/var/log/r0.log
StandardError=append:/var/log/r0.log
ExecStart="/opt/sglang/bin/python" "-m" "sglang.launch_server" "--tp" "2"
""",
        id="everything"),
    pytest.param(
        # % starts a specifier everywhere in a unit file, $ a variable in ExecStart: both are doubled there
        dict(unit="w", argv=["/bin/sh", "-c", 'echo "$HOME" 100% \\ done'], env_file="/state/env/50%.env",
             log_path="/logs/%h.log"),
        """\
# /run/systemd/transient/w.service
# This is a transient unit file, created programmatically via the systemd API. Do not edit.
[Unit]
Description=/bin/sh -c echo "$HOME" 100%% \\ done
CollectMode=inactive-or-failed

[Service]
KillMode=control-group
TimeoutStopSec=30s
EnvironmentFile=/state/env/50%%.env
StandardOutput=append:/logs/%%h.log
StandardError=append:/logs/%%h.log
ExecStart="/bin/sh" "-c" "echo \\"$$HOME\\" 100%% \\\\ done"
""",
        id="escaping"),
]


@pytest.mark.parametrize(("kwargs", "expected"), UNIT_TEXT_CASES)
def test_systemd_unit_text(kwargs, expected):
    assert pm.systemd_unit_text(**kwargs) == expected


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(unit="inferlab rank0", argv=["x"]), '"unit" must be a service unit name'),
    (dict(unit="-x", argv=["x"]), "must be a service unit name"),
    (dict(unit="inferlab.timer", argv=["x"]), "must be a service unit name"),
    (dict(unit="u", argv=[]), "argv must be a non-empty list of strings"),
    (dict(unit="u", argv="sleep 30"), "argv must be a non-empty list of strings"),
    (dict(unit="u", argv=["sleep", 30]), "argv must be a non-empty list of strings"),
    (dict(unit="u", argv=["x"], env_file="u.env"), "env_file must be an absolute path"),
    (dict(unit="u", argv=["x"], properties=["KillMode=mixed"]), "property KillMode is always control-group"),
    (dict(unit="u", argv=["x"], properties=["TimeoutStopSec=5"]), "property TimeoutStopSec is set from the stop"),
    (dict(unit="u", argv=["x"], properties=["StandardOutput=null"], log_path="/l"), "is set from log_path"),
    (dict(unit="u", argv=["x"], properties=["MemoryMax"]), "must read NAME=VALUE on one line"),
    (dict(unit="u", argv=["x"], properties=["A=1\nExecStart=/bin/evil"]), "must read NAME=VALUE on one line"),
    (dict(unit="u", argv=["x"], working_dir="srv"), "working_dir must be an absolute path"),
    (dict(unit="u", argv=["x"], log_path="r0.log"), "log_path must be an absolute path"),
    (dict(unit="u", argv=["x"], stop_timeout=-1), "must be a non-negative number of seconds"),
])
def test_systemd_bad_arguments(kwargs, message):
    with pytest.raises(pm.ProcessManagerError, match=re.escape(message)):
        pm.systemd_run_argv(**kwargs)
    with pytest.raises(pm.ProcessManagerError, match=re.escape(message)):
        pm.systemd_unit_text(**kwargs)


def test_a_user_property_may_set_the_log_when_log_path_does_not():
    assert pm.systemd_run_argv("u", ["x"], properties=["StandardOutput=journal"])[5] == (
        "--property=StandardOutput=journal")


def test_systemctl_status_argv():
    assert pm.systemctl_status_argv("inferlab-rank0", "/usr/bin/systemctl") == [
        "/usr/bin/systemctl", "show", "-p", "ActiveState,MainPID", "inferlab-rank0.service"]


@pytest.mark.parametrize(("text", "expected"), [
    ("MainPID=4242\nActiveState=active\n", {"active_state": "active", "main_pid": 4242, "running": True}),
    ("ActiveState=activating\nMainPID=4242\n", {"active_state": "activating", "main_pid": 4242, "running": True}),
    # what systemctl prints for a unit that does not exist (and exits 0)
    ("MainPID=0\nActiveState=inactive\n", {"active_state": "inactive", "main_pid": None, "running": False}),
    ("MainPID=0\nActiveState=failed\n\n", {"active_state": "failed", "main_pid": None, "running": False}),
    ("MainPID=17\nActiveState=deactivating\n", {"active_state": "deactivating", "main_pid": 17, "running": False}),
])
def test_parse_systemctl_show(text, expected):
    assert pm.parse_systemctl_show(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "did not report ActiveState, MainPID"),
    ("MainPID=1\n", "did not report ActiveState"),
    ("System has not been booted with systemd as init system (PID 1). Can't operate.\n", "not KEY=VALUE"),
    ("MainPID=abc\nActiveState=active\n", "MainPID='abc', not a number"),
    ("MainPID=-1\nActiveState=active\n", "not a number"),
    ("=active\n", "not KEY=VALUE"),
])
def test_parse_systemctl_show_malformed(text, message):
    with pytest.raises(pm.ProcessManagerError, match=re.escape(message)):
        pm.parse_systemctl_show(text)


# --- containers: exact argv -------------------------------------------------------------------------------------

CONTAINER_CASES = [
    pytest.param(
        dict(engine="docker", name="rank0", image="lmsysorg/sglang:v0.5.6", argv=SGLANG),
        ["docker", "run", "-d", "--name", "rank0", "--network", "host", "--ipc", "host", "--gpus", "all",
         "lmsysorg/sglang:v0.5.6", *SGLANG],
        id="docker_gpus"),
    pytest.param(
        dict(engine="podman", name="rank0", image="lmsysorg/sglang:v0.5.6", argv=SGLANG),
        ["podman", "run", "-d", "--name", "rank0", "--network", "host", "--ipc", "host",
         "--device", "nvidia.com/gpu=all", "lmsysorg/sglang:v0.5.6", *SGLANG],
        id="podman_gpus_are_a_cdi_device"),
    pytest.param(
        dict(engine="docker", name="rank1", image="img:1", argv=["python3", "-m", "x"],
             env_file="/var/lib/inferlab/env/docker-rank1.env",
             options=["--shm-size=32g", "--ulimit", "memlock=-1"], volumes=["/models:/models:ro", "hf:/root/.cache"],
             binary="/usr/bin/docker"),
        ["/usr/bin/docker", "run", "-d", "--name", "rank1", "--network", "host", "--ipc", "host", "--gpus", "all",
         "--env-file", "/var/lib/inferlab/env/docker-rank1.env",
         "-v", "/models:/models:ro", "-v", "hf:/root/.cache",
         "--shm-size=32g", "--ulimit", "memlock=-1", "img:1", "python3", "-m", "x"],
        id="docker_env_volumes_options"),
    pytest.param(
        dict(engine="podman", name="rank1", image="img:1", argv=["python3"], env_file="/s/env/podman-rank1.env",
             log_path="/var/lib/inferlab/logs/rank1.log", gpus=False),
        ["podman", "run", "-d", "--name", "rank1", "--network", "host", "--ipc", "host", "--env-file",
         "/s/env/podman-rank1.env",
         "--log-driver", "k8s-file", "--log-opt", "path=/var/lib/inferlab/logs/rank1.log", "img:1", "python3"],
        id="podman_log_file_without_gpus"),
    pytest.param(
        dict(engine="docker", name="prober.1", image="registry.local:5000/prober@sha256:abc", argv=None, gpus=False),
        ["docker", "run", "-d", "--name", "prober.1", "--network", "host", "--ipc", "host",
         "registry.local:5000/prober@sha256:abc"],
        id="the_image_s_own_command"),
]


@pytest.mark.parametrize(("kwargs", "expected"), CONTAINER_CASES)
def test_container_run_argv(kwargs, expected):
    assert pm.container_run_argv(**kwargs) == expected


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(engine="nerdctl", name="r", image="i", argv=["x"]), "container engine must be docker or podman"),
    (dict(engine="docker", name="-r", image="i", argv=["x"]), "name must match [A-Za-z0-9][A-Za-z0-9_.-]*"),
    (dict(engine="docker", name="rank 0", image="i", argv=["x"]), "name must match"),
    (dict(engine="docker", name="r/0", image="i", argv=["x"]), "name must match"),
    (dict(engine="docker", name="", image="i", argv=["x"]), "name must match"),
    (dict(engine="docker", name="r", image="", argv=["x"]), "image must be an image reference"),
    (dict(engine="docker", name="r", image="--privileged", argv=["x"]), "image must be an image reference"),
    (dict(engine="docker", name="r", image="i", argv=["x"], volumes=["/models"]), "a volume must read SRC:DST"),
    (dict(engine="docker", name="r", image="i", argv=["x"], volumes=["/m:models"]), "DST absolute"),
    (dict(engine="docker", name="r", image="i", argv=["x"], volumes=["/m:/m:"]), "a volume must read"),
    (dict(engine="docker", name="r", image="i", argv=["x"], options=[1]), "container options must be strings"),
    (dict(engine="docker", name="r", image="i", argv=["x"], log_path="/l.log"),
     "docker cannot write a container log to a chosen file"),
    (dict(engine="podman", name="r", image="i", argv=["x"], log_path="l.log"), "log_path must be an absolute"),
])
def test_container_bad_arguments(kwargs, message):
    with pytest.raises(pm.ProcessManagerError, match=re.escape(message)):
        pm.container_run_argv(**kwargs)


def test_container_status_and_logs_argv():
    assert pm.container_status_argv("podman", "rank0") == [
        "podman", "container", "inspect", "-f", "{{.State.Running}} {{.State.Pid}}", "rank0"]
    assert pm.container_logs_argv("docker", "rank0", 40, "/usr/bin/docker") == [
        "/usr/bin/docker", "logs", "--tail", "40", "rank0"]


@pytest.mark.parametrize(("rc", "out", "err", "expected"), [
    (0, "true 4321\n", "", {"exists": True, "running": True, "pid": 4321}),
    (0, "false 0\n", "", {"exists": True, "running": False, "pid": None}),
    (1, "", "Error response from daemon: No such container: rank0\n",
     {"exists": False, "running": False, "pid": None}),
    (1, "", "Error: No such object: rank0\n", {"exists": False, "running": False, "pid": None}),
    (125, "", 'Error: no such container "rank0"\n', {"exists": False, "running": False, "pid": None}),
])
def test_parse_container_status(rc, out, err, expected):
    assert pm.parse_container_status(rc, out, err) == expected


@pytest.mark.parametrize(("rc", "out", "err", "message"), [
    (1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
     "container inspect exited 1: Cannot connect to the Docker daemon"),
    (0, "", "", "printed '', not \"<running> <pid>\""),
    (0, "running 12\n", "", "printed 'running 12\\n'"),
    (0, "true\n", "", "not \"<running> <pid>\""),
    (0, "true -1\n", "", "not \"<running> <pid>\""),
    (0, "<no value> <no value>\n", "", "not \"<running> <pid>\""),
])
def test_parse_container_status_malformed(rc, out, err, message):
    with pytest.raises(pm.ProcessManagerError, match=re.escape(message)):
        pm.parse_container_status(rc, out, err)


# --- the ledger params and entries of a managed process ---------------------------------------------------------


def test_ledger_params_pass_the_kind_checks(tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    for manager, kwargs in (
            ("process", dict(pidfile="/run/r0.pid", argv=SGLANG)),
            ("systemd", dict(unit="inferlab-r0", command=["systemd-run", "--", "x"])),
            ("podman", dict(name="r0", command=["podman", "run", "img"], stop_timeout=2.5))):
        params = pm.ledger_params(manager, **kwargs)
        line = _ledger_core.record(ledger_dir, HOST, pm.LEDGER_KINDS[manager], params)
        assert line["params"] == params, manager
    assert pm.ledger_params("process", pidfile="/run/r0.pid", argv=SGLANG) == {
        "pidfile": "/run/r0.pid", "cmdline": SGLANG, "stop_timeout": 30.0, "process_group": True}
    assert pm.ledger_params("systemd", unit="u", command=["c"], stop_timeout=5) == {
        "unit": "u.service", "command": ["c"], "stop_timeout": 5.0}


def test_open_entries_picks_this_name_s_open_entries_only(tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    mine = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": "/run/r0.pid", "cmdline": ["a"]})
    other = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": "/run/r1.pid", "cmdline": ["a"]})
    closed = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": "/run//r0.pid", "cmdline": ["b"]})
    _ledger_core.mark(ledger_dir, HOST, closed["id"], "undone")
    unit = _ledger_core.record(ledger_dir, HOST, "systemd_unit", {"unit": "inferlab-r0"})
    docker = _ledger_core.record(ledger_dir, HOST, "container", {"engine": "docker", "name": "r0"})
    _ledger_core.record(ledger_dir, HOST, "container", {"engine": "podman", "name": "r0"})
    again = _ledger_core.record(ledger_dir, HOST, "process", {"pidfile": "/run/./r0.pid", "cmdline": ["c"]})

    def ids(manager, **identity):
        return [e["id"] for e in pm.open_entries(ledger_dir, HOST, manager, pm.identity_params(manager, **identity))]

    assert ids("process", pidfile="/run/r0.pid") == [mine["id"], again["id"]]
    assert ids("process", pidfile="/run/r1.pid") == [other["id"]]
    assert ids("systemd", unit="inferlab-r0.service") == [unit["id"]]
    assert ids("docker", name="r0") == [docker["id"]]
    assert ids("process", pidfile="/run/none.pid") == []


# --- the process manager on real processes -----------------------------------------------------------------------


def test_spawn_detached_writes_the_pidfile_and_the_log_and_detaches(spawned, tmp_path):
    argv = [sys.executable, "-c", "import os, sys, time; print('up', os.getcwd(), flush=True); "
                                  "print('err', file=sys.stderr, flush=True); time.sleep(30)"]
    pid = spawn(spawned, tmp_path, argv, {"NCCL_IB_DISABLE": 1, "PATH": "/opt/bin:/usr/bin:/bin"})
    assert (tmp_path / "run" / "p.pid").read_text() == f"{pid}\n"
    assert not [p for p in (tmp_path / "run").iterdir() if p.name != "p.pid"], "temporary pidfile left behind"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "logs").stat().st_mode & 0o777 == 0o755 & ~umask
    deadline = time.monotonic() + 10
    while "err" not in (tmp_path / "logs" / "p.log").read_text():
        assert time.monotonic() < deadline, "the process wrote nothing to its log"
        time.sleep(0.02)
    assert (tmp_path / "logs" / "p.log").read_text() == "up /\nerr\n"
    assert _ledger_proc.read_proc_cmdline(pid) == argv
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid, "not the leader of a session of its own"
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2") == str(tmp_path / "logs" / "p.log")
    assert sorted(os.listdir(f"/proc/{pid}/fd")) == ["0", "1", "2"], "it inherited other descriptors"
    assert pm.read_proc_environ(pid) == {"PATH": "/opt/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                                         "HOME": pwd.getpwuid(os.geteuid()).pw_dir, "NCCL_IB_DISABLE": "1"}


def test_the_log_is_appended_and_working_dir_used(spawned, tmp_path):
    log = tmp_path / "logs" / "p.log"
    log.parent.mkdir()
    log.write_text("earlier run\n")
    pid = spawn(spawned, tmp_path, ["sh", "-c", "pwd; exec sleep 30"], working_dir=str(tmp_path))
    deadline = time.monotonic() + 10
    while log.read_text().count("\n") < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert log.read_text() == f"earlier run\n{tmp_path}\n"
    assert pm.log_tail(str(log), 40, start=len("earlier run\n")) == str(tmp_path)
    assert pm.wait_alive(pid, 0.2)


def test_a_spawned_process_outlives_its_starter_without_holding_its_pipes(tmp_path):
    """The Ansible module over SSH with pipelining: its stdout and stderr are pipes that must reach EOF when it
    exits. capture_output waits for EOF, so a child that kept them would hang this run until the timeout."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]);"
            "from ansible_collections.inferlab.distributed.plugins.module_utils import _process_manager as pm;"
            "print(pm.spawn_detached(['sleep', '30'], {}, sys.argv[2] + '/p.log', sys.argv[2] + '/p.pid'))")
    started = time.monotonic()
    collections_dir = Path(pm.__file__).parents[5]  # above ansible_collections/ (not resolved: .collections is a link)
    out = subprocess.run([sys.executable, "-c", code, str(collections_dir), str(tmp_path)],
                         capture_output=True, text=True, timeout=20, check=True)
    pid = int(out.stdout)
    try:
        assert time.monotonic() - started < 10
        assert _ledger_proc.pid_alive(pid), "the process died with its starter"
        assert _ledger_proc.read_proc_cmdline(pid) == ["sleep", "30"]
        assert pm.process_status(str(tmp_path / "p.pid"), ["sleep", "30"])["running"] is True
    finally:
        os.killpg(pid, signal.SIGKILL)


def test_spawn_failure_writes_no_pidfile(tmp_path):
    with pytest.raises(pm.ProcessManagerError, match="cannot start /nonexistent/server: .*No such file"):
        pm.spawn_detached(["/nonexistent/server"], {}, str(tmp_path / "p.log"), str(tmp_path / "p.pid"))
    assert not (tmp_path / "p.pid").exists()
    with pytest.raises(pm.ProcessManagerError, match="pidfile must be an absolute path"):
        pm.spawn_detached(["sleep", "1"], {}, str(tmp_path / "p.log"), "p.pid")


def test_process_status(spawned, tmp_path):
    pidfile = str(tmp_path / "run" / "p.pid")
    assert pm.process_status(pidfile, ["sleep", "30"]) == {
        "running": False, "pid": None, "start_time": None, "cmdline": None, "environment_matches": None}
    pid = spawn(spawned, tmp_path, ["sleep", "30"], {"A": "1"})
    status = pm.process_status(pidfile, ["sleep", "30"], {"A": "1"})
    assert status == {"running": True, "pid": pid, "start_time": _ledger_proc.process_identity(pid)["start_time"],
                      "cmdline": ["sleep", "30"], "environment_matches": True}
    assert pm.process_status(pidfile, ["sleep", "30"], {"A": "2"})["environment_matches"] is False
    assert pm.process_status(pidfile, ["sleep", "30"])["environment_matches"] is None
    # the pidfile's pid runs another program: not ours, whatever it is
    assert pm.process_status(pidfile, ["sleep", "31"])["running"] is False
    Path(pidfile).write_text("not a pid\n")
    assert pm.process_status(pidfile, ["sleep", "30"])["running"] is False


def test_a_dead_process_reads_not_running(spawned, tmp_path):
    pid = spawn(spawned, tmp_path, ["sh", "-c", "exit 3"])
    assert pm.wait_alive(pid, 5) is False
    assert pm.exit_status(pid) == "exited with status 3"
    assert pm.process_status(str(tmp_path / "run" / "p.pid"), ["sh", "-c", "exit 3"])["running"] is False
    pid = spawn(spawned, tmp_path, ["sleep", "30"])
    assert pm.exit_status(pid) is None
    os.kill(pid, signal.SIGKILL)
    assert pm.wait_alive(pid, 5) is False
    assert pm.exit_status(pid) == "killed by signal 9"
    assert pm.exit_status(1) is None


def test_wait_alive_returns_as_soon_as_the_process_dies(spawned, tmp_path):
    pid = spawn(spawned, tmp_path, ["sleep", "0.3"])
    started = time.monotonic()
    assert pm.wait_alive(pid, 10) is False
    assert time.monotonic() - started < 5


def test_a_script_run_through_its_interpreter_still_matches(spawned, tmp_path):
    script = tmp_path / "server"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    script.chmod(0o755)
    spawn(spawned, tmp_path, [str(script), "--port", "1"])
    status = pm.process_status(str(tmp_path / "run" / "p.pid"), [str(script), "--port", "1"])
    assert status["cmdline"] == [sys.executable, str(script), "--port", "1"]
    assert status["running"] is True


@pytest.mark.parametrize(("argv", "actual", "matches"), [
    (["sleep", "30"], ["sleep", "30"], True),
    (["sleep", "30"], ["sleep", "31"], False),
    (["sleep", "30"], None, False),
    (["sleep", "30"], [], False),
    (["/opt/v/bin/sglang", "--tp", "2"], ["/opt/v/bin/python3", "/opt/v/bin/sglang", "--tp", "2"], True),
    (["sglang", "--tp", "2"], ["/opt/v/bin/python3", "/opt/v/bin/sglang", "--tp", "2"], True),
    # "#!/usr/bin/env python3": env with its one argument, then python3 once env has exec'd it
    (["sglang", "--tp", "2"], ["/usr/bin/env", "python3", "/opt/v/bin/sglang", "--tp", "2"], True),
    (["sglang", "--tp", "2"], ["python3", "/opt/v/bin/sglang", "--tp", "2"], True),
    (["sglang", "--tp", "2"], ["/usr/bin/python3", "-u", "/opt/v/bin/sglang", "--tp", "2"], True),
    (["/opt/v/bin/sglang", "--tp", "2"], ["/usr/bin/python3", "/opt/w/bin/sglang", "--tp", "2"], False),
    (["sglang", "--tp", "2"], ["/usr/bin/python3", "/opt/v/bin/sglang", "--tp", "4"], False),
    (["x"], ["sh", "x"], True),
    (["x"], ["sh", "-e", "-x", "x"], False),
])
def test_cmdline_matches(argv, actual, matches):
    assert pm.cmdline_matches(argv, actual) is matches


def test_read_proc_environ_of_a_fixture_and_a_missing_pid(tmp_path):
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "environ").write_bytes(b"A=1\0B=x=y\0JUNK\0\0")
    assert pm.read_proc_environ(77, str(tmp_path)) == {"A": "1", "B": "x=y"}
    assert pm.read_proc_environ(78, str(tmp_path)) is None


def test_spawn_environment_is_clean():
    env = pm.spawn_environment({"PATH": "/opt/bin", "X": 2.5})
    assert env == {"PATH": "/opt/bin", "LANG": "C.UTF-8", "HOME": pwd.getpwuid(os.geteuid()).pw_dir, "X": "2.5"}
    os.environ["INFERLAB_LEAK_TEST"] = "1"
    try:
        assert "INFERLAB_LEAK_TEST" not in pm.spawn_environment()
    finally:
        del os.environ["INFERLAB_LEAK_TEST"]


def test_log_tail(tmp_path):
    log = tmp_path / "x.log"
    assert pm.log_tail(str(log)) == ""
    assert pm.log_size(str(log)) == 0
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(100)) + b"bad \xff byte")
    assert pm.log_tail(str(log), 3) == "line 98\nline 99\nbad \ufffd byte"
    assert pm.log_tail(str(log), 0) == ""
    assert pm.log_tail(str(log), 40, start=pm.log_size(str(log))) == ""
    assert pm.log_tail(str(log), 40, start=len(b"".join(b"line %d\n" % i for i in range(98)))).splitlines() == [
        "line 98", "line 99", "bad \ufffd byte"]
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * (pm.LOG_TAIL_MAX_BYTES * 2) + b"\nlast\n")
    assert pm.log_tail(str(big), 1) == "last"


def test_write_pidfile_replaces_atomically(tmp_path):
    pidfile = tmp_path / "d" / "x.pid"
    _ledger_proc.write_pidfile(str(pidfile), 123)
    inode = pidfile.stat().st_ino
    _ledger_proc.write_pidfile(str(pidfile), 456)
    assert pidfile.read_text() == "456\n"
    assert pidfile.stat().st_ino != inode, "rewritten in place, not replaced"
    assert os.listdir(tmp_path / "d") == ["x.pid"]


@pytest.mark.parametrize("name", ["-x", "a b", "a/b", "", "é", ".hidden", None, 5])
def test_bad_names(name):
    with pytest.raises(pm.ProcessManagerError, match=re.escape("name must match [A-Za-z0-9][A-Za-z0-9_.-]*")):
        pm.check_name(name)


def test_module_utils_import_only_the_standard_library_and_the_ledger():
    source = (REPO_ROOT / "plugins" / "module_utils" / "_process_manager.py").read_text()
    imports = re.findall(r"^(?:from|import)\s+(\S+)", source, re.MULTILINE)
    assert [i for i in imports if i.startswith("ansible")] == [
        "ansible_collections.inferlab.distributed.plugins.module_utils"]


# --- the environment file of a systemd unit or a container -------------------------------------------------------

TRICKY = 'say "hi" $HOME `x` \\n 100% \\\\  '  # quotes, $, a backtick, backslashes, trailing spaces


def test_a_systemd_environment_file_quotes_every_value():
    assert pm.env_file_text("systemd", {"B": TRICKY, "A": 1, "NL": "one\ntwo"}) == (
        'A="1"\nB="say \\"hi\\" \\$HOME \\`x\\` \\\\n 100% \\\\\\\\  "\nNL="one\ntwo"\n')


def test_a_systemd_environment_file_reads_back_exactly_under_posix_double_quotes(tmp_path):
    """systemd.exec(5): a double-quoted value in an EnvironmentFile= is read with the escapes of a POSIX shell's
    double-quoted string. /bin/sh reads the file here and prints each value back."""
    environment = {"TRICKY": TRICKY, "NL": "one\ntwo", "EMPTY": "", "EQ": "a=b", "TOKEN": "hf_x'y"}
    path = tmp_path / "u.env"
    path.write_text(pm.env_file_text("systemd", environment))
    for key, value in environment.items():
        out = subprocess.run(["/bin/sh", "-c", f'. "$1"; printf %s "${key}"', "sh", str(path)],
                             check=True, capture_output=True, text=True).stdout
        assert out == value, key


def test_a_container_environment_file_is_verbatim_and_refuses_a_line_break():
    assert pm.env_file_text("docker", {"B": TRICKY, "A": "x=y"}) == f"A=x=y\nB={TRICKY}\n"
    with pytest.raises(pm.ProcessManagerError, match="environment variable NL holds a line break, which podman's "
                                                     "--env-file cannot carry"):
        pm.env_file_text("podman", {"NL": "one\ntwo"})
    with pytest.raises(pm.ProcessManagerError, match="container engine must be docker or podman"):
        pm.env_file_text("nerdctl", {"A": "1"})


def test_the_environment_file_lives_beside_the_ledger_and_is_written_0600(tmp_path):
    assert pm.env_file_path("/var/lib/inferlab/ledger/", "systemd", unit="inferlab-rank0") == (
        "/var/lib/inferlab/env/inferlab-rank0.service.env")
    assert pm.env_file_path("/var/lib/inferlab/ledger", "podman", name="rank1") == (
        "/var/lib/inferlab/env/podman-rank1.env")
    path = tmp_path / "env" / "u.env"
    pm.write_env_file(str(path), 'A="1"\n')
    pm.write_env_file(str(path), 'A="2"\n')  # replaced whole
    assert path.read_text() == 'A="2"\n' and os.listdir(path.parent) == ["u.env"]
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700

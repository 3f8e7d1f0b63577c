"""`python -m inferlab.system.liveness state`: the ledger role's check, on the controller, of the process a lock names
(its pid, with the start time and machine id the lock recorded when it has them)."""

import os
import subprocess
import sys

import pytest

from inferlab.system import liveness


def state(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferlab.system.liveness", "state", *args], capture_output=True,
                          text=True, check=False, timeout=60)


def test_a_live_pid_with_its_start_time_and_this_machine_is_alive():
    mine = str(liveness.start_time(os.getpid()))
    machine = liveness.machine_id() or ""
    assert state(str(os.getpid())).stdout == "alive\n"
    assert state(str(os.getpid()), mine, machine).stdout == "alive\n"


def test_a_reused_pid_a_dead_pid_and_another_machine():
    mine = liveness.start_time(os.getpid())
    assert state(str(os.getpid()), str(mine + 1)).stdout == "dead\n"  # the pid started at another time
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert state(str(ended.pid)).stdout == "dead\n"
    if liveness.machine_id():
        assert state(str(os.getpid()), "", "0" * 32).stdout == "elsewhere\n"


@pytest.mark.parametrize("args", [(), ("x",), ("1", "y"), ("1", "", "", "extra")])
def test_bad_arguments_say_the_usage_and_exit_2(args):
    done = state(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert "usage: python -m inferlab.system.liveness state PID [START_TIME [MACHINE_ID]]" in done.stderr

"""Whether the `inferlab run` that made a run directory still lives, judged as the ledger judges a process
(plugins/module_utils/_ledger_proc.same_process): its pid AND the start time /proc gives that pid, on the machine the
run was made on (its /etc/machine-id, not its hostname: two controllers may share a short hostname). A pid alone is
not enough: pids are reused, and a run directory copied from another machine names a pid of that machine.

The run's controller writes `controller_vars()` into its extra vars; run directories from before that have the pid
only, and for them a live pid counts only when its process started before the run did (a pid reused later cannot
be the run's controller).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

PROCFS = Path("/proc")
MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
PID_MAX = 2**22  # the kernel's PID_MAX_LIMIT: no pid is larger
# The extra vars that name a run's controller process (runner.run_playbook writes them into env/extravars).
PID_VAR = "inferlab_controller_pid"
START_TIME_VAR = "inferlab_controller_start_time"
MACHINE_ID_VAR = "inferlab_controller_machine_id"
CONTROLLER_VARS = (PID_VAR, START_TIME_VAR, MACHINE_ID_VAR)

ALIVE, DEAD, ELSEWHERE = "alive", "dead", "elsewhere"


def machine_id(files: tuple[Path, ...] = MACHINE_ID_FILES) -> str | None:
    """This machine's id (systemd's /etc/machine-id, else D-Bus's copy), or None where it has none."""
    for path in files:
        try:
            text = path.read_text().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return text
    return None


def valid_pid(value) -> int | None:
    """`value` as a pid when it can be one (an int in 1..PID_MAX), else None: a record may hold anything."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= PID_MAX else None


def stat_fields(pid: int, procfs: Path = PROCFS) -> list[str] | None:
    """/proc/PID/stat's fields from the third (state) on, or None when there is no such process."""
    try:
        raw = (procfs / str(pid) / "stat").read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    # field 2 (comm) is in parentheses and may itself hold ") ": the fields go on after the LAST ')'
    return raw[raw.rfind(")") + 2:].split()


def start_time(pid: int, procfs: Path = PROCFS) -> int | None:
    """The start time of a live (not zombie) process, in clock ticks after boot (/proc/PID/stat field 22), or None."""
    fields = stat_fields(pid, procfs)
    if not fields or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19]) if fields[19].isdigit() else None


def _boot_time(procfs: Path) -> float | None:
    try:
        lines = (procfs / "stat").read_text().splitlines()
    except OSError:
        return None
    return next((float(line.split()[1]) for line in lines if line.startswith("btime ")), None)


def started_at(pid: int, procfs: Path = PROCFS) -> float | None:
    """When a live process started, in seconds since the epoch (boot time + its start ticks), or None."""
    ticks, boot = start_time(pid, procfs), _boot_time(procfs)
    if ticks is None or boot is None:
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def controller_vars(pid: int | None = None, procfs: Path = PROCFS) -> dict:
    """The extra vars that let a later `runs list` tell whether this process (default: the caller) still works on
    its run: its pid, its start time and this machine's id."""
    pid = os.getpid() if pid is None else pid
    return {PID_VAR: pid, START_TIME_VAR: start_time(pid, procfs), MACHINE_ID_VAR: machine_id()}


def controller_state(extravars: dict, run_started: datetime | None = None, procfs: Path = PROCFS,
                     this_machine: str | None = None) -> str:
    """ALIVE when the run's controller (`extravars`: its PID_VAR, START_TIME_VAR, MACHINE_ID_VAR) still runs here,
    DEAD when it does not (or no valid pid is recorded), ELSEWHERE when it ran on another machine, whose processes
    cannot be checked from here. Without a recorded start time, a live pid counts only when its process started no
    later than `run_started` (the run directory's stamp)."""
    pid = valid_pid(extravars.get(PID_VAR))
    if pid is None:
        return DEAD
    recorded_machine = extravars.get(MACHINE_ID_VAR)
    this_machine = machine_id() if this_machine is None else this_machine
    if isinstance(recorded_machine, str) and recorded_machine and this_machine and recorded_machine != this_machine:
        return ELSEWHERE
    recorded_start = extravars.get(START_TIME_VAR)
    if isinstance(recorded_start, int) and not isinstance(recorded_start, bool):
        return ALIVE if start_time(pid, procfs) == recorded_start else DEAD
    began = started_at(pid, procfs)
    if began is None:
        return DEAD
    # the stamp has whole seconds and the controller started before it named the directory
    return ALIVE if run_started is None or began <= run_started.timestamp() + 1 else DEAD


def _optional(text: str, kind=str):
    return kind(text) if text else None


def main(argv: list[str] | None = None) -> int:
    """``state PID [START_TIME [MACHINE_ID]]``: prints alive, dead or elsewhere for a controller process as a ledger
    lock names it (the ledger role runs it on the controller before it takes a stale lock over; an empty
    START_TIME or MACHINE_ID is one the lock does not hold)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if not 2 <= len(args) <= 4 or args[0] != "state":
            raise ValueError(args)
        extravars = {PID_VAR: int(args[1]), START_TIME_VAR: _optional(args[2] if len(args) > 2 else "", int),
                     MACHINE_ID_VAR: _optional(args[3] if len(args) > 3 else "")}
    except ValueError:
        print("usage: python -m inferlab.system.liveness state PID [START_TIME [MACHINE_ID]]", file=sys.stderr)
        return 2
    print(controller_state(extravars))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""End a canceled playbook's whole process tree, before its restore takes the run's locks over.

ansible-runner ends a canceled ansible-playbook with SIGKILL to its process group. A process that made itself a
session or group leader (a strategy's worker, a task's helper) is outside that group: it lives on as an orphan of
init and goes on changing hosts while the restore runs. Its parent chain is known only while its parents live, so
the tree is found and ended before anything else is killed: every member is stopped (SIGSTOP, top-down, until a walk
finds no member it has not stopped: a stopped process forks nothing), then killed (SIGKILL). A process that detached
itself before the cancel (a managed process the run started, recorded in a ledger) is no longer in the tree, and is
the restore's to undo.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PROCFS = Path("/proc")
# how long end_tree waits for the killed members to be gone (SIGKILL is not refused; a process in uninterruptible
# sleep takes until its I/O ends)
GONE_WAIT_S = 5.0
# a tree that still grows after this many stop walks is forking faster than it can be stopped: kill what was found
MAX_STOP_WALKS = 50


def stat_fields(pid: int, procfs: Path = PROCFS) -> tuple[str, int, int] | None:
    """``(state, ppid, start_time)`` of ``pid`` from /proc/PID/stat, or None when it is gone."""
    try:
        raw = (procfs / str(pid) / "stat").read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # comm may hold ") ": fields start after the last ')'
    return fields[0], int(fields[1]), int(fields[19])


def parents(procfs: Path = PROCFS) -> dict[int, int]:
    """Every live process's parent: ``{pid: ppid}``."""
    found = {}
    for entry in procfs.iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name), procfs)
            if fields and fields[0] not in ("Z", "X"):
                found[int(entry.name)] = fields[1]
    return found


def descendants(root: int, procfs: Path = PROCFS) -> list[int]:
    """``root`` and every live process below it, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents(procfs).items():
        children.setdefault(ppid, []).append(pid)
    tree, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        if pid not in tree:
            tree.append(pid)
            queue.extend(children.get(pid, []))
    return tree


def send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def end_tree(root: int, procfs: Path = PROCFS, gone_wait_s: float = GONE_WAIT_S) -> list[int]:
    """Stop, then kill, ``root`` and every process below it; return the pids killed (root first). Each is killed
    only if it is still the process found in the walk (its start time), never a reused pid."""
    if stat_fields(root, procfs) is None:
        return []
    stopped: dict[int, int] = {}  # pid -> start time
    for _ in range(MAX_STOP_WALKS):
        new = [pid for pid in descendants(root, procfs) if pid not in stopped]
        if not new:
            break
        for pid in new:
            fields = stat_fields(pid, procfs)
            if fields is not None:
                stopped[pid] = fields[2]
                send(pid, signal.SIGSTOP)
    for pid, start_time in stopped.items():
        fields = stat_fields(pid, procfs)
        if fields is not None and fields[2] == start_time:
            send(pid, signal.SIGKILL)
    deadline = time.monotonic() + gone_wait_s
    while time.monotonic() < deadline and any(alive(pid, start, procfs) for pid, start in stopped.items()):
        time.sleep(0.02)
    return list(stopped)


def alive(pid: int, start_time: int, procfs: Path = PROCFS) -> bool:
    """Whether ``pid`` is still the live (not zombie) process that started at ``start_time``."""
    fields = stat_fields(pid, procfs)
    return fields is not None and fields[0] not in ("Z", "X") and fields[2] == start_time

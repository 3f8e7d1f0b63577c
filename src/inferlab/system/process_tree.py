"""End a canceled or killed run's processes on the controller, before a restore takes the run's locks over.

ansible-runner ends a canceled ansible-playbook with SIGKILL to its process group. A process that made itself a
session or group leader (ansible-core's task workers do) is outside that group: it lives on as an orphan of init and
goes on changing hosts while the restore runs. So a run's processes are found two ways: the tree below its
ansible-playbook (while its parents live), and the run's mark, ``INFERLAB_RUN_ID=<run id>`` in the environment
that `inferlab run` gives ansible-playbook and every process it starts inherits (found after a kill too, when the
tree is gone). Every member is stopped (SIGSTOP, walk after walk, until a walk finds no member it has not stopped: a
stopped process forks nothing), then killed (SIGKILL). A process that detached itself with an environment of its own
(a managed process the run started, recorded in a ledger) carries no mark, and is the restore's to undo.

    python -m inferlab.system.process_tree end-run RUN_ID   # what a killed run left on this machine; prints JSON
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from inferlab.system import liveness

PROCFS = liveness.PROCFS
RUN_MARK = "INFERLAB_RUN_ID"  # the environment variable that marks a run's processes
# how long end_tree waits for the killed members to be gone (SIGKILL is not refused; a process in uninterruptible
# sleep takes until its I/O ends)
GONE_WAIT_S = 5.0
# a tree that still grows after this many stop walks is forking faster than it can be stopped: kill what was found
MAX_STOP_WALKS = 50


def stat_fields(pid: int, procfs: Path = PROCFS) -> tuple[str, int, int] | None:
    """``(state, ppid, start_time)`` of ``pid`` from /proc/PID/stat, or None when it is gone."""
    fields = liveness.stat_fields(pid, procfs)
    if not fields or len(fields) < 20:
        return None
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


def marked(run_id: str, procfs: Path = PROCFS) -> list[int]:
    """Every live process, but this one, whose environment carries the run's mark (``INFERLAB_RUN_ID=run_id``)."""
    mark = f"{RUN_MARK}={run_id}".encode()
    found = []
    for entry in procfs.iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if mark in environ.split(b"\0"):
                found.append(int(entry.name))
    return found


def end_tree(root: int | None, run_id: str | None = None, procfs: Path = PROCFS,
             gone_wait_s: float = GONE_WAIT_S) -> list[int]:
    """Stop, then kill, ``root`` and every process below it, and every process that carries ``run_id``'s mark;
    return the pids killed (in the order found). Each is killed only if it is still the process found in the walk
    (its start time), never a reused pid."""
    def members() -> list[int]:
        tree = descendants(root, procfs) if root and stat_fields(root, procfs) else []
        return tree + [pid for pid in (marked(run_id, procfs) if run_id else []) if pid not in tree]

    stopped: dict[int, int] = {}  # pid -> start time
    for _walk in range(MAX_STOP_WALKS):
        new = [pid for pid in members() if pid not in stopped]
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
    return liveness.start_time(pid, procfs) == start_time


def main(argv: list[str] | None = None) -> int:
    """``end-run RUN_ID``: end what a killed run left on this machine (restore.yml runs it on the controller for
    the run whose stale lock it takes over); prints ``{"run_id", "ended"}``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "end-run" or not args[1]:
        print("usage: python -m inferlab.system.process_tree end-run RUN_ID", file=sys.stderr)
        return 2
    print(json.dumps({"run_id": args[1], "ended": end_tree(None, args[1])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

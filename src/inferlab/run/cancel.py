"""How a run is canceled: by a signal (SIGINT, SIGTERM, or SIGHUP: a closed terminal, a dropped SSH session) or
by the caller's cancel callback; either way the playbook's whole process tree is ended before the cancel is reported
to ansible-runner, so no orphan of the run changes a host while its restore runs.

A hang-up also leaves nobody to read the console: from then on, what the run prints goes to
``console-after-hangup.log`` in its run directory instead of a terminal that is gone (a write there would fail).
The restore playbook itself is never canceled by a hang-up (it is what puts production back): it only loses its
console the same way. The handlers stay installed through the restore after a cancel, so a second signal changes
nothing until ``inferlab run`` returns.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from inferlab.system import process_tree

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CONSOLE_AFTER_HANGUP = "console-after-hangup.log"


class Cancel:
    """ansible-runner's cancel callback for one run (call the object), and the signal handlers that request it.

    ``callback`` is the caller's (polled; True cancels), or None: then SIGINT, SIGTERM and SIGHUP cancel, when the
    run is started from the main thread. ``cancel_on_hangup`` is False for a restore. It sees every
    job event (``events``): the first one names ansible-playbook's pid, the root of the tree to end.
    """

    def __init__(self, run_dir: Path, run_id: str, callback: Callable[[], bool] | None = None,
                 cancel_on_hangup: bool = True):
        self.run_dir = run_dir
        self.run_id = run_id  # the mark of the run's processes (process_tree.RUN_MARK)
        self.callback = callback
        self.cancel_on_hangup = cancel_on_hangup
        self.requested_by: str | None = None  # a signal's name, or "callback"
        self.playbook_pid: int | None = None
        self.ended: list[int] = []  # the pids of the playbook's tree that the cancel killed
        self.saved: dict = {}

    def __enter__(self) -> Cancel:
        if self.callback is None and threading.current_thread() is threading.main_thread():
            self.saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
            for sig in SIGNALS:
                signal.signal(sig, self.on_signal)
        return self

    def __exit__(self, *exc_info) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)

    def on_signal(self, signum: int, _frame) -> None:
        if signum == signal.SIGHUP:
            detach_console(self.run_dir / CONSOLE_AFTER_HANGUP)
            if not self.cancel_on_hangup:
                return
        if self.requested_by is None:
            self.requested_by = signal.Signals(signum).name

    def events(self, handler: Callable[[dict], bool] | None) -> Callable[[dict], bool]:
        """ansible-runner's event handler: notes ansible-playbook's pid from the events, then calls ``handler``
        (True, keep the event, without one)."""
        def handle(event: dict) -> bool:
            if self.playbook_pid is None and isinstance(event.get("pid"), int):
                self.playbook_pid = event["pid"]
            return handler(event) if handler else True
        return handle

    def __call__(self) -> bool:
        """Polled by ansible-runner while the playbook runs: True once a cancel is requested, after the playbook's
        tree is ended (ansible-runner then kills what is left of its process group, and reports `canceled`)."""
        if self.requested_by is None and self.callback is not None and self.callback():
            self.requested_by = "callback"
        if self.requested_by is None:
            return False
        if not self.ended:
            self.ended = process_tree.end_tree(self.playbook_pid or playbook_child(), self.run_id)
        return True


def playbook_child() -> int | None:
    """This process's one ansible-playbook child, for a cancel that comes before the playbook's first event."""
    mine = [pid for pid, ppid in process_tree.parents().items() if ppid == os.getpid()]
    found = [pid for pid in mine if b"ansible-playbook" in read_cmdline(pid)]
    return found[0] if len(found) == 1 else None


def read_cmdline(pid: int) -> bytes:
    try:
        return (process_tree.PROCFS / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def detach_console(log_path: Path) -> None:
    """Point stdout and stderr (the file descriptors, so ansible-runner's writes follow) at ``log_path``: the
    terminal is gone, and a write to it would fail with EIO and end the run before its restore."""
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):  # what they buffered for the terminal goes to the log
        try:
            stream.flush()
        except (OSError, ValueError):
            pass

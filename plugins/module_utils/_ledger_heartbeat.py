# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heartbeat that keeps the dead man's switches renewed while the controller's playbook lives.

The experiment renews every armed switch at each stage's start; a stage can outlast the switch's deadline (a TP
server may take up to its readiness timeout to load, then the ladder and the trials run), and a renewal only at
stage starts would fire a switch in a healthy run. So once the switches are armed, the controller runs
``heartbeat``: it watches the ansible-playbook process of the run (its pid and start time) and, while that lives,
writes a line every interval to one ``renew`` process per host (through SSH, or directly for a host the controller
reaches locally). ``renew`` touches the switch's renew file for each line it reads, and returns at end of input.

The renewal is driven by input, never by a timer on the host: when the playbook dies, the heartbeat stops writing
and closes the pipes; when the controller or the network dies, no line arrives. Either way the renew files age and
each switch fires at its deadline, as it would with no heartbeat at all. One of the ledger's host-side modules (see
``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core as core
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ledger_core as core
    import inferlab_ledger_proc as proc

# how long the heartbeat waits for its renew processes to end after it closed their input, before it kills them
CHILD_EXIT_WAIT_S = 5.0
# how often the heartbeat looks at the watched process
WATCH_TICK_S = 1.0


def renew(path):
    """Set the renew file's times to now (a renewal the switch sees by the file's signature); False when it is gone.
    It is never created: the arming creates it, and a switch that is gone (disarmed, fired) removed it."""
    try:
        os.utime(path, None)
    except FileNotFoundError:
        return False
    return True


def renew_on_input(renew_file, stream):
    """Renew ``renew_file`` once for each line read from ``stream``; return the counts at end of input (the
    heartbeat stopped, or its connection closed)."""
    count, missing = 0, 0
    for line in stream:
        if line:
            if renew(renew_file):
                count += 1
            else:
                missing += 1
    gone = f'; {missing} found no renew file (no switch armed)' if missing else ''
    return {'changed': count > 0, 'renewals': count, 'missing': missing,
            'message': f'renewed {renew_file} {count} times{gone}; the heartbeat ended its input'}


def playbook_alive(pid, start_time, procfs_root='/proc'):
    """Whether the watched process still runs: the same pid with the same start time (a reused pid is not it)."""
    return proc.same_process(pid, start_time, procfs_root)


class _Stop(Exception):
    """Raised by the SIGTERM handler: the heartbeat's process entry was undone."""


def heartbeat(watch_pid, watch_start_time, children, interval_s, procfs_root='/proc', sleep=time.sleep,
              clock=time.monotonic, spawn=None):
    """While ``watch_pid`` (with ``watch_start_time``) lives, write a line every ``interval_s`` seconds to each
    child of ``children`` (``[{'name', 'argv'}]``: a ``renew`` process per host), starting it again when it ended
    (a network blip). The watched process is looked at every WATCH_TICK_S, so the renewals end within that of its
    death. Returns when it is gone or on SIGTERM, after closing every child's input and waiting for it (then killing
    what is left). ``sleep``, ``clock`` and ``spawn(argv)`` are injectable for tests."""
    spawn = spawn or (lambda argv: subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL))
    running = {}
    beats, restarts = 0, 0

    def on_sigterm(signum, frame):
        raise _Stop()

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread (tests)
        previous = None
    reason = None
    core.log(f'heartbeat for pid {watch_pid}: a line every {interval_s:g}s to {", ".join(c["name"] for c in children)}')
    next_beat = clock()
    try:
        while True:
            if not playbook_alive(watch_pid, watch_start_time, procfs_root):
                reason = f'the playbook (pid {watch_pid}) ended'
                break
            if clock() < next_beat:
                sleep(min(WATCH_TICK_S, next_beat - clock()))
                continue
            next_beat += interval_s
            for child in children:
                handle = running.get(child['name'])
                if handle is not None and handle.poll() is not None:
                    core.log(f'{child["name"]}: its renew process exited {handle.returncode}; starting it again')
                    handle, restarts = None, restarts + 1
                if handle is None:
                    try:
                        handle = running[child['name']] = spawn(child['argv'])
                    except OSError as exc:
                        core.log(f'{child["name"]}: cannot start its renew process: {exc}')
                        running.pop(child['name'], None)
                        continue
                try:
                    handle.stdin.write(b'\n')
                    handle.stdin.flush()
                except OSError:
                    pass  # it is exiting: the next beat starts it again
            beats += 1
    except _Stop:
        reason = 'stopped by SIGTERM (the undo of its process entry)'
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        _end_children(running.values())
    core.log(f'{reason}: {beats} beats, {restarts} restarts; the switches are no longer renewed')
    return {'changed': False, 'reason': reason, 'beats': beats, 'restarts': restarts,
            'message': f'{reason} after {beats} beats'}


def _end_children(handles):
    """Close each child's input (end of input: it returns), wait, then kill what is left."""
    for handle in handles:
        try:
            handle.stdin.close()
        except OSError:
            pass
    deadline = time.monotonic() + CHILD_EXIT_WAIT_S
    for handle in handles:
        try:
            handle.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            handle.kill()
            handle.wait()

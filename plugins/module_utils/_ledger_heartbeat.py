# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heartbeat that keeps the dead man's switches renewed while the controller's run lives and progresses.

Nothing else renews a switch once it is armed. So the controller runs ``heartbeat``: it watches the
ansible-playbook process of the run (its pid and start time) and, while that lives, writes a line every interval to
one ``renew`` process per host (over SSH as Ansible reaches the host, or the script itself for a host reached
locally: the commands come from the ``renew_command`` action). ``renew`` touches the switch's renew file for each
line it reads, answers each with an acknowledgement line, and returns at end of input.

A renewal counts when its acknowledgement arrives, never when its line is written. Per host the heartbeat keeps the
time of the last confirmed renewal and the last error (a renew process that could not start or exited, with its last
line of error output; a renew file that is gone) in a status file, JSON written whole then renamed. ``judge`` reads
it: the run checks right after the start that every host's first renewal arrives (a refused host, a rejected host
key fail the run in seconds) and, at each stage's start, that every host renewed within half a deadline.

The renewal is driven by input, never by a timer on the host: when the playbook dies, the heartbeat stops within a
tick (WATCH_TICK_S) and closes the pipes; when the controller or the network dies, no line arrives. A controller
alive but hung stops it too: given the run's journal directory, the heartbeat renews only while something in it
changed within a bound (the longest stage's budget). Either way the renew files age and each switch fires at its
deadline, as it would with no heartbeat at all. One of the ledger's host-side modules (see ``_ledger_core``):
standard library only, Python 3.8+.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core as core
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ledger_core as core
    import inferlab_ledger_proc as proc

# how long the heartbeat waits for its renew processes to end after it closed their input, before it kills them
CHILD_EXIT_WAIT_S = 5.0
# how often the heartbeat looks at the watched process (and writes its status when something changed)
WATCH_TICK_S = 1.0
# the lines ``renew`` answers each input line with
ACK_RENEWED = 'renewed'
ACK_NO_RENEW_FILE = 'no renew file'
STATUS_FORMAT = 'inferlab.heartbeat_status/1'
# how much of a renew process's last line of error output the status keeps
ERROR_TAIL_CHARS = 300


def renew(path):
    """Set the renew file's times to now (a renewal the switch sees by the file's signature); False when it is gone.
    It is never created: the arming creates it, and a switch that is gone (disarmed, fired) removed it."""
    try:
        os.utime(path, None)
    except FileNotFoundError:
        return False
    return True


def renew_on_input(renew_file, stream, acknowledge=None):
    """Renew ``renew_file`` once for each line read from ``stream``, calling ``acknowledge(ACK_RENEWED)`` or
    ``acknowledge(ACK_NO_RENEW_FILE)`` after each; return the counts at end of input (the heartbeat stopped, or its
    connection closed)."""
    count, missing = 0, 0
    for line in stream:
        if line:
            if renew(renew_file):
                count += 1
                answer = ACK_RENEWED
            else:
                missing += 1
                answer = ACK_NO_RENEW_FILE
            if acknowledge is not None:
                acknowledge(answer)
    gone = f'; {missing} found no renew file (no switch armed)' if missing else ''
    return {'changed': count > 0, 'renewals': count, 'missing': missing,
            'message': f'renewed {renew_file} {count} times{gone}; the heartbeat ended its input'}


def playbook_alive(pid, start_time, procfs_root='/proc'):
    """Whether the watched process still runs: the same pid with the same start time (a reused pid is not it)."""
    return proc.same_process(pid, start_time, procfs_root)


def journal_moved_at(journal_dir):
    """The newest modification time of ``journal_dir`` and the files in it (a journal entry written whole then
    renamed changes the directory's); None when there is no such directory."""
    try:
        with os.scandir(journal_dir) as entries:
            times = [entry.stat().st_mtime for entry in entries if entry.is_file()]
        return max(times + [os.stat(journal_dir).st_mtime])
    except FileNotFoundError:
        return None


class _Stop(Exception):
    """Raised by the SIGTERM handler: the heartbeat's process entry was undone."""


class _Host:
    """One host's renew process and what the heartbeat knows of it; the fields are guarded by the heartbeat's
    lock (its reader threads write them)."""

    def __init__(self, name, argv):
        self.name, self.argv = name, argv
        self.process = None
        self.renewals, self.restarts = 0, 0
        self.last_renewal, self.last_error, self.last_error_time = None, None, None

    def summary(self):
        return {'renewals': self.renewals, 'restarts': self.restarts, 'last_renewal': self.last_renewal,
                'last_error': self.last_error, 'last_error_time': self.last_error_time}


class Heartbeat:
    """The renew processes of ``children`` (``[{'name', 'argv'}]``), their acknowledgements and the status file."""

    def __init__(self, children, status_file=None, identity=None):
        self.hosts = [_Host(child['name'], child['argv']) for child in children]
        self.status_file = status_file
        self.identity = identity or {}
        self.lock = threading.Lock()
        self.changed = True  # the status file is behind
        self.stopping = False  # the heartbeat ends its children: their exits are no errors

    def error(self, host, message):
        with self.lock:
            host.last_error, host.last_error_time = message, time.time()
            self.changed = True
        core.log(f'{host.name}: {message}')

    def beat(self):
        """Write a line to every host's renew process, starting it first when it is not running."""
        for host in self.hosts:
            if host.process is not None and host.process.poll() is not None:
                host.process = None
                host.restarts += 1
            if host.process is None and not self._start(host):
                continue
            try:
                host.process.stdin.write(b'\n')
                host.process.stdin.flush()
            except OSError:
                pass  # it is exiting: its reader records why, the next beat starts it again

    def _start(self, host):
        # in a process group of its own: the undo's SIGTERM to the heartbeat's group reaches the heartbeat alone,
        # which ends its renew processes itself (end()), so their exit is never taken for a lost connection; a
        # heartbeat killed outright closes their input, and a renew returns at its end
        try:
            host.process = subprocess.Popen(host.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            self.error(host, f'cannot start its renew process {host.argv[0]}: {exc}')
            return False
        errors = []
        stderr_reader = threading.Thread(target=self._read_errors, args=(host.process, errors), daemon=True)
        stderr_reader.start()
        threading.Thread(target=self._read_acks, args=(host, host.process, stderr_reader, errors), daemon=True).start()
        return True

    @staticmethod
    def _read_errors(process, errors):
        for line in process.stderr:
            text = line.decode('utf-8', 'replace').strip()
            if text:
                errors[:] = [text[:ERROR_TAIL_CHARS]]

    def _read_acks(self, host, process, stderr_reader, errors):
        """Count the acknowledgements of ``process``; at its end, record why it ended (unless the heartbeat ended
        it)."""
        for line in process.stdout:
            answer = line.decode('utf-8', 'replace').strip()
            if answer == ACK_RENEWED:
                with self.lock:
                    host.renewals += 1
                    host.last_renewal = time.time()
                    self.changed = True
            elif answer == ACK_NO_RENEW_FILE:
                self.error(host, 'its renew file is gone: the switch is not armed, or it fired')
        returncode = process.wait()
        stderr_reader.join(timeout=CHILD_EXIT_WAIT_S)
        if not self.stopping:
            said = f': {errors[0]}' if errors else ' (no error output)'
            self.error(host, f'its renew process exited {returncode}{said}')

    def write_status(self, running=True, reason=None, force=False):
        """Write the status file whole, then rename it over the old one, when something changed (or ``force``)."""
        with self.lock:
            if not (self.changed or force) or not self.status_file:
                return
            status = dict(self.identity, format=STATUS_FORMAT, updated=time.time(), running=running, reason=reason,
                          hosts={host.name: host.summary() for host in self.hosts})
            self.changed = False
        tmp = f'{self.status_file}.{os.getpid()}.tmp'
        try:
            with open(tmp, 'w', encoding='utf-8') as handle:
                json.dump(status, handle, sort_keys=True)
            os.replace(tmp, self.status_file)
        except OSError as exc:  # the run's check then finds the status stale and fails the run: it says so
            core.log(f'cannot write the status file {self.status_file}: {exc}')

    def end(self):
        """Close each renew process's input (end of input: it returns), wait, then kill what is left."""
        self.stopping = True
        handles = [host.process for host in self.hosts if host.process is not None]
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

    def renewals(self):
        with self.lock:
            return {host.name: host.renewals for host in self.hosts}


def heartbeat(watch_pid, watch_start_time, children, interval_s, status_file=None, run_id=None, journal_dir=None,
              journal_stall_s=None, procfs_root='/proc'):
    """While ``watch_pid`` (with ``watch_start_time``) lives, write a line every ``interval_s`` seconds to each
    child of ``children`` (``[{'name', 'argv'}]``: a ``renew`` process per host), starting it again when it ended
    (a network blip), and keep ``status_file`` up to date (see ``judge``). With ``journal_dir``, stop once nothing
    in it changed for ``journal_stall_s`` (counted from the heartbeat's start at the earliest). The watched process
    is looked at every WATCH_TICK_S, so the renewals end within that of its death. Returns when it is gone, the
    journal stalled, or on SIGTERM, after closing every child's input and waiting for it (then killing what is
    left)."""
    started = time.time()
    own = proc.read_proc_stat(os.getpid(), procfs_root) or {}
    beat = Heartbeat(children, status_file, identity={
        'run_id': run_id, 'pid': os.getpid(), 'start_time': own.get('start_time'), 'started': started,
        'interval_s': interval_s, 'watch': {'pid': watch_pid, 'start_time': watch_start_time}})

    def on_sigterm(signum, frame):
        raise _Stop()

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread (tests)
        previous = None
    reason = None
    core.log(f'heartbeat for pid {watch_pid}: a line every {interval_s:g}s to {", ".join(c["name"] for c in children)}')
    next_beat = time.monotonic()
    try:
        while True:
            if not playbook_alive(watch_pid, watch_start_time, procfs_root):
                reason = f'the playbook (pid {watch_pid}) ended'
                break
            if time.monotonic() >= next_beat:
                reason = _journal_stalled(journal_dir, journal_stall_s, started)
                if reason:
                    break
                next_beat += interval_s
                beat.beat()
            beat.write_status()
            time.sleep(max(0.0, min(WATCH_TICK_S, next_beat - time.monotonic())))
    except _Stop:
        reason = 'stopped by SIGTERM (the undo of its process entry)'
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        beat.end()
        beat.write_status(running=False, reason=reason, force=True)
    renewals = beat.renewals()
    counts = ', '.join(f'{name} {count}' for name, count in renewals.items())
    restarts = sum(host.restarts for host in beat.hosts)
    core.log(f'{reason}: renewals confirmed: {counts}; {restarts} restarts; the switches are no longer renewed')
    return {'changed': False, 'reason': reason, 'renewals': renewals, 'restarts': restarts,
            'message': f'{reason}; renewals confirmed: {counts}'}


def _journal_stalled(journal_dir, stall_s, started):
    """Why the heartbeat must stop because the run's journal has not moved for ``stall_s``; None while it has."""
    if not journal_dir:
        return None
    moved = max(journal_moved_at(journal_dir) or started, started)
    still = time.time() - moved
    if still <= stall_s:
        return None
    return (f"the run's journal ({journal_dir}) has not moved for {still:.0f}s, past its bound of {stall_s:g}s (the "
            'longest stage): the controller looks hung, so the switches are left to fire')


# ---------------------------------------------------------------------------------------------------------------
# the run's check of the status file


def read_status(status_file):
    """The heartbeat's status, or None when there is no status file; ValueError when it is not one."""
    try:
        with open(status_file, encoding='utf-8') as handle:
            status = json.load(handle)
    except FileNotFoundError:
        return None
    if not (isinstance(status, dict) and status.get('format') == STATUS_FORMAT
            and isinstance(status.get('hosts'), dict)):
        raise ValueError(f'{status_file} is not a heartbeat status ({STATUS_FORMAT})')
    return status


def judge(status, now, within_s, run_id=None, procfs_root='/proc'):
    """Whether ``status`` (``read_status``) shows every host renewed within ``within_s`` of ``now``: ``(failed,
    waiting)``, two lists of ``'HOST: reason'``. ``failed`` says why a switch is at risk: the heartbeat stopped or
    gone, a host whose last confirmed renewal is older than ``within_s`` (or that never renewed ``within_s`` after
    the start), a host that never renewed and has an error. ``waiting`` names what has not happened yet and is no
    failure yet: no status from this run, a host whose first renewal is still on its way."""
    if status is None or (run_id is not None and status.get('run_id') != run_id):
        found = 'no status file' if status is None else f'the status of run {status.get("run_id")}'
        return [], [f'heartbeat: nothing from the heartbeat of this run yet ({found})']
    if not status.get('running'):
        return [f'heartbeat: it stopped: {status.get("reason")}'], []
    if not proc.same_process(status.get('pid') or 0, status.get('start_time') or 0, procfs_root):
        return [f'heartbeat: its process (pid {status.get("pid")}) is gone without a word (killed?)'], []
    failed, waiting = [], []
    for name, host in sorted(status['hosts'].items()):
        last, error = host.get('last_renewal'), host.get('last_error')
        if last is not None and now - last <= within_s:
            continue
        if last is None and error is None and now - status['started'] <= within_s:
            waiting.append(f'{name}: its first renewal is not confirmed yet')
            continue
        since = (f'the last confirmed renewal was {now - last:.0f}s ago' if last is not None
                 else f'no renewal confirmed in {now - status["started"]:.0f}s')
        failed.append(f'{name}: {error}; {since}' if error else f'{name}: {since} (its renew process answers nothing)')
    return failed, waiting

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host-side watchdogs of the change ledger: the dead man's switch of a run, and the link watchdog.

Both run detached (started through the host's process manager and recorded as ``process`` entries), log to stderr
with timestamps, and restore without a controller. One of the ledger's host-side modules (see ``_ledger_core``):
standard library only, Python 3.8+.
"""

from __future__ import annotations

import math
import os
import signal
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core as core
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_undo as undo
    from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_driver as driver
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ledger_core as core
    import inferlab_ledger_proc as proc
    import inferlab_ledger_undo as undo
    import inferlab_tbnet_driver as driver

# ---------------------------------------------------------------------------------------------------------------
# the dead man's switch: the host-side watchdog of a run that borrows production
#
# The experiment starts it on each host (through the host's process manager, recorded as a ``process`` entry)
# when it starts borrowing, renews it between stages by touching the renew file, and disarms it at the end by
# creating ``<renew file>.disarm``; the ledger's undo of its process entry (SIGTERM) disarms it too. When the
# controller stops renewing it for longer than the deadline, it runs this host's part of the restore: the same
# ``undo()`` as the ``undo`` subcommand, on every open entry but its own.

DEADMAN_DISARM_SUFFIX = '.disarm'


class _Disarmed(Exception):
    """Raised by the SIGTERM handler while the dead man's switch waits (never once it fires)."""


def _renew_stamp(renew_file):
    """``(signature, mtime)`` of the renew file, ``(None, None)`` when it is absent or cannot be read. The signature
    (inode, mtime and ctime in ns) changes at every touch, even one that sets the mtime to a time already seen."""
    try:
        st = os.stat(renew_file)
    except OSError:
        return None, None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns), st.st_mtime


def _on_sigterm(handler):
    """Install ``handler`` for SIGTERM; returns the previous one, or False where no handler can be installed (a
    thread other than the main one: tests)."""
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return False
    return signal.SIG_DFL if previous is None else previous


def _check_lock_free(ledger_dir, host):
    """Raise LockError when any run holds the lock: the check of a dead man's switch armed without a run id."""
    holder, problem = core.read_lock(ledger_dir, host)
    if holder is not None:
        raise core.LockError(f'{core.locked_message(host, holder, problem)} (this dead man\'s switch was armed without '
                             '--run-id, so it only undoes an unlocked ledger)')


def deadman(ledger_dir, host, renew_file, deadline_s, poll_s=1.0, run_id=None, self_id=None, clock=time,
            sleep=time.sleep, procfs_root='/proc'):
    """The dead man's switch: wait while the controller renews ``renew_file`` (touches it); when it has not been
    renewed for more than ``deadline_s`` seconds, undo every open entry of the ledger of ``host``, newest first,
    except ``self_id`` (the switch's own entry, ``process`` or ``systemd_unit``, found by own_entry when not
    given; marked undone instead: it is exiting).

    ``<renew_file>.disarm`` existing, or SIGTERM while waiting, disarms it: it returns without undoing anything.
    ``run_id`` is the run that armed it. The controller is gone when it fires, so the lock of that run (left by
    the dead run) does not stop it; a lock of another run does (that run is alive and owns the ledger now), as
    does any lock when ``run_id`` is None. The lock is left as it is, for the restore of the next run to break.
    Whatever ends it, it removes the renew and disarm files on its way out.

    ``clock`` (``monotonic()`` and ``time()``) and ``sleep`` are injectable for tests. Returns ``{fired, reason,
    changed, message}`` plus, once fired, ``undo`` (the result of ``undo()``, None when refused), ``self``
    (``{id, marked, previous}`` or ``{id, error}``), ``failed`` (the undo's failures, and the self entry's) and
    ``refused`` (the lock or the ledger refused the undo: nothing was undone)."""
    core.check_host(host)
    if any(math.isnan(value) or value <= 0 for value in (deadline_s, poll_s)):
        raise core.LedgerError(f'the deadline ({deadline_s}) and the poll interval ({poll_s}) must be positive seconds')
    disarm_file = renew_file + DEADMAN_DISARM_SUFFIX
    phase = {'now': 'waiting', 'sigterm': False}

    def on_sigterm(signum, frame):
        phase['sigterm'] = True
        if phase['now'] == 'waiting':
            phase['now'] = 'disarmed'
            raise _Disarmed()
        # once it fires it finishes: an undo cut short would leave a change made and unrecorded

    previous = _on_sigterm(on_sigterm)
    try:
        try:
            holder, problem = core.read_lock(ledger_dir, host)
            core.log(f'armed for the ledger of {host} in {ledger_dir}: deadline {deadline_s:g}s, renew file '
                     f'{renew_file}, disarm file {disarm_file}, run {run_id or "(none)"}, own entry '
                     f'{self_id or "(none)"}')
            if holder is not None and holder.get('run_id') != run_id:
                core.log(f'warning: {problem or "the lock is held by " + core.describe_holder(holder)}; if this '
                         'switch fires while it is, it will undo nothing')
            reason = _deadman_wait(renew_file, disarm_file, deadline_s, poll_s, clock, sleep, phase)
        except _Disarmed:
            reason = None
        if phase['now'] != 'firing':
            phase['now'] = 'disarmed'
            why = reason or 'disarmed by SIGTERM (the undo of its process entry sends it)'
            core.log(f'{why}: exiting, nothing undone')
            return {'fired': False, 'reason': why, 'changed': False, 'message': f'{why}: nothing undone'}
        return _deadman_fire(ledger_dir, host, run_id, self_id, reason, phase, procfs_root)
    finally:
        if previous is not False:
            signal.signal(signal.SIGTERM, previous)
        # the renew and disarm files are this switch's: whatever ends it, they must not outlive it
        for path in (renew_file, disarm_file):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                core.log(f'cannot remove {path}: {exc}')


def _deadman_wait(renew_file, disarm_file, deadline_s, poll_s, clock, sleep, phase):
    """Poll until disarmed or expired; returns why, with ``phase`` set to ``disarmed`` or ``firing``.

    Clock jumps never make it fire early. The renew file's mtime is wall-clock time (the host's clock when the
    controller touched it), so its age is ``clock.time() - mtime``, never a difference with the monotonic clock;
    but the wall clock can be stepped (NTP, a person, a VM resumed), and a step forward would make a fresh renewal
    look old. So the switch also times every renewal itself: the monotonic time since it last SAW the file change
    (or since its own start, which is also where a missing file counts from). That time is never longer than the
    real time since the renewal, so it fires only when both ages exceed the deadline. A wall age below zero (an
    mtime in the future: the wall clock went back) says nothing, and the monotonic age alone decides; a smaller step
    back delays firing by at most the size of the step. The monotonic clock does not count a suspend, which can
    only delay it too."""
    started = clock.monotonic()
    seen, mtime = _renew_stamp(renew_file)
    seen_at = started
    if seen is None:
        core.log(f'{renew_file} is absent: the deadline counts from now')
    while True:
        if os.path.lexists(disarm_file):
            phase['now'] = 'disarmed'  # from here on a SIGTERM only notes itself
            return f'disarmed: {disarm_file} exists'
        stamp, mtime = _renew_stamp(renew_file)
        now = clock.monotonic()
        if stamp is not None and stamp != seen:
            seen_at = now
            if seen is not None:
                core.log(f'renewed: {renew_file} touched')
        seen = stamp
        quiet = now - seen_at
        age = None if mtime is None else clock.time() - mtime
        if quiet > deadline_s and (age is None or age < 0 or age > deadline_s):
            phase['now'] = 'firing'
            late = f'not renewed for {quiet:.2f}s, past the deadline of {deadline_s:g}s'
            if mtime is None:
                return f'{renew_file} is absent: {late}'
            if age < 0:
                return f'{renew_file} was {late} (its mtime is {-age:.2f}s in the future: the wall clock went back)'
            return f'{renew_file} was {late} (its mtime is {age:.2f}s old)'
        sleep(poll_s)


def _unit_name(unit):
    return unit if '.' in unit else unit + '.service'  # systemctl's own reading of a bare name


def own_entry(ledger_dir, host, pid=None, procfs_root='/proc'):
    """The id of this process's own open entry, or None: a switch or watchdog started through the process manager
    is recorded before it starts, so it cannot be told its id. ``process``: the entry naming this pid;
    ``systemd_unit``: the entry naming the unit this process runs in (its undo would stop the switch itself)."""
    pid = os.getpid() if pid is None else pid
    unit = proc.own_systemd_unit(pid, procfs_root)
    try:
        lines, _problems = core.read_ledger(ledger_dir, host)
    except core.LedgerError:
        return None
    for entry in core.current_entries(lines).values():
        if entry['state'] not in core.OPEN_STATES:
            continue
        if entry['kind'] == 'process' and entry['params'].get('pid') == pid:
            return entry['id']
        if entry['kind'] == 'systemd_unit' and unit and _unit_name(entry['params'].get('unit', '')) == unit:
            return entry['id']
    return None


def _deadman_fire(ledger_dir, host, run_id, self_id, reason, phase, procfs_root='/proc'):
    """The restore of a dead man's switch that expired: undo all but its own entry, then mark that one undone."""
    self_id = self_id or own_entry(ledger_dir, host, procfs_root=procfs_root)
    core.log(f'firing: {reason}; undoing the open entries of {host}, newest first'
             + (f', all but its own {self_id}' if self_id else ''))
    result = {'fired': True, 'reason': reason, 'changed': False, 'undo': None, 'self': None, 'failed': [],
              'refused': False}
    try:
        if run_id is None:
            _check_lock_free(ledger_dir, host)
        outcome = undo.undo(ledger_dir, host, run_id=run_id, exclude=[self_id] if self_id else None)
    except core.LedgerError as exc:
        result.update(refused=True, error=type(exc).__name__,
                      message=f'the dead man\'s switch fired: {reason}; but it undid nothing: {exc}')
        core.log(f'refused: {exc}')
        return result
    for detail in outcome['details']:
        core.log(f'{detail["result"]} {detail["id"]} ({detail["kind"]}): {detail["message"]}')
    result.update(undo=outcome, changed=outcome['changed'], failed=list(outcome['failed']))
    message = f'the dead man\'s switch fired: {reason}; {outcome["message"]}'
    if self_id:
        try:
            changed, line, previous = core.mark(ledger_dir, host, self_id, 'undone', run_id=run_id)
        except (core.LedgerError, OSError) as exc:  # OSError: a full or read-only ledger filesystem
            result['self'] = {'id': self_id, 'error': str(exc)}
            result['failed'].append({'id': self_id, 'kind': core.kind_of_id(self_id),
                                     'error': f'cannot mark its own entry undone: {exc}'})
            message += f'; its own entry {self_id} could not be marked undone: {exc}'
        else:
            result['self'] = {'id': self_id, 'marked': changed, 'previous': previous}
            result['changed'] = result['changed'] or changed
            message += f'; marked its own entry {line["id"]} undone (was {previous})'
    if phase['sigterm']:
        message += ' (a SIGTERM came while it restored: it finished first)'
    result['message'] = message
    core.log(message)
    return result


# ---------------------------------------------------------------------------------------------------------------
# the link watchdog


def watch_link(ledger_dir, host, entry_id, interface, peer, deadline_s, ping=None, loader=None, load_timeout_s=None,
               emit=None, poll_s=1.0, procfs_root='/proc'):
    """The host-side link watchdog of a candidate driver load (started by tbnet_module before the load, recorded as
    a ``process`` entry). It watches the candidate for the whole time it is loaded, in three phases, and undoes the
    ``kernel_module`` entry ``entry_id`` (the stock driver comes back without the controller) when one fails:

    1. the load: it waits for the entry to leave ``pending``. It undoes it when the loader (``{pid, start_time}``,
       the module's process) is gone first, or when the load is still pending after ``load_timeout_s`` (a stuck
       ``insmod``, or a loader that hangs); an entry undone meanwhile (the loader's own failure path) ends it.
    2. the link back: where the entry describes the link (its ``link`` param), ``bring_back_link`` as the host
       manages it, carrier, speed, lanes and the peer's answer; without it, the first answered ping. Within
       ``deadline_s`` of the load. Its verdict is passed to ``emit`` (the module waits for that line).
    3. the watch: a ping to the peer every ``poll_s`` while the entry is open; when none has been answered for
       ``deadline_s``, the link has stalled under the candidate and it is undone. It returns once the entry is
       undone by someone else (the stock load, the restore; the undo of its own process entry stops it first).

    Returns the last verdict."""
    emit = emit or (lambda _verdict: None)
    state, reason = _wait_for_load(ledger_dir, host, entry_id, loader, load_timeout_s, procfs_root)
    if state != 'applied':
        if state == 'undone':
            return {'changed': False, 'link': False, 'loaded': False, 'message': reason}
        return _unload(ledger_dir, host, entry_id, reason, {'loaded': False})
    params = _entry(ledger_dir, host, entry_id)['params']
    link = params.get('link')
    back = None
    try:
        if link:
            back = driver.bring_back_link(interface, link, params['sysfs_root'], {'ping': ping},
                                          timeout_s=deadline_s)
            ok, seconds, tries = True, back['seconds'], None
        else:
            ok, seconds, tries = driver.watch_link(interface, peer, deadline_s, ping)
            reason = f'no ping to {peer} over {interface} answered within {deadline_s:g}s ({tries} tries)'
    except driver.DriverError as exc:
        ok, seconds, tries = False, None, 0
        reason = str(exc)
    if not ok:
        return _unload(ledger_dir, host, entry_id, reason, {'seconds': seconds, 'tries': tries})
    emit({'changed': False, 'link': True, 'seconds': seconds, 'tries': tries, 'back': back,
          'message': f'the direct link carried traffic {seconds}s after the candidate load'
                     + (f' ({tries} tries)' if tries else '') + '; watching it while the candidate is loaded'})
    stalled = _watch_until_unloaded(ledger_dir, host, entry_id, interface, peer, deadline_s, ping, poll_s)
    if stalled:
        return _unload(ledger_dir, host, entry_id, stalled, {'stalled': True})
    return {'changed': False, 'link': True, 'seconds': seconds, 'back': back,
            'message': 'the candidate was unloaded by the stock load or the restore; the link carried traffic '
                       'while it was loaded'}


def _entry(ledger_dir, host, entry_id):
    """The entry's current view in the ledger, or None."""
    return core.current_entries(core.read_ledger(ledger_dir, host)[0]).get(entry_id)


def _entry_state(ledger_dir, host, entry_id):
    entry = _entry(ledger_dir, host, entry_id)
    return entry['state'] if entry else None


def _wait_for_load(ledger_dir, host, entry_id, loader, load_timeout_s, procfs_root, poll_s=0.2):
    """Phase 1 of watch_link: ``(state, reason)``, state ``applied``, ``undone`` or ``stuck`` (to be undone)."""
    started = time.monotonic()
    while True:
        state = _entry_state(ledger_dir, host, entry_id)
        if state == 'applied':
            return state, ''
        if state != 'pending':
            return 'undone', f'the candidate load {entry_id} was undone before it completed (state {state})'
        if loader and not proc.same_process(loader['pid'], loader['start_time'], procfs_root):
            return 'stuck', f'the loader (pid {loader["pid"]}) is gone and the candidate load was never completed'
        if load_timeout_s and time.monotonic() - started > load_timeout_s:
            return 'stuck', f'the candidate load was not completed within {load_timeout_s:g}s (a stuck insmod?)'
        time.sleep(poll_s)


def _watch_until_unloaded(ledger_dir, host, entry_id, interface, peer, stall_s, ping, poll_s):
    """Phase 3 of watch_link: None once the entry is undone by someone else; the reason when no ping to the peer
    was answered for ``stall_s``."""
    answered = time.monotonic()
    while _entry_state(ledger_dir, host, entry_id) in ('pending', 'applied'):
        if driver.link_carries_traffic(interface, peer, ping):
            answered = time.monotonic()
        elif time.monotonic() - answered > stall_s:
            return (f'the direct link stalled under the candidate: no ping to {peer} over {interface} answered for '
                    f'{time.monotonic() - answered:.0f}s (at most {stall_s:g}s)')
        time.sleep(poll_s)
    return None


def _unload(ledger_dir, host, entry_id, reason, extra):
    """Undo the candidate load (the stock driver back) and say why."""
    outcome = undo.undo(ledger_dir, host, ids=[entry_id])
    return dict(extra, changed=outcome['changed'], link=False, failed=outcome['failed'], undone=outcome['undone'],
                message=f'{reason}: the candidate was unloaded ({outcome["message"]})')

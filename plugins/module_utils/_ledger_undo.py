# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The undo of the change ledger: each kind's undo (``UNDO``), the undo of a host's open entries, the write-ahead
protocol of one change (``change``), and the leftovers.

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ethtool as ethtool
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core as core
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
    from ansible_collections.inferlab.distributed.plugins.module_utils import _tc as tc
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ethtool as ethtool
    import inferlab_ledger_core as core
    import inferlab_ledger_proc as proc
    import inferlab_tc as tc

COMMAND_DIRS = ('/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin')
TC_SBIN = ('/usr/sbin', '/sbin', '/usr/local/sbin')
# how long a stop command may take beyond the stop timeout it was given (the engine's own overhead)
COMMAND_GRACE = 60.0
UNIT_UP_STATES = ('active', 'reloading')
UNIT_STARTING_STATES = ('activating',)


class UndoContext:
    """What an undo function may need from its surroundings; injectable for tests.

    ``tc_command``: the argv prefix that runs ``tc`` (default: ``tc`` from PATH or an sbin directory); a test points
    it into a network namespace of its own, e.g. ``['ip', 'netns', 'exec', NS, 'tc']``. ``ethtool_command``,
    ``systemctl_command`` and ``container_commands`` (engine name -> argv prefix) do the same for ``ethtool``,
    ``systemctl``, ``docker`` and ``podman``.
    ``run_command``: a callable ``(argv, timeout) -> (rc, stdout, stderr)`` that runs every command an undo runs
    (default: subprocess with ``LC_ALL=C``); the managed_process module passes one built on its own
    ``run_command``, so that its tests see the undo's commands like its other ones."""

    def __init__(self, procfs_root='/proc', poll_interval=0.05, kill_wait=5.0, tc_command=None,
                 systemctl_command=None, container_commands=None, run_command=None, ethtool_command=None):
        self.procfs_root = procfs_root
        self.poll_interval = poll_interval
        self.kill_wait = kill_wait
        self.tc_command = list(tc_command) if tc_command else None
        self.ethtool_command = list(ethtool_command) if ethtool_command else None
        self.systemctl_command = list(systemctl_command) if systemctl_command else None
        self.container_commands = {k: list(v) for k, v in (container_commands or {}).items() if v}
        self.run_command = run_command


# ---------------------------------------------------------------------------------------------------------------
# undo


def undo(ledger_dir, host, ids=None, run_id=None, ctx=None, check_mode=False, exclude=None):
    """Undo every open entry (pending, applied, undo_failed) in reverse order of first appearance, or only
    ``ids``, leaving out the ids in ``exclude`` (the dead man's switch leaves its own process entry). Appends
    ``undone`` or ``undo_failed`` for each; one failure does not stop the others. Returns
    ``{changed, undone, failed, skipped, details, problems, message}``; an empty or fully undone ledger is a
    no-op with ``changed: false``. A mark that cannot be written (a full or read-only filesystem) stops nothing:
    every other entry is still undone, the mark is tried again at the end, and one still unwritten is a failure
    that says so (the entry reads open, and a later undo finds its change already undone)."""
    ctx = ctx or UndoContext()
    if check_mode or not os.path.isdir(ledger_dir):
        return _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude)
    with core.DirGuard(ledger_dir):
        return _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude)


def change(ledger_dir, host, kind, params, run_id=None, ctx=None, undo_on_error=True):
    """The write-ahead protocol of one change: ``with change(ledger_dir, host, kind, params) as entry:``.

    The call records the entry ``pending`` (fsynced) before the body makes the change, and raises as ``record``
    does; a normal exit marks it ``applied``, with what ``entry.update`` learned during the change (a pid) merged
    into its params. On an exception, any (KeyboardInterrupt too), or a mark that cannot be written, the entry is
    undone by its kind's undo (``entry.undone`` holds the result) and the exception goes on. With
    ``undo_on_error=False`` it stays as it is instead, open for the restore, for a caller that reports a failed
    change with its entry open."""
    return Change(ledger_dir, host, core.record(ledger_dir, host, kind, params, run_id=run_id), run_id, ctx,
                  undo_on_error)


class Change:
    """An entry under ``change``'s protocol: ``id``, ``line`` (the pending line), ``undone``."""

    def __init__(self, ledger_dir, host, line, run_id, ctx, undo_on_error):
        self.ledger_dir, self.host, self.line, self.id = ledger_dir, host, line, line['id']
        self.run_id, self.ctx, self.undo_on_error = run_id, ctx, undo_on_error
        self.learned = {}
        self.undone = None

    def update(self, **params):
        """Params learned during the change, written with the ``applied`` mark."""
        self.learned.update(params)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                core.mark(self.ledger_dir, self.host, self.id, 'applied', params=self.learned or None,
                          run_id=self.run_id)
                return False
        except BaseException:
            self._undo()
            raise
        self._undo()
        return False

    def _undo(self):
        if self.undo_on_error:
            self.undone = undo(self.ledger_dir, self.host, ids=[self.id], run_id=self.run_id, ctx=self.ctx)


def undo_kind(ledger_dir, host, kind, select=None, run_id=None, check_mode=False):
    """``undo`` of the host's open entries of ``kind`` (those whose params ``select`` keeps, or all), newest first;
    with none open, a no-op result that says so. The layer modules' ``state=undone``."""
    ids = [entry['id'] for entry in core.entries(ledger_dir, host)
           if entry['kind'] == kind and entry['state'] in core.OPEN_STATES
           and (select is None or select(entry['params']))]
    if not ids:
        return {'changed': False, 'details': [], 'failed': [], 'message': f'no open {kind} entry: nothing to undo'}
    return undo(ledger_dir, host, ids=ids, run_id=run_id, check_mode=check_mode)


def _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude=None):
    core.check_lock_owner(ledger_dir, host, run_id)
    entries, problems = core.read_ledger(ledger_dir, host)
    view = core.current_entries(entries)
    if ids:
        missing = [i for i in ids if i not in view]
        if missing:
            raise core.LedgerError(f'no entry {", ".join(missing)} in the ledger of {host}')
    excluded = set(exclude or ())
    selected = [e for e in view.values() if (not ids or e['id'] in ids) and e['id'] not in excluded]
    skipped = [e['id'] for e in selected if e['state'] not in core.OPEN_STATES]
    todo = sorted((e for e in selected if e['state'] in core.OPEN_STATES), key=lambda e: e['first_line'], reverse=True)
    undone, failed, details, unwritten = [], [], [], []
    for entry in todo:
        detail = {'id': entry['id'], 'kind': entry['kind'], 'state': entry['state']}
        details.append(detail)
        if check_mode:
            undone.append(entry['id'])
            detail.update(result='would undo', message='')
            continue
        error = None
        try:
            undo_kind = UNDO.get(entry['kind'])
            if undo_kind is None:
                raise core.UndoError(f'unknown kind {entry["kind"]!r}: this ledger tool ({core.FORMAT}) cannot undo it')
            message = undo_kind(dict(entry['params']), ctx)
        except core.UndoError as exc:
            error = str(exc)
        except Exception as exc:  # recorded as undo_failed and reported: never swallowed
            error = f'undo of the {entry["kind"]} entry failed: {type(exc).__name__}: {exc}'
        new_state = 'undo_failed' if error else 'undone'
        line = core.make_line(entry['id'], entry['kind'], entry['params'], new_state,
                              run_id=run_id or entry.get('run_id'), error=error)
        try:
            core.append_line(ledger_dir, host, line)
        except OSError as exc:  # a full or read-only filesystem: the other entries are undone all the same
            unwritten.append((line, detail, exc))
        if error:
            failed.append({'id': entry['id'], 'kind': entry['kind'], 'error': error})
            detail.update(result='undo_failed', message=error)
        else:
            undone.append(entry['id'])
            detail.update(result='undone', message=message)
    for line, detail, exc in _retry_marks(ledger_dir, host, unwritten):
        error = (f'{"undone" if line["state"] == "undone" else "its undo failed"}, but the {line["state"]} mark '
                 f'could not be written to the ledger ({exc}), so the entry still reads open: free the ledger\'s '
                 'filesystem and run the undo again (it finds what was undone already undone)')
        if line['id'] in undone:
            undone.remove(line['id'])
            failed.append({'id': line['id'], 'kind': line['kind'], 'error': error})
        else:
            failed[[f['id'] for f in failed].index(line['id'])]['error'] += f'; {error}'
        detail.update(result='mark_not_written', message=f'{detail["message"]}; {error}'.lstrip('; '))
    if not todo:
        message = (f'nothing to undo on {host} ({len(selected)} entries, all undone)' if selected
                   else f'nothing to undo on {host} (empty ledger)')
    else:
        message = f'{"would undo" if check_mode else "undid"} {len(undone)} of {len(todo)} open changes on {host}'
        if failed:
            message += f'; {len(failed)} failed: ' + '; '.join(f'{f["id"]}: {f["error"]}' for f in failed)
    if problems:
        message += ' (ledger problems: ' + '; '.join(problems) + ')'
    return {'changed': bool(todo), 'undone': undone, 'failed': failed, 'skipped': skipped, 'details': details,
            'problems': problems, 'message': message}


def _retry_marks(ledger_dir, host, unwritten):
    """Try once more, after every undo, to write the marks that could not be written; return the ones that still
    cannot be, as ``(line, detail, error)``."""
    left = []
    for line, detail, _first in unwritten:
        try:
            core.append_line(ledger_dir, host, line)
        except OSError as exc:
            left.append((line, detail, exc))
    return left


# ---------------------------------------------------------------------------------------------------------------
# leftovers


def leftovers(ledger_dir, host, procfs_root='/proc', ctx=None):
    """What this host's ledger closed (``undone``) that still runs, matched by the ledger's identity only, never by a
    command line, so a production process that the restore resumed is never one, whatever its arguments:

    - ``process``: the recorded pid with its recorded start time, and, for an entry recorded with its process group,
      every live member of that group (a child that outlived its leader: the group's id is not reused while the
      group exists);
    - ``systemd_unit``: the recorded unit, still active (``systemctl is-active``);
    - ``container``: the recorded container, still running (``ENGINE container inspect``).

    A unit or container that an open entry names again (a later start under the same name) is that entry's, not a
    leftover, and a name undone several times is one leftover (its newest entry); a host without systemctl or the
    engine runs no unit or container. ``ctx`` (UndoContext) names the
    commands. Returns ``[{id, kind, pid, what, message}]`` (``cmdline`` for processes, ``unit`` or ``engine`` and
    ``name`` for the others), oldest entry first; ``what`` names the thing: its pid, ``unit NAME`` or ``ENGINE
    container NAME``."""
    ctx = ctx or UndoContext(procfs_root=procfs_root)
    lines, _problems = core.read_ledger(ledger_dir, host)
    view = core.current_entries(lines).values()
    open_names = {_managed_name(e) for e in view if e['state'] in core.OPEN_STATES} - {None}
    # a name started and undone several times is checked once, under its newest entry
    newest = {_managed_name(e): e['id'] for e in view if e['state'] == 'undone'}
    found = []
    for entry in view:
        name = _managed_name(entry)
        if entry['state'] != 'undone':
            continue
        if entry['kind'] == 'process':
            found.extend(_process_leftovers(entry, procfs_root))
        elif name is not None and name not in open_names and newest[name] == entry['id']:
            found.extend(_managed_leftovers(entry, ctx))
    return found


def _managed_name(entry):
    """``(kind, engine, name)`` of a systemd_unit or container entry, else None."""
    params = entry['params']
    if entry['kind'] == 'systemd_unit':
        return ('systemd_unit', None, params.get('unit'))
    if entry['kind'] == 'container':
        return ('container', params.get('engine'), params.get('name'))
    return None


def _process_leftovers(entry, procfs_root):
    params = entry['params']
    pid, start_time = params.get('pid'), params.get('start_time')
    if not isinstance(pid, int):
        return []
    leader = proc.read_proc_stat(pid, procfs_root)
    leader_alive = leader is not None and leader['state'] not in ('Z', 'X')
    if leader_alive and leader['start_time'] != start_time:
        return []  # the pid belongs to another process now
    pids = proc.group_members(pid, procfs_root) if params.get('process_group') else []
    if leader_alive and pid not in pids:
        pids.append(pid)
    found = []
    for member in sorted(pids):
        argv = proc.read_proc_cmdline(member, procfs_root)
        label = _cmdline_text(argv) or _cmdline_text(params.get('cmdline')) or 'process'
        what = 'the recorded process' if member == pid else f'a member of the recorded process group {pid}'
        found.append({'id': entry['id'], 'kind': 'process', 'pid': member, 'what': str(member), 'cmdline': argv,
                      'message': f'"{label}" still runs ({what}) although entry {entry["id"]} is undone'})
    return found


def _managed_leftovers(entry, ctx):
    """The unit still active, or the container still running, of an undone systemd_unit or container entry, read as
    the undo reads them (``_unit_state``, ``_container_state``). A state that cannot be read is reported as one (the
    restore must not pass on what it could not check)."""
    params = entry['params']
    try:
        if entry['kind'] == 'systemd_unit':
            found = {'unit': params['unit'], 'what': f'unit {params["unit"]}'}
            base = _command_argv(ctx.systemctl_command, 'systemctl', 'package systemd', found['what'])
            running = UNIT_UP_STATES + UNIT_STARTING_STATES
        else:
            engine = params['engine']
            found = {'engine': engine, 'name': params['name'], 'what': f'{engine} container {params["name"]}'}
            base = _command_argv(ctx.container_commands.get(engine), engine, f'the {engine} CLI', found['what'])
            running = ('running', 'restarting', 'paused')
    except core.UndoError:
        return []  # not installed on this host: nothing of that kind can run
    try:
        if entry['kind'] == 'systemd_unit':
            state = _unit_state(base, params['unit'], ctx)
        else:
            state = _container_state(base, engine, params['name'], ctx, missing_ok=True)
    except core.UndoError as exc:
        return [{'id': entry['id'], 'kind': entry['kind'], 'pid': params.get('pid'), **found,
                 'message': f'cannot tell whether {found["what"]} still runs: {exc}'}]
    if state not in running:
        return []
    return [{'id': entry['id'], 'kind': entry['kind'], 'pid': params.get('pid'), **found,
             'message': f'{found["what"]} is still {state} although entry {entry["id"]} is undone'}]


# ---------------------------------------------------------------------------------------------------------------
# kind: process (and sampler)


def _cmdline_text(cmdline):
    if cmdline is None:
        return ''
    return cmdline if isinstance(cmdline, str) else ' '.join(cmdline)


def _cmdline_matches(recorded, actual):
    if actual is None or recorded is None:
        return False
    if isinstance(recorded, list):
        return recorded == actual
    return recorded.split() == ' '.join(actual).split()


def undo_process(params, ctx):
    label = _cmdline_text(params.get('cmdline')) or 'process'
    pidfile = params.get('pidfile')
    pid = params.get('pid')
    start_time = params.get('start_time')
    source = 'recorded pid'
    if pid is None:
        pid = _read_pidfile(pidfile)
        source = f'from pidfile {pidfile}'
        if pid is None:
            return f'no process to stop for "{label}": pidfile {pidfile} is absent or empty (it was never started)'
    info = proc.read_proc_stat(pid, ctx.procfs_root)
    leader_alive = info is not None and info['state'] not in ('Z', 'X')
    group = bool(params.get('process_group'))
    note = ''
    if group and leader_alive and info['pgrp'] != pid:
        group = False
        note = f' (pid {pid} does not lead its own process group, so only it was signalled)'
    if leader_alive and start_time is not None and info['start_time'] != start_time:
        return (f'pid {pid} ({source}) now belongs to another process (start time {info["start_time"]}, recorded '
                f'{start_time}): nothing to kill' + _remove_pidfile(pidfile, pid, ctx, reused=True))
    if leader_alive and start_time is None:
        actual = proc.read_proc_cmdline(pid, ctx.procfs_root)
        if not _cmdline_matches(params.get('cmdline'), actual):
            return (f'pid {pid} ({source}) runs "{_cmdline_text(actual)}", not "{label}": nothing to kill'
                    + _remove_pidfile(pidfile, pid, ctx, reused=True))

    def alive():
        if group:
            return bool(proc.group_members(pid, ctx.procfs_root))
        current = proc.read_proc_stat(pid, ctx.procfs_root)
        return current is not None and current['state'] not in ('Z', 'X')

    # a dead leader's pid is not reused while its process group exists, so live members of that group are ours
    if not (leader_alive or (group and alive())):
        return f'process {pid} ("{label}") had already exited: nothing to kill' + _remove_pidfile(pidfile, pid, ctx)
    what = f'process group {pid}' if group else f'pid {pid}'
    stop_timeout = params.get('stop_timeout', 10)
    if not _signal(pid, group, signal.SIGTERM):
        return f'{what} ("{label}") exited before it was signalled' + _remove_pidfile(pidfile, pid, ctx)
    if _wait_gone(alive, stop_timeout, ctx):
        return f'stopped {what} ("{label}") with SIGTERM{note}' + _remove_pidfile(pidfile, pid, ctx)
    _signal(pid, group, signal.SIGKILL)
    if _wait_gone(alive, ctx.kill_wait, ctx):
        return (f'stopped {what} ("{label}") with SIGKILL: still running {stop_timeout}s after SIGTERM{note}'
                + _remove_pidfile(pidfile, pid, ctx))
    raise core.UndoError(f'{what} ("{label}") is still alive after SIGTERM and SIGKILL (stuck in the kernel, state '
                         'D?); stop it by hand')


def _signal(pid, group, signum):
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError as exc:
        raise core.UndoError(f'not allowed to signal pid {pid}: {exc} (run the undo as the user that started it, or as '
                             'root)') from exc
    return True


def _wait_gone(alive, timeout, ctx):
    deadline = time.monotonic() + float(timeout)
    while alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(ctx.poll_interval)
    return True


def _read_pidfile(pidfile):
    try:
        return proc.read_pidfile(pidfile)
    except proc.PidfileError as exc:
        raise core.UndoError(str(exc)) from None


def _remove_pidfile(pidfile, pid, ctx, reused=False):
    """Remove our pidfile, unless it names another live process (or ``reused``: ``pid`` now belongs to another
    process that the pidfile may describe)."""
    if not pidfile or not os.path.lexists(pidfile):
        return ''
    try:
        named = proc.read_pidfile(pidfile)
    except proc.PidfileError:
        named = None
    if named is not None and named != pid and proc.pid_alive(named, ctx.procfs_root):
        return f'; left pidfile {pidfile}: it names another live process {named}'
    if reused and named == pid:
        return f'; left pidfile {pidfile}: its pid now belongs to another process'
    os.unlink(pidfile)
    return f'; removed pidfile {pidfile}'


# ---------------------------------------------------------------------------------------------------------------
# kind: file


def _undo_file(params, ctx):
    path = params['path']
    if params.get('existed') is False:
        if os.path.isdir(path) and not os.path.islink(path):
            raise core.UndoError(f'{path} is a directory now; a file entry only removes files: remove it by hand')
        if not os.path.lexists(path):
            return f'removed nothing: {path} is absent (it was never written)'
        os.unlink(path)
        return f'removed {path} (it did not exist before the change)'
    backup = params['backup']
    if not os.path.isfile(backup):
        raise core.UndoError(f'backup {backup} of {path} is missing, so the file cannot be restored; restore {path} by '
                             'hand')
    if os.path.isdir(path) and not os.path.islink(path):
        raise core.UndoError(f'{path} is a directory now; cannot restore the file from {backup}')
    st = os.stat(backup)
    _replace_with_copy(path, backup, st)
    return f'restored {path} from {backup} (mode {st.st_mode & 0o7777:04o}); the backup is kept'


def _replace_with_copy(path, backup, st):
    """Put a copy of ``backup`` (content, mode, times and, as root, owner: ``st``) in place of ``path`` by a rename.

    The copy is written to a new file of an unpredictable name in ``path``'s directory, made with O_CREAT|O_EXCL|
    O_NOFOLLOW (tempfile.mkstemp) and set up through its descriptor only: a link planted in that directory is never
    followed, so a restore that runs as root writes nowhere but there."""
    directory = os.path.dirname(path) or '.'
    fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.inferlab-restore.', dir=directory)
    replaced = False
    try:
        with os.fdopen(fd, 'wb') as copy, open(backup, 'rb') as original:
            shutil.copyfileobj(original, copy)
            copy.flush()
            if os.geteuid() == 0:
                os.fchown(copy.fileno(), st.st_uid, st.st_gid)
            os.fchmod(copy.fileno(), stat.S_IMODE(st.st_mode))
            os.utime(copy.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(copy.fileno())
        os.replace(tmp, path)
        replaced = True
        core.fsync_dir(directory)
    finally:
        if not replaced:
            os.unlink(tmp)


# ---------------------------------------------------------------------------------------------------------------
# kind: tc_profile (a link profile, made by the link_profile module; _tc tells whether the root qdisc is ours)


def _tc_argv(ctx):
    if ctx.tc_command:
        return list(ctx.tc_command)
    found = shutil.which('tc') or shutil.which('tc', path=os.pathsep.join(TC_SBIN))
    if not found:
        raise core.UndoError('tc is not installed on this host (package iproute2), so the link profile cannot be '
                             'removed; install it and run the undo again')
    return [found]


def _run_command(argv, ctx, timeout=60):
    """Run one command of an undo: ``(rc, stdout, stderr)``; UndoError when it cannot run at all."""
    if ctx.run_command is not None:
        return ctx.run_command(argv, timeout)
    env = dict(os.environ, LC_ALL='C')
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise core.UndoError(f'{" ".join(argv)} could not run: {exc}') from exc
    return done.returncode, done.stdout.decode('utf-8', 'replace'), done.stderr.decode('utf-8', 'replace')


def _read_qdiscs(interface, tc_argv, ctx):
    """The qdiscs of ``interface`` (``parse_qdiscs``), or None when it no longer exists."""
    show = tc_argv + tc.show_argv(interface)[1:]
    rc, out, err = _run_command(show, ctx)
    if rc != 0:
        if 'cannot find device' in err.lower():
            return None
        raise core.UndoError(f'cannot read the qdiscs of {interface}: {" ".join(show)} exited {rc}: {err.strip()}')
    try:
        return tc.parse_qdiscs(out)
    except tc.TcError as exc:
        raise core.UndoError(f'{" ".join(show)}: {exc}') from None


def _undo_tc_profile(params, ctx):
    interface, profile = params['interface'], params['profile']
    tc_argv = _tc_argv(ctx)
    qdiscs = _read_qdiscs(interface, tc_argv, ctx)
    if qdiscs is None:
        return f'{interface} no longer exists, and its qdiscs went with it: nothing to remove'
    if 'qdiscs' in params:
        return _put_back_tc_tree(interface, profile, params['qdiscs'], qdiscs, tc_argv, ctx)
    # an entry from before the tree was recorded: its undo removes our profile, as it did then
    found = tc.classify(qdiscs)
    if found['profile'] == 'clean':
        return f'no {profile} profile on {interface} ({found["reason"]}): nothing to remove'
    described = tc.describe(qdiscs)
    if found['profile'] == 'foreign':
        raise core.UndoError(f'{interface} has a root qdisc inferlab did not make ({described}); not deleting it. Look '
                             f'at `tc qdisc show dev {interface}`, remove it yourself if it is a leftover '
                             f'(tc qdisc del dev {interface} root), then run the undo again')
    delete = tc_argv + tc.delete_root_argv(interface)[1:]
    rc, out, err = _run_command(delete, ctx)
    if rc != 0:
        raise core.UndoError(f'{" ".join(delete)} exited {rc}: {err.strip() or out.strip()}')
    return f'removed the {profile} profile from {interface} ({described})'


def _put_back_tc_tree(interface, profile, recorded, qdiscs, tc_argv, ctx):
    """Put ``recorded`` (the tree found before the change) back, when what is there now is what the entry made
    (``profile``: our tbf for tx_cliff and lossy, the kernel's default root for clean); read it back to prove it."""
    before = tc.describe_tree(recorded)
    if not tc.tree_differences(recorded, tc.tree(qdiscs)):
        return f'{interface} has the qdiscs recorded before the {profile} profile ({before}): nothing to put back'
    found = tc.classify(qdiscs)
    if (found['profile'] == 'clean') != (profile == 'clean') or found['profile'] == 'foreign':
        raise core.UndoError(f'{interface} has {tc.describe_tree(tc.tree(qdiscs))}, not the {profile} profile this '
                             f'entry made, so something else changed it since; not replacing it. Look at `tc qdisc '
                             f'show dev {interface}`; what was there before the change: {before}')
    try:
        commands = tc.rebuild_commands(interface, recorded, qdiscs, tc=tc_argv[0])
    except tc.TcError as exc:
        raise core.UndoError(f'cannot put back the qdiscs of {interface} ({before}): {exc}') from None
    for argv in commands:
        argv = tc_argv + argv[1:]
        rc, out, err = _run_command(argv, ctx)
        if rc != 0:
            raise core.UndoError(f'{" ".join(argv)} exited {rc}: {err.strip() or out.strip()}; the qdiscs to put '
                                 f'back on {interface}: {before}')
    now = _read_qdiscs(interface, tc_argv, ctx) or []
    differences = tc.tree_differences(recorded, tc.tree(now))
    if differences:
        raise core.UndoError(f'put the qdiscs of {interface} back, but they differ from the recorded ones: '
                             f'{"; ".join(differences)}')
    return f'put back the qdiscs of {interface} from before the {profile} profile: {before}'


# ---------------------------------------------------------------------------------------------------------------
# kinds: systemd_unit and container (see _ledger_core)


def _command_argv(configured, name, package, what):
    if configured:
        return list(configured)
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(COMMAND_DIRS))
    if not found:
        raise core.UndoError(f'{name} is not installed on this host ({package}), so {what} cannot be stopped; install '
                             'it or stop it by hand, then run the undo again')
    return [found]


def _output(out, err):
    return (err.strip() or out.strip()).replace('\n', ' ')


def _undo_systemd_unit(params, ctx):
    unit = params['unit']
    systemctl = _command_argv(ctx.systemctl_command, 'systemctl', 'package systemd', f'unit {unit}')
    stop = systemctl + ['stop', unit]
    rc, out, err = _run_command(stop, ctx, timeout=params.get('stop_timeout', core.SYSTEMD_DEFAULT_STOP_TIMEOUT)
                                + COMMAND_GRACE)
    said = _output(out, err)
    if rc != 0:
        if 'not loaded' in said.lower():
            return f'unit {unit} is not loaded (never started, or exited and collected): nothing to stop'
        if 'not been booted with systemd' in said.lower():
            return f'this host does not run systemd, so no unit {unit} can be running: nothing to stop'
        raise core.UndoError(f'{" ".join(stop)} exited {rc}: {said}')
    # a unit that failed stays listed until reset (unless collected already, which reads "not loaded")
    reset = systemctl + ['reset-failed', unit]
    rc, out, err = _run_command(reset, ctx)
    if rc != 0 and 'not loaded' not in _output(out, err).lower():
        raise core.UndoError(f'stopped unit {unit}, but {" ".join(reset)} exited {rc}: {_output(out, err)}')
    return f'stopped unit {unit}'


def _no_such_container(said):
    # docker: "Error response from daemon: No such container: NAME"; podman: '... found: no such container'
    return 'no such container' in said.lower()


def _undo_container(params, ctx):
    engine, name = params['engine'], params['name']
    base = _command_argv(ctx.container_commands.get(engine), engine, f'the {engine} CLI',
                         f'container {name}')
    stop_timeout = params.get('stop_timeout', core.CONTAINER_DEFAULT_STOP_TIMEOUT)
    # -t takes whole seconds; round up so the container gets at least the time recorded
    stop = base + ['stop', '-t', str(int(math.ceil(stop_timeout))), name]
    rc, out, err = _run_command(stop, ctx, timeout=stop_timeout + COMMAND_GRACE)
    if rc != 0:
        if _no_such_container(_output(out, err)):
            return f'no {engine} container {name} (never created, or already removed): nothing to stop'
        raise core.UndoError(f'{" ".join(stop)} exited {rc}: {_output(out, err)}')
    remove = base + ['rm', name]
    rc, out, err = _run_command(remove, ctx)
    if rc != 0 and not _no_such_container(_output(out, err)):
        raise core.UndoError(f'stopped {engine} container {name}, but {" ".join(remove)} exited {rc}: '
                             f'{_output(out, err)}')
    return f'stopped and removed {engine} container {name}'


# ---------------------------------------------------------------------------------------------------------------
# kind: service_pause (a production service stopped to borrow its GPUs, by the paused_service module; undo starts
# it again)
#
# A pause frees the service's GPU memory, so it is a stop, never SIGSTOP, and the params hold what starting it again
# needs. A ``process`` service is started again by ``spawn_detached`` with the argv, environment, working directory
# and log file read from /proc before the stop; a systemd unit or a container keeps its own definition, so
# ``systemctl start`` or ``<engine> start`` brings it back. ``pid`` and ``start_time`` are those of the process that
# was stopped (for the record, and to tell that it still runs when the stop never happened); ``how`` says how it
# stopped. The undo is safe when the stop never happened (a pending entry of a killed run): a service that runs
# already is left alone.


SERVICE_SETTLE = 0.5
SERVICE_LOG_TAIL_LINES = 20
SERVICE_LOG_TAIL_MAX_BYTES = 64 * 1024


def _undo_service_pause(params, ctx):
    if params['manager'] == 'process':
        return _resume_process(params, ctx)
    if params['manager'] == 'systemd':
        return _resume_unit(params, ctx)
    return _resume_container(params, ctx)


def _service_process_running(params, ctx):
    """The pid of the paused service when it runs: the pidfile's live process with the recorded argv, or the very
    process that was to be stopped (same pid and start time: the stop never happened). None otherwise."""
    try:
        named = proc.read_pidfile(params['pidfile'])
    except proc.PidfileError:
        named = None  # not a pid: the start writes the pidfile anew
    if named is not None and proc.pid_alive(named, ctx.procfs_root) \
            and proc.read_proc_cmdline(named, ctx.procfs_root) == params['argv']:
        return named
    pid = params.get('pid')
    if pid is not None and proc.pid_alive(pid, ctx.procfs_root):
        info = proc.read_proc_stat(pid, ctx.procfs_root)
        if info is not None and info['start_time'] == params.get('start_time'):
            return pid
    return None


def _spawned_exit(pid):
    child = proc.SPAWNED.get(pid)
    if child is None or child.poll() is None:
        return 'exited'
    if child.returncode < 0:
        return f'was killed by signal {-child.returncode}'
    return f'exited with status {child.returncode}'


def _file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _log_tail(path, start):
    """The last lines ``path`` got after byte ``start``, for an error message."""
    if path == os.devnull:
        return '(none: its output went to /dev/null)'
    try:
        with open(path, 'rb') as handle:
            size = os.fstat(handle.fileno()).st_size
            begin = start if start <= size else 0  # a log truncated meanwhile is read from its start
            handle.seek(max(begin, size - SERVICE_LOG_TAIL_MAX_BYTES))
            text = handle.read().decode('utf-8', 'replace')
    except OSError as exc:
        return f'(cannot read it: {exc})'
    lines = text.splitlines()[-SERVICE_LOG_TAIL_LINES:]
    return '\n'.join(lines) if lines else '(nothing)'


def _resume_process(params, ctx):
    name, pidfile, log_path, argv = params['name'], params['pidfile'], params['log_path'], params['argv']
    running = _service_process_running(params, ctx)
    if running is not None:
        return f'service {name} is already running (pid {running}): nothing to start'
    log_start = _file_size(log_path)
    # argv[0] only in messages: the rest of the command line may hold a secret (an API key)
    try:
        pid = proc.spawn_detached(argv, params['environment'], log_path, pidfile, params['working_dir'])
    except OSError as exc:
        raise core.UndoError(f'cannot start service {name} again ({argv[0]} in {params["working_dir"]}): {exc}; start '
                             'it by hand') from exc
    started = time.monotonic()
    deadline = started + max(SERVICE_SETTLE, params.get('start_timeout', core.SERVICE_START_TIMEOUT))
    while True:
        up = proc.pidfile_alive(pidfile, ctx.procfs_root)
        now = time.monotonic()
        if up is None and not proc.pid_alive(pid, ctx.procfs_root):
            died = (f'service {name} was started again (pid {pid}) but {_spawned_exit(pid)} after '
                    f'{now - started:.1f}s')
            raise core.UndoError(f'{died}{_remove_pidfile(pidfile, pid, ctx)}; last lines of its output ({log_path}):\n'
                                 f'{_log_tail(log_path, log_start)}')
        if up is not None and now - started >= SERVICE_SETTLE:
            return f'started service {name} again: pid {up}, output to {log_path}'
        if now >= deadline:
            raise core.UndoError(f'service {name} was started again (pid {pid}) but pidfile {pidfile} names no live '
                                 f'process {deadline - started:.1f}s later; look at its output ({log_path})')
        time.sleep(ctx.poll_interval)


def _service_command(configured, name, package, what):
    try:
        return _command_argv(configured, name, package, what)
    except core.UndoError:
        raise core.UndoError(f'{name} is not installed on this host ({package}), so {what} cannot be started again; '
                             'install it or start the service by hand, then run the undo again') from None


def _unit_state(systemctl, unit, ctx):
    """``systemctl is-active UNIT``: active, inactive, failed, activating... (it exits 3 for all but active)."""
    argv = systemctl + ['is-active', unit]
    rc, out, err = _run_command(argv, ctx)
    state = out.strip().splitlines()[0].strip() if out.strip() else ''
    if not state or ' ' in state:
        raise core.UndoError(f'{" ".join(argv)} exited {rc}: {_output(out, err) or "(no output)"}')
    return state


def _resume_unit(params, ctx):
    unit = params['unit']
    systemctl = _service_command(ctx.systemctl_command, 'systemctl', 'package systemd', f'unit {unit}')
    state = _unit_state(systemctl, unit, ctx)
    if state in UNIT_UP_STATES + UNIT_STARTING_STATES:
        return f'unit {unit} is already {state}: nothing to start'
    timeout = params.get('start_timeout', core.SERVICE_START_TIMEOUT)
    start = systemctl + ['start', unit]
    rc, out, err = _run_command(start, ctx, timeout=timeout + COMMAND_GRACE)
    if rc != 0:
        raise core.UndoError(f'{" ".join(start)} exited {rc}: {_output(out, err)} (see journalctl -u {unit})')
    deadline = time.monotonic() + timeout
    while True:
        state = _unit_state(systemctl, unit, ctx)
        if state in UNIT_UP_STATES:
            return f'started unit {unit} again'
        if state not in UNIT_STARTING_STATES:
            raise core.UndoError(f'unit {unit} is {state} after {" ".join(start)} (see journalctl -u {unit})')
        if time.monotonic() >= deadline:
            raise core.UndoError(f'unit {unit} is still {state} {timeout}s after {" ".join(start)} (see journalctl -u '
                                 f'{unit})')
        time.sleep(ctx.poll_interval)


def _container_state(base, engine, name, ctx, missing_ok=False):
    """``<engine> container inspect -f {{.State.Status}} NAME``: running, exited, created, restarting... A container
    that does not exist is None with ``missing_ok``, else core.UndoError."""
    argv = base + ['container', 'inspect', '-f', '{{.State.Status}}', name]
    rc, out, err = _run_command(argv, ctx)
    said = _output(out, err)
    if rc != 0:
        if _no_such_container(said) or 'no such object' in said.lower():
            if missing_ok:
                return None
            raise core.UndoError(f'there is no {engine} container {name} any more (removed while paused?), so it '
                                 'cannot be started again: start the service by hand')
        raise core.UndoError(f'{" ".join(argv)} exited {rc}: {said}')
    state = out.strip()
    if not state or ' ' in state or '\n' in state:
        raise core.UndoError(f'{" ".join(argv)} printed {out[:120]!r}, not a container state')
    return state


def _resume_container(params, ctx):
    engine, name = params['manager'], params['container']
    base = _service_command(ctx.container_commands.get(engine), engine, f'the {engine} CLI', f'container {name}')
    state = _container_state(base, engine, name, ctx)
    if state in ('running', 'restarting'):
        return f'{engine} container {name} is already {state}: nothing to start'
    timeout = params.get('start_timeout', core.SERVICE_START_TIMEOUT)
    start = base + ['start', name]
    rc, out, err = _run_command(start, ctx, timeout=timeout + COMMAND_GRACE)
    if rc != 0:
        raise core.UndoError(f'{" ".join(start)} exited {rc}: {_output(out, err)}')
    deadline = time.monotonic() + timeout
    while True:
        state = _container_state(base, engine, name, ctx)
        if state == 'running':
            return f'started {engine} container {name} again'
        if state not in ('restarting', 'created'):
            raise core.UndoError(f'{engine} container {name} is {state} after {" ".join(start)} (see {engine} logs '
                                 f'{name})')
        if time.monotonic() >= deadline:
            raise core.UndoError(f'{engine} container {name} is still {state} {timeout}s after {" ".join(start)}')
        time.sleep(ctx.poll_interval)


# ---------------------------------------------------------------------------------------------------------------
# kinds: gateway_config and kernel_module (their companions do the work: _gateway_swap, _tbnet_driver)


def _undo_gateway_config(params, ctx):
    swap = core.companion('gateway_swap')
    systemctl = ctx.systemctl_command[0] if ctx.systemctl_command else 'systemctl'
    try:
        return swap.undo_change(params, procfs_root=ctx.procfs_root, systemctl=systemctl)
    except (swap.GatewayError, OSError) as exc:
        raise core.UndoError(str(exc)) from None


def _undo_kernel_module(params, ctx):
    driver = core.companion('tbnet_driver')
    try:
        return driver.undo_change(params)
    except (driver.DriverError, OSError) as exc:
        raise core.UndoError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------------------
# kind: build_dir (a private directory made for a build, such as the candidate driver's; undo removes it)


def _undo_build_dir(params, ctx):
    path = params['path']
    if not os.path.lexists(path):
        return f'removed nothing: {path} is absent'
    if os.path.islink(path) or not os.path.isdir(path):
        raise core.UndoError(f'{path} is not a directory now; a build_dir entry only removes the directory it made: '
                             'look at it by hand')
    if os.listdir(path) and not os.path.isfile(os.path.join(path, core.BUILD_DIR_MARKER)):
        raise core.UndoError(f'{path} has files but no {core.BUILD_DIR_MARKER} marker: not the directory inferlab '
                             'made, so it is left alone; remove it by hand once you have looked')
    shutil.rmtree(path)
    return f'removed the build directory {path}'


def read_setting(path):
    """The value of a setting file (a sysctl, a driver's parameter) as the ledger records it (core.sysctl_text); None
    when the path is gone."""
    try:
        with open(path, encoding='utf-8') as handle:
            return core.sysctl_text(handle.read())
    except FileNotFoundError:
        return None


def write_setting(path, value):
    """Write a setting file (the kernel parses the text as ``sysctl -w`` or a module option would give it) and read
    it back."""
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(str(value) + '\n')
    return read_setting(path)


def _put_back_setting(label, path, previous, value, by_hand):
    """Write ``previous`` back to the setting file ``path`` while it still holds ``value`` (inferlab's); a value at
    neither is someone else's and left alone, ``by_hand`` saying how to put it back once they know who set it."""
    found = read_setting(path)
    if found is None:
        return f'{path} is gone (its network namespace or driver with it?): nothing to put back'
    if found == previous:
        return f'{label} is {previous!r} already: nothing to put back'
    if found != value:
        raise core.UndoError(f'{label} is {found!r} now, neither the {value!r} inferlab wrote nor the {previous!r} it '
                             f'found: someone changed it since, so it is left alone; put it back yourself '
                             f'({by_hand}) once you know who did')
    try:
        back = write_setting(path, previous)
    except OSError as exc:
        raise core.UndoError(f'could not write {previous!r} to {path}: {exc}') from None
    if back != previous:
        raise core.UndoError(f'wrote {previous!r} to {path}, but it reads {back!r}')
    return f'{label} back to {previous!r} (from {value!r})'


def _undo_sysctl(params, ctx):
    name, previous = params['name'], params['previous']
    return _put_back_setting(name, params['path'], previous, params['value'], f'sysctl -w {name}="{previous}"')


def _undo_driver_param(params, ctx):
    label = f'{params["driver"]}\'s parameter {params["name"]}'
    return _put_back_setting(label, params['path'], params['previous'], params['value'],
                             f'echo {params["previous"]} > {params["path"]}')


def _undo_nic_setting(params, ctx):
    interface, group, previous, value = params['interface'], params['group'], params['previous'], params['value']
    prefix = ethtool.ethtool_argv(ctx.ethtool_command)
    if prefix is None:
        raise core.UndoError(f'ethtool is not installed on this host (package ethtool), so the {group} of '
                             f'{interface} cannot be set back; install it and run the undo again')

    def runner(argv, timeout=60):
        return _run_command(argv, ctx, timeout=timeout)

    try:
        found = ethtool.read_group(prefix, group, interface, runner=runner)
    except ethtool.EthtoolError as exc:
        # ethtool's ioctl and netlink paths say it differently
        if any(text in str(exc).lower() for text in ('no such device', 'no device matches name')):
            return f'{interface} no longer exists, and its settings went with it: nothing to put back'
        raise core.UndoError(f'cannot read the {group} of {interface}: {exc}') from None
    now = {name: (found.get(name) or {}).get('value') for name in value}
    foreign = {name: text for name, text in now.items() if text not in (previous[name], value[name])}
    if foreign:
        raise core.UndoError(
            f'{interface}: ' + ', '.join(f'{name} is {text!r} now, neither the {value[name]!r} inferlab set nor the '
                                         f'{previous[name]!r} it found' for name, text in sorted(foreign.items()))
            + '; someone changed it since, so nothing is set back; put it back yourself ('
            + ' '.join(ethtool.set_argv(['ethtool'], group, interface, previous)) + ') once you know who did')
    back = {name: previous[name] for name, text in now.items() if text != previous[name]}
    if not back:
        return f'the {group} of {interface} are as found before already: nothing to put back'
    argv = ethtool.set_argv(prefix, group, interface, back)
    rc, out, err = _run_command(argv, ctx)
    if rc != 0:
        raise core.UndoError(f'{" ".join(argv)} exited {rc}: {(err.strip() or out.strip())[:300]}')
    try:
        wrong = ethtool.differences(ethtool.read_group(prefix, group, interface, runner=runner), back)
    except ethtool.EthtoolError as exc:
        raise core.UndoError(f'set the {group} of {interface} back, but cannot read them again: {exc}') from None
    if wrong:
        raise core.UndoError(f'set the {group} of {interface} back, but they read {wrong} (expected {back})')
    return f'the {group} of {interface} back to ' + ', '.join(f'{n} {back[n]}' for n in sorted(back))


# ---------------------------------------------------------------------------------------------------------------
# kind name -> its undo, for every kind of the registry (_ledger_core.KINDS)

UNDO = {
    'process': undo_process,
    'sampler': undo_process,
    'file': _undo_file,
    'tc_profile': _undo_tc_profile,
    'systemd_unit': _undo_systemd_unit,
    'container': _undo_container,
    'service_pause': _undo_service_pause,
    'gateway_config': _undo_gateway_config,
    'kernel_module': _undo_kernel_module,
    'build_dir': _undo_build_dir,
    'sysctl': _undo_sysctl,
    'nic_setting': _undo_nic_setting,
    'driver_param': _undo_driver_param,
}

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The change ledger of inferlab: its format, the per-host lock and the undo of every kind.

This file is the single implementation. The ``change_ledger`` module imports it; the ``ledger`` role copies it alone
to a host as ``<inferlab_state_dir>/bin/inferlab_ledger.py``, where the restore playbook and the host-side watchdog run
it without a controller::

    python3 inferlab_ledger.py undo   --ledger-dir DIR --host NAME [--id ID ...] [--run-id RUN] [--check] [--json]
                                      [--procfs-root DIR] [--tc TC] [--systemctl SYSTEMCTL] [--docker DOCKER]
                                      [--podman PODMAN]
    python3 inferlab_ledger.py status --ledger-dir DIR --host NAME [--json]
    python3 inferlab_ledger.py unlock --ledger-dir DIR --host NAME (--run-id RUN | --force) [--json]
    python3 inferlab_ledger.py watch-link --ledger-dir DIR --host NAME --id ID --interface IF --peer ADDR
                                      [--deadline SECONDS] [--ping PING] [--json]
    python3 inferlab_ledger.py deadman --ledger-dir DIR --host NAME --renew-file PATH --deadline SECONDS
                                      [--poll SECONDS] [--run-id RUN] [--self-id ID] [--json]

``undo`` is the host's part of the restore; ``status`` and ``unlock`` serve the restore playbook. ``watch-link`` and
``deadman`` are watchdogs that run detached (started through the host's process manager and recorded as ``process``
entries), log to stderr with timestamps, and restore without a controller. ``watch-link`` puts the stock driver back
when the direct link carries nothing after a candidate load. ``deadman`` is the dead man's switch of a run that
borrows production: the controller renews it by touching PATH and disarms it by creating ``PATH.disarm`` (SIGTERM,
the undo of its process entry, disarms it too); when PATH goes unrenewed past the deadline it undoes every open
entry but its own (``--self-id``, then marked undone), newest first, as ``--run-id``: the lock of that run does not
stop it, the lock of another run does.

Exit codes: 0 success (for ``deadman``: disarmed, or fired and every undo succeeded); 1 at least one undo failed; 2
usage error; 3 the ledger or its lock refused the request (locked by another run, unknown id, unreadable file); 4 an
unexpected error (a bug: the traceback is in the output). With ``--json`` stdout is one JSON object for 0, 1, 3 and 4.

It must stay standard library only, free of any ``ansible`` import, and compile on Python 3.8 (the oldest target
Python of ansible-core 2.19).

Format
------
``<ledger_dir>/<host>.jsonl`` is append-only, one JSON object per line::

    {"id": ..., "time": "2026-11-30T10:15:00Z", "kind": "process", "params": {...}, "state": "pending"}

plus optional ``run_id`` and ``error``. The current state of an id is its last line; every line carries the full
kind and params, so the last line alone describes the entry. ``pending`` is written (and fsynced) BEFORE the change,
``applied`` after it, then ``undone`` or ``undo_failed`` (with ``error``). A line cut short by a killed writer is
reported in ``problems`` and otherwise ignored: since ``pending`` is on disk before any change starts, a cut line
never hides a change.

Kinds are a closed registry, ``KINDS``: kind name -> ``Kind(check, undo)``. ``check(params)`` validates (and may
normalise) the params at record time and raises ``LedgerError``; ``undo(params, ctx)`` reverts the change, returns a
one-line description and raises ``UndoError`` when it cannot. An undo must be safe when the change was never made
(a ``pending`` entry whose run was killed before the change). Adding a kind is two functions and one entry.

The kinds: ``process`` and ``sampler`` (a process known by pid and start time, or by pidfile and cmdline; undo
signals it), ``file`` (undo restores a backup or removes a created file), ``tc_profile`` (undo deletes the root
qdisc inferlab made), ``systemd_unit`` (a transient unit from systemd-run; undo stops it), ``container`` (a docker
or podman container; undo stops and removes it), ``service_pause`` (a production service stopped to borrow its
GPUs; undo starts it again: a process from its recorded argv, environment, working directory and log file, a unit
with ``systemctl start``, a container with ``<engine> start``), and ``gateway_config`` (a temporary gateway config;
undo puts the original bytes back from the backup and restarts the instances that run another config, one at a time
behind the front: ``inferlab_gateway_swap.py``, installed beside this script, does that part), and ``kernel_module``
(the candidate ``thunderbolt_net`` loaded for a while; undo reloads the distribution's driver and verifies it
through sysfs: ``inferlab_tbnet_driver.py``), and ``build_dir`` (a private build directory; undo removes it when it
carries inferlab's marker file or is empty).
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import importlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

FORMAT = 'inferlab.ledger/1'
STATES = ('pending', 'applied', 'undone', 'undo_failed')
OPEN_STATES = ('pending', 'applied', 'undo_failed')
# state -> the states a ``mark`` may move it to (marking to the current state is a no-op, handled apart)
MARK_TRANSITIONS = {
    'pending': ('applied', 'undone'),
    'applied': ('undone',),
    'undo_failed': ('undone',),
    'undone': (),
}
# What a line of the ledger may move an entry to (the marks, and the undo's undone and undo_failed); a line that
# repeats the state (new params) is fine. Anything else - an entry reopened after its undo - is a problem reported
# by the reader, never a reopened entry.
LINE_TRANSITIONS = {
    'pending': ('applied', 'undone', 'undo_failed'),
    'applied': ('undone', 'undo_failed'),
    'undo_failed': ('undone',),
    'undone': (),
}

EXIT_OK = 0
EXIT_UNDO_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_CRASHED = 4

Kind = collections.namedtuple('Kind', ['check', 'undo'])


class LedgerError(Exception):
    """The ledger refused a request: bad params, unknown kind or id, unreadable file."""


class LockError(LedgerError):
    """The lock is held by another run (or could not be taken or released). ``holder`` is the lock file's holder
    when another run holds it (``{'problem': ...}`` for a malformed lock file), else None."""

    def __init__(self, message, holder=None):
        super().__init__(message)
        self.holder = holder


class UndoError(LedgerError):
    """One entry could not be undone; the message says why and what to do."""


class UndoContext:
    """What an undo function may need from its surroundings; injectable for tests.

    ``tc_command``: the argv prefix that runs ``tc`` (default: ``tc`` from PATH or an sbin directory); a test points
    it into a network namespace of its own, e.g. ``['ip', 'netns', 'exec', NS, 'tc']``. ``systemctl_command`` and
    ``container_commands`` (engine name -> argv prefix) do the same for ``systemctl``, ``docker`` and ``podman``.
    ``run_command``: a callable ``(argv, timeout) -> (rc, stdout, stderr)`` that runs every command an undo runs
    (default: subprocess with ``LC_ALL=C``); the managed_process module passes one built on its own
    ``run_command``, so that its tests see the undo's commands like its other ones."""

    def __init__(self, procfs_root='/proc', poll_interval=0.05, kill_wait=5.0, tc_command=None,
                 systemctl_command=None, container_commands=None, run_command=None):
        self.procfs_root = procfs_root
        self.poll_interval = poll_interval
        self.kill_wait = kill_wait
        self.tc_command = list(tc_command) if tc_command else None
        self.systemctl_command = list(systemctl_command) if systemctl_command else None
        self.container_commands = {k: list(v) for k, v in (container_commands or {}).items() if v}
        self.run_command = run_command


# ---------------------------------------------------------------------------------------------------------------
# time, ids, paths


def utc_now():
    """UTC time as ISO 8601 with a Z, to the second."""
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def _utc_stamp():
    return time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())


def new_id(kind, taken=()):
    """A fresh entry id ``<UTC stamp>-<kind>-<4 hex>``, not in ``taken``."""
    while True:
        candidate = f'{_utc_stamp()}-{kind}-{os.urandom(2).hex()}'
        if candidate not in taken:
            return candidate


def kind_of_id(entry_id):
    """The kind an id of ``new_id`` names (``20261130T101502Z-systemd_unit-3fa9`` -> ``systemd_unit``)."""
    return entry_id.split('-', 1)[-1].rsplit('-', 1)[0]


def _check_host(host):
    if not isinstance(host, str) or not host or host.startswith('.') or '/' in host or '\0' in host:
        raise LedgerError(f'invalid ledger host name {host!r}: it names a file in the ledger directory, so it must '
                          'be non-empty, without "/" and not start with "."')


def ledger_path(ledger_dir, host):
    _check_host(host)
    return os.path.join(ledger_dir, host + '.jsonl')


def lock_path(ledger_dir, host):
    _check_host(host)
    return os.path.join(ledger_dir, host + '.lock')


def _ensure_dir(ledger_dir):
    if not os.path.isdir(ledger_dir):
        # 0700: entries can hold the command line and environment needed to restart a paused service
        os.makedirs(ledger_dir, mode=0o700, exist_ok=True)


def fsync_dir(path):
    """fsync a directory, so that a file created or renamed in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------------------
# reading and writing the ledger


def read_ledger(ledger_dir, host):
    """Read ``<host>.jsonl``. Returns ``(entries, problems)``: the well-formed lines in file order (each dict gets
    ``_line``, its 1-based line number) and human-readable problems with the lines that were skipped: malformed
    ones, and lines that move an entry backwards (LINE_TRANSITIONS), e.g. ``applied`` after ``undone``."""
    path = ledger_path(ledger_dir, host)
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        raise LedgerError(f'cannot read ledger {path}: {exc}') from exc
    entries = []
    problems = []
    states = {}  # id -> its state so far, for the transition check
    complete = data.endswith(b'\n')
    lines = data.split(b'\n')
    if complete:
        lines = lines[:-1]
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        unterminated = number == len(lines) and not complete
        try:
            entry = json.loads(raw.decode('utf-8'))
        except ValueError as exc:
            if unterminated:
                problems.append(f'{path} line {number}: truncated last line (a writer was killed mid-write), '
                                f'ignored: {raw[:80]!r}')
            else:
                problems.append(f'{path} line {number}: not valid JSON (a write was cut short?), ignored: {exc}')
            continue
        problem = _line_problem(entry)
        if problem:
            problems.append(f'{path} line {number}: {problem}, ignored')
            continue
        previous = states.get(entry['id'])
        if previous not in (None, entry['state']) and entry['state'] not in LINE_TRANSITIONS[previous]:
            problems.append(f'{path} line {number}: entry {entry["id"]} goes from {previous} back to '
                            f'{entry["state"]}, which no inferlab writer does; ignored (the entry stays {previous})')
            continue
        states[entry['id']] = entry['state']
        if unterminated:
            problems.append(f'{path} line {number}: the last line has no newline (a writer was killed before '
                            'finishing it); it parses, so it is used')
        entry['_line'] = number
        entries.append(entry)
    return entries, problems


def _line_problem(entry):
    if not isinstance(entry, dict):
        return 'not a JSON object'
    for key in ('id', 'time', 'kind', 'state'):
        if not isinstance(entry.get(key), str) or not entry.get(key):
            return f'missing or empty "{key}"'
    if entry['state'] not in STATES:
        return f'unknown state {entry["state"]!r}'
    if not isinstance(entry.get('params'), dict):
        return '"params" is not an object'
    return None


def current_entries(entries):
    """Fold the lines into the current view: an ordered dict id -> its last line (plus ``first_line``, the line
    where the id first appeared), in the order of first appearance."""
    view = collections.OrderedDict()
    for entry in entries:
        current = dict(entry)
        first = view.get(entry['id'])
        current['first_line'] = first['first_line'] if first else entry.get('_line', 0)
        view[entry['id']] = current
    return view


def _plain(entry):
    """An entry without the internal line numbers."""
    return {k: v for k, v in entry.items() if not k.startswith('_') and k != 'first_line'}


def _public(entry):
    """An entry as a result shows it: plain, its environment values redacted (redact_line)."""
    return redact_line(_plain(entry))


def redact_line(line):
    """A ledger line or entry with its params' environment values redacted (redact_params), for a result."""
    if not isinstance(line.get('params'), dict):
        return dict(line)
    return {**line, 'params': redact_params(line['params'])}


def entries(ledger_dir, host):
    """The current entries of a host's ledger, in order of first appearance, unredacted: for the code that acts on
    them (a start compares the command it would run with the recorded one). Results show ``status``'s."""
    lines, _problems = read_ledger(ledger_dir, host)
    return [_plain(e) for e in current_entries(lines).values()]


# ---------------------------------------------------------------------------------------------------------------
# secrets: environment values (a paused service's, a rank's HF_TOKEN) stay in the ledger file (0600, in a 0700
# directory) and in the process; every result shows their names and only the values of the allow-listed settings.

# never secrets, and needed to read a run: NCCL's and Gloo's transport settings, the GPUs and the import path
VISIBLE_ENV_PREFIXES = ('NCCL_', 'GLOO_', 'CUDA_VISIBLE_DEVICES', 'PYTHONPATH')
REDACTED = '<redacted>'


def redact_environment(environment):
    """``environment`` with every value replaced by REDACTED, except the allow-listed names'."""
    return {k: v if str(k).startswith(VISIBLE_ENV_PREFIXES) else REDACTED for k, v in environment.items()}


def _redact_assignment(text):
    key, sep, _value = text.partition('=')
    return text if not sep or key.startswith(VISIBLE_ENV_PREFIXES) else f'{key}={REDACTED}'


def redact_command(argv):
    """A start command with the values of its environment assignments redacted: systemd-run's ``--setenv=K=V``,
    docker's and podman's ``-e K=V``, ``--env K=V`` and ``--env=K=V``."""
    redacted, value_next = [], False
    for arg in argv:
        if not isinstance(arg, str):
            redacted.append(arg)
        elif value_next:
            redacted.append(_redact_assignment(arg))
        elif arg.startswith(('--setenv=', '--env=')):
            option, _sep, assignment = arg.partition('=')
            redacted.append(f'{option}={_redact_assignment(assignment)}')
        else:
            redacted.append(arg)
        value_next = arg in ('-e', '--env', '--setenv')
    return redacted


def redact_params(params):
    """An entry's params as shown to callers: ``environment`` and ``command`` redacted."""
    shown = dict(params)
    if isinstance(shown.get('environment'), dict):
        shown['environment'] = redact_environment(shown['environment'])
    if isinstance(shown.get('command'), list):
        shown['command'] = redact_command(shown['command'])
    return shown


def _make_line(entry_id, kind, params, state, run_id=None, error=None):
    line = {'id': entry_id, 'time': utc_now(), 'kind': kind, 'params': params, 'state': state}
    if run_id:
        line['run_id'] = run_id
    if error:
        line['error'] = error
    return line


def append_line(ledger_dir, host, line):
    """Append one line with O_APPEND and fsync it. A previous line left without its newline by a killed writer is
    closed first, so the new line never merges into it."""
    if line.get('state') not in STATES:
        raise LedgerError(f'refusing to write unknown state {line.get("state")!r}')
    _ensure_dir(ledger_dir)
    path = ledger_path(ledger_dir, host)
    created = not os.path.exists(path)
    payload = (json.dumps(line, sort_keys=True, separators=(',', ':')) + '\n').encode('utf-8')
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b'\n':
            payload = b'\n' + payload
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(ledger_dir)
    return line


def check_kind(kind, params):
    """Validate ``params`` for ``kind``; returns the normalised params. Raises LedgerError."""
    if kind not in KINDS:
        raise LedgerError(f'unknown ledger kind {kind!r}: known kinds are {", ".join(sorted(KINDS))}')
    if not isinstance(params, dict):
        raise LedgerError(f'params of a {kind} entry must be a mapping, got {type(params).__name__}')
    params = KINDS[kind].check(dict(params))
    try:
        json.dumps(params)
    except (TypeError, ValueError) as exc:
        raise LedgerError(f'params of a {kind} entry must be JSON-serialisable: {exc}') from exc
    return params


def record(ledger_dir, host, kind, params, run_id=None, check_mode=False):
    """Record a ``pending`` entry BEFORE making a change. Returns the line written (with its new ``id``)."""
    params = check_kind(kind, params)
    _check_lock_owner(ledger_dir, host, run_id)
    entries, _problems = read_ledger(ledger_dir, host)
    line = _make_line(new_id(kind, {e['id'] for e in entries}), kind, params, 'pending', run_id=run_id)
    if not check_mode:
        append_line(ledger_dir, host, line)
    return line


def mark(ledger_dir, host, entry_id, state, params=None, run_id=None, check_mode=False):
    """Move entry ``entry_id`` to ``state`` (``applied`` or ``undone``). ``params``, when given, are merged into the
    entry's params (e.g. the pid and start time of a process, known only once it runs). Returns
    ``(changed, line, previous_state)``; marking to the current state with no new params writes nothing."""
    if state not in ('applied', 'undone'):
        raise LedgerError(f'an entry can be marked applied or undone, not {state!r}')
    _check_lock_owner(ledger_dir, host, run_id)
    entries, _problems = read_ledger(ledger_dir, host)
    view = current_entries(entries)
    if entry_id not in view:
        raise LedgerError(f'no entry {entry_id!r} in the ledger of {host} ({ledger_path(ledger_dir, host)})')
    current = view[entry_id]
    previous = current['state']
    merged = dict(current['params'])
    if params:
        merged.update(params)
        merged = check_kind(current['kind'], merged)
    if previous == state and merged == current['params']:
        return False, _plain(current), previous
    if previous != state and state not in MARK_TRANSITIONS.get(previous, ()):
        raise LedgerError(f'entry {entry_id} is {previous} and cannot be marked {state}; record a new entry for a '
                          'new change')
    line = _make_line(entry_id, current['kind'], merged, state, run_id=run_id or current.get('run_id'))
    if not check_mode:
        append_line(ledger_dir, host, line)
    return True, line, previous


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
    lines, _problems = read_ledger(ledger_dir, host)
    view = current_entries(lines).values()
    open_names = {_managed_name(e) for e in view if e['state'] in OPEN_STATES} - {None}
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
    leader = read_proc_stat(pid, procfs_root)
    leader_alive = leader is not None and leader['state'] not in ('Z', 'X')
    if leader_alive and leader['start_time'] != start_time:
        return []  # the pid belongs to another process now
    pids = _group_members(pid, procfs_root) if params.get('process_group') else []
    if leader_alive and pid not in pids:
        pids.append(pid)
    found = []
    for member in sorted(pids):
        argv = read_proc_cmdline(member, procfs_root)
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
    except UndoError:
        return []  # not installed on this host: nothing of that kind can run
    try:
        if entry['kind'] == 'systemd_unit':
            state = _unit_state(base, params['unit'], ctx)
        else:
            state = _container_state(base, engine, params['name'], ctx, missing_ok=True)
    except UndoError as exc:
        return [{'id': entry['id'], 'kind': entry['kind'], 'pid': params.get('pid'), **found,
                 'message': f'cannot tell whether {found["what"]} still runs: {exc}'}]
    if state not in running:
        return []
    return [{'id': entry['id'], 'kind': entry['kind'], 'pid': params.get('pid'), **found,
             'message': f'{found["what"]} is still {state} although entry {entry["id"]} is undone'}]


def status(ledger_dir, host):
    """The current view of a host's ledger and lock: ``{ledger, entries, open, lock, problems}``."""
    entries, problems = read_ledger(ledger_dir, host)
    view = current_entries(entries)
    holder, lock_problem = read_lock(ledger_dir, host)
    if lock_problem:
        problems.append(lock_problem)
    current = [_public(e) for e in view.values()]
    return {
        'ledger': ledger_path(ledger_dir, host),
        'entries': current,
        'open': [e['id'] for e in current if e['state'] in OPEN_STATES],
        'lock': holder,
        'problems': problems,
    }


# ---------------------------------------------------------------------------------------------------------------
# the per-host lock


class _DirGuard:
    """flock on the ledger directory. It serialises, among processes on this machine, lock acquire/break/release
    and undo, so two runs breaking the same stale lock cannot both win and two undos cannot interleave."""

    def __init__(self, ledger_dir):
        self.ledger_dir = ledger_dir
        self.fd = None

    def __enter__(self):
        _ensure_dir(self.ledger_dir)
        self.fd = os.open(self.ledger_dir, os.O_RDONLY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc_info):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        return False


def read_lock(ledger_dir, host):
    """Returns ``(holder, problem)``: holder is the lock's JSON (None when unlocked); problem describes a lock file
    that exists but cannot be read (holder is then ``{}``)."""
    path = lock_path(ledger_dir, host)
    try:
        with open(path, 'rb') as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return {}, f'lock file {path} cannot be read: {exc}'
    try:
        holder = json.loads(raw.decode('utf-8'))
    except ValueError:
        holder = None
    if not isinstance(holder, dict) or not isinstance(holder.get('run_id'), str):
        return {}, (f'lock file {path} is empty or malformed ({len(raw)} bytes): a run was probably killed while '
                    'taking it')
    return holder, None


def describe_holder(holder):
    return (f'run {holder.get("run_id", "?")} (controller {holder.get("controller", "?")}, '
            f'pid {holder.get("pid", "?")}, since {holder.get("time", "?")})')


def _locked_message(host, holder, problem=None):
    if problem:
        head = f'ledger for {host} is locked, but {problem}'
    else:
        head = f'ledger for {host} is locked by {describe_holder(holder)}'
    return f'{head}; wait for it, or if that run is dead, run playbooks/restore.yml with ledger_break_stale_lock=true'


def pid_alive(pid, procfs_root='/proc'):
    """Whether ``pid`` names a live (non-zombie) process on this machine."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    info = read_proc_stat(pid, procfs_root)
    return not (info is not None and info['state'] in ('Z', 'X'))


def acquire_lock(ledger_dir, host, run_id, controller=None, pid=None, break_stale=False, holder_alive=None,
                 check_mode=False):
    """Take the lock of ``host`` for ``run_id``. Returns ``{changed, lock, took_over, message}``.

    Re-acquiring by the same run_id from the same ``controller`` is a no-op; the same run_id from another controller
    is another run (a run id copied, or two controllers that named their runs alike) and is refused like one. A lock
    held by another run raises LockError naming the holder,
    unless ``break_stale`` and the holder is known dead: it must have taken the lock from the same ``controller``
    and its pid must not be alive there. ``holder_alive`` is that liveness as checked on the controller by the
    caller; when None it is checked here, which is only valid when this machine is that controller (same
    hostname). An empty or malformed lock file (a run killed while taking it) is taken over by ``break_stale``."""
    if not run_id:
        raise LockError(f'a run_id is needed to take the ledger lock of {host}')
    controller = controller or socket.gethostname()
    pid = int(pid) if pid is not None else os.getpid()
    path = lock_path(ledger_dir, host)
    mine = {'run_id': run_id, 'controller': controller, 'pid': pid, 'time': utc_now()}
    with _DirGuard(ledger_dir):
        holder, problem = read_lock(ledger_dir, host)
        if holder and holder.get('run_id') == run_id:
            if holder.get('controller') != controller:
                raise LockError(f'{_locked_message(host, holder)}: the same run id {run_id}, but taken from '
                                f'controller {holder.get("controller")}, not from this controller {controller}; '
                                'two runs may not share an id', holder=holder)
            return {'changed': False, 'lock': holder, 'took_over': None,
                    'message': f'the ledger of {host} is already locked by this run {run_id}'}
        if holder is None:
            if not check_mode:
                _write_new_file(path, mine)
                fsync_dir(ledger_dir)
            return {'changed': True, 'lock': mine, 'took_over': None,
                    'message': f'locked the ledger of {host} for run {run_id}'}
        if not break_stale:
            raise LockError(_locked_message(host, holder, problem),
                            holder={'problem': problem} if problem else holder)
        if problem:
            took_over = {'problem': problem}
            what = problem
        else:
            _check_stale(host, holder, controller, holder_alive, path)
            took_over = dict(holder)
            what = describe_holder(holder)
        if not check_mode:
            tmp = f'{path}.{os.getpid()}.tmp'
            _write_new_file(tmp, mine)
            os.replace(tmp, path)
            fsync_dir(ledger_dir)
        return {'changed': True, 'lock': mine, 'took_over': took_over,
                'message': f'took over the stale ledger lock of {host} from {what}'}


def _check_stale(host, holder, controller, holder_alive, path):
    """Raise LockError unless ``holder`` is known dead on ``controller``."""
    locked = _locked_message(host, holder)
    if holder.get('controller') != controller:
        raise LockError(f'{locked}; it was taken from controller {holder.get("controller")}, not from this '
                        f'controller {controller}, so its pid cannot be checked from here: break it from '
                        f'{holder.get("controller")}, or remove {path} by hand once you know that run is dead')
    if holder_alive is None:
        if socket.gethostname() != controller:
            raise LockError(f'{locked}; breaking it needs the liveness of pid {holder.get("pid")} on controller '
                            f'{controller}, which cannot be checked on {socket.gethostname()}')
        holder_alive = pid_alive(holder.get('pid'))
    if holder_alive:
        raise LockError(f'{locked}; not breaking it: pid {holder.get("pid")} is still alive on controller '
                        f'{controller}', holder=holder)


def _write_new_file(path, data):
    """Create ``path`` atomically (O_CREAT|O_EXCL) holding ``data`` as JSON, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, (json.dumps(data, sort_keys=True) + '\n').encode('utf-8'))
        os.fsync(fd)
    finally:
        os.close(fd)


def release_lock(ledger_dir, host, run_id=None, force=False, check_mode=False):
    """Release the lock; only its holder's ``run_id`` may, unless ``force``. Returns ``{changed, lock, message}``
    where ``lock`` is the holder that was released (None when there was no lock)."""
    if not run_id and not force:
        raise LockError(f'releasing the ledger lock of {host} needs the run_id of its holder (or force)')
    path = lock_path(ledger_dir, host)
    free = {'changed': False, 'lock': None, 'message': f'the ledger of {host} is not locked'}
    if not os.path.isdir(ledger_dir):
        return free
    with _DirGuard(ledger_dir):
        holder, problem = read_lock(ledger_dir, host)
        if holder is None:
            return free
        if not force and holder.get('run_id') != run_id:
            if problem:
                raise LockError(f'not releasing the ledger lock of {host} for run {run_id}: {problem}')
            raise LockError(f'not releasing the ledger lock of {host}: it is held by {describe_holder(holder)}, '
                            f'not by run {run_id}')
        if not check_mode:
            os.unlink(path)
            fsync_dir(ledger_dir)
        return {'changed': True, 'lock': holder,
                'message': f'released the ledger lock of {host} held by {problem or describe_holder(holder)}'}


def _check_lock_owner(ledger_dir, host, run_id):
    """A run that names itself may only write when the lock is free or its own."""
    if not run_id:
        return
    holder, problem = read_lock(ledger_dir, host)
    if holder is not None and holder.get('run_id') != run_id:
        raise LockError(_locked_message(host, holder, problem))


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
    with _DirGuard(ledger_dir):
        return _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude)


def _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude=None):
    _check_lock_owner(ledger_dir, host, run_id)
    entries, problems = read_ledger(ledger_dir, host)
    view = current_entries(entries)
    if ids:
        missing = [i for i in ids if i not in view]
        if missing:
            raise LedgerError(f'no entry {", ".join(missing)} in the ledger of {host}')
    excluded = set(exclude or ())
    selected = [e for e in view.values() if (not ids or e['id'] in ids) and e['id'] not in excluded]
    skipped = [e['id'] for e in selected if e['state'] not in OPEN_STATES]
    todo = sorted((e for e in selected if e['state'] in OPEN_STATES), key=lambda e: e['first_line'], reverse=True)
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
            kind = KINDS.get(entry['kind'])
            if kind is None:
                raise UndoError(f'unknown kind {entry["kind"]!r}: this ledger tool ({FORMAT}) cannot undo it')
            message = kind.undo(dict(entry['params']), ctx)
        except UndoError as exc:
            error = str(exc)
        except Exception as exc:  # recorded as undo_failed and reported: never swallowed
            error = f'undo of the {entry["kind"]} entry failed: {type(exc).__name__}: {exc}'
        new_state = 'undo_failed' if error else 'undone'
        line = _make_line(entry['id'], entry['kind'], entry['params'], new_state,
                          run_id=run_id or entry.get('run_id'), error=error)
        try:
            append_line(ledger_dir, host, line)
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
            append_line(ledger_dir, host, line)
        except OSError as exc:
            left.append((line, detail, exc))
    return left


# ---------------------------------------------------------------------------------------------------------------
# starting a detached process (managed_process's `process` manager, and the undo that resumes a paused service)


# The children spawned by this process, by pid: their exit status is ours to read, and keeping the Popen objects
# stops subprocess from reaping them behind our back when they would be garbage-collected.
SPAWNED = {}


def make_parent_dir(path):
    """Create the directory of ``path`` (and its parents) with mode 0755 when missing."""
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, mode=0o755, exist_ok=True)


def write_pidfile(pidfile, pid):
    """Write ``pid`` to ``pidfile`` atomically (a temporary file renamed over it), so a reader never sees it
    half-written."""
    make_parent_dir(pidfile)
    tmp = os.path.join(os.path.dirname(pidfile), f'.{os.path.basename(pidfile)}.{os.getpid()}.tmp')
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f'{int(pid)}\n'.encode('ascii'))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, pidfile)


def spawn_detached(argv, env, log_path, pidfile, working_dir=None):
    """Start ``argv`` with exactly ``env``, detached from the caller, and return its pid once ``pidfile`` names it.

    The child outlives whoever started it (an Ansible module over SSH with pipelining, or this script run by a
    watchdog): it gets a session of its own (no hangup from the caller's session, its own process group, which the
    undo of a process signals whole), stdin from /dev/null, stdout and stderr appended to ``log_path`` and no other
    descriptor, so it holds no pipe of an SSH channel open. It runs in ``working_dir``, or ``/`` (like a service).
    Popen returns once the program is exec'd (or raises OSError when it cannot be), so /proc then describes the new
    program."""
    make_parent_dir(log_path)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        with open(os.devnull, 'rb') as devnull:
            proc = subprocess.Popen(argv, stdin=devnull, stdout=log_fd, stderr=log_fd, env=env,
                                    cwd=working_dir or '/', close_fds=True, start_new_session=True)
    finally:
        os.close(log_fd)
    SPAWNED[proc.pid] = proc
    write_pidfile(pidfile, proc.pid)
    return proc.pid


# ---------------------------------------------------------------------------------------------------------------
# kind: process


def read_proc_stat(pid, procfs_root='/proc'):
    """Parse ``<procfs_root>/<pid>/stat``: ``{state, ppid, pgrp, start_time}`` (start_time = field 22, clock ticks
    after boot), or None when there is no such process."""
    try:
        with open(os.path.join(procfs_root, str(int(pid)), 'stat'), 'rb') as handle:
            raw = handle.read().decode('utf-8', 'replace')
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    # field 2 (comm) is in parentheses and may itself contain ") ": split after the LAST ')'
    rest = raw[raw.rindex(')') + 2:].split()
    # rest[0] is field 3 (state), so field N is rest[N - 3]
    return {'state': rest[0], 'ppid': int(rest[1]), 'pgrp': int(rest[2]), 'start_time': int(rest[19])}


def read_proc_cmdline(pid, procfs_root='/proc'):
    """The argv of ``pid`` as a list, or None when there is no such process."""
    try:
        with open(os.path.join(procfs_root, str(int(pid)), 'cmdline'), 'rb') as handle:
            raw = handle.read()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    return [part.decode('utf-8', 'replace') for part in raw.split(b'\0')[:-1]] if raw else []


def process_identity(pid, procfs_root='/proc'):
    """What a ``process`` entry records about a running process: ``{pid, start_time, cmdline}``; None if gone."""
    info = read_proc_stat(pid, procfs_root)
    if info is None:
        return None
    return {'pid': int(pid), 'start_time': info['start_time'], 'cmdline': read_proc_cmdline(pid, procfs_root)}


def _check_process(params):
    _no_unknown('process', params, {'pid', 'start_time', 'cmdline', 'pidfile', 'stop_timeout', 'process_group'})
    if params.get('pid') is None and not params.get('pidfile'):
        raise LedgerError('a process entry needs "pid" (with "start_time") or, when recorded before the process '
                          'starts, "pidfile" (with "cmdline")')
    if params.get('pid') is not None:
        params['pid'] = _as_int(params['pid'], 'pid', minimum=1)
        if params.get('start_time') is None:
            raise LedgerError(f'a process entry with pid {params["pid"]} needs "start_time" (field 22 of '
                              '/proc/PID/stat), so that undo never signals a process that reused the pid')
    if params.get('start_time') is not None:
        params['start_time'] = _as_int(params['start_time'], 'start_time', minimum=0)
    cmdline = params.get('cmdline')
    if params.get('pid') is None and not cmdline:
        raise LedgerError('a process entry known only by its pidfile needs "cmdline", to check that the process '
                          'the pidfile names is the one that was started')
    if cmdline is not None and not isinstance(cmdline, str) and not (
            isinstance(cmdline, list) and all(isinstance(a, str) for a in cmdline)):
        raise LedgerError('"cmdline" of a process entry must be a string or a list of strings')
    pidfile = params.get('pidfile')
    if pidfile is not None and (not isinstance(pidfile, str) or not os.path.isabs(pidfile)):
        raise LedgerError(f'"pidfile" of a process entry must be an absolute path, got {pidfile!r}')
    params['stop_timeout'] = _as_float(params.get('stop_timeout', 10), 'stop_timeout')
    params['process_group'] = _as_bool(params.get('process_group', False), 'process_group')
    return params


def _no_unknown(kind, params, known):
    unknown = sorted(set(params) - known)
    if unknown:
        raise LedgerError(f'unknown params for a {kind} entry: {", ".join(unknown)} (known: '
                          f'{", ".join(sorted(known))})')


def _as_int(value, name, minimum=None):
    if isinstance(value, bool):
        raise LedgerError(f'"{name}" must be an integer, got {value!r}')
    try:
        number = int(str(value).strip())
    except ValueError:
        raise LedgerError(f'"{name}" must be an integer, got {value!r}') from None
    if minimum is not None and number < minimum:
        raise LedgerError(f'"{name}" must be at least {minimum}, got {number}')
    return number


def _as_float(value, name):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LedgerError(f'"{name}" must be a number of seconds, got {value!r}') from None
    if not math.isfinite(number) or number < 0:
        # an infinite or NaN stop timeout would make an undo wait forever
        raise LedgerError(f'"{name}" must be a finite number of seconds, not negative, got {value!r}')
    return number


def _as_bool(value, name):
    if isinstance(value, bool):
        return value
    if str(value).lower() in ('true', 'yes', '1'):
        return True
    if str(value).lower() in ('false', 'no', '0'):
        return False
    raise LedgerError(f'"{name}" must be a boolean, got {value!r}')


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


def _group_members(pgid, procfs_root):
    """Live pids whose process group is ``pgid``."""
    members = []
    for name in os.listdir(procfs_root):
        if name.isdigit():
            info = read_proc_stat(name, procfs_root)
            if info and info['pgrp'] == pgid and info['state'] not in ('Z', 'X'):
                members.append(int(name))
    return members


def _undo_process(params, ctx):
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
    info = read_proc_stat(pid, ctx.procfs_root)
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
        actual = read_proc_cmdline(pid, ctx.procfs_root)
        if not _cmdline_matches(params.get('cmdline'), actual):
            return (f'pid {pid} ({source}) runs "{_cmdline_text(actual)}", not "{label}": nothing to kill'
                    + _remove_pidfile(pidfile, pid, ctx, reused=True))

    def alive():
        if group:
            return bool(_group_members(pid, ctx.procfs_root))
        current = read_proc_stat(pid, ctx.procfs_root)
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
    raise UndoError(f'{what} ("{label}") is still alive after SIGTERM and SIGKILL (stuck in the kernel, state D?); '
                    'stop it by hand')


def _signal(pid, group, signum):
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError as exc:
        raise UndoError(f'not allowed to signal pid {pid}: {exc} (run the undo as the user that started it, or as '
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
    if not pidfile:
        return None
    try:
        with open(pidfile) as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UndoError(f'cannot read pidfile {pidfile}: {exc}') from exc
    if not text:
        return None
    try:
        return int(text.split()[0])
    except ValueError:
        raise UndoError(f'pidfile {pidfile} does not hold a pid: {text[:40]!r}') from None


def _remove_pidfile(pidfile, pid, ctx, reused=False):
    """Remove our pidfile, unless it names another live process (or ``reused``: ``pid`` now belongs to another
    process that the pidfile may describe)."""
    if not pidfile or not os.path.lexists(pidfile):
        return ''
    try:
        named = _read_pidfile(pidfile)
    except UndoError:
        named = None
    if named is not None and named != pid and pid_alive(named, ctx.procfs_root):
        return f'; left pidfile {pidfile}: it names another live process {named}'
    if reused and named == pid:
        return f'; left pidfile {pidfile}: its pid now belongs to another process'
    os.unlink(pidfile)
    return f'; removed pidfile {pidfile}'


# ---------------------------------------------------------------------------------------------------------------
# kind: file


def _check_file(params):
    _no_unknown('file', params, {'path', 'backup', 'existed'})
    path = params.get('path')
    if not isinstance(path, str) or not os.path.isabs(path):
        raise LedgerError(f'"path" of a file entry must be an absolute path, got {path!r}')
    if 'existed' in params:
        params['existed'] = _as_bool(params['existed'], 'existed')
    backup = params.get('backup')
    if backup is not None:
        if not isinstance(backup, str) or not os.path.isabs(backup):
            raise LedgerError(f'"backup" of a file entry must be an absolute path, got {backup!r}')
        if params.get('existed') is False:
            raise LedgerError('a file entry has either "backup" (the file existed) or "existed: false", not both')
        if os.path.normpath(backup) == os.path.normpath(path):
            raise LedgerError(f'the backup of {path} cannot be the file itself')
        params['existed'] = True
    elif params.get('existed') is not False:
        raise LedgerError(f'a file entry for {path} needs "backup" (a copy taken before the change) or '
                          '"existed: false" (the change creates it)')
    return params


def _undo_file(params, ctx):
    path = params['path']
    if params.get('existed') is False:
        if os.path.isdir(path) and not os.path.islink(path):
            raise UndoError(f'{path} is a directory now; a file entry only removes files: remove it by hand')
        if not os.path.lexists(path):
            return f'removed nothing: {path} is absent (it was never written)'
        os.unlink(path)
        return f'removed {path} (it did not exist before the change)'
    backup = params['backup']
    if not os.path.isfile(backup):
        raise UndoError(f'backup {backup} of {path} is missing, so the file cannot be restored; restore {path} by '
                        'hand')
    if os.path.isdir(path) and not os.path.islink(path):
        raise UndoError(f'{path} is a directory now; cannot restore the file from {backup}')
    tmp = os.path.join(os.path.dirname(path), f'.{os.path.basename(path)}.inferlab-restore.{os.getpid()}')
    try:
        shutil.copy2(backup, tmp)  # content, mode and times
        st = os.stat(backup)
        if os.geteuid() == 0:
            os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return f'restored {path} from {backup} (mode {st.st_mode & 0o7777:04o}); the backup is kept'


# ---------------------------------------------------------------------------------------------------------------
# kind: tc_profile (a link profile: tc qdiscs on one interface's egress, made by the link_profile module)
#
# The module's own logic lives in _tc.py; this script is copied to hosts alone, so it keeps this small copy of the
# test "is the root qdisc ours": a root tbf with the recorded handle (1ab:), alone or with the pfifo 1ac: under it.
# tests/unit/plugins/module_utils/test_tc.py checks that it agrees with _tc.classify on every fixture.

TC_ROOT_HANDLE = '1ab:'
TC_CHILD_HANDLE = '1ac:'
TC_PROFILES = ('tx_cliff', 'lossy')
TC_INGRESS_KINDS = ('ingress', 'clsact')
TC_SBIN = ('/usr/sbin', '/sbin', '/usr/local/sbin')


def _check_tc_profile(params):
    known = {'interface', 'profile', 'handle', 'rate_mbit', 'burst_kb', 'latency_ms', 'pfifo_limit'}
    _no_unknown('tc_profile', params, known)
    interface = params.get('interface')
    if (not isinstance(interface, str) or not interface or len(interface) > 15 or '/' in interface
            or any(c.isspace() for c in interface) or interface in ('.', '..')):
        raise LedgerError(f'"interface" of a tc_profile entry must be an interface name (1-15 characters, no "/" '
                          f'or spaces), got {interface!r}')
    if params.get('profile') not in TC_PROFILES:
        raise LedgerError(f'"profile" of a tc_profile entry must be one of {", ".join(TC_PROFILES)} (clean is the '
                          f'absence of a profile, nothing to record), got {params.get("profile")!r}')
    params['handle'] = params.get('handle') or TC_ROOT_HANDLE
    handle = params['handle']
    if (not isinstance(handle, str) or not handle.endswith(':') or not 1 <= len(handle) - 1 <= 4
            or any(c not in '0123456789abcdef' for c in handle[:-1]) or handle == '0:'):
        raise LedgerError(f'"handle" of a tc_profile entry must be a qdisc handle such as {TC_ROOT_HANDLE!r}, '
                          f'got {handle!r}')
    for name in ('rate_mbit', 'burst_kb', 'latency_ms', 'pfifo_limit'):
        if params.get(name) is not None:
            params[name] = _as_int(params[name], name, minimum=1)
    return params


def _tc_root(qdiscs, handle=TC_ROOT_HANDLE):
    """``(state, description)`` of ``tc -j qdisc show`` output (parsed): ``none`` (no root qdisc, or the kernel's
    default, handle 0:), ``ours`` (tbf ``handle`` alone or with the pfifo 1ac: under it) or ``foreign``."""
    egress = [q for q in qdiscs if isinstance(q, dict) and q.get('kind') not in TC_INGRESS_KINDS]
    roots = [q for q in egress if q.get('root')]
    described = ', '.join(f'{q.get("kind")} {q.get("handle")}' + (' root' if q.get('root') else
                                                                  f' parent {q.get("parent")}') for q in egress)
    if not roots:
        return 'none', 'no root qdisc'
    root = roots[0]
    if root.get('handle') == '0:':
        return 'none', f'the kernel default root qdisc ({root.get("kind")} 0:)'
    children = [q for q in egress if not q.get('root')]
    ours = root.get('kind') == 'tbf' and root.get('handle') == handle and all(
        q.get('kind') == 'pfifo' and q.get('handle') == TC_CHILD_HANDLE and q.get('parent') == handle + '1'
        for q in children) and len(children) <= 1
    return ('ours' if ours else 'foreign'), described


def _tc_argv(ctx):
    if ctx.tc_command:
        return list(ctx.tc_command)
    found = shutil.which('tc') or shutil.which('tc', path=os.pathsep.join(TC_SBIN))
    if not found:
        raise UndoError('tc is not installed on this host (package iproute2), so the link profile cannot be '
                        'removed; install it and run the undo again')
    return [found]


def _run_command(argv, ctx, timeout=60):
    """Run one command of an undo: ``(rc, stdout, stderr)``; UndoError when it cannot run at all."""
    if ctx.run_command is not None:
        return ctx.run_command(argv, timeout)
    env = dict(os.environ, LC_ALL='C')
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UndoError(f'{" ".join(argv)} could not run: {exc}') from exc
    return proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace')


def _undo_tc_profile(params, ctx):
    interface, handle, profile = params['interface'], params.get('handle') or TC_ROOT_HANDLE, params['profile']
    tc = _tc_argv(ctx)
    show = tc + ['-j', 'qdisc', 'show', 'dev', interface]
    rc, out, err = _run_command(show, ctx)
    if rc != 0:
        if 'cannot find device' in err.lower():
            return f'{interface} no longer exists, and its qdiscs went with it: nothing to remove'
        raise UndoError(f'cannot read the qdiscs of {interface}: {" ".join(show)} exited {rc}: {err.strip()}')
    try:
        qdiscs = json.loads(out) if out.strip() else []
    except ValueError:
        raise UndoError(f'{" ".join(show)} printed something that is not JSON: {out[:120]!r}') from None
    if not isinstance(qdiscs, list):
        raise UndoError(f'{" ".join(show)} printed {type(qdiscs).__name__}, not a list of qdiscs')
    state, described = _tc_root(qdiscs, handle)
    if state == 'none':
        return f'no {profile} profile on {interface} ({described}): nothing to remove'
    if state == 'foreign':
        raise UndoError(f'{interface} has a root qdisc inferlab did not make ({described}); not deleting it. Look at '
                        f'`tc qdisc show dev {interface}`, remove it yourself if it is a leftover '
                        f'(tc qdisc del dev {interface} root), then run the undo again')
    delete = tc + ['qdisc', 'del', 'dev', interface, 'root']
    rc, out, err = _run_command(delete, ctx)
    if rc != 0:
        raise UndoError(f'{" ".join(delete)} exited {rc}: {err.strip() or out.strip()}')
    return f'removed the {profile} profile from {interface} ({described})'


# ---------------------------------------------------------------------------------------------------------------
# kinds: systemd_unit and container (started by the managed_process module, whose _process_manager.py builds the
# commands that start them; these undo them)
#
# The unit or container name is the identity: undo stops whatever runs under it, which is why the module only
# starts names that no one else runs (inferlab-<name> by default) and refuses a running one it has no entry for.
# ``pid`` and ``start_time`` (of the main process, once started) and ``command`` (the argv that started it) are
# kept for the record only.

UNIT_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9:_.-]*$')
CONTAINER_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
CONTAINER_ENGINES = ('docker', 'podman')
COMMAND_DIRS = ('/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin')
SYSTEMD_DEFAULT_STOP_TIMEOUT = 90.0  # systemd's DefaultTimeoutStopSec
CONTAINER_DEFAULT_STOP_TIMEOUT = 10.0  # docker's and podman's default for `stop`
# how long a stop command may take beyond the stop timeout it was given (the engine's own overhead)
COMMAND_GRACE = 60.0


def service_unit_name(unit):
    """``unit`` with its ``.service`` suffix (systemd adds it to a bare name, so both name the same unit); raises
    LedgerError for a name systemd would refuse or a unit type other than a service."""
    if isinstance(unit, str) and unit.endswith('.service'):
        unit = unit[:-len('.service')]
    if not isinstance(unit, str) or not UNIT_NAME_RE.match(unit) or len(unit) > 255 - len('.service') \
            or unit.endswith(('.scope', '.socket', '.timer', '.target', '.slice', '.mount', '.path')):
        raise LedgerError(f'"unit" must be a service unit name (letters, digits, ":", "_", ".", "-", starting with a '
                          f'letter or digit, optionally ending in .service), got {unit!r}')
    return unit + '.service'


def container_name(name):
    """``name`` if docker and podman accept it as a container name, else LedgerError."""
    if not isinstance(name, str) or not CONTAINER_NAME_RE.match(name) or len(name) > 253:
        raise LedgerError(f'a container name must match [A-Za-z0-9][A-Za-z0-9_.-]* (as docker and podman require), '
                          f'got {name!r}')
    return name


def _check_started_by_manager(kind, params):
    """The params a systemd_unit and a container share: ``command``, ``pid`` and ``start_time`` for the record."""
    command = params.get('command')
    if command is not None and not (isinstance(command, list) and command
                                    and all(isinstance(a, str) for a in command)):
        raise LedgerError(f'"command" of a {kind} entry must be the argv that started it, a list of strings')
    if params.get('pid') is not None:
        params['pid'] = _as_int(params['pid'], 'pid', minimum=1)
    if params.get('start_time') is not None:
        params['start_time'] = _as_int(params['start_time'], 'start_time', minimum=0)
    return params


def _check_systemd_unit(params):
    _no_unknown('systemd_unit', params, {'unit', 'stop_timeout', 'command', 'pid', 'start_time'})
    params['unit'] = service_unit_name(params.get('unit'))
    params['stop_timeout'] = _as_float(params.get('stop_timeout', SYSTEMD_DEFAULT_STOP_TIMEOUT), 'stop_timeout')
    return _check_started_by_manager('systemd_unit', params)


def _check_container(params):
    _no_unknown('container', params, {'engine', 'name', 'stop_timeout', 'command', 'pid', 'start_time'})
    if params.get('engine') not in CONTAINER_ENGINES:
        raise LedgerError(f'"engine" of a container entry must be one of {", ".join(CONTAINER_ENGINES)}, got '
                          f'{params.get("engine")!r}')
    params['name'] = container_name(params.get('name'))
    params['stop_timeout'] = _as_float(params.get('stop_timeout', CONTAINER_DEFAULT_STOP_TIMEOUT), 'stop_timeout')
    return _check_started_by_manager('container', params)


def _command_argv(configured, name, package, what):
    if configured:
        return list(configured)
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(COMMAND_DIRS))
    if not found:
        raise UndoError(f'{name} is not installed on this host ({package}), so {what} cannot be stopped; install it '
                        'or stop it by hand, then run the undo again')
    return [found]


def _output(out, err):
    return (err.strip() or out.strip()).replace('\n', ' ')


def _undo_systemd_unit(params, ctx):
    unit = params['unit']
    systemctl = _command_argv(ctx.systemctl_command, 'systemctl', 'package systemd', f'unit {unit}')
    stop = systemctl + ['stop', unit]
    rc, out, err = _run_command(stop, ctx, timeout=params.get('stop_timeout', SYSTEMD_DEFAULT_STOP_TIMEOUT)
                                + COMMAND_GRACE)
    said = _output(out, err)
    if rc != 0:
        if 'not loaded' in said.lower():
            return f'unit {unit} is not loaded (never started, or exited and collected): nothing to stop'
        if 'not been booted with systemd' in said.lower():
            return f'this host does not run systemd, so no unit {unit} can be running: nothing to stop'
        raise UndoError(f'{" ".join(stop)} exited {rc}: {said}')
    # a unit that failed stays listed until reset (unless collected already, which reads "not loaded")
    reset = systemctl + ['reset-failed', unit]
    rc, out, err = _run_command(reset, ctx)
    if rc != 0 and 'not loaded' not in _output(out, err).lower():
        raise UndoError(f'stopped unit {unit}, but {" ".join(reset)} exited {rc}: {_output(out, err)}')
    return f'stopped unit {unit}'


def _no_such_container(said):
    # docker: "Error response from daemon: No such container: NAME"; podman: '... found: no such container'
    return 'no such container' in said.lower()


def _undo_container(params, ctx):
    engine, name = params['engine'], params['name']
    base = _command_argv(ctx.container_commands.get(engine), engine, f'the {engine} CLI',
                         f'container {name}')
    stop_timeout = params.get('stop_timeout', CONTAINER_DEFAULT_STOP_TIMEOUT)
    # -t takes whole seconds; round up so the container gets at least the time recorded
    stop = base + ['stop', '-t', str(int(math.ceil(stop_timeout))), name]
    rc, out, err = _run_command(stop, ctx, timeout=stop_timeout + COMMAND_GRACE)
    if rc != 0:
        if _no_such_container(_output(out, err)):
            return f'no {engine} container {name} (never created, or already removed): nothing to stop'
        raise UndoError(f'{" ".join(stop)} exited {rc}: {_output(out, err)}')
    remove = base + ['rm', name]
    rc, out, err = _run_command(remove, ctx)
    if rc != 0 and not _no_such_container(_output(out, err)):
        raise UndoError(f'stopped {engine} container {name}, but {" ".join(remove)} exited {rc}: '
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

SERVICE_MANAGERS = ('process', 'systemd', 'docker', 'podman')
SERVICE_COMMON_KEYS = {'manager', 'name', 'start_timeout', 'how', 'pid', 'start_time'}
SERVICE_MANAGER_KEYS = {
    'process': {'pidfile', 'argv', 'environment', 'working_dir', 'log_path'},
    'systemd': {'unit'},
    'docker': {'container'},
    'podman': {'container'},
}
SERVICE_START_TIMEOUT = 30.0
# a process started again must still run this long (seconds) after its start, else the undo fails quoting its log
SERVICE_SETTLE = 0.5
SERVICE_LOG_TAIL_LINES = 20
SERVICE_LOG_TAIL_MAX_BYTES = 64 * 1024
UNIT_UP_STATES = ('active', 'reloading')
UNIT_STARTING_STATES = ('activating',)


def _check_absolute_param(params, key):
    value = params.get(key)
    if not isinstance(value, str) or not os.path.isabs(value) or '\0' in value:
        raise LedgerError(f'"{key}" of a service_pause entry must be an absolute path, got {value!r}')
    return value


def _check_service_pause(params):
    manager = params.get('manager')
    if manager not in SERVICE_MANAGERS:
        raise LedgerError(f'"manager" of a service_pause entry must be one of {", ".join(SERVICE_MANAGERS)}, got '
                          f'{manager!r}')
    _no_unknown(f'service_pause (manager {manager})', params, SERVICE_COMMON_KEYS | SERVICE_MANAGER_KEYS[manager])
    name = params.get('name')
    if not isinstance(name, str) or not name.strip() or any(c in name for c in '\0\n\r'):
        raise LedgerError(f'"name" of a service_pause entry must be the name of the service (one line, not empty), '
                          f'got {name!r}')
    if manager == 'process':
        for key in ('pidfile', 'working_dir', 'log_path'):
            _check_absolute_param(params, key)
        argv = params.get('argv')
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) and '\0' not in a for a in argv)
                and argv[0]):
            raise LedgerError('"argv" of a service_pause entry must be the command that starts the service again, a '
                              'non-empty list of strings')
        environment = params.get('environment')
        if not isinstance(environment, dict) or not all(
                isinstance(k, str) and k and '=' not in k and '\0' not in k and isinstance(v, str) and '\0' not in v
                for k, v in environment.items()):
            # the values are never quoted: they may hold secrets
            raise LedgerError('"environment" of a service_pause entry must map variable names (not empty, without '
                              '"=") to strings')
    elif manager == 'systemd':
        params['unit'] = service_unit_name(params.get('unit'))
    else:
        params['container'] = container_name(params.get('container'))
    if params.get('pid') is not None:
        params['pid'] = _as_int(params['pid'], 'pid', minimum=1)
        if params.get('start_time') is None:
            raise LedgerError(f'a service_pause entry with pid {params["pid"]} needs "start_time" (field 22 of '
                              '/proc/PID/stat), so that a process that reused the pid is never taken for it')
    if params.get('start_time') is not None:
        params['start_time'] = _as_int(params['start_time'], 'start_time', minimum=0)
    params['start_timeout'] = _as_float(params.get('start_timeout', SERVICE_START_TIMEOUT), 'start_timeout')
    how = params.get('how')
    if how is not None and (not isinstance(how, str) or '\n' in how):
        raise LedgerError(f'"how" of a service_pause entry must be a one-line note, got {how!r}')
    return params


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
        named = _read_pidfile(params['pidfile'])
    except UndoError:
        named = None  # not a pid: the start writes the pidfile anew
    if named is not None and pid_alive(named, ctx.procfs_root) \
            and read_proc_cmdline(named, ctx.procfs_root) == params['argv']:
        return named
    pid = params.get('pid')
    if pid is not None and pid_alive(pid, ctx.procfs_root):
        info = read_proc_stat(pid, ctx.procfs_root)
        if info is not None and info['start_time'] == params.get('start_time'):
            return pid
    return None


def _pidfile_alive(pidfile, ctx):
    """The pid ``pidfile`` names when that process is alive, else None."""
    try:
        named = _read_pidfile(pidfile)
    except UndoError:
        return None
    return named if named is not None and pid_alive(named, ctx.procfs_root) else None


def _spawned_exit(pid):
    proc = SPAWNED.get(pid)
    if proc is None or proc.poll() is None:
        return 'exited'
    if proc.returncode < 0:
        return f'was killed by signal {-proc.returncode}'
    return f'exited with status {proc.returncode}'


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
        pid = spawn_detached(argv, params['environment'], log_path, pidfile, params['working_dir'])
    except OSError as exc:
        raise UndoError(f'cannot start service {name} again ({argv[0]} in {params["working_dir"]}): {exc}; start it '
                        'by hand') from exc
    started = time.monotonic()
    deadline = started + max(SERVICE_SETTLE, params.get('start_timeout', SERVICE_START_TIMEOUT))
    while True:
        up = _pidfile_alive(pidfile, ctx)
        now = time.monotonic()
        if up is None and not pid_alive(pid, ctx.procfs_root):
            died = (f'service {name} was started again (pid {pid}) but {_spawned_exit(pid)} after '
                    f'{now - started:.1f}s')
            raise UndoError(f'{died}{_remove_pidfile(pidfile, pid, ctx)}; last lines of its output ({log_path}):\n'
                            f'{_log_tail(log_path, log_start)}')
        if up is not None and now - started >= SERVICE_SETTLE:
            return f'started service {name} again: pid {up}, output to {log_path}'
        if now >= deadline:
            raise UndoError(f'service {name} was started again (pid {pid}) but pidfile {pidfile} names no live '
                            f'process {deadline - started:.1f}s later; look at its output ({log_path})')
        time.sleep(ctx.poll_interval)


def _service_command(configured, name, package, what):
    try:
        return _command_argv(configured, name, package, what)
    except UndoError:
        raise UndoError(f'{name} is not installed on this host ({package}), so {what} cannot be started again; '
                        'install it or start the service by hand, then run the undo again') from None


def _unit_state(systemctl, unit, ctx):
    """``systemctl is-active UNIT``: active, inactive, failed, activating... (it exits 3 for all but active)."""
    argv = systemctl + ['is-active', unit]
    rc, out, err = _run_command(argv, ctx)
    state = out.strip().splitlines()[0].strip() if out.strip() else ''
    if not state or ' ' in state:
        raise UndoError(f'{" ".join(argv)} exited {rc}: {_output(out, err) or "(no output)"}')
    return state


def _resume_unit(params, ctx):
    unit = params['unit']
    systemctl = _service_command(ctx.systemctl_command, 'systemctl', 'package systemd', f'unit {unit}')
    state = _unit_state(systemctl, unit, ctx)
    if state in UNIT_UP_STATES + UNIT_STARTING_STATES:
        return f'unit {unit} is already {state}: nothing to start'
    timeout = params.get('start_timeout', SERVICE_START_TIMEOUT)
    start = systemctl + ['start', unit]
    rc, out, err = _run_command(start, ctx, timeout=timeout + COMMAND_GRACE)
    if rc != 0:
        raise UndoError(f'{" ".join(start)} exited {rc}: {_output(out, err)} (see journalctl -u {unit})')
    deadline = time.monotonic() + timeout
    while True:
        state = _unit_state(systemctl, unit, ctx)
        if state in UNIT_UP_STATES:
            return f'started unit {unit} again'
        if state not in UNIT_STARTING_STATES:
            raise UndoError(f'unit {unit} is {state} after {" ".join(start)} (see journalctl -u {unit})')
        if time.monotonic() >= deadline:
            raise UndoError(f'unit {unit} is still {state} {timeout}s after {" ".join(start)} (see journalctl -u '
                            f'{unit})')
        time.sleep(ctx.poll_interval)


def _container_state(base, engine, name, ctx, missing_ok=False):
    """``<engine> container inspect -f {{.State.Status}} NAME``: running, exited, created, restarting... A container
    that does not exist is None with ``missing_ok``, else UndoError."""
    argv = base + ['container', 'inspect', '-f', '{{.State.Status}}', name]
    rc, out, err = _run_command(argv, ctx)
    said = _output(out, err)
    if rc != 0:
        if _no_such_container(said) or 'no such object' in said.lower():
            if missing_ok:
                return None
            raise UndoError(f'there is no {engine} container {name} any more (removed while paused?), so it cannot '
                            'be started again: start the service by hand')
        raise UndoError(f'{" ".join(argv)} exited {rc}: {said}')
    state = out.strip()
    if not state or ' ' in state or '\n' in state:
        raise UndoError(f'{" ".join(argv)} printed {out[:120]!r}, not a container state')
    return state


def _resume_container(params, ctx):
    engine, name = params['manager'], params['container']
    base = _service_command(ctx.container_commands.get(engine), engine, f'the {engine} CLI', f'container {name}')
    state = _container_state(base, engine, name, ctx)
    if state in ('running', 'restarting'):
        return f'{engine} container {name} is already {state}: nothing to start'
    timeout = params.get('start_timeout', SERVICE_START_TIMEOUT)
    start = base + ['start', name]
    rc, out, err = _run_command(start, ctx, timeout=timeout + COMMAND_GRACE)
    if rc != 0:
        raise UndoError(f'{" ".join(start)} exited {rc}: {_output(out, err)}')
    deadline = time.monotonic() + timeout
    while True:
        state = _container_state(base, engine, name, ctx)
        if state == 'running':
            return f'started {engine} container {name} again'
        if state not in ('restarting', 'created'):
            raise UndoError(f'{engine} container {name} is {state} after {" ".join(start)} (see {engine} logs '
                            f'{name})')
        if time.monotonic() >= deadline:
            raise UndoError(f'{engine} container {name} is still {state} {timeout}s after {" ".join(start)}')
        time.sleep(ctx.poll_interval)


# ---------------------------------------------------------------------------------------------------------------
# kind: gateway_config


# Kinds whose undo needs more than this file import a companion module_utils by name (so that this file keeps no
# ansible import: it runs alone on hosts); a module that undoes such an entry imports the companion itself, which
# bundles it. On a host the ledger role installs each companion beside this script as inferlab_<name>.py.
COMPANIONS = {
    'gateway_swap': 'ansible_collections.inferlab.distributed.plugins.module_utils._gateway_swap',
    'tbnet_driver': 'ansible_collections.inferlab.distributed.plugins.module_utils._tbnet_driver',
}


def _companion(name):
    """The companion module ``name`` (COMPANIONS), imported when first needed: inside the collection as a
    module_utils, beside this script as ``inferlab_<name>.py``. It may import this module in turn, so it cannot be
    imported at the top."""
    try:
        return importlib.import_module(COMPANIONS[name])
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)  # `python3 -I` leaves the script's directory off sys.path
        try:
            return importlib.import_module(f'inferlab_{name}')
        except ImportError as exc:
            raise UndoError(f'this undo needs inferlab_{name}.py beside {__file__}: {exc}') from None


def _check_gateway_config(params):
    swap = _companion('gateway_swap')
    try:
        return swap.check_change_params(params)
    except swap.GatewayError as exc:
        raise LedgerError(str(exc)) from None


def _undo_gateway_config(params, ctx):
    swap = _companion('gateway_swap')
    systemctl = ctx.systemctl_command[0] if ctx.systemctl_command else 'systemctl'
    try:
        return swap.undo_change(params, procfs_root=ctx.procfs_root, systemctl=systemctl)
    except (swap.GatewayError, OSError) as exc:
        raise UndoError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------------------
# kind: kernel_module (the candidate thunderbolt_net, loaded for a while; _tbnet_driver.py does the work)


def _check_kernel_module(params):
    driver = _companion('tbnet_driver')
    try:
        return driver.check_change_params(params)
    except driver.DriverError as exc:
        raise LedgerError(str(exc)) from None


def _undo_kernel_module(params, ctx):
    driver = _companion('tbnet_driver')
    try:
        return driver.undo_change(params)
    except (driver.DriverError, OSError) as exc:
        raise UndoError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------------------
# kind: build_dir (a private directory made for a build, such as the candidate driver's; undo removes it)

BUILD_DIR_MARKER = '.inferlab-build-dir'
SYSTEM_DIRS = ('/lib/modules', '/usr/lib/modules', '/boot', '/etc', '/usr', '/bin', '/sbin', '/lib', '/proc', '/sys',
               '/dev')


def _check_build_dir(params):
    _no_unknown('build_dir', params, {'path', 'purpose'})
    path = params.get('path')
    if not isinstance(path, str) or not os.path.isabs(path):
        raise LedgerError(f'"path" of a build_dir entry must be an absolute path, got {path!r}')
    path = os.path.normpath(path)
    if path.count('/') < 2:
        raise LedgerError(f'a build_dir entry needs a directory at least two levels deep, got {path!r}')
    for system in SYSTEM_DIRS:
        if path == system or path.startswith(system + '/'):
            raise LedgerError(f'a build directory may not be under {system}: {path} (nothing inferlab builds may '
                              'land where the system keeps its own files)')
    params['path'] = path
    return params


def _undo_build_dir(params, ctx):
    path = params['path']
    if not os.path.lexists(path):
        return f'removed nothing: {path} is absent'
    if os.path.islink(path) or not os.path.isdir(path):
        raise UndoError(f'{path} is not a directory now; a build_dir entry only removes the directory it made: '
                        'look at it by hand')
    if os.listdir(path) and not os.path.isfile(os.path.join(path, BUILD_DIR_MARKER)):
        raise UndoError(f'{path} has files but no {BUILD_DIR_MARKER} marker: not the directory inferlab made, so '
                        'it is left alone; remove it by hand once you have looked')
    shutil.rmtree(path)
    return f'removed the build directory {path}'


# ---------------------------------------------------------------------------------------------------------------
# the registry of kinds: kind name -> Kind(check, undo). Add a kind here.

KINDS = {
    'process': Kind(_check_process, _undo_process),
    # a background counter sampler is a process; its own kind says in the ledger what it was
    'sampler': Kind(_check_process, _undo_process),
    'file': Kind(_check_file, _undo_file),
    # a link profile on an interface's egress; undo deletes our root qdisc, never a foreign one
    'tc_profile': Kind(_check_tc_profile, _undo_tc_profile),
    # a transient systemd service (systemd-run); undo stops it, and is a no-op when the unit is not loaded
    'systemd_unit': Kind(_check_systemd_unit, _undo_systemd_unit),
    # a docker or podman container; undo stops and removes it, and is a no-op when there is no such container
    'container': Kind(_check_container, _undo_container),
    # a production service paused (stopped) to borrow its GPUs; undo starts it again, and is a no-op when it runs
    'service_pause': Kind(_check_service_pause, _undo_service_pause),
    # a temporary gateway config (a fallback); undo puts the original bytes back and restarts the instances that
    # run another config, one at a time behind the front (plugins/module_utils/_gateway_swap.py)
    'gateway_config': Kind(_check_gateway_config, _undo_gateway_config),
    # the candidate thunderbolt_net loaded in place of the distribution's; undo puts the distribution's back
    # (plugins/module_utils/_tbnet_driver.py), or, in the netns lab, the fixture root's stock state
    'kernel_module': Kind(_check_kernel_module, _undo_kernel_module),
    # a private build directory (0700, outside the system's trees, with a marker file); undo removes it
    'build_dir': Kind(_check_build_dir, _undo_build_dir),
}


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


def _log(message):
    """One log line on stderr with a UTC timestamp: the watchdog runs detached, its output in a log file."""
    sys.stderr.write(f'{utc_now()} inferlab_ledger[{os.getpid()}]: {message}\n')
    sys.stderr.flush()


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
    holder, problem = read_lock(ledger_dir, host)
    if holder is not None:
        raise LockError(f'{_locked_message(host, holder, problem)} (this dead man\'s switch was armed without '
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
    _check_host(host)
    if any(math.isnan(value) or value <= 0 for value in (deadline_s, poll_s)):
        raise LedgerError(f'the deadline ({deadline_s}) and the poll interval ({poll_s}) must be positive seconds')
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
            holder, problem = read_lock(ledger_dir, host)
            _log(f'armed for the ledger of {host} in {ledger_dir}: deadline {deadline_s:g}s, renew file '
                 f'{renew_file}, disarm file {disarm_file}, run {run_id or "(none)"}, own entry '
                 f'{self_id or "(none)"}')
            if holder is not None and holder.get('run_id') != run_id:
                _log(f'warning: {problem or "the lock is held by " + describe_holder(holder)}; if this switch '
                     'fires while it is, it will undo nothing')
            reason = _deadman_wait(renew_file, disarm_file, deadline_s, poll_s, clock, sleep, phase)
        except _Disarmed:
            reason = None
        if phase['now'] != 'firing':
            phase['now'] = 'disarmed'
            why = reason or 'disarmed by SIGTERM (the undo of its process entry sends it)'
            _log(f'{why}: exiting, nothing undone')
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
                _log(f'cannot remove {path}: {exc}')


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
        _log(f'{renew_file} is absent: the deadline counts from now')
    while True:
        if os.path.lexists(disarm_file):
            phase['now'] = 'disarmed'  # from here on a SIGTERM only notes itself
            return f'disarmed: {disarm_file} exists'
        stamp, mtime = _renew_stamp(renew_file)
        now = clock.monotonic()
        if stamp is not None and stamp != seen:
            seen_at = now
            if seen is not None:
                _log(f'renewed: {renew_file} touched')
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


def own_systemd_unit(pid, procfs_root='/proc'):
    """The systemd service or scope this process runs in, from ``/proc/PID/cgroup`` (cgroup v2's ``0::`` line, or
    v1's ``name=systemd`` hierarchy): the last component of its path, or None outside a unit (a login session's
    processes are in a ``session-N.scope``, which no ledger entry names)."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(os.path.join(procfs_root, str(pid), 'cgroup'), encoding='utf-8') as handle:
            text = handle.read()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split(':', 2)
        if len(fields) == 3 and (fields[0] == '0' and fields[1] == '' or fields[1] == 'name=systemd'):
            last = fields[2].rstrip('/').rsplit('/', 1)[-1]
            if last.endswith(('.service', '.scope')):
                return last
    return None


def _unit_name(unit):
    return unit if '.' in unit else unit + '.service'  # systemctl's own reading of a bare name


def own_entry(ledger_dir, host, pid=None, procfs_root='/proc'):
    """The id of this process's own open entry, or None: a switch or watchdog started through the process manager
    is recorded before it starts, so it cannot be told its id. ``process``: the entry naming this pid;
    ``systemd_unit``: the entry naming the unit this process runs in (its undo would stop the switch itself)."""
    pid = os.getpid() if pid is None else pid
    unit = own_systemd_unit(pid, procfs_root)
    try:
        lines, _problems = read_ledger(ledger_dir, host)
    except LedgerError:
        return None
    for entry in current_entries(lines).values():
        if entry['state'] not in OPEN_STATES:
            continue
        if entry['kind'] == 'process' and entry['params'].get('pid') == pid:
            return entry['id']
        if entry['kind'] == 'systemd_unit' and unit and _unit_name(entry['params'].get('unit', '')) == unit:
            return entry['id']
    return None


def _deadman_fire(ledger_dir, host, run_id, self_id, reason, phase, procfs_root='/proc'):
    """The restore of a dead man's switch that expired: undo all but its own entry, then mark that one undone."""
    self_id = self_id or own_entry(ledger_dir, host, procfs_root=procfs_root)
    _log(f'firing: {reason}; undoing the open entries of {host}, newest first'
         + (f', all but its own {self_id}' if self_id else ''))
    result = {'fired': True, 'reason': reason, 'changed': False, 'undo': None, 'self': None, 'failed': [],
              'refused': False}
    try:
        if run_id is None:
            _check_lock_free(ledger_dir, host)
        outcome = undo(ledger_dir, host, run_id=run_id, exclude=[self_id] if self_id else None)
    except LedgerError as exc:
        result.update(refused=True, error=type(exc).__name__,
                      message=f'the dead man\'s switch fired: {reason}; but it undid nothing: {exc}')
        _log(f'refused: {exc}')
        return result
    for detail in outcome['details']:
        _log(f'{detail["result"]} {detail["id"]} ({detail["kind"]}): {detail["message"]}')
    result.update(undo=outcome, changed=outcome['changed'], failed=list(outcome['failed']))
    message = f'the dead man\'s switch fired: {reason}; {outcome["message"]}'
    if self_id:
        try:
            changed, line, previous = mark(ledger_dir, host, self_id, 'undone', run_id=run_id)
        except (LedgerError, OSError) as exc:  # OSError: a full or read-only ledger filesystem
            result['self'] = {'id': self_id, 'error': str(exc)}
            result['failed'].append({'id': self_id, 'kind': kind_of_id(self_id),
                                     'error': f'cannot mark its own entry undone: {exc}'})
            message += f'; its own entry {self_id} could not be marked undone: {exc}'
        else:
            result['self'] = {'id': self_id, 'marked': changed, 'previous': previous}
            result['changed'] = result['changed'] or changed
            message += f'; marked its own entry {line["id"]} undone (was {previous})'
    if phase['sigterm']:
        message += ' (a SIGTERM came while it restored: it finished first)'
    result['message'] = message
    _log(message)
    return result


# ---------------------------------------------------------------------------------------------------------------
# command line


def _parser():
    parser = argparse.ArgumentParser(
        prog='inferlab_ledger.py',
        description='The inferlab change ledger on this host: undo recorded changes, show the ledger, release its '
                    'lock, watch the direct link after a candidate driver load, run the dead man\'s switch of a run. '
                    'Exit codes: 0 success, 1 an undo failed, 2 usage error, 3 refused (lock held by another run, '
                    'unknown id, unreadable ledger), 4 unexpected error.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True

    def common(p):
        p.add_argument('--ledger-dir', required=True, help='the ledger directory (<inferlab_state_dir>/ledger)')
        p.add_argument('--host', required=True, help='whose ledger: <ledger-dir>/<host>.jsonl')
        p.add_argument('--json', action='store_true', help='print one JSON object instead of text')

    p_undo = sub.add_parser('undo', help='undo every open entry, newest first')
    common(p_undo)
    p_undo.add_argument('--id', action='append', dest='ids', metavar='ID', help='undo only this entry (repeatable)')
    p_undo.add_argument('--run-id', help='the run doing the undo: refuse if another run holds the lock')
    p_undo.add_argument('--check', action='store_true', help='only say what would be undone')
    p_undo.add_argument('--procfs-root', default='/proc', help='where procfs is mounted (default /proc)')
    p_undo.add_argument('--tc', dest='tc_command', help='the tc binary for tc_profile entries (default: tc from '
                        'PATH or /usr/sbin, /sbin)')
    p_undo.add_argument('--systemctl', help='the systemctl binary for systemd_unit and service_pause entries (default: '
                        'from PATH)')
    p_undo.add_argument('--docker', help='the docker binary for docker container and service_pause entries (default: '
                        'from PATH)')
    p_undo.add_argument('--podman', help='the podman binary for podman container and service_pause entries (default: '
                        'from PATH)')
    p_watch = sub.add_parser('watch-link', help='after a candidate driver load: undo it when the direct link carries '
                             'no traffic (no ping to the peer answered) within the deadline')
    common(p_watch)
    p_watch.add_argument('--id', required=True, help='the kernel_module entry of the candidate load')
    p_watch.add_argument('--interface', required=True, help='the direct-link interface')
    p_watch.add_argument('--peer', required=True, help="the peer's address on the direct link")
    p_watch.add_argument('--deadline', type=float, default=30.0, help='seconds (default 30)')
    p_watch.add_argument('--ping', help='the ping binary (default: from the sbin/bin directories)')
    p_deadman = sub.add_parser('deadman', help="the dead man's switch: wait while the controller renews the renew "
                               'file; when it is not renewed within the deadline, undo every open entry (all but '
                               '--self-id), newest first. <renew-file>.disarm or SIGTERM disarms it')
    common(p_deadman)
    p_deadman.add_argument('--renew-file', required=True, help='the file the controller touches to renew it')
    p_deadman.add_argument('--deadline', required=True, type=_seconds, help='seconds without a renewal before it '
                           'fires')
    p_deadman.add_argument('--poll', type=_seconds, default=1.0, help='seconds between looks (default 1)')
    p_deadman.add_argument('--run-id', help='the run that armed it: its lock does not stop the undo, the lock of '
                           'another run does (without it, any lock does)')
    p_deadman.add_argument('--self-id', help='its own process entry: not undone, marked undone once it fires')
    p_status = sub.add_parser('status', help='show the entries, the open ones, the lock and any problems')
    common(p_status)
    p_unlock = sub.add_parser('unlock', help='release the lock')
    common(p_unlock)
    holder = p_unlock.add_mutually_exclusive_group(required=True)
    holder.add_argument('--run-id', help='the run that holds the lock')
    holder.add_argument('--force', action='store_true', help='release it whoever holds it (the holder must be dead)')
    return parser


def _seconds(text):
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number of seconds: {text!r}') from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f'must be a positive number of seconds, got {text!r}')
    return value


def watch_link(ledger_dir, host, entry_id, interface, peer, deadline_s, ping=None):
    """The host-side link watchdog after a candidate driver load (started by tbnet_module, recorded as a process).

    Where the candidate's ``kernel_module`` entry describes the link (its ``link`` param), the watchdog is also the
    load's tail: it brings the link back as the host manages it (``bring_back_link``) and waits for carrier, speed,
    lanes and the peer's answer. Without it, it waits for a ping to the peer. When neither happens within the
    deadline, it undoes the entry, so the stock driver comes back without the controller."""
    driver = _companion('tbnet_driver')
    lines, _problems = read_ledger(ledger_dir, host)
    entry = current_entries(lines).get(entry_id)
    link = (entry or {}).get('params', {}).get('link')
    back = None
    try:
        if link:
            back = driver.bring_back_link(interface, link, entry['params']['sysfs_root'], {'ping': ping},
                                          timeout_s=deadline_s)
            ok, seconds, tries = True, back['seconds'], None
        else:
            ok, seconds, tries = driver.watch_link(interface, peer, deadline_s, ping)
            reason = f'no ping to {peer} over {interface} answered within {deadline_s:g}s ({tries} tries)'
    except driver.DriverError as exc:
        ok, seconds, tries = False, None, 0
        reason = str(exc)
    if ok:
        return {'changed': False, 'link': True, 'seconds': seconds, 'tries': tries, 'back': back,
                'message': f'the direct link carried traffic {seconds}s after the candidate load'
                           + (f' ({tries} tries)' if tries else '')}
    outcome = undo(ledger_dir, host, ids=[entry_id])
    return {'changed': outcome['changed'], 'link': False, 'seconds': seconds, 'tries': tries,
            'failed': outcome['failed'], 'undone': outcome['undone'],
            'message': f'{reason}: the candidate was unloaded ({outcome["message"]})'}


def _status_text(result):
    lines = [f'ledger {result["ledger"]}: {len(result["entries"])} entries, {len(result["open"])} open']
    lines += [f'{e["state"]} {e["id"]} {json.dumps(e["params"], sort_keys=True)}' for e in result['entries']]
    if result['lock']:
        lines.append(f'lock: held by {describe_holder(result["lock"])}')
    else:
        lines.append('lock: malformed' if result['lock'] == {} else 'lock: free')
    lines += [f'problem: {p}' for p in result['problems']]
    return lines


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        if args.command == 'undo':
            result = undo(args.ledger_dir, args.host, ids=args.ids, run_id=args.run_id,
                          ctx=UndoContext(procfs_root=args.procfs_root,
                                          tc_command=[args.tc_command] if args.tc_command else None,
                                          systemctl_command=[args.systemctl] if args.systemctl else None,
                                          container_commands={'docker': [args.docker] if args.docker else None,
                                                              'podman': [args.podman] if args.podman else None}),
                          check_mode=args.check)
            rc = EXIT_UNDO_FAILED if result['failed'] else EXIT_OK
            text = [result['message']] + [f'{d["result"]} {d["id"]}: {d["message"]}' for d in result['details']]
        elif args.command == 'watch-link':
            result = watch_link(args.ledger_dir, args.host, args.id, args.interface, args.peer, args.deadline,
                                [args.ping] if args.ping else None)
            rc = EXIT_UNDO_FAILED if result.get('failed') else EXIT_OK
            text = [result['message']]
        elif args.command == 'deadman':
            result = deadman(args.ledger_dir, args.host, args.renew_file, args.deadline, poll_s=args.poll,
                             run_id=args.run_id, self_id=args.self_id)
            if result.get('refused'):
                rc = EXIT_REFUSED
            else:
                rc = EXIT_UNDO_FAILED if result.get('failed') else EXIT_OK
            text = [result['message']]
            if result.get('undo'):
                text += [f'{d["result"]} {d["id"]}: {d["message"]}' for d in result['undo']['details']]
        elif args.command == 'status':
            result = status(args.ledger_dir, args.host)
            text = _status_text(result)
            result.update(changed=False, message=text[0])
            rc = EXIT_OK
        else:
            result = release_lock(args.ledger_dir, args.host, run_id=args.run_id, force=args.force)
            text = [result['message']]
            rc = EXIT_OK
    except LedgerError as exc:
        result = {'changed': False, 'error': type(exc).__name__, 'message': str(exc)}
        text = [f'error: {exc}']
        rc = EXIT_REFUSED
    except Exception as exc:  # a bug: report it whole, with a code of its own, so it never reads as a result
        trace = traceback.format_exc()
        result = {'changed': False, 'error': type(exc).__name__, 'message': f'{args.command} crashed: {exc}',
                  'traceback': trace}
        text = [f'error: {args.command} crashed: {exc}', trace]
        rc = EXIT_CRASHED
    sys.stdout.write((json.dumps(result, sort_keys=True) if args.json else '\n'.join(text)) + '\n')
    sys.stdout.flush()
    return rc


if __name__ == '__main__':
    raise SystemExit(main())

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The change ledger of inferlab: its format, the registry of kinds, recording and marking, the per-host lock.

The ledger's code is a set of modules, each with one job: this core; ``_ledger_proc`` (processes: /proc, pidfiles,
starting one detached); ``_ledger_undo`` (the undo of every kind, and of a host's open entries); ``_ledger_watch``
(the host-side watchdogs: the dead man's switch and the link watchdog); ``_ledger_cli`` (the command line). Modules
import them as module_utils; the ``ledger`` role installs the set on each host in ``<inferlab_state_dir>/bin``, each
as ``inferlab_<name>.py`` (``_ledger_core.py`` as ``inferlab_ledger_core.py``) and the command line as
``inferlab_ledger.py``, which the restore playbook and the watchdogs run there without a controller. So every one
stays standard library only, imports its siblings under both names (never ansible itself), and compiles on Python
3.8 (the oldest target Python of ansible-core 2.19).

Format
------
``<ledger_dir>/<host>.jsonl`` is append-only, one JSON object per line::

    {"id": ..., "time": "2026-11-30T10:15:00Z", "kind": "process", "params": {...}, "state": "pending"}

plus optional ``run_id`` and ``error``. The current state of an id is its last line; every line carries the full
kind and params, so the last line alone describes the entry. ``pending`` is written (and fsynced) BEFORE the change,
``applied`` after it, then ``undone`` or ``undo_failed`` (with ``error``). A line cut short by a killed writer is
reported in ``problems`` and otherwise ignored: since ``pending`` is on disk before any change starts, a cut line
never hides a change.

Kinds are a closed registry, ``KINDS``: kind name -> its check. ``check(params)`` validates (and may normalise) the
params at record time and raises ``LedgerError``. Each kind's undo is in ``_ledger_undo.UNDO``: ``undo(params,
ctx)`` reverts the change, returns a one-line description and raises ``UndoError`` when it cannot; it must be safe
when the change was never made (a ``pending`` entry whose run was killed before the change). Adding a kind is a check
here and an undo there.

The kinds: ``process`` and ``sampler`` (a process known by pid and start time, or by pidfile and cmdline; undo signals
it), ``file`` (undo restores a backup or removes a created file), ``tc_profile`` (undo puts back the interface's qdisc
tree recorded before the change; an entry without one deletes the root qdisc inferlab made), ``systemd_unit`` (a
transient unit from systemd-run; undo stops it), ``container`` (a docker or podman container; undo stops and removes
it), ``service_pause`` (a production service stopped to borrow its GPUs; undo starts it again: a process from its
recorded argv, environment, working directory and log file, a unit with ``systemctl start``, a container with ``<engine>
start``), ``gateway_config`` (a temporary gateway config; undo puts the original bytes back from the backup and restarts
the instances that run another config, one at a time behind the front: ``_gateway_swap`` does that part),
``kernel_module`` (the candidate ``thunderbolt_net`` loaded for a while; undo reloads the distribution's driver and
verifies it through sysfs: ``_tbnet_driver``), ``build_dir`` (a private build directory; undo removes it when it
carries inferlab's marker file or is empty), ``sysctl`` (a transport sysctl; undo writes the value read before back)
``nic_setting`` (a NIC's offloads, coalescing or ring sizes set with ethtool; undo sets the values read before
back: ``_ethtool``) and ``driver_param`` (a driver's parameter written under ``/sys/module``; undo as a sysctl's).
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import importlib
import itertools
import json
import math
import os
import re
import socket
import sys
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ethtool as ethtool
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
    from ansible_collections.inferlab.distributed.plugins.module_utils import _redaction as redaction
    from ansible_collections.inferlab.distributed.plugins.module_utils import _tc as tc
except ImportError:  # on a host, installed beside them (see the module docstring)
    import inferlab_ethtool as ethtool
    import inferlab_ledger_proc as proc
    import inferlab_redaction as redaction
    import inferlab_tc as tc

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


# ---------------------------------------------------------------------------------------------------------------
# time, ids, paths


def utc_now():
    """UTC time as ISO 8601 with a Z, to the second."""
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def log(message):
    """One log line on stderr with a UTC timestamp and the pid: the watchdogs and the heartbeat run detached, their
    output in a log file."""
    sys.stderr.write(f'{utc_now()} inferlab_ledger[{os.getpid()}]: {message}\n')
    sys.stderr.flush()


def _utc_stamp():
    return time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())


# new_id's count (next() on it is atomic in CPython, so threads never share a number) and the process it counts for,
# ``(pid, '<pid>.<start time>')``, replaced as one reference in a forked child
_ID_COUNT = itertools.count(1)
_ID_ORIGIN = [(None, '')]


def _id_origin():
    """``<pid>.<start time>`` of this process: its start time in clock ticks after boot (``/proc/self/stat``), or 4
    random bytes in hex where there is no /proc (never on a Linux host)."""
    pid = os.getpid()
    known_pid, origin = _ID_ORIGIN[0]
    if known_pid != pid:  # the first id of this process, or of a forked child
        info = proc.read_proc_stat(pid)
        origin = f'{pid}.{info["start_time"] if info else os.urandom(4).hex()}'
        _ID_ORIGIN[0] = (pid, origin)
    return origin


def new_id(kind, taken=()):
    """A fresh entry id ``<UTC stamp>-<kind>-<pid>.<start time>.<count>``, not in ``taken``.

    Unique on its host by construction, however many processes write one ledger at once: two live processes have
    different pids, a reused pid has another start time, and each process counts its ids. (The ids of older
    ledgers end in 4 random hex digits instead; they read the same, and kind_of_id reads both.)"""
    while True:
        candidate = f'{_utc_stamp()}-{kind}-{_id_origin()}.{next(_ID_COUNT)}'
        if candidate not in taken:
            return candidate


def kind_of_id(entry_id):
    """The kind an id of ``new_id`` names (``20261130T101502Z-systemd_unit-4242.1234567.1`` or, in an older ledger,
    ``20261130T101502Z-systemd_unit-3fa9`` -> ``systemd_unit``)."""
    return entry_id.split('-', 1)[-1].rsplit('-', 1)[0]


def check_host(host):
    if not isinstance(host, str) or not host or host.startswith('.') or '/' in host or '\0' in host:
        raise LedgerError(f'invalid ledger host name {host!r}: it names a file in the ledger directory, so it must '
                          'be non-empty, without "/" and not start with "."')


def ledger_path(ledger_dir, host):
    check_host(host)
    return os.path.join(ledger_dir, host + '.jsonl')


def lock_path(ledger_dir, host):
    check_host(host)
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


def sha256_file(path):
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


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
    """A start command with the values of its environment assignments redacted (systemd-run's ``--setenv=K=V``,
    docker's and podman's ``-e K=V``, ``--env K=V`` and ``--env=K=V``), then every secret by its shape
    (``_redaction``: a secret flag's value, a URL's userinfo)."""
    return redaction.redact_argv(_redact_env_assignments(argv))


def _redact_env_assignments(argv):
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
    """An entry's params as shown to callers: ``environment`` by name, ``command`` (redact_command), and every
    other value by its shape (a process's ``cmdline``, a unit's ``exec_start``)."""
    shown = {key: redaction.redact_value(value) for key, value in params.items()}
    if isinstance(params.get('environment'), dict):
        shown['environment'] = redact_environment(params['environment'])
    if isinstance(params.get('command'), list):
        shown['command'] = redact_command(params['command'])
    return shown


def make_line(entry_id, kind, params, state, run_id=None, error=None):
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
    params = KINDS[kind](dict(params))
    try:
        json.dumps(params)
    except (TypeError, ValueError) as exc:
        raise LedgerError(f'params of a {kind} entry must be JSON-serialisable: {exc}') from exc
    return params


def record(ledger_dir, host, kind, params, run_id=None, check_mode=False):
    """Record a ``pending`` entry BEFORE making a change. Returns the line written (with its new ``id``)."""
    params = check_kind(kind, params)
    check_lock_owner(ledger_dir, host, run_id)
    entries, _problems = read_ledger(ledger_dir, host)
    line = make_line(new_id(kind, {e['id'] for e in entries}), kind, params, 'pending', run_id=run_id)
    if not check_mode:
        append_line(ledger_dir, host, line)
    return line


def mark(ledger_dir, host, entry_id, state, params=None, run_id=None, check_mode=False):
    """Move entry ``entry_id`` to ``state`` (``applied`` or ``undone``). ``params``, when given, are merged into the
    entry's params (e.g. the pid and start time of a process, known only once it runs). Returns
    ``(changed, line, previous_state)``; marking to the current state with no new params writes nothing."""
    if state not in ('applied', 'undone'):
        raise LedgerError(f'an entry can be marked applied or undone, not {state!r}')
    check_lock_owner(ledger_dir, host, run_id)
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
    line = make_line(entry_id, current['kind'], merged, state, run_id=run_id or current.get('run_id'))
    if not check_mode:
        append_line(ledger_dir, host, line)
    return True, line, previous


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


class DirGuard:
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


def locked_message(host, holder, problem=None):
    if problem:
        head = f'ledger for {host} is locked, but {problem}'
    else:
        head = f'ledger for {host} is locked by {describe_holder(holder)}'
    return f'{head}; wait for it, or if that run is dead, run playbooks/restore.yml with ledger_break_stale_lock=true'


def acquire_lock(ledger_dir, host, run_id, controller=None, pid=None, break_stale=False, holder_alive=None,
                 check_mode=False, start_time=None, machine_id=None):
    """Take the lock of ``host`` for ``run_id``. Returns ``{changed, lock, took_over, held_before, message}``.

    Re-acquiring by the same run_id from the same ``controller`` is a no-op (``held_before``: a role inside a run
    that locked every host for its whole length leaves that lock to the run's restore); the same run_id from
    another controller is another run (a run id copied, or two controllers that named their runs alike) and is
    refused like one. A lock held by another run raises LockError naming the holder, unless ``break_stale`` and
    the holder is known dead: it must have taken the lock from the same controller (``machine_id`` when both locks
    have one, else the ``controller`` hostname: two controllers may share a hostname) and its process must not be
    alive there (its ``pid`` with its ``start_time`` when recorded: a pid is reused). ``holder_alive`` is that
    liveness as checked on the controller by the caller; when None it is checked here, which is only valid when this
    machine is that controller (same hostname). An empty or malformed lock file (a run killed while taking it) is
    taken over by ``break_stale``."""
    if not run_id:
        raise LockError(f'a run_id is needed to take the ledger lock of {host}')
    controller = controller or socket.gethostname()
    pid = int(pid) if pid is not None else os.getpid()
    path = lock_path(ledger_dir, host)
    mine = {'run_id': run_id, 'controller': controller, 'pid': pid, 'time': utc_now()}
    if start_time is not None:
        mine['start_time'] = int(start_time)
    if machine_id:
        mine['machine_id'] = machine_id
    with DirGuard(ledger_dir):
        holder, problem = read_lock(ledger_dir, host)
        if holder and holder.get('run_id') == run_id:
            if not _same_controller(holder, mine):
                raise LockError(f'{locked_message(host, holder)}: the same run id {run_id}, but taken from '
                                f'controller {_controller_name(holder)}, not from this controller '
                                f'{_controller_name(mine)}; two runs may not share an id', holder=holder)
            return {'changed': False, 'lock': holder, 'took_over': None, 'held_before': True,
                    'message': f'the ledger of {host} is already locked by this run {run_id}'}
        if holder is None:
            if not check_mode:
                _write_new_file(path, mine)
                fsync_dir(ledger_dir)
            return {'changed': True, 'lock': mine, 'took_over': None, 'held_before': False,
                    'message': f'locked the ledger of {host} for run {run_id}'}
        if not break_stale:
            raise LockError(locked_message(host, holder, problem),
                            holder={'problem': problem} if problem else holder)
        if problem:
            took_over = {'problem': problem}
            what = problem
        else:
            _check_stale(host, holder, mine, holder_alive, path)
            took_over = dict(holder)
            what = describe_holder(holder)
        if not check_mode:
            tmp = f'{path}.{os.getpid()}.tmp'
            _write_new_file(tmp, mine)
            os.replace(tmp, path)
            fsync_dir(ledger_dir)
        return {'changed': True, 'lock': mine, 'took_over': took_over, 'held_before': False,
                'message': f'took over the stale ledger lock of {host} from {what}'}


def _same_controller(holder, mine):
    """Whether the lock ``holder`` was taken from the controller taking ``mine``: the same machine id when both
    have one, else the same hostname."""
    if holder.get('machine_id') and mine.get('machine_id'):
        return holder['machine_id'] == mine['machine_id']
    return holder.get('controller') == mine['controller']


def _controller_name(lock):
    """A lock's controller as messages name it: its hostname, and its machine id when recorded."""
    machine_id = lock.get('machine_id')
    return f'{lock.get("controller")} (machine id {machine_id})' if machine_id else f'{lock.get("controller")}'


def _check_stale(host, holder, mine, holder_alive, path):
    """Raise LockError unless ``holder`` is known dead on the controller taking ``mine``."""
    locked = locked_message(host, holder)
    controller = mine['controller']
    if not _same_controller(holder, mine):
        raise LockError(f'{locked}; it was taken from controller {_controller_name(holder)}, not from this '
                        f'controller {_controller_name(mine)}, so its pid cannot be checked from here: break it from '
                        f'{holder.get("controller")}, or remove {path} by hand once you know that run is dead')
    if holder_alive is None:
        if socket.gethostname() != controller:
            raise LockError(f'{locked}; breaking it needs the liveness of pid {holder.get("pid")} on controller '
                            f'{controller}, which cannot be checked on {socket.gethostname()}')
        start_time = holder.get('start_time')
        holder_alive = (proc.same_process(holder.get('pid'), start_time) if isinstance(start_time, int)
                        else proc.pid_alive(holder.get('pid')))
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
    with DirGuard(ledger_dir):
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


def check_lock_owner(ledger_dir, host, run_id):
    """A run that names itself may only write when the lock is free or its own."""
    if not run_id:
        return
    holder, problem = read_lock(ledger_dir, host)
    if holder is not None and holder.get('run_id') != run_id:
        raise LockError(locked_message(host, holder, problem))


# ---------------------------------------------------------------------------------------------------------------
# the kinds' checks (each kind's undo is in _ledger_undo)


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


def _check_interface(kind, interface):
    if (not isinstance(interface, str) or not interface or len(interface) > 15 or '/' in interface
            or any(c.isspace() for c in interface) or interface in ('.', '..')):
        raise LedgerError(f'"interface" of a {kind} entry must be an interface name (1-15 characters, no "/" '
                          f'or spaces), got {interface!r}')


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


# a link profile: tc qdiscs on one interface's egress, made by the link_profile module (_tc)
TC_PROFILES = tuple(profile for profile in tc.PROFILES if profile != 'clean')  # clean is no profile


def _check_tc_profile(params):
    """``qdiscs``: the interface's egress qdisc tree before the change (``_tc.tree``), which the undo puts back; an
    entry without it (recorded before inferlab kept the tree) is undone by removing our profile. With a tree,
    ``profile`` may be ``clean`` too: our profile (or the lab's stock one) removed from a link."""
    known = {'interface', 'profile', 'handle', 'rate_mbit', 'burst_kb', 'latency_ms', 'pfifo_limit', 'qdiscs'}
    _no_unknown('tc_profile', params, known)
    if 'qdiscs' in params:
        try:
            tc.check_tree(params['qdiscs'])
        except tc.TcError as exc:
            raise LedgerError(f'"qdiscs" of a tc_profile entry must be the interface\'s qdisc tree: {exc}') from None
    _check_interface('tc_profile', params.get('interface'))
    if params.get('profile') not in TC_PROFILES and not (params.get('profile') == 'clean' and 'qdiscs' in params):
        raise LedgerError(f'"profile" of a tc_profile entry must be one of {", ".join(TC_PROFILES)} (clean is the '
                          f'absence of a profile, nothing to record), got {params.get("profile")!r}')
    params['handle'] = params.get('handle') or tc.ROOT_HANDLE
    handle = params['handle']
    if (not isinstance(handle, str) or not handle.endswith(':') or not 1 <= len(handle) - 1 <= 4
            or any(c not in '0123456789abcdef' for c in handle[:-1]) or handle == '0:'):
        raise LedgerError(f'"handle" of a tc_profile entry must be a qdisc handle such as {tc.ROOT_HANDLE!r}, '
                          f'got {handle!r}')
    for name in ('rate_mbit', 'burst_kb', 'latency_ms', 'pfifo_limit'):
        if params.get(name) is not None:
            params[name] = _as_int(params[name], name, minimum=1)
    return params


# systemd_unit and container: started by the managed_process module (_process_manager builds the commands). The unit
# or container name is the identity: undo stops whatever runs under it, which is why the module only starts names
# that no one else runs (inferlab-<name> by default) and refuses a running one it has no entry for. ``pid`` and
# ``start_time`` (of the main process, once started) and ``command`` (the argv that started it) are kept for the
# record only.

UNIT_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9:_.-]*$')
CONTAINER_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
CONTAINER_ENGINES = ('docker', 'podman')
SYSTEMD_DEFAULT_STOP_TIMEOUT = 90.0  # systemd's DefaultTimeoutStopSec
CONTAINER_DEFAULT_STOP_TIMEOUT = 10.0  # docker's and podman's default for `stop`


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


SERVICE_MANAGERS = ('process', 'systemd', 'docker', 'podman')
SERVICE_COMMON_KEYS = {'manager', 'name', 'start_timeout', 'how', 'pid', 'start_time'}
SERVICE_MANAGER_KEYS = {
    'process': {'pidfile', 'argv', 'environment', 'working_dir', 'log_path'},
    'systemd': {'unit'},
    'docker': {'container'},
    'podman': {'container'},
}
SERVICE_START_TIMEOUT = 30.0


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


# Kinds whose check and undo need more than the ledger import a companion module_utils by name, when first needed (it
# imports the ledger in turn); a module that records or undoes such an entry imports the companion itself, which
# bundles it. On a host the ledger role installs each companion beside the ledger as inferlab_<name>.py.
COMPANIONS = {
    'gateway_swap': 'ansible_collections.inferlab.distributed.plugins.module_utils._gateway_swap',
    'tbnet_driver': 'ansible_collections.inferlab.distributed.plugins.module_utils._tbnet_driver',
}


def companion(name):
    """The companion module ``name`` (COMPANIONS), imported when first needed: inside the collection as a
    module_utils, on a host as ``inferlab_<name>.py`` beside this file. It may import this module in turn, so it
    cannot be imported at the top."""
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
    swap = companion('gateway_swap')
    try:
        return swap.check_change_params(params)
    except swap.GatewayError as exc:
        raise LedgerError(str(exc)) from None


def _check_kernel_module(params):
    driver = companion('tbnet_driver')
    try:
        return driver.check_change_params(params)
    except driver.DriverError as exc:
        raise LedgerError(str(exc)) from None


# a private build directory (the candidate driver's): its undo removes it only when it carries this marker file
BUILD_DIR_MARKER = '.inferlab-build-dir'
# Where a build directory may never be: the system's own files and the parts of /var the system keeps (a state
# directory under /var/lib, the default, stays allowed; so does one in a user's workspace, such as molecule's).
SYSTEM_DIRS = ('/lib/modules', '/usr/lib/modules', '/boot', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib64', '/proc',
               '/sys', '/dev', '/run', '/var/log', '/var/spool', '/var/mail', '/var/cache', '/var/lib/dpkg',
               '/var/lib/apt', '/var/lib/systemd')
# Nor inside a directory of keys, wherever it is (~/.ssh, ~/.gnupg).
KEY_DIRS = ('.ssh', '.gnupg')


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
    keys = [part for part in path.split('/') if part in KEY_DIRS]
    if keys:
        raise LedgerError(f'a build directory may not be inside a {keys[0]} directory: {path} (nothing inferlab '
                          'builds may land among keys)')
    params['path'] = path
    return params


# a transport tunable: one sysctl under net.* written at run time (never persisted: no file under /etc/sysctl.d), by
# the sysctl_layer module. ``path`` is where it was written (``<proc_sys_root>/net/...``, injectable for tests),
# ``previous`` the value read just before and ``value`` the one written, each as the kernel prints it with its
# whitespace folded to single spaces. The undo writes ``previous`` back only while the value is still ``value``.
SYSCTL_NAME_RE = re.compile(r'^net\.(core|ipv4|ipv6)\.[A-Za-z0-9_.-]+$')


def is_transport_sysctl(name):
    """Whether ``name`` is a sysctl the ledger takes: under net.core, net.ipv4 or net.ipv6, no empty part."""
    return isinstance(name, str) and bool(SYSCTL_NAME_RE.match(name)) and '..' not in name


def sysctl_text(value):
    """A sysctl value as compared and recorded: its whitespace folded to single spaces, no ends."""
    return ' '.join(str(value).split())


def _check_sysctl(params):
    _no_unknown('sysctl', params, {'name', 'path', 'previous', 'value'})
    name, path = params.get('name'), params.get('path')
    if not is_transport_sysctl(name):
        raise LedgerError(f'"name" of a sysctl entry must be a transport sysctl under net.core, net.ipv4 or '
                          f'net.ipv6, got {name!r}')
    suffix = '/' + name.replace('.', '/')
    if not isinstance(path, str) or not os.path.isabs(path) or not os.path.normpath(path).endswith(suffix):
        raise LedgerError(f'"path" of a sysctl entry must be the absolute path of {name} (ending {suffix}), '
                          f'got {path!r}')
    _check_setting_values('sysctl', params)
    params['path'] = os.path.normpath(path)
    return params


def _check_setting_values(kind, params):
    """``previous`` and ``value`` of a setting file's entry (sysctl, driver_param): text, whitespace folded."""
    for key in ('previous', 'value'):
        if not isinstance(params.get(key), (str, int)) or isinstance(params.get(key), bool):
            raise LedgerError(f'"{key}" of a {kind} entry must be the value as text, got {params.get(key)!r}')
        params[key] = sysctl_text(params[key])


# a driver's parameter written at run time under /sys/module/DRIVER/parameters (only those the driver lets change
# while loaded; a load-time parameter is a reload's, as the candidate thunderbolt_net's tx_e2e), by the
# driver_param_layer module: ``path`` (under an injectable sysfs root), ``previous`` and ``value`` as the sysctl
# kind's, and undone the same way.
DRIVER_PARAM_NAME_RE = re.compile(r'^[A-Za-z0-9_-]+$')


def driver_param_path(sysfs_root, driver, name):
    """The file of ``driver``'s parameter ``name`` under ``sysfs_root``; LedgerError for a name that is not one."""
    for label, text in (('driver', driver), ('parameter', name)):
        if not isinstance(text, str) or not DRIVER_PARAM_NAME_RE.match(text):
            raise LedgerError(f'{text!r} is not a {label} name: expected letters, digits, "_" or "-", for example '
                              'virtio_net and napi_tx')
    return os.path.join(sysfs_root, 'module', driver, 'parameters', name)


def _check_driver_param(params):
    _no_unknown('driver_param', params, {'driver', 'name', 'path', 'previous', 'value'})
    driver, name, path = params.get('driver'), params.get('name'), params.get('path')
    suffix = os.path.join('/module', str(driver), 'parameters', str(name))
    driver_param_path('/', driver, name)
    if not isinstance(path, str) or not os.path.isabs(path) or not os.path.normpath(path).endswith(suffix):
        raise LedgerError(f'"path" of a driver_param entry must be the absolute path of the parameter (ending '
                          f'{suffix}), got {path!r}')
    _check_setting_values('driver_param', params)
    params['path'] = os.path.normpath(path)
    return params


# a NIC's ethtool settings of one group (offloads, interrupt coalescing or ring sizes: _ethtool.GROUPS) set in one
# command by the nic_layer module. ``previous`` holds each set name's value read just before, ``value`` the value
# set, each as text (on/off or a whole number). The undo sets back each name still at ``value``, and leaves the
# entry open, naming them, when a name is at neither value (someone else set it since).
def _check_nic_setting(params):
    _no_unknown('nic_setting', params, {'interface', 'group', 'previous', 'value'})
    _check_interface('nic_setting', params.get('interface'))
    if params.get('group') not in ethtool.GROUPS:
        raise LedgerError(f'"group" of a nic_setting entry must be one of {", ".join(ethtool.GROUPS)}, got '
                          f'{params.get("group")!r}')
    previous, value = params.get('previous'), params.get('value')
    if not isinstance(value, dict) or not value or not isinstance(previous, dict) or set(previous) != set(value):
        raise LedgerError('"previous" and "value" of a nic_setting entry must map the same setting names (at least '
                          f'one) to their values, got {previous!r} and {value!r}')
    for key, values in (('previous', previous), ('value', value)):
        for name, text in values.items():
            try:
                values[name] = ethtool.setting_text(text)
            except ethtool.EthtoolError as exc:
                raise LedgerError(f'"{key}" of a nic_setting entry: {name}: {exc}') from None
    return params


# ---------------------------------------------------------------------------------------------------------------
# the registry of kinds: kind name -> its check (its undo: _ledger_undo.UNDO). Add a kind here and there.

KINDS = {
    'process': _check_process,
    # a background counter sampler is a process; its own kind says in the ledger what it was
    'sampler': _check_process,
    'file': _check_file,
    # a link profile on an interface's egress; undo deletes our root qdisc, never a foreign one
    'tc_profile': _check_tc_profile,
    # a transient systemd service (systemd-run); undo stops it, and is a no-op when the unit is not loaded
    'systemd_unit': _check_systemd_unit,
    # a docker or podman container; undo stops and removes it, and is a no-op when there is no such container
    'container': _check_container,
    # a production service paused (stopped) to borrow its GPUs; undo starts it again, and is a no-op when it runs
    'service_pause': _check_service_pause,
    # a temporary gateway config (a fallback); undo puts the original bytes back and restarts the instances that
    # run another config, one at a time behind the front (_gateway_swap)
    'gateway_config': _check_gateway_config,
    # the candidate thunderbolt_net loaded in place of the distribution's; undo puts the distribution's back
    # (_tbnet_driver), or, in the netns lab, the fixture root's stock state
    'kernel_module': _check_kernel_module,
    # a private build directory (0700, outside the system's trees, with a marker file); undo removes it
    'build_dir': _check_build_dir,
    # a transport sysctl written at run time; undo writes the value read before it back
    'sysctl': _check_sysctl,
    # a NIC's offloads, coalescing or ring sizes set with ethtool; undo sets the values read before back
    'nic_setting': _check_nic_setting,
    # a driver's parameter written at run time under /sys/module; undo writes the value read before it back
    'driver_param': _check_driver_param,
}

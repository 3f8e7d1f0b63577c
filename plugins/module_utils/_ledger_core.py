# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The change ledger of inferlab: its format, recording and marking (checked by the kinds), the per-host lock.

Over 600 lines on purpose: installed on hosts as ``inferlab_ledger_core.py`` (the ledger role's files), the name its
siblings import; its ids, reading, recording and lock all serve the one ledger file.

The ledger's code is a set of modules, each with one job: this core; ``_ledger_base`` (what every kind builds on);
``_ledger_kinds`` (the registry of kinds) and the modules that declare them; ``_ledger_proc`` (processes: /proc,
pidfiles, starting one detached); ``_ledger_undo`` (the undo of a host's open entries, the write-ahead protocol of
one change, the leftovers); ``_ledger_watch`` (the host-side watchdogs: the dead man's switch and the link
watchdog); ``_ledger_cli`` (the command line). Modules import them as module_utils; the ``ledger`` role installs the
set on each host in ``<inferlab_state_dir>/bin``, each as ``inferlab_<name>.py`` (``_ledger_core.py`` as
``inferlab_ledger_core.py``) and the command line as ``inferlab_ledger.py``, which the restore playbook and the
watchdogs run there without a controller. So every one stays standard library only, imports its siblings under both
names (never ansible itself), and compiles on Python 3.8 (the oldest target Python of ansible-core 2.19).

Format
------
``<ledger_dir>/<host>.jsonl`` is append-only, one JSON object per line::

    {"id": ..., "time": "2026-11-30T10:15:00Z", "kind": "process", "params": {...}, "state": "pending"}

plus optional ``run_id`` and ``error``. The current state of an id is its last line; every line carries the full
kind and params, so the last line alone describes the entry. ``pending`` is written (and fsynced) BEFORE the change,
``applied`` after it, then ``undone`` or ``undo_failed`` (with ``error``). A line cut short by a killed writer is
reported in ``problems`` and otherwise ignored: since ``pending`` is on disk before any change starts, a cut line
never hides a change.

Kinds are a closed registry, ``_ledger_kinds.KINDS``: kind name -> its declaration (``_ledger_base.Kind``), made
once beside the kind's code: its check, run here at record time, its undo, run by ``_ledger_undo``, and its leftovers.
``_ledger_running`` declares the kinds of things that run (``process``, ``sampler``, ``systemd_unit``, ``container``,
``service_pause``), ``_ledger_settings`` those of things changed in place (``file``, ``build_dir``, ``tc_profile``,
``sysctl``, ``driver_param``, ``nic_setting``), and the registry itself ``gateway_config`` and ``kernel_module``,
whose work is ``_gateway_swap``'s and ``_tbnet_driver``'s. Adding a kind is its declaration and its line in the
registry.
"""

from __future__ import annotations

import collections
import fcntl
import itertools
import json
import os
import socket
import sys
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base as base
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_kinds as kinds
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
    from ansible_collections.inferlab.distributed.plugins.module_utils import _redaction as redaction
except ImportError:  # on a host, installed beside them (see the module docstring)
    import inferlab_ledger_base as base
    import inferlab_ledger_kinds as kinds
    import inferlab_ledger_proc as proc
    import inferlab_redaction as redaction

# the errors and the file helpers every kind shares, under the names the ledger's callers know
LedgerError = base.LedgerError
UndoError = base.UndoError
fsync_dir = base.fsync_dir
sha256_file = base.sha256_file
KINDS = kinds.KINDS

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


class LockError(LedgerError):
    """The lock is held by another run (or could not be taken or released). ``holder`` is the lock file's holder
    when another run holds it (``{'problem': ...}`` for a malformed lock file), else None."""

    def __init__(self, message, holder=None):
        super().__init__(message)
        self.holder = holder


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
    params = KINDS[kind].check(dict(params))
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

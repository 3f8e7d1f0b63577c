# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ledger's kinds of things that run, each declared with its check, its undo and its leftovers: ``process`` and
``sampler`` (a process known by pid and start time, or by pidfile and cmdline; undo signals it), ``systemd_unit`` (a
transient unit from systemd-run; undo stops it), ``container`` (a docker or podman container; undo stops and removes
it) and ``service_pause`` (a production service stopped to borrow its GPUs; undo starts it again).

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

import math
import os
import re
import signal
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base as base
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ledger_base as base
    import inferlab_ledger_proc as proc


# ---------------------------------------------------------------------------------------------------------------
# kinds: process and sampler (a process known by pid and start time, or by pidfile and cmdline; undo
# signals it)


def _check_process(params):
    base.no_unknown('process', params, {'pid', 'start_time', 'cmdline', 'pidfile', 'stop_timeout', 'process_group'})
    if params.get('pid') is None and not params.get('pidfile'):
        raise base.LedgerError('a process entry needs "pid" (with "start_time") or, when recorded before the process '
                               'starts, "pidfile" (with "cmdline")')
    _check_pid('process', params, needs_start_time='undo never signals a process that reused the pid')
    cmdline = params.get('cmdline')
    if params.get('pid') is None and not cmdline:
        raise base.LedgerError('a process entry known only by its pidfile needs "cmdline", to check that the process '
                               'the pidfile names is the one that was started')
    if cmdline is not None and not isinstance(cmdline, str) and not (
            isinstance(cmdline, list) and all(isinstance(a, str) for a in cmdline)):
        raise base.LedgerError('"cmdline" of a process entry must be a string or a list of strings')
    pidfile = params.get('pidfile')
    if pidfile is not None and (not isinstance(pidfile, str) or not os.path.isabs(pidfile)):
        raise base.LedgerError(f'"pidfile" of a process entry must be an absolute path, got {pidfile!r}')
    params['stop_timeout'] = base.as_float(params.get('stop_timeout', 10), 'stop_timeout')
    params['process_group'] = base.as_bool(params.get('process_group', False), 'process_group')
    return params


def _check_pid(kind, params, needs_start_time=None):
    """``pid`` and ``start_time`` of an entry as integers. With ``needs_start_time`` (why it does), a pid needs its
    start time."""
    if params.get('pid') is not None:
        params['pid'] = base.as_int(params['pid'], 'pid', minimum=1)
        if needs_start_time and params.get('start_time') is None:
            raise base.LedgerError(f'a {kind} entry with pid {params["pid"]} needs "start_time" (field 22 of '
                                   f'/proc/PID/stat), so that {needs_start_time}')
    if params.get('start_time') is not None:
        params['start_time'] = base.as_int(params['start_time'], 'start_time', minimum=0)


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
    leader_alive = proc.is_live(info)
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
        return proc.is_live(proc.read_proc_stat(pid, ctx.procfs_root))

    # a dead leader's pid is not reused while its process group exists, so live members of that group are ours
    if not (leader_alive or (group and alive())):
        return f'process {pid} ("{label}") had already exited: nothing to kill' + _remove_pidfile(pidfile, pid, ctx)
    what = f'process group {pid}' if group else f'pid {pid}'
    stop_timeout = params.get('stop_timeout', 10)
    if not _signal(pid, group, signal.SIGTERM):
        return f'{what} ("{label}") exited before it was signalled' + _remove_pidfile(pidfile, pid, ctx)
    if proc.wait_gone(alive, stop_timeout, ctx.poll_interval):
        return f'stopped {what} ("{label}") with SIGTERM{note}' + _remove_pidfile(pidfile, pid, ctx)
    _signal(pid, group, signal.SIGKILL)
    if proc.wait_gone(alive, ctx.kill_wait, ctx.poll_interval):
        return (f'stopped {what} ("{label}") with SIGKILL: still running {stop_timeout}s after SIGTERM{note}'
                + _remove_pidfile(pidfile, pid, ctx))
    raise base.UndoError(f'{what} ("{label}") is still alive after SIGTERM and SIGKILL (stuck in the kernel, state '
                         'D?); stop it by hand')


def _signal(pid, group, signum):
    try:
        return proc.send_signal(pid, signum, group)
    except PermissionError as exc:
        raise base.UndoError(f'not allowed to signal pid {pid}: {exc} (run the undo as the user that started it, or as '
                             'root)') from exc


def _read_pidfile(pidfile):
    try:
        return proc.read_pidfile(pidfile)
    except proc.PidfileError as exc:
        raise base.UndoError(str(exc)) from None


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


def _process_leftovers(entry, ctx):
    """The recorded process, and for an entry recorded with its process group every live member of that group (a
    child that outlived its leader: the group's id is not reused while the group exists)."""
    procfs_root, params = ctx.procfs_root, entry['params']
    pid, start_time = params.get('pid'), params.get('start_time')
    if not isinstance(pid, int):
        return []
    leader = proc.read_proc_stat(pid, procfs_root)
    leader_alive = proc.is_live(leader)
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
        found.append({'id': entry['id'], 'kind': entry['kind'], 'pid': member, 'what': str(member), 'cmdline': argv,
                      'message': f'"{label}" still runs ({what}) although entry {entry["id"]} is undone'})
    return found


PROCESS = base.Kind('process', _check_process, undo_process, leftovers=_process_leftovers)
# a background counter sampler is a process; its own kind says in the ledger what it was
SAMPLER = base.Kind('sampler', _check_process, undo_process, leftovers=_process_leftovers)


# ---------------------------------------------------------------------------------------------------------------
# kinds: systemd_unit and container


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
        raise base.LedgerError(f'"unit" must be a service unit name (letters, digits, ":", "_", ".", "-", starting '
                               f'with a letter or digit, optionally ending in .service), got {unit!r}')
    return unit + '.service'


def container_name(name):
    """``name`` if docker and podman accept it as a container name, else LedgerError."""
    if not isinstance(name, str) or not CONTAINER_NAME_RE.match(name) or len(name) > 253:
        raise base.LedgerError(f'a container name must match [A-Za-z0-9][A-Za-z0-9_.-]* (as docker and podman '
                               f'require), got {name!r}')
    return name


def _check_started_by_manager(kind, params):
    """The params a systemd_unit and a container share: ``command``, ``pid`` and ``start_time`` for the record."""
    command = params.get('command')
    if command is not None and not (isinstance(command, list) and command
                                    and all(isinstance(a, str) for a in command)):
        raise base.LedgerError(f'"command" of a {kind} entry must be the argv that started it, a list of strings')
    _check_pid(kind, params)
    return params


def _check_systemd_unit(params):
    base.no_unknown('systemd_unit', params, {'unit', 'stop_timeout', 'command', 'pid', 'start_time'})
    params['unit'] = service_unit_name(params.get('unit'))
    params['stop_timeout'] = base.as_float(params.get('stop_timeout', SYSTEMD_DEFAULT_STOP_TIMEOUT), 'stop_timeout')
    return _check_started_by_manager('systemd_unit', params)


def _check_container(params):
    base.no_unknown('container', params, {'engine', 'name', 'stop_timeout', 'command', 'pid', 'start_time'})
    if params.get('engine') not in CONTAINER_ENGINES:
        raise base.LedgerError(f'"engine" of a container entry must be one of {", ".join(CONTAINER_ENGINES)}, got '
                               f'{params.get("engine")!r}')
    params['name'] = container_name(params.get('name'))
    params['stop_timeout'] = base.as_float(params.get('stop_timeout', CONTAINER_DEFAULT_STOP_TIMEOUT), 'stop_timeout')
    return _check_started_by_manager('container', params)


UNIT_UP_STATES = ('active', 'reloading')
UNIT_STARTING_STATES = ('activating',)


def _undo_systemd_unit(params, ctx):
    unit = params['unit']
    systemctl = base.command_argv(ctx.systemctl_command, 'systemctl', 'package systemd', f'unit {unit}')
    stop = systemctl + ['stop', unit]
    rc, out, err = base.run_command(stop, ctx, timeout=params.get('stop_timeout', SYSTEMD_DEFAULT_STOP_TIMEOUT)
                                    + base.COMMAND_GRACE)
    said = base.output(out, err)
    if rc != 0:
        if 'not loaded' in said.lower():
            return f'unit {unit} is not loaded (never started, or exited and collected): nothing to stop'
        if 'not been booted with systemd' in said.lower():
            return f'this host does not run systemd, so no unit {unit} can be running: nothing to stop'
        raise base.UndoError(f'{" ".join(stop)} exited {rc}: {said}')
    # a unit that failed stays listed until reset (unless collected already, which reads "not loaded")
    reset = systemctl + ['reset-failed', unit]
    rc, out, err = base.run_command(reset, ctx)
    if rc != 0 and 'not loaded' not in base.output(out, err).lower():
        raise base.UndoError(f'stopped unit {unit}, but {" ".join(reset)} exited {rc}: {base.output(out, err)}')
    return f'stopped unit {unit}'


def _no_such_container(said):
    # docker: "Error response from daemon: No such container: NAME"; podman: '... found: no such container'
    return 'no such container' in said.lower()


def _undo_container(params, ctx):
    engine, name = params['engine'], params['name']
    cli = base.command_argv(ctx.container_commands.get(engine), engine, f'the {engine} CLI',
                            f'container {name}')
    stop_timeout = params.get('stop_timeout', CONTAINER_DEFAULT_STOP_TIMEOUT)
    # -t takes whole seconds; round up so the container gets at least the time recorded
    stop = cli + ['stop', '-t', str(int(math.ceil(stop_timeout))), name]
    rc, out, err = base.run_command(stop, ctx, timeout=stop_timeout + base.COMMAND_GRACE)
    if rc != 0:
        if _no_such_container(base.output(out, err)):
            return f'no {engine} container {name} (never created, or already removed): nothing to stop'
        raise base.UndoError(f'{" ".join(stop)} exited {rc}: {base.output(out, err)}')
    remove = cli + ['rm', name]
    rc, out, err = base.run_command(remove, ctx)
    if rc != 0 and not _no_such_container(base.output(out, err)):
        raise base.UndoError(f'stopped {engine} container {name}, but {" ".join(remove)} exited {rc}: '
                             f'{base.output(out, err)}')
    return f'stopped and removed {engine} container {name}'


def _managed_leftovers(entry, ctx):
    """The unit still active, or the container still running, of an undone systemd_unit or container entry, read as
    the undo reads them (``_unit_state``, ``_container_state``). A state that cannot be read is reported as one (the
    restore must not pass on what it could not check)."""
    params = entry['params']
    try:
        if entry['kind'] == 'systemd_unit':
            found = {'unit': params['unit'], 'what': f'unit {params["unit"]}'}
            cli = base.command_argv(ctx.systemctl_command, 'systemctl', 'package systemd', found['what'])
            running = UNIT_UP_STATES + UNIT_STARTING_STATES
        else:
            engine = params['engine']
            found = {'engine': engine, 'name': params['name'], 'what': f'{engine} container {params["name"]}'}
            cli = base.command_argv(ctx.container_commands.get(engine), engine, f'the {engine} CLI', found['what'])
            running = ('running', 'restarting', 'paused')
    except base.UndoError:
        return []  # not installed on this host: nothing of that kind can run
    try:
        if entry['kind'] == 'systemd_unit':
            state = _unit_state(cli, params['unit'], ctx)
        else:
            state = _container_state(cli, engine, params['name'], ctx, missing_ok=True)
    except base.UndoError as exc:
        return [{'id': entry['id'], 'kind': entry['kind'], 'pid': params.get('pid'), **found,
                 'message': f'cannot tell whether {found["what"]} still runs: {exc}'}]
    if state not in running:
        return []
    return [{'id': entry['id'], 'kind': entry['kind'], 'pid': params.get('pid'), **found,
             'message': f'{found["what"]} is still {state} although entry {entry["id"]} is undone'}]


# the unit or container name is the identity: a later entry may start the same name again
SYSTEMD_UNIT = base.Kind('systemd_unit', _check_systemd_unit, _undo_systemd_unit, leftovers=_managed_leftovers,
                         identity=lambda params: params.get('unit'))
CONTAINER = base.Kind('container', _check_container, _undo_container, leftovers=_managed_leftovers,
                      identity=lambda params: (params.get('engine'), params.get('name')))


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


def _check_absolute_param(params, key):
    value = params.get(key)
    if not isinstance(value, str) or not os.path.isabs(value) or '\0' in value:
        raise base.LedgerError(f'"{key}" of a service_pause entry must be an absolute path, got {value!r}')
    return value


def _check_service_pause(params):
    manager = params.get('manager')
    if manager not in SERVICE_MANAGERS:
        raise base.LedgerError(f'"manager" of a service_pause entry must be one of {", ".join(SERVICE_MANAGERS)}, got '
                               f'{manager!r}')
    base.no_unknown(f'service_pause (manager {manager})', params, SERVICE_COMMON_KEYS | SERVICE_MANAGER_KEYS[manager])
    name = params.get('name')
    if not isinstance(name, str) or not name.strip() or any(c in name for c in '\0\n\r'):
        raise base.LedgerError(f'"name" of a service_pause entry must be the name of the service (one line, not '
                               f'empty), got {name!r}')
    if manager == 'process':
        for key in ('pidfile', 'working_dir', 'log_path'):
            _check_absolute_param(params, key)
        argv = params.get('argv')
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) and '\0' not in a for a in argv)
                and argv[0]):
            raise base.LedgerError('"argv" of a service_pause entry must be the command that starts the service '
                                   'again, a non-empty list of strings')
        environment = params.get('environment')
        if not isinstance(environment, dict) or not all(
                isinstance(k, str) and k and '=' not in k and '\0' not in k and isinstance(v, str) and '\0' not in v
                for k, v in environment.items()):
            # the values are never quoted: they may hold secrets
            raise base.LedgerError('"environment" of a service_pause entry must map variable names (not empty, without '
                                   '"=") to strings')
    elif manager == 'systemd':
        params['unit'] = service_unit_name(params.get('unit'))
    else:
        params['container'] = container_name(params.get('container'))
    _check_pid('service_pause', params, needs_start_time='a process that reused the pid is never taken for it')
    params['start_timeout'] = base.as_float(params.get('start_timeout', SERVICE_START_TIMEOUT), 'start_timeout')
    how = params.get('how')
    if how is not None and (not isinstance(how, str) or '\n' in how):
        raise base.LedgerError(f'"how" of a service_pause entry must be a one-line note, got {how!r}')
    return params


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
    code = proc.spawned_returncode(pid)
    if code is None:
        return 'exited'
    return f'was killed by signal {-code}' if code < 0 else f'exited with status {code}'


def _log_tail(path, start):
    """The last lines ``path`` got after byte ``start``, for an error message."""
    if path == os.devnull:
        return '(none: its output went to /dev/null)'
    try:
        tail = proc.read_log_end(path, SERVICE_LOG_TAIL_LINES, start, max_bytes=SERVICE_LOG_TAIL_MAX_BYTES)
    except OSError as exc:
        return f'(cannot read it: {exc})'
    return tail or '(nothing)'


def _resume_process(params, ctx):
    name, pidfile, log_path, argv = params['name'], params['pidfile'], params['log_path'], params['argv']
    running = _service_process_running(params, ctx)
    if running is not None:
        return f'service {name} is already running (pid {running}): nothing to start'
    log_start = proc.file_size(log_path)
    # argv[0] only in messages: the rest of the command line may hold a secret (an API key)
    try:
        pid = proc.spawn_detached(argv, params['environment'], log_path, pidfile, params['working_dir'])
    except OSError as exc:
        raise base.UndoError(f'cannot start service {name} again ({argv[0]} in {params["working_dir"]}): {exc}; start '
                             'it by hand') from exc
    started = time.monotonic()
    deadline = started + max(SERVICE_SETTLE, params.get('start_timeout', SERVICE_START_TIMEOUT))
    while True:
        up = proc.pidfile_alive(pidfile, ctx.procfs_root)
        now = time.monotonic()
        if up is None and not proc.pid_alive(pid, ctx.procfs_root):
            died = (f'service {name} was started again (pid {pid}) but {_spawned_exit(pid)} after '
                    f'{now - started:.1f}s')
            raise base.UndoError(f'{died}{_remove_pidfile(pidfile, pid, ctx)}; last lines of its output ({log_path}):\n'
                                 f'{_log_tail(log_path, log_start)}')
        if up is not None and now - started >= SERVICE_SETTLE:
            return f'started service {name} again: pid {up}, output to {log_path}'
        if now >= deadline:
            raise base.UndoError(f'service {name} was started again (pid {pid}) but pidfile {pidfile} names no live '
                                 f'process {deadline - started:.1f}s later; look at its output ({log_path})')
        time.sleep(ctx.poll_interval)


def _service_command(configured, name, package, what):
    try:
        return base.command_argv(configured, name, package, what)
    except base.UndoError:
        raise base.UndoError(f'{name} is not installed on this host ({package}), so {what} cannot be started again; '
                             'install it or start the service by hand, then run the undo again') from None


def _unit_state(systemctl, unit, ctx):
    """``systemctl is-active UNIT``: active, inactive, failed, activating... (it exits 3 for all but active)."""
    argv = systemctl + ['is-active', unit]
    rc, out, err = base.run_command(argv, ctx)
    state = out.strip().splitlines()[0].strip() if out.strip() else ''
    if not state or ' ' in state:
        raise base.UndoError(f'{" ".join(argv)} exited {rc}: {base.output(out, err) or "(no output)"}')
    return state


def _resume_unit(params, ctx):
    unit = params['unit']
    systemctl = _service_command(ctx.systemctl_command, 'systemctl', 'package systemd', f'unit {unit}')
    state = _unit_state(systemctl, unit, ctx)
    if state in UNIT_UP_STATES + UNIT_STARTING_STATES:
        return f'unit {unit} is already {state}: nothing to start'
    timeout = params.get('start_timeout', SERVICE_START_TIMEOUT)
    start = systemctl + ['start', unit]
    hint = f' (see journalctl -u {unit})'
    state, up = _start_and_wait(start, lambda: _unit_state(systemctl, unit, ctx), UNIT_UP_STATES,
                                UNIT_STARTING_STATES, timeout, ctx, hint)
    if up:
        return f'started unit {unit} again'
    if state not in UNIT_STARTING_STATES:
        raise base.UndoError(f'unit {unit} is {state} after {" ".join(start)}{hint}')
    raise base.UndoError(f'unit {unit} is still {state} {timeout}s after {" ".join(start)}{hint}')


def _start_and_wait(start, state_now, up_states, starting_states, timeout, ctx, hint=''):
    """Run ``start`` (``hint`` ends its error), then read ``state_now()`` until it is one of ``up_states``:
    ``(state, True)``; ``(state, False)`` as soon as it is neither up nor starting, or when it is still starting
    ``timeout`` seconds later."""
    rc, out, err = base.run_command(start, ctx, timeout=timeout + base.COMMAND_GRACE)
    if rc != 0:
        raise base.UndoError(f'{" ".join(start)} exited {rc}: {base.output(out, err)}{hint}')
    deadline = time.monotonic() + timeout
    while True:
        state = state_now()
        if state in up_states:
            return state, True
        if state not in starting_states or time.monotonic() >= deadline:
            return state, False
        time.sleep(ctx.poll_interval)


def _container_state(cli, engine, name, ctx, missing_ok=False):
    """``<engine> container inspect -f {{.State.Status}} NAME``: running, exited, created, restarting... A container
    that does not exist is None with ``missing_ok``, else base.UndoError."""
    argv = cli + ['container', 'inspect', '-f', '{{.State.Status}}', name]
    rc, out, err = base.run_command(argv, ctx)
    said = base.output(out, err)
    if rc != 0:
        if _no_such_container(said) or 'no such object' in said.lower():
            if missing_ok:
                return None
            raise base.UndoError(f'there is no {engine} container {name} any more (removed while paused?), so it '
                                 'cannot be started again: start the service by hand')
        raise base.UndoError(f'{" ".join(argv)} exited {rc}: {said}')
    state = out.strip()
    if not state or ' ' in state or '\n' in state:
        raise base.UndoError(f'{" ".join(argv)} printed {out[:120]!r}, not a container state')
    return state


def _resume_container(params, ctx):
    engine, name = params['manager'], params['container']
    cli = _service_command(ctx.container_commands.get(engine), engine, f'the {engine} CLI', f'container {name}')
    state = _container_state(cli, engine, name, ctx)
    if state in ('running', 'restarting'):
        return f'{engine} container {name} is already {state}: nothing to start'
    timeout = params.get('start_timeout', SERVICE_START_TIMEOUT)
    start = cli + ['start', name]
    starting = ('restarting', 'created')
    state, up = _start_and_wait(start, lambda: _container_state(cli, engine, name, ctx), ('running',), starting,
                                timeout, ctx)
    if up:
        return f'started {engine} container {name} again'
    if state not in starting:
        raise base.UndoError(f'{engine} container {name} is {state} after {" ".join(start)} (see {engine} logs '
                             f'{name})')
    raise base.UndoError(f'{engine} container {name} is still {state} {timeout}s after {" ".join(start)}')


SERVICE_PAUSE = base.Kind('service_pause', _check_service_pause, _undo_service_pause)

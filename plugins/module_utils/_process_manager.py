# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The process managers of the managed_process module: how a named process is started, found and described.

- ``process``: a plain detached child (``spawn_detached``), found again through its pidfile and /proc. It works
  everywhere, the netns lab included, and is what the lab exercises.
- ``systemd``: a transient service from ``systemd-run`` (no unit file is written); ``systemd_run_argv`` builds the
  command and ``systemd_unit_text`` what ``systemctl cat`` shows for it.
- ``docker`` and ``podman``: ``container_run_argv``. Their GPU flags differ:
  - docker: ``--gpus all``, served by the NVIDIA Container Toolkit's runtime hook (``nvidia-ctk runtime configure
    --runtime=docker``);
  - podman: ``--device nvidia.com/gpu=all``, a CDI device, which needs the CDI spec that ``nvidia-ctk cdi generate
    --output=/etc/cdi/nvidia.yaml`` writes. Older podman accepts ``--gpus`` for docker compatibility but attaches no
    device with it, so it is never used here.
  The log file differs too: podman writes it where asked (``--log-driver k8s-file --log-opt path=LOG``); docker's
  drivers keep it under /var/lib/docker, readable with ``docker logs`` only.

Stopping is not here: every stop is the undo of a ledger entry, in ``_ledger_undo`` (kinds ``process``,
``systemd_unit`` and ``container``), the single implementation that the restore and the watchdog also run.

Standard library only (plus the ledger's modules), Python 3.8+: it runs on the managed hosts.
"""

from __future__ import annotations

import math
import os
import re
import time

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_base,
    _ledger_core,
    _ledger_proc,
    _ledger_running,
)

MANAGERS = ('process', 'systemd', 'docker', 'podman')
# the ledger kind that records a process started by each manager
LEDGER_KINDS = {'process': 'process', 'systemd': 'systemd_unit', 'docker': 'container', 'podman': 'container'}
RUNNING_UNIT_STATES = ('active', 'activating', 'reloading')
ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
PROPERTY_RE = re.compile(r'^([A-Za-z][A-Za-z0-9]*)=')
LOG_TAIL_MAX_BYTES = 256 * 1024
CONTAINER_STATUS_FORMAT = '{{.State.Running}} {{.State.Pid}}'


class ProcessManagerError(ValueError):
    """A request the process managers cannot carry out: a bad name or option, or output they cannot read."""


# ---------------------------------------------------------------------------------------------------------------
# validation


def check_name(name):
    """A process name: it becomes a container name and part of a unit name, so it follows the stricter rule."""
    if not isinstance(name, str) or not _ledger_running.CONTAINER_NAME_RE.match(name):
        raise ProcessManagerError(f'name must match [A-Za-z0-9][A-Za-z0-9_.-]* (it names a container or a systemd '
                                  f'unit), got {name!r}')
    return name


def check_seconds(option, value):
    """A module's timeout option: finite and not negative (an infinite or NaN stop timeout would make an undo wait
    forever)."""
    if not math.isfinite(value) or value < 0:
        raise ProcessManagerError(f'{option} must be a finite number of seconds, not negative, got {value}')
    return value


def check_argv(argv):
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv) \
            or not argv[0] or any('\0' in a for a in argv):
        raise ProcessManagerError(f'argv must be a non-empty list of strings without NUL bytes, got {argv!r}')
    return list(argv)


def check_environment(environment):
    """``environment`` as a dict of strings. Numbers are written out (YAML reads ``NCCL_IB_DISABLE: 1`` as an int);
    booleans and nested values are refused, since their spelling would be a guess."""
    checked = {}
    for key, value in (environment or {}).items():
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            raise ProcessManagerError(f'environment variable name {key!r} must match [A-Za-z_][A-Za-z0-9_]*')
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ProcessManagerError(f'environment variable {key} must be a string or a number, got '
                                      f'{type(value).__name__} {value!r}; quote it')
        value = str(value)
        if '\0' in value:
            raise ProcessManagerError(f'environment variable {key} contains a NUL byte')
        checked[key] = value
    return checked


def env_file_text(manager, environment):
    """``environment`` as ``manager``'s env file spells it, read back exactly: systemd's EnvironmentFile= reads a
    double-quoted value with ``\\``, ``"``, ``$`` and a backtick escaped (a line break kept); docker's and podman's
    ``--env-file`` take the rest of each line verbatim, so a value with a line break cannot be written and is
    refused."""
    environment = check_environment(environment)
    if manager != 'systemd':
        _check_engine(manager)
    lines = []
    for key in sorted(environment):
        value = environment[key]
        if manager == 'systemd':
            lines.append(key + '="' + re.sub(r'([\\"$`])', r'\\\1', value) + '"')
        elif '\n' in value or '\r' in value:
            raise ProcessManagerError(f'environment variable {key} holds a line break, which {manager}\'s --env-file '
                                      'cannot carry')
        else:
            lines.append(f'{key}={value}')
    return ''.join(line + '\n' for line in lines)


def env_file_path(ledger_dir, manager, name=None, unit=None):
    """Where a unit's or container's environment file lives: ``<state_dir>/env/``, beside the ledger (0700)."""
    state_dir = os.path.dirname(os.path.normpath(_check_absolute(ledger_dir, 'ledger_dir')))
    base = service_unit(unit) if manager == 'systemd' else f'{_check_engine(manager)}-{check_name(name)}'
    return os.path.join(state_dir, 'env', base + '.env')


def write_env_file(path, text):
    """Write ``text`` to ``path`` mode 0600 in a 0700 directory, whole or not at all (``_ledger_base.write_atomic``:
    a temporary file beside it, fsynced, renamed over it)."""
    directory = os.path.dirname(_check_absolute(path, 'env_file'))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    _ledger_base.write_atomic(path, text.encode('utf-8'), mode=0o600)


def _check_absolute(path, what):
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ProcessManagerError(f'{what} must be an absolute path, got {path!r}')
    return path


def service_unit(unit):
    """The unit name with its ``.service`` suffix; ProcessManagerError for a name systemd would refuse."""
    try:
        return _ledger_running.service_unit_name(unit)
    except _ledger_core.LedgerError as err:
        raise ProcessManagerError(str(err)) from None


# ---------------------------------------------------------------------------------------------------------------
# systemd: transient services


def systemd_seconds(seconds):
    """A time span as systemd reads it: whole seconds as ``30s``, anything finer in milliseconds."""
    if seconds is None or seconds < 0:
        raise ProcessManagerError(f'a stop timeout must be a non-negative number of seconds, got {seconds!r}')
    if float(seconds).is_integer():
        return f'{int(seconds)}s'
    return f'{int(round(seconds * 1000))}ms'


def _check_properties(properties, log_path):
    """User properties, refusing those this module sets itself (a second assignment would silently win or lose)."""
    ours = {'KillMode': 'always control-group', 'TimeoutStopSec': 'set from the stop timeout',
            'Environment': 'set from environment', 'WorkingDirectory': 'set from working_dir'}
    if log_path:
        ours.update(StandardOutput='set from log_path', StandardError='set from log_path')
    checked = []
    for prop in properties or ():
        match = PROPERTY_RE.match(prop) if isinstance(prop, str) else None
        if not match or '\n' in prop:
            raise ProcessManagerError(f'a systemd property must read NAME=VALUE on one line, got {prop!r}')
        if match.group(1) in ours:
            raise ProcessManagerError(f'property {match.group(1)} is {ours[match.group(1)]}; leave it out of the '
                                      'systemd properties')
        checked.append(prop)
    return checked


def systemd_run_argv(unit, argv, env_file=None, working_dir=None, properties=(), log_path=None,
                     stop_timeout=30.0, systemd_run='systemd-run'):
    """The ``systemd-run`` argv that starts ``argv`` as the transient service ``unit``.

    ``--collect`` unloads the unit once it is inactive, failed included, so a unit that died leaves no failed
    state behind to block the next start under the same name. KillMode=control-group stops the whole cgroup (every
    child of a TP rank); TimeoutStopSec is how long ``systemctl stop`` waits before SIGKILL. systemd starts the
    service with its own clean environment, plus the variables of ``env_file`` (EnvironmentFile=, written by
    ``write_env_file``): the values never go on argv, where ``ps`` shows them to every user."""
    unit = service_unit(unit)
    argv = check_argv(argv)
    command = [systemd_run, f'--unit={unit}', '--collect', '--property=KillMode=control-group',
               f'--property=TimeoutStopSec={systemd_seconds(stop_timeout)}']
    command += [f'--property={p}' for p in _check_properties(properties, log_path)]
    if env_file:
        command.append(f'--property=EnvironmentFile={_check_absolute(env_file, "env_file")}')
    if working_dir:
        command.append(f'--working-directory={_check_absolute(working_dir, "working_dir")}')
    if log_path:
        log_path = _check_absolute(log_path, 'log_path')
        command += [f'--property=StandardOutput=append:{log_path}', f'--property=StandardError=append:{log_path}']
    return command + ['--'] + argv


def _unit_escape(text, exec_syntax=False):
    """``text`` as a unit file spells it: ``%`` doubled (specifiers), and in ExecStart also ``$`` (variables)."""
    text = text.replace('%', '%%')
    return text.replace('$', '$$') if exec_syntax else text


def _unit_quote(text, exec_syntax=False):
    escaped = text.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
    return '"' + _unit_escape(escaped, exec_syntax) + '"'


def systemd_unit_text(unit, argv, env_file=None, working_dir=None, properties=(), log_path=None,
                      stop_timeout=30.0):
    """The unit that ``systemd_run_argv`` with the same arguments makes, as ``systemctl cat`` shows a transient
    unit: for the run's record, since no unit file exists on disk. Equivalent, not byte-identical: systemd
    resolves the program path itself, and puts a user property that belongs to [Unit] there."""
    unit = service_unit(unit)
    argv = check_argv(argv)
    lines = [f'# /run/systemd/transient/{unit}',
             '# This is a transient unit file, created programmatically via the systemd API. Do not edit.',
             '[Unit]',
             # systemd-run describes a unit by its command line when not told otherwise
             f'Description={_unit_escape(" ".join(argv))}',
             'CollectMode=inactive-or-failed',
             '',
             '[Service]',
             'KillMode=control-group',
             f'TimeoutStopSec={systemd_seconds(stop_timeout)}']
    lines += _check_properties(properties, log_path)
    if env_file:
        lines.append(f'EnvironmentFile={_unit_escape(_check_absolute(env_file, "env_file"))}')
    if working_dir:
        lines.append(f'WorkingDirectory={_unit_escape(_check_absolute(working_dir, "working_dir"))}')
    if log_path:
        log_path = _unit_escape(_check_absolute(log_path, 'log_path'))
        lines += [f'StandardOutput=append:{log_path}', f'StandardError=append:{log_path}']
    lines.append('ExecStart=' + ' '.join(_unit_quote(a, exec_syntax=True) for a in argv))
    return '\n'.join(lines) + '\n'


def systemctl_status_argv(unit, systemctl='systemctl'):
    return [systemctl, 'show', '-p', 'ActiveState,MainPID', service_unit(unit)]


def parse_systemctl_show(text):
    """``systemctl show -p ActiveState,MainPID UNIT`` -> ``{active_state, main_pid, running}``. A unit that does
    not exist reads ``inactive`` with MainPID 0 (systemctl exits 0 for it); ``main_pid`` is None when 0."""
    values = {}
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition('=')
        if not sep or not key:
            raise ProcessManagerError(f'systemctl show printed a line that is not KEY=VALUE: {line[:120]!r}')
        values[key.strip()] = value.strip()
    missing = [k for k in ('ActiveState', 'MainPID') if k not in values]
    if missing:
        raise ProcessManagerError(f'systemctl show did not report {", ".join(missing)}: {(text or "")[:200]!r}')
    if not values['MainPID'].isdigit():
        raise ProcessManagerError(f'systemctl show reported MainPID={values["MainPID"]!r}, not a number')
    state = values['ActiveState']
    return {'active_state': state, 'main_pid': int(values['MainPID']) or None,
            'running': state in RUNNING_UNIT_STATES}


# ---------------------------------------------------------------------------------------------------------------
# containers: docker and podman


def _check_engine(engine):
    if engine not in ('docker', 'podman'):
        raise ProcessManagerError(f'container engine must be docker or podman, got {engine!r}')
    return engine


def _check_volume(volume):
    """``SRC:DST[:OPTIONS]``, DST absolute; SRC a host path or a named volume."""
    parts = volume.split(':') if isinstance(volume, str) else []
    if len(parts) not in (2, 3) or not parts[0] or not parts[1].startswith('/') or (len(parts) == 3 and not parts[2]):
        raise ProcessManagerError(f'a volume must read SRC:DST or SRC:DST:OPTIONS (e.g. /models:/models:ro) with '
                                  f'DST absolute, got {volume!r}')
    return volume


def container_run_argv(engine, name, image, argv, env_file=None, options=(), volumes=(), log_path=None,
                       gpus=True, binary=None):
    """``<engine> run -d`` argv for a TP rank: host network and IPC (NCCL talks over the host's interfaces and
    shared memory), all GPUs unless ``gpus`` is false, the environment from ``env_file`` (``--env-file``, written by
    ``write_env_file``; never ``-e K=V`` on argv), ``-v`` volumes in order, then ``options`` verbatim, the image and
    ``argv``.

    ``log_path`` is for podman only (k8s-file driver at that path); docker cannot put the log in a chosen file, so
    asking for it is an error rather than a log that silently never appears."""
    engine = _check_engine(engine)
    check_name(name)
    argv = check_argv(argv) if argv else []
    if not isinstance(image, str) or not image or image.startswith('-') or any(c.isspace() for c in image):
        raise ProcessManagerError(f'image must be an image reference such as lmsysorg/sglang:v0.5.6, got {image!r}')
    command = [binary or engine, 'run', '-d', '--name', name, '--network', 'host', '--ipc', 'host']
    if gpus:
        command += ['--gpus', 'all'] if engine == 'docker' else ['--device', 'nvidia.com/gpu=all']
    if env_file:
        command += ['--env-file', _check_absolute(env_file, 'env_file')]
    for volume in volumes or ():
        command += ['-v', _check_volume(volume)]
    if log_path:
        if engine == 'docker':
            raise ProcessManagerError('docker cannot write a container log to a chosen file (its log drivers keep '
                                      f'it under /var/lib/docker); leave log_path out and read it with docker logs '
                                      f'{name}')
        command += ['--log-driver', 'k8s-file', '--log-opt', f'path={_check_absolute(log_path, "log_path")}']
    if not all(isinstance(o, str) for o in options or ()):
        raise ProcessManagerError(f'container options must be strings, got {options!r}')
    return command + list(options or ()) + [image] + argv


def container_status_argv(engine, name, binary=None):
    # `container inspect`, not `inspect`: an image or volume of the same name must not answer for a container
    return [binary or _check_engine(engine), 'container', 'inspect', '-f', CONTAINER_STATUS_FORMAT, check_name(name)]


def container_logs_argv(engine, name, lines=40, binary=None):
    return [binary or _check_engine(engine), 'logs', '--tail', str(int(lines)), check_name(name)]


def parse_container_status(rc, out, err):
    """The result of ``container_status_argv`` -> ``{exists, running, pid}``; pid is None when not running."""
    if rc != 0:
        said = (err or out or '').strip()
        # docker: "No such container: NAME" (older: "No such object"); podman: 'no such container'
        if 'no such container' in said.lower() or 'no such object' in said.lower():
            return {'exists': False, 'running': False, 'pid': None}
        raise ProcessManagerError(f'container inspect exited {rc}: {said[:300]}')
    fields = (out or '').split()
    if len(fields) != 2 or fields[0] not in ('true', 'false') or not fields[1].isdigit():
        raise ProcessManagerError(f'container inspect printed {(out or "")[:120]!r}, not "<running> <pid>"')
    running = fields[0] == 'true'
    return {'exists': True, 'running': running, 'pid': int(fields[1]) if running and int(fields[1]) else None}


# ---------------------------------------------------------------------------------------------------------------
# the process manager: detached children with a pidfile


def spawn_environment(environment=None):
    """The environment a spawned process gets: a clean minimal base plus ``environment``.

    Not the module's own environment: over SSH that carries Ansible's and the login's variables (LC_ALL=C,
    SSH_*, the remote user's PATH), so a rank would depend on how it was started, and the restart by a watchdog or
    by hand would differ from the first start. The base is what systemd gives a service (its default PATH), with
    LANG=C.UTF-8 and the user's HOME (``_ledger_proc.service_environment``)."""
    env = _ledger_proc.service_environment()
    env.update(check_environment(environment))
    return env


def spawn_detached(argv, environment, log_path, pidfile, working_dir=None):
    """Start ``argv`` detached (``_ledger_proc.spawn_detached``) with the clean environment of ``spawn_environment``
    and return its pid, once the pidfile names it."""
    argv = check_argv(argv)
    env = spawn_environment(environment)
    _check_absolute(log_path, 'log_path')
    _check_absolute(pidfile, 'pidfile')
    try:
        return _ledger_proc.spawn_detached(argv, env, log_path, pidfile, working_dir)
    except OSError as exc:
        raise ProcessManagerError(f'cannot start {argv[0]}: {exc}') from exc


# how a child spawned here ended (``exited with status 1``, ``killed by signal 9``), or None while it runs or when
# it is not ours
exit_status = _ledger_proc.spawned_exit


def cmdline_matches(argv, actual):
    """Whether ``actual`` (a /proc cmdline) is ``argv`` running: the same list, or a script run through its ``#!``
    line, which the kernel shows as the interpreter (and its one optional argument), the script's path, then
    ``argv[1:]``. A bare ``argv[0]`` was found on PATH, so only the script's base name is compared then."""
    if actual is None:
        return False
    argv = list(argv)
    if actual == argv:
        return True
    extra = len(actual) - len(argv)
    if extra not in (1, 2) or actual[extra + 1:] != argv[1:]:
        return False
    script = actual[extra]
    return script == argv[0] or ('/' not in argv[0] and os.path.basename(script) == argv[0])


def read_proc_environ(pid, procfs_root='/proc'):
    """The environment ``pid`` was started with, or None when it cannot be read (gone, or another user's)."""
    try:
        with open(os.path.join(procfs_root, str(int(pid)), 'environ'), 'rb') as handle:
            raw = handle.read()
    except (OSError, ValueError):
        return None
    environ = {}
    for item in raw.split(b'\0'):
        key, sep, value = item.decode('utf-8', 'replace').partition('=')
        if sep:
            environ[key] = value
    return environ


def process_status(pidfile, argv, environment=None, procfs_root='/proc'):
    """What runs under ``pidfile``: ``{running, pid, start_time, cmdline, environment_matches}``.

    ``running`` is true when the pidfile names a live process whose cmdline is ``argv`` (``cmdline_matches``); a
    stale pidfile whose pid now belongs to another program reads not running. ``environment_matches`` compares the
    process's environment with what ``spawn_environment(environment)`` gives: None when not asked (``environment``
    None) or unreadable."""
    status = {'running': False, 'pid': None, 'start_time': None, 'cmdline': None, 'environment_matches': None}
    try:
        pid = _ledger_proc.read_pidfile(pidfile)
    except _ledger_proc.PidfileError:
        return status  # not a pidfile of ours: nothing we started runs under it
    if pid is None or not _ledger_proc.pid_alive(pid, procfs_root):
        return status
    identity = _ledger_proc.process_identity(pid, procfs_root)
    if identity is None:
        return status
    status.update(pid=pid, start_time=identity['start_time'], cmdline=identity['cmdline'])
    status['running'] = cmdline_matches(argv, identity['cmdline'])
    if status['running'] and environment is not None:
        actual = read_proc_environ(pid, procfs_root)
        status['environment_matches'] = None if actual is None else actual == spawn_environment(environment)
    return status


def wait_alive(pid, seconds, procfs_root='/proc', poll_interval=0.05):
    """The startup check: True when ``pid`` is still alive after ``seconds``, False as soon as it is gone."""
    deadline = time.monotonic() + max(0.0, float(seconds))
    while True:
        if not _ledger_proc.pid_alive(pid, procfs_root):
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        time.sleep(min(poll_interval, remaining))


# the size of a log now (0 when absent): pass it to ``log_tail`` as ``start`` to quote only what a new start wrote
# to an appended log
log_size = _ledger_proc.file_size


def log_tail(path, lines=40, start=0, max_bytes=LOG_TAIL_MAX_BYTES):
    """The last ``lines`` lines of ``path`` written after byte ``start`` (at most the last ``max_bytes``), as text
    (``_ledger_proc.read_log_end``); '' when the file is absent or nothing was written."""
    try:
        return _ledger_proc.read_log_end(path, lines, int(start), max_bytes)
    except OSError:
        return ''


# ---------------------------------------------------------------------------------------------------------------
# the ledger entries of a managed process


def ledger_params(manager, name=None, pidfile=None, argv=None, unit=None, command=None, stop_timeout=30.0):
    """The params of the ledger entry recorded BEFORE a start: what the undo needs to stop it.

    A process is known by its pidfile and cmdline until it runs (its pid and start time are merged in then) and
    is signalled as a whole process group, since spawn_detached made it a group leader."""
    if manager == 'process':
        return {'pidfile': _check_absolute(pidfile, 'pidfile'), 'cmdline': check_argv(argv),
                'stop_timeout': float(stop_timeout), 'process_group': True}
    if manager == 'systemd':
        return {'unit': service_unit(unit), 'command': list(command), 'stop_timeout': float(stop_timeout)}
    return {'engine': _check_engine(manager), 'name': check_name(name), 'command': list(command),
            'stop_timeout': float(stop_timeout)}


def identity_params(manager, name=None, pidfile=None, unit=None):
    """The params that tell a managed process's entries apart from every other entry in the ledger."""
    if manager == 'process':
        return {'pidfile': os.path.normpath(_check_absolute(pidfile, 'pidfile'))}
    if manager == 'systemd':
        return {'unit': service_unit(unit)}
    return {'engine': _check_engine(manager), 'name': check_name(name)}


def open_entries(ledger_dir, host, manager, identity):
    """The open (pending, applied, undo_failed) entries of the managed process ``identity`` names, oldest first."""
    kind = LEDGER_KINDS[manager]
    found = []
    for entry in _ledger_core.entries(ledger_dir, host):
        if entry['kind'] != kind or entry['state'] not in _ledger_core.OPEN_STATES:
            continue
        params = dict(entry['params'])
        if 'pidfile' in params and isinstance(params['pidfile'], str):
            params['pidfile'] = os.path.normpath(params['pidfile'])
        if all(params.get(key) == value for key, value in identity.items()):
            found.append(entry)
    return found

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What every kind of the change ledger builds on: the errors, the declaration of a kind (``Kind``), the checks of
params, and the context and commands of an undo.

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+. Of the others it
imports only the process toolkit (``_ledger_proc``, which imports none), so that the kinds' modules
(``_ledger_running``, ``_ledger_settings``) and ``_gateway_swap`` need this one and never the core, which imports them
through the registry (``_ledger_kinds``).
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc
except ImportError:  # on a host, installed beside it (see _ledger_core)
    import inferlab_ledger_proc as proc

COMMAND_DIRS = ('/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin')
# how long a stop command may take beyond the stop timeout it was given (the engine's own overhead)
COMMAND_GRACE = 60.0


class LedgerError(Exception):
    """The ledger refused a request: bad params, unknown kind or id, unreadable file."""


class UndoError(LedgerError):
    """One entry could not be undone; the message says why and what to do."""


class Kind:
    """One kind of change the ledger records, declared once beside its code; ``_ledger_kinds`` lists them all.

    ``check(params)`` validates (and may normalise) the params at record time and raises LedgerError. ``undo(params,
    ctx)`` reverts the change, returns a one-line description and raises UndoError when it cannot; it must be safe
    when the change was never made (a ``pending`` entry whose run was killed before the change). ``leftovers(entry,
    ctx)``, for a change that may outlive its undo, lists what an undone entry still runs. ``identity(params)``, for
    a thing a later entry may take again (a unit's name), keys it: the leftovers of a thing an open entry holds are
    that entry's, and of several undone entries of one thing only the newest is looked at."""

    def __init__(self, name, check, undo, leftovers=None, identity=None):
        self.name, self.check, self.undo, self.leftovers, self.identity = name, check, undo, leftovers, identity


# ---------------------------------------------------------------------------------------------------------------
# checks of params


def no_unknown(kind, params, known):
    unknown = sorted(set(params) - known)
    if unknown:
        raise LedgerError(f'unknown params for a {kind} entry: {", ".join(unknown)} (known: '
                          f'{", ".join(sorted(known))})')


def check_interface(kind, interface):
    if (not isinstance(interface, str) or not interface or len(interface) > 15 or '/' in interface
            or any(c.isspace() for c in interface) or interface in ('.', '..')):
        raise LedgerError(f'"interface" of a {kind} entry must be an interface name (1-15 characters, no "/" '
                          f'or spaces), got {interface!r}')


def as_int(value, name, minimum=None):
    if isinstance(value, bool):
        raise LedgerError(f'"{name}" must be an integer, got {value!r}')
    try:
        number = int(str(value).strip())
    except ValueError:
        raise LedgerError(f'"{name}" must be an integer, got {value!r}') from None
    if minimum is not None and number < minimum:
        raise LedgerError(f'"{name}" must be at least {minimum}, got {number}')
    return number


def as_float(value, name):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LedgerError(f'"{name}" must be a number of seconds, got {value!r}') from None
    if not math.isfinite(number) or number < 0:
        # an infinite or NaN stop timeout would make an undo wait forever
        raise LedgerError(f'"{name}" must be a finite number of seconds, not negative, got {value!r}')
    return number


def as_bool(value, name):
    if isinstance(value, bool):
        return value
    if str(value).lower() in ('true', 'yes', '1'):
        return True
    if str(value).lower() in ('false', 'no', '0'):
        return False
    raise LedgerError(f'"{name}" must be a boolean, got {value!r}')


# ---------------------------------------------------------------------------------------------------------------
# an undo's context and commands


class UndoContext:
    """What an undo function may need from its surroundings; injectable for tests.

    ``tc_command``: the argv prefix that runs ``tc`` (default: ``tc`` from PATH or an sbin directory); a test points
    it into a network namespace of its own, e.g. ``['ip', 'netns', 'exec', NS, 'tc']``. ``ethtool_command``,
    ``systemctl_command`` and ``container_commands`` (engine name -> argv prefix) do the same for ``ethtool``,
    ``systemctl``, ``docker`` and ``podman``.
    ``run_command``: a callable ``(argv, timeout) -> (rc, stdout, stderr)`` that runs every command an undo runs
    (default: ``_ledger_proc.run_bounded``, with ``LC_ALL=C``); the managed_process module passes one built on its own
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


def run_command(argv, ctx, timeout=60):
    """Run one command of an undo: ``(rc, stdout, stderr)``; UndoError when it cannot run at all."""
    if ctx.run_command is not None:
        return ctx.run_command(argv, timeout)
    try:
        return proc.run_bounded(argv, timeout)
    except (OSError, proc.CommandTimedOut) as exc:
        raise UndoError(f'{" ".join(argv)} could not run: {exc}') from exc


def command_argv(configured, name, package, what):
    if configured:
        return list(configured)
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(COMMAND_DIRS))
    if not found:
        raise UndoError(f'{name} is not installed on this host ({package}), so {what} cannot be stopped; install '
                        'it or stop it by hand, then run the undo again')
    return [found]


def output(out, err):
    return (err.strip() or out.strip()).replace('\n', ' ')


# ---------------------------------------------------------------------------------------------------------------
# files


def fsync_dir(path):
    """fsync a directory, so that a file created or renamed in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data, mode=None):
    """Write ``data`` (bytes) to ``path`` atomically: a temporary file in the same directory, fsynced, renamed over
    it. ``mode`` None keeps the existing file's mode (and, when allowed, its owner); a new file gets 0644."""
    directory = os.path.dirname(path) or '.'
    try:
        current = os.stat(path)
    except FileNotFoundError:
        current = None
    if mode is None:
        mode = (current.st_mode & 0o7777) if current else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.', suffix='.tmp', dir=directory)
    try:
        view = memoryview(bytes(data))
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode)
        if current is not None and (current.st_uid, current.st_gid) != (os.geteuid(), os.getegid()):
            try:
                os.fchown(fd, current.st_uid, current.st_gid)
            except PermissionError:
                pass
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.replace(tmp, path)
    except BaseException:
        if fd is not None:
            os.close(fd)
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def sha256_file(path):
    """The sha256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Processes on this host for the change ledger: /proc, pids and pidfiles, and starting a detached process.

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import subprocess

# systemd's default PATH for services: what a process started by inferlab sees (a managed process, a gateway
# instance, the host-side watchdog)
BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


class PidfileError(Exception):
    """A pidfile that cannot be read or does not hold a pid."""


# ---------------------------------------------------------------------------------------------------------------
# /proc


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


def same_process(pid, start_time, procfs_root='/proc'):
    """Whether ``pid`` is still the live process that started at ``start_time`` (not a reused pid)."""
    info = read_proc_stat(pid, procfs_root)
    return info is not None and info['state'] not in ('Z', 'X') and info['start_time'] == int(start_time)


def group_members(pgid, procfs_root):
    """Live pids whose process group is ``pgid``."""
    members = []
    for name in os.listdir(procfs_root):
        if name.isdigit():
            info = read_proc_stat(name, procfs_root)
            if info and info['pgrp'] == pgid and info['state'] not in ('Z', 'X'):
                members.append(int(name))
    return members


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


# ---------------------------------------------------------------------------------------------------------------
# pidfiles


def read_pidfile(pidfile):
    if not pidfile:
        return None
    try:
        with open(pidfile) as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PidfileError(f'cannot read pidfile {pidfile}: {exc}') from exc
    if not text:
        return None
    try:
        return int(text.split()[0])
    except ValueError:
        raise PidfileError(f'pidfile {pidfile} does not hold a pid: {text[:40]!r}') from None


def pidfile_alive(pidfile, procfs_root='/proc'):
    """The pid ``pidfile`` names when that process is alive, else None."""
    try:
        named = read_pidfile(pidfile)
    except PidfileError:
        return None
    return named if named is not None and pid_alive(named, procfs_root) else None


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

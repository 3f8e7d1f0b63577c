# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The process toolkit of this host: /proc, pids and pidfiles, signals and waits, starting a detached process, and
running a command with a bound.

Everything on a host that reads or handles a process goes through here: the ledger's kinds and undo, the gateway
swap, the driver's commands, the process managers and the modules that start, stop or pause processes.

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+. It imports none of
the others, so that any of them may import it.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time

# systemd's default PATH for services: what a process started by inferlab sees (a managed process, a gateway
# instance, the host-side watchdog)
BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
# how long a command killed at its timeout gets to die before it is left behind (stuck in the kernel)
KILL_WAIT_S = 5.0
# how often a wait looks again
POLL_S = 0.05


class PidfileError(Exception):
    """A pidfile that cannot be read or does not hold a pid: ``pidfile``, and ``os_error`` (it could not be read) or
    ``text`` (what it holds instead of a pid), for a caller that words its own message."""

    def __init__(self, message, pidfile=None, os_error=None, text=None):
        super().__init__(message)
        self.pidfile, self.os_error, self.text = pidfile, os_error, text


class CommandTimedOut(subprocess.TimeoutExpired):
    """A command that did not return within its timeout and was killed; ``died``: whether it died then (one stuck in
    the kernel does not, and is left behind), ``pid`` its pid. Its text is subprocess's own."""

    def __init__(self, cmd, timeout, died, pid):
        super().__init__(cmd, timeout)
        self.died, self.pid = died, pid


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


def is_live(info):
    """Whether ``read_proc_stat``'s answer is a live process (not None, not a zombie or dead)."""
    return info is not None and info['state'] not in ('Z', 'X')


def leads_group(pid, procfs_root='/proc'):
    """Whether ``pid`` leads its own process group (False when it is gone or its stat cannot be read)."""
    try:
        info = read_proc_stat(pid, procfs_root)
    except (OSError, ValueError, IndexError):
        return False
    return info is not None and info['pgrp'] == int(pid)


def _labelled_number(path, label, field):
    """The integer in word ``field`` of the first line of ``path`` that starts with ``label``, or None when there is
    none or it cannot be read."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(label):
                    return int(line.split()[field])
    except (OSError, ValueError, IndexError):
        return None
    return None


def boot_time(procfs_root='/proc'):
    """The boot time (``btime`` of ``<procfs_root>/stat``, seconds since the epoch), or None when unreadable."""
    return _labelled_number(os.path.join(procfs_root, 'stat'), 'btime ', 1)


def started_at(start_ticks, procfs_root='/proc'):
    """When a process started (seconds since the epoch) from its start time in clock ticks after boot, or None when
    the boot time cannot be read."""
    boot = boot_time(procfs_root)
    return None if boot is None else boot + start_ticks / float(os.sysconf('SC_CLK_TCK'))


def read_proc_uid(pid, procfs_root='/proc'):
    """The effective uid of ``pid`` (``Uid:`` of ``/proc/PID/status``: real, effective, saved, filesystem), or None
    when it cannot be read."""
    return _labelled_number(os.path.join(procfs_root, str(pid), 'status'), 'Uid:', 2)


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
    return is_live(info) and info['start_time'] == int(start_time)


def group_members(pgid, procfs_root):
    """Live pids whose process group is ``pgid``."""
    members = []
    for name in os.listdir(procfs_root):
        if name.isdigit():
            info = read_proc_stat(name, procfs_root)
            if is_live(info) and info['pgrp'] == pgid:
                members.append(int(name))
    return members


# ---------------------------------------------------------------------------------------------------------------
# signals and waits


def send_signal(pid, signum, group=False):
    """Signal ``pid`` (its process group when ``group``); False when it is gone already. PermissionError goes on,
    for the caller to say whose process it is."""
    kill = os.killpg if group else os.kill
    try:
        kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def wait_gone(alive, timeout, poll_interval=POLL_S):
    """Wait until ``alive()`` is false: True, or False when it is still true ``timeout`` seconds later."""
    deadline = time.monotonic() + float(timeout)
    while alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_interval)
    return True


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
        raise PidfileError(f'cannot read pidfile {pidfile}: {exc}', pidfile, os_error=exc) from exc
    if not text:
        return None
    try:
        return int(text.split()[0])
    except ValueError:
        raise PidfileError(f'pidfile {pidfile} does not hold a pid: {text[:40]!r}', pidfile, text=text) from None


def pidfile_alive(pidfile, procfs_root='/proc'):
    """The pid ``pidfile`` names when that process is alive, else None."""
    try:
        named = read_pidfile(pidfile)
    except PidfileError:
        return None
    return named if named is not None and pid_alive(named, procfs_root) else None


# ---------------------------------------------------------------------------------------------------------------
# starting a detached process (managed_process's `process` manager, the undo that resumes a paused service, a
# gateway instance, the link watchdog)

# The children spawned by this process, by pid: their exit status is ours to read, and keeping the Popen objects
# stops subprocess from reaping them behind our back when they would be garbage-collected.
SPAWNED = {}


def service_environment():
    """The clean environment a started service gets: what systemd gives one (its default PATH), LANG=C.UTF-8 and
    the user's HOME; never the starter's own (over SSH that carries Ansible's and the login's variables)."""
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        home = '/'
    return {'PATH': BASE_PATH, 'LANG': 'C.UTF-8', 'HOME': home}


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


def spawned_returncode(pid):
    """The exit status of a child spawned here (``Popen.returncode``: negative for a signal), collected so that it
    leaves no zombie; None while it runs, or when it is not ours."""
    proc = SPAWNED.get(pid)
    return None if proc is None else proc.poll()


def spawned_exit(pid):
    """How a child spawned here ended (``exited with status 1``, ``killed by signal 9``), or None while it runs or
    when it is not ours."""
    code = spawned_returncode(pid)
    if code is None:
        return None
    return f'killed by signal {-code}' if code < 0 else f'exited with status {code}'


# ---------------------------------------------------------------------------------------------------------------
# logs


def file_size(path):
    """The size of ``path`` now (0 when absent): where what a new start writes to an appended log begins."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def read_log_end(path, lines, start=0, max_bytes=256 * 1024):
    """The last ``lines`` lines of ``path`` written after byte ``start`` (a log truncated meanwhile: from its start),
    reading at most its last ``max_bytes``; OSError when it cannot be read."""
    with open(path, 'rb') as handle:
        size = os.fstat(handle.fileno()).st_size
        begin = start if start <= size else 0
        handle.seek(max(begin, size - int(max_bytes)))
        text = handle.read().decode('utf-8', 'replace')
    return '\n'.join(text.splitlines()[-int(lines):]) if lines > 0 else ''


# ---------------------------------------------------------------------------------------------------------------
# a command with a bound


def run_bounded(argv, timeout=60):
    """Run ``argv`` with LC_ALL=C and stdin from /dev/null: ``(rc, stdout, stderr)``. Bounded even for a command
    stuck in the kernel (an ``insmod`` whose module init never returns ignores SIGKILL): past ``timeout`` it is
    killed and waited for KILL_WAIT_S more, then left behind, and CommandTimedOut says which. OSError when it
    cannot start."""
    env = dict(os.environ, LC_ALL='C')
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.communicate(timeout=KILL_WAIT_S)
            died = True
        except subprocess.TimeoutExpired:
            died = False
        raise CommandTimedOut(argv, timeout, died, proc.pid) from None
    return proc.returncode, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace')

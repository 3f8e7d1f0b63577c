#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: paused_service
short_description: Pause a production service to borrow its GPUs, and resume it, through the change ledger
version_added: 0.1.0
description:
  - Pausing a service stops it and so frees its GPU memory (SIGSTOP would free nothing). What starting it again needs
    goes into the host's change ledger first, as a V(service_pause) entry recorded V(pending) BEFORE the stop and
    marked V(applied) after it, so a standalone restore (C(python3 inferlab_ledger.py undo)) or the host-side
    watchdog starts it again even when the controller died.
  - V(process) services (a plain process with a pidfile, like the lab's original replicas) are read from
    C(/proc/PID) before the stop - command line, environment, working directory and the file its stdout goes to -
    then stopped with SIGTERM, and SIGKILL after O(stop_timeout_s). The restart is a detached process with exactly
    that command, environment and directory, appending to that file.
  - V(systemd) services are stopped with C(systemctl stop) and started again with C(systemctl start); V(docker) and
    V(podman) containers with C(stop -t SECONDS) and C(start). The unit or container keeps its own definition.
  - O(state=resumed) is the undo of this service's open V(service_pause) entries, the single implementation that
    the restore playbook and the watchdog run too.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: The service is read (pidfile and /proc, C(systemctl show), C(container inspect)) and the ledger entry
      checked; nothing is recorded, stopped or started.
  diff_mode:
    support: full
    details: Whether the service runs, before and after (none when nothing is open to resume).
  platform:
    support: full
    platforms: posix
options:
  name:
    description:
      - The service, as named in C(inferlab_original_services), for example V(original-a). Its ledger entries are
        found by this name.
    type: str
    required: true
  state:
    description:
      - V(paused) stops the service, recording in the ledger how to start it again. A service that is not running
        fails, unless this name already has an open V(service_pause) entry (it is paused already).
      - V(resumed) undoes this name's open V(service_pause) entries; with none open it changes nothing.
    type: str
    choices: [paused, resumed]
    default: paused
  manager:
    description:
      - How the service runs, C(inferlab_process_manager). O(state=resumed) uses the manager recorded in each entry.
    type: str
    choices: [process, systemd, docker, podman]
    default: process
  pidfile:
    description:
      - The pidfile the service writes, for V(process). Required to pause a V(process) service; the restart writes it
        too.
    type: path
  unit:
    description:
      - The systemd unit, for V(systemd). Defaults to C(<name>.service); C(.service) is added when missing.
    type: str
  container:
    description:
      - The container, for V(docker) and V(podman). Defaults to O(name).
    type: str
  stop_timeout_s:
    description:
      - Seconds between SIGTERM and SIGKILL for V(process); containers get it as C(stop -t), rounded up. V(systemd)
        uses the unit's own C(TimeoutStopSec).
    type: float
    default: 30
  start_timeout_s:
    description:
      - Recorded in the ledger entry - how long the undo waits to see the service running again (V(process) its
        pidfile naming a live process, at least 0.5 seconds after the start; V(systemd) C(is-active); containers
        C(running)).
    type: float
    default: 30
  run_id:
    description:
      - The run, stamped into the ledger lines; the module fails when another run holds the ledger's lock. Required
        for O(state=paused).
    type: str
  procfs_root:
    description:
      - Where procfs is mounted; pids, start times, command lines, environments, working directories and stdout are
        read below it.
    type: path
    default: /proc
  systemctl:
    description:
      - The C(systemctl) binary. Defaults to the one on the host's PATH.
    type: path
  docker:
    description:
      - The C(docker) binary. Defaults to the one on the host's PATH.
    type: path
  podman:
    description:
      - The C(podman) binary. Defaults to the one on the host's PATH.
    type: path
notes:
  - The environment of a V(process) service is kept in the ledger (a directory of mode C(0700), files C(0600)) and
    never returned; RV(environment_names) lists only the names of its variables.
  - A V(process) service's stdout is kept when it is a regular file (C(/proc/PID/fd/1)); a pipe, a terminal or a
    socket becomes C(/dev/null) for the restart. Its stderr goes to the same file as its stdout.
  - A pidfile that names a process started after the pidfile was written is stale (the service died and its pid
    was reused); that process is not the service and is never stopped.
  - The whole process group is stopped when the service leads its own group (its workers hold GPU memory too).
  - A service that could not be started again is refused before anything is stopped - a transient systemd unit
    (from C(systemd-run), unloaded by its stop), a container started with C(--rm) (removed by its stop), a process
    whose environment, working directory or stdout cannot be read, whose working directory was deleted, or that
    runs as another user than the module (its restart would run as the module's user).
seealso:
  - module: inferlab.distributed.change_ledger
  - module: inferlab.distributed.managed_process
"""

EXAMPLES = r"""
- name: Pause the original replica to borrow its GPUs
  inferlab.distributed.paused_service:
    name: "{{ item.name }}"
    manager: "{{ inferlab_process_manager }}"
    pidfile: "/var/lib/inferlab/run/{{ item.name }}.pid"
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"
  loop: "{{ inferlab_original_services }}"

- name: Resume it (the undo of its ledger entries)
  inferlab.distributed.paused_service:
    name: "{{ item.name }}"
    state: resumed
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"
  loop: "{{ inferlab_original_services }}"
"""

RETURN = r"""
state:
  description: The state asked for, reached (or, in check mode, that would be).
  returned: success
  type: str
  sample: paused
entry_id:
  description: The ledger entry of the pause - the new one, the open one already there, or the newest one undone by
    O(state=resumed); null when nothing is or would be recorded.
  returned: success
  type: str
  sample: 20261130T101502Z-service_pause-3fa9
pid:
  description: The pid stopped (or to stop, in check mode; recorded, when already paused), or after O(state=resumed)
    the pid now running (a unit's main pid, a container's init process on the host); null when not known.
  returned: success
  type: int
  sample: 48213
how:
  description: How the service stopped or started - V(SIGTERM), V(SIGKILL), V(exited by itself), V(systemctl stop),
    V(docker stop), V(podman stop), V(already paused), V(started), V(already running), V(nothing to resume); null
    in check mode.
  returned: success
  type: str
  sample: SIGTERM
message:
  description: One line saying what was done.
  returned: success
  type: str
  sample: "paused service original-a (pidfile /var/lib/inferlab/run/original-a.pid): SIGTERM, pid 48213; ledger entry
    20261130T101502Z-service_pause-3fa9"
environment_names:
  description: The names (never the values) of the environment variables recorded to start the service again.
  returned: when O(manager=process) and O(state=paused) and the service was running
  type: list
  elements: str
  sample: [CUDA_VISIBLE_DEVICES, HOME, LANG, PATH]
log_path:
  description: Where the restarted process's output goes (its stdout at the pause, or C(/dev/null)).
  returned: when O(manager=process) and O(state=paused) and the service was running
  type: str
  sample: /var/lib/inferlab/logs/original-a.log
undone:
  description: The ledger entries undone by O(state=resumed) (or that would be, in check mode), newest first.
  returned: success
  type: list
  elements: str
  sample: [20261130T101502Z-service_pause-3fa9]
"""

import math  # noqa: E402 - after the docs, as in community.general
import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import (  # noqa: E402
    _ledger_core,
    _ledger_proc,
    _ledger_running,
    _ledger_undo,
    _module_base,
)
from ansible_collections.inferlab.distributed.plugins.module_utils import _process_manager as pm  # noqa: E402

KIND = 'service_pause'
# a pidfile older than the start of the process it names, by more than this, is stale: that pid was reused
PIDFILE_SLACK_S = 5.0


class PausedService(_module_base.StateModule):
    expected_errors = (pm.ProcessManagerError, _ledger_core.LedgerError)

    def __init__(self, module):
        super().__init__(module)
        self.name = self.params['name']
        self.manager = self.params['manager']
        self.procfs_root = self.params['procfs_root']
        self.undone = []

    # -- options -----------------------------------------------------------------------------------------------

    def prepare(self):
        params = self.params
        if not self.name.strip() or any(c in self.name for c in '\0\n\r'):
            raise pm.ProcessManagerError(f'name must be the name of the service (one line, not empty), got '
                                         f'{self.name!r}')
        for option in ('stop_timeout_s', 'start_timeout_s'):
            pm.check_seconds(option, params[option])
        self.unit = pm.service_unit(params['unit'] or self.name) if self.manager == 'systemd' else None
        self.container = None
        if self.manager in ('docker', 'podman'):
            self.container = _ledger_running.container_name(params['container'] or self.name)
        self.binary = None
        if params['state'] == 'paused':
            if self.manager == 'process' and not params['pidfile']:
                self.fail('manager=process state=paused needs pidfile')
            if self.manager != 'process':
                self.binary = self.find_binary(self.binary_name(self.manager), required=True)

    @staticmethod
    def binary_name(manager):
        return 'systemctl' if manager == 'systemd' else manager

    def find_binary(self, name, required=False):
        return self.params[name] or self.module.get_bin_path(name, required=required)

    def describe(self):
        if self.manager == 'process':
            return f'service {self.name} (pidfile {self.params["pidfile"]})'
        if self.manager == 'systemd':
            return f'service {self.name} (unit {self.unit})'
        return f'service {self.name} ({self.manager} container {self.container})'

    # -- reading -----------------------------------------------------------------------------------------------

    def own_entries(self):
        """This service's open service_pause entries, oldest first."""
        return self.open_entries(lambda e: e['kind'] == KIND and e['params'].get('name') == self.name)

    def proc_stat(self, pid):
        """``_ledger_proc.read_proc_stat``, failing with a message on a stat file it cannot parse."""
        try:
            return _ledger_proc.read_proc_stat(pid, self.procfs_root)
        except (ValueError, IndexError, OSError) as exc:
            self.fail(f'cannot read {os.path.join(self.procfs_root, str(pid), "stat")}: {type(exc).__name__}: {exc}')

    def start_time(self, pid):
        info = self.proc_stat(pid) if pid else None
        return info['start_time'] if info else None

    def started_after_pidfile(self, start_ticks, pidfile):
        """Whether the process started after ``pidfile`` was last written (so the pidfile is not its own)."""
        try:
            written = os.stat(pidfile).st_mtime
        except OSError:
            return False
        started = _ledger_proc.started_at(start_ticks, self.procfs_root)
        return started is not None and started > written + PIDFILE_SLACK_S

    def process_status(self):
        """``(running, pid, why)``: the live process the pidfile names, or why the service is not running."""
        pidfile = self.params['pidfile']
        try:
            pid = _ledger_proc.read_pidfile(pidfile)
        except _ledger_proc.PidfileError as err:
            self.fail(f'service {self.name} cannot be paused: {err}')
        if pid is None:
            return False, None, f'pidfile {pidfile}: absent or empty'
        info = self.proc_stat(pid)  # parsed first: pid_alive reads it too, and raises on a malformed one
        if info is None or not _ledger_proc.pid_alive(pid, self.procfs_root):
            return False, None, f'pidfile {pidfile}: pid {pid} is not running'
        if self.started_after_pidfile(info['start_time'], pidfile):
            return False, None, (f'pidfile {pidfile}: pid {pid} belongs to a process started after the pidfile was '
                                 'written, so the service died and its pid was reused')
        return True, pid, None

    def read_process(self, pid):
        """What starting the service again needs, read from ``<procfs_root>/PID``; fails when any of it cannot be
        read, before anything is stopped."""
        proc_dir = os.path.join(self.procfs_root, str(pid))
        info = self.proc_stat(pid)
        argv = _ledger_proc.read_proc_cmdline(pid, self.procfs_root)
        if info is None or argv is None:
            self.fail(f'service {self.name}: pid {pid} exited while it was being read; nothing was '
                      'paused')
        if not argv:
            self.fail(f'service {self.name}: pid {pid} has an empty command line ({proc_dir}/cmdline: '
                      'a kernel thread, or a process exiting), so it could not be started again; '
                      'nothing was paused')
        self.check_user(pid, proc_dir)
        environment = pm.read_proc_environ(pid, self.procfs_root)
        if environment is None:
            self.fail(f'service {self.name}: cannot read the environment of pid {pid} '
                      f'({proc_dir}/environ), which starting it again needs; run as root or as the '
                      'user of the service. Nothing was paused')
        try:
            working_dir = os.readlink(os.path.join(proc_dir, 'cwd'))
        except OSError as exc:
            self.fail(f'service {self.name}: cannot read the working directory of pid {pid} '
                      f'({proc_dir}/cwd: {exc.strerror}); nothing was paused')
        if working_dir.endswith(' (deleted)') or not os.path.isabs(working_dir):
            self.fail(f'service {self.name}: the working directory of pid {pid} is gone '
                      f'({working_dir}), so it could not be started again; nothing was paused')
        return {'argv': argv, 'environment': environment, 'working_dir': working_dir,
                'log_path': self.stdout_file(pid, proc_dir), 'start_time': info['start_time']}

    def check_user(self, pid, proc_dir):
        """The restart runs as whoever runs the undo, so the service must run as this module's user already."""
        uid = _ledger_proc.read_proc_uid(pid, self.procfs_root)
        if uid is None:
            self.fail(f'service {self.name}: cannot read the user of pid {pid} ({proc_dir}/status); '
                      'nothing was paused')
        if uid != os.geteuid():
            self.fail(f'service {self.name}: pid {pid} runs as uid {uid}, not as uid {os.geteuid()} '
                      'that runs this module and would run its restart; pause it as its own user, or '
                      'manage it with systemd. Nothing was paused')

    def stdout_file(self, pid, proc_dir):
        """The regular file stdout goes to, or /dev/null (a pipe, a terminal, a socket, a deleted file, closed)."""
        try:
            target = os.readlink(os.path.join(proc_dir, 'fd', '1'))
        except FileNotFoundError:
            return os.devnull
        except OSError as exc:
            self.fail(f'service {self.name}: cannot read where the output of pid {pid} goes '
                      f'({proc_dir}/fd/1: {exc.strerror}); run as root or as the user of the service. '
                      'Nothing was paused')
        return target if os.path.isabs(target) and os.path.isfile(target) else os.devnull

    def unit_status(self):
        argv = [self.binary, 'show', '-p', 'ActiveState,MainPID,Transient', self.unit]
        out = self.checked_command(argv, f'cannot read unit {self.unit}')
        shown = pm.parse_systemctl_show(out)
        if shown['running'] and 'Transient=yes' in out.splitlines():
            self.fail(f'unit {self.unit} of service {self.name} is transient (systemd-run): stopping '
                      'it unloads it, so systemctl start could not resume it; nothing was paused')
        return shown['running'], shown['main_pid'], f'unit {self.unit} is {shown["active_state"]}'

    def container_status(self):
        rc, out, err = self.run_command(pm.container_status_argv(self.manager, self.container, self.binary))
        try:
            state = pm.parse_container_status(rc, out, err)
        except pm.ProcessManagerError as exc:
            self.fail(f'cannot read {self.manager} container {self.container}: {exc}', rc=rc,
                      stdout=out, stderr=err)
        if not state['exists']:
            return False, None, f'there is no {self.manager} container {self.container}'
        if state['running']:
            argv = [self.binary, 'container', 'inspect', '-f', '{{.HostConfig.AutoRemove}}', self.container]
            if self.checked_command(argv, f'cannot read {self.manager} container {self.container}').strip() == 'true':
                self.fail(f'{self.manager} container {self.container} of service {self.name} was '
                          'started with --rm: stopping it removes it, so it could not be resumed; '
                          'nothing was paused')
        return state['running'], state['pid'], f'{self.manager} container {self.container} is not running'

    # -- pausing -----------------------------------------------------------------------------------------------

    def state_paused(self):
        entries = self.own_entries()
        if self.manager == 'process':
            running, pid, why = self.process_status()
        elif self.manager == 'systemd':
            running, pid, why = self.unit_status()
        else:
            running, pid, why = self.container_status()
        if not running:
            if entries:
                return self.already_paused(entries)
            self.not_running(why)
        return self.pause_running(pid)

    def not_running(self, why):
        self.fail(f'service {self.name} is not running ({why}): nothing to pause')

    def already_paused(self, entries):
        entry = entries[-1]
        message = (f'service {self.name} is already paused (ledger entry {entry["id"]}, {entry["state"]}); nothing to '
                   'do')
        return self.result(False, entry_id=entry['id'], pid=entry['params'].get('pid'), how='already paused',
                           message=message, before=False, after=False)

    def pause_running(self, pid):
        params = {'manager': self.manager, 'name': self.name, 'start_timeout': self.params['start_timeout_s']}
        extra = {}
        if self.manager == 'process':
            service = self.read_process(pid)
            params.update(service, pidfile=self.params['pidfile'], pid=pid)
            extra = {'environment_names': sorted(service['environment']), 'log_path': service['log_path']}
        else:
            if self.manager == 'systemd':
                params['unit'] = self.unit
            else:
                params['container'] = self.container
            start_time = self.start_time(pid)
            if pid and start_time is not None:
                params.update(pid=pid, start_time=start_time)
        check_mode = self.check_mode
        # record validates the params and refuses when another run holds the lock, in check mode too
        line = _ledger_core.record(self.ledger_dir, self.host, KIND, params, run_id=self.params['run_id'],
                                   check_mode=check_mode)
        if check_mode:
            return self.result(True, pid=pid, message=f'would pause {self.describe()} (pid {pid})', before=True,
                               after=False, **extra)
        entry_id = line['id']
        if self.manager == 'process':
            how = self.stop_process(entry_id, pid, params['start_time'])
        else:
            how = self.stop_managed(entry_id)
        _ledger_core.mark(self.ledger_dir, self.host, entry_id, 'applied', params={'how': how},
                          run_id=self.params['run_id'])
        return self.result(True, entry_id=entry_id, pid=pid, how=how, before=True, after=False,
                           message=f'paused {self.describe()}: {how}, pid {pid}; ledger entry {entry_id}', **extra)

    def stop_process(self, entry_id, pid, start_time):
        """SIGTERM, then SIGKILL: the ledger's stop of a process (the undo of a ``process`` entry), which never
        signals a pid that now belongs to another process. The whole group goes when the service leads one."""
        stop = {'pid': pid, 'start_time': start_time, 'cmdline': f'service {self.name}',
                'pidfile': self.params['pidfile'], 'stop_timeout': self.params['stop_timeout_s'],
                'process_group': True}
        try:
            said = _ledger_running.undo_process(stop, _ledger_undo.UndoContext(procfs_root=self.procfs_root))
        except _ledger_core.UndoError as err:
            self.fail(f'could not stop {self.describe()}: {err}; ledger entry {entry_id} stays pending '
                      '(its undo starts the service again if it is down)', entry_id=entry_id, pid=pid)
        if ' with SIGKILL' in said:
            return 'SIGKILL'
        if ' with SIGTERM' in said:
            return 'SIGTERM'
        return 'exited by itself'

    def stop_managed(self, entry_id):
        if self.manager == 'systemd':
            argv = [self.binary, 'stop', self.unit]
        else:
            argv = [self.binary, 'stop', '-t', str(int(math.ceil(self.params['stop_timeout_s']))), self.container]
        self.checked_command(argv, f'could not stop {self.describe()} (ledger entry {entry_id} stays pending: its '
                                   'undo starts the service again if it is down)', entry_id=entry_id)
        return 'systemctl stop' if self.manager == 'systemd' else f'{self.manager} stop'

    # -- resuming: always the undo of the ledger entries -------------------------------------------------------

    def state_resumed(self):
        entries = self.own_entries()
        if not entries:
            return self.result(False, how='nothing to resume', before=None, after=None,
                               message=f'nothing to resume: no open service_pause entry for {self.name} in the '
                                       f'ledger of {self.host}')
        ids = [e['id'] for e in entries]
        newest = entries[-1]
        if self.check_mode:
            self.undone = list(reversed(ids))
            return self.result(True, entry_id=newest['id'], before=False, after=True,
                               message=f'would start service {self.name} again (undo of {", ".join(self.undone)})')
        managers = {e['params'].get('manager') for e in entries}
        systemctl = self.find_binary('systemctl') if 'systemd' in managers else None
        engines = {m: self.find_binary(m) for m in ('docker', 'podman') if m in managers}
        ctx = _ledger_undo.UndoContext(procfs_root=self.procfs_root,
                                       systemctl_command=[systemctl] if systemctl else None,
                                       container_commands={m: [b] for m, b in engines.items() if b},
                                       run_command=self.undo_command)
        result = self.undo(ids, ctx, run_id=self.params['run_id'])
        self.undone = result['undone']
        if result['failed']:
            self.fail(f'could not resume service {self.name}: {result["message"]}',
                      failures=result['failed'], details=result['details'], undone=self.undone)
        said = [d['message'] for d in result['details']]
        how = 'already running' if all(' is already ' in m for m in said) else 'started'
        return self.result(True, entry_id=newest['id'], pid=self.resumed_pid(newest['params'], ctx), how=how,
                           before=False, after=True, message='; '.join(said))

    def resumed_pid(self, params, ctx):
        """The pid running after the resume, or None when it cannot be told."""
        manager = params.get('manager')
        if manager == 'process':
            return _ledger_proc.pidfile_alive(params['pidfile'], ctx.procfs_root)
        if manager == 'systemd' and ctx.systemctl_command:
            rc, out, _err = self.run_command(pm.systemctl_status_argv(params['unit'], ctx.systemctl_command[0]))
            try:
                return pm.parse_systemctl_show(out)['main_pid'] if rc == 0 else None
            except pm.ProcessManagerError:
                return None
        if manager in ctx.container_commands:
            binary = ctx.container_commands[manager][0]
            rc, out, err = self.run_command(pm.container_status_argv(manager, params['container'], binary))
            try:
                return pm.parse_container_status(rc, out, err)['pid']
            except pm.ProcessManagerError:
                return None
        return None

    # -- the result --------------------------------------------------------------------------------------------

    def result(self, changed, entry_id=None, pid=None, how=None, message='', before=None, after=None, **extra):
        result = dict(changed=changed, state=self.params['state'], entry_id=entry_id, pid=pid, how=how,
                      message=message, undone=self.undone, **extra)
        if self.module._diff and before is not None:
            result['diff'] = dict(before={'state': 'running' if before else 'paused'},
                                  after={'state': 'running' if after else 'paused'})
        return result


def build_module():
    return AnsibleModule(
        argument_spec=_module_base.ledger_argument_spec(
            name=dict(type='str', required=True),
            state=dict(type='str', choices=['paused', 'resumed'], default='paused'),
            manager=dict(type='str', choices=list(pm.MANAGERS), default='process'),
            pidfile=dict(type='path'),
            unit=dict(type='str'),
            container=dict(type='str'),
            stop_timeout_s=dict(type='float', default=30),
            start_timeout_s=dict(type='float', default=30),
            procfs_root=dict(type='path', default='/proc'),
            systemctl=dict(type='path'),
            docker=dict(type='path'),
            podman=dict(type='path'),
        ),
        required_if=[
            ('state', 'paused', ['run_id']),
        ],
        supports_check_mode=True,
    )


def main():
    PausedService(build_module()).run()


if __name__ == '__main__':
    main()

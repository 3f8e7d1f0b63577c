#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: change_ledger
short_description: Record temporary changes in the host's change ledger, lock it, and undo them
version_added: 0.1.0
description:
  - Every temporary change inferlab makes on a host (a process started, a file written, later a paused service, a
    link profile, a swapped driver) goes into that host's change ledger BEFORE it is made, so that the restore
    playbook, or the host-side watchdog without a controller, can undo it.
  - The ledger is C(<ledger_dir>/<host>.jsonl), append-only, one JSON object per line
    C({id, time, kind, params, state}); the current state of an entry is its last line. V(pending) is written and
    fsynced before the change, V(applied) after it, then V(undone) or V(undo_failed).
  - A per-host lock C(<ledger_dir>/<host>.lock) stops two runs from interleaving their ledgers; a second run fails
    fast and names the holder.
  - The format, the lock and the undo of every kind live once, in the ledger's standard-library modules
    C(plugins/module_utils/_ledger_*.py), which this module imports and the C(inferlab.distributed.ledger) role
    installs on the host, the command line as C(<inferlab_state_dir>/bin/inferlab_ledger.py).
  - Known kinds are V(process), V(sampler), V(file), V(tc_profile), V(systemd_unit) and V(container). An unknown
    kind, or params a kind does not accept, fail at record time.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Nothing is written or undone; C(changed) says whether it would be. A lock held by another run
      still fails, so a check run finds the conflict.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  ledger_dir:
    description:
      - The ledger directory, C(<inferlab_state_dir>/ledger). Created (mode C(0700)) when something is written.
    type: path
    required: true
  host:
    description:
      - Whose ledger, the file C(<ledger_dir>/<host>.jsonl). Usually C(inventory_hostname); changes made on the
        controller go into the ledger of V(localhost).
    type: str
    required: true
  action:
    description:
      - V(lock) takes the host's lock for O(run_id); taking it again with the same O(run_id) changes nothing.
      - V(unlock) releases it; only the holder's O(run_id) may.
      - V(record) appends a V(pending) entry of O(kind) with O(params) and returns its RV(id). Call it BEFORE the
        change; it always writes a new entry.
      - V(mark) moves entry O(id) to O(state); marking to the state it already has changes nothing.
      - V(undo) undoes every open entry (V(pending), V(applied), V(undo_failed)) newest first, or only O(id), and
        fails when any undo failed.
      - V(status) reads the ledger and the lock and changes nothing.
      - V(leftovers) lists what V(undone) entries started that still runs (RV(leftovers)) - a V(process) entry's
        process by its recorded pid and start time or process group, a V(systemd_unit) entry's unit still active, a
        V(container) entry's container still running - never matched by a command line; it changes nothing.
    type: str
    required: true
    choices: [lock, unlock, record, mark, undo, status, leftovers]
  run_id:
    description:
      - The run, for example C(20261130T101500Z-experiment). Required for O(action=lock) and O(action=unlock).
      - For O(action=record), O(action=mark) and O(action=undo) it is stamped into the lines written, and the action
        fails when another run holds the lock.
    type: str
  controller:
    description:
      - Hostname of the controller taking the lock (C(lookup('ansible.builtin.pipe', 'hostname'))). Required for
        O(action=lock).
    type: str
  controller_pid:
    description:
      - PID on the controller of the process that lives as long as the run (the C(inferlab run) process or
        C(ansible-playbook)). Required for O(action=lock); O(break_stale) uses it to tell a dead holder.
    type: int
  controller_start_time:
    description:
      - With O(action=lock), the start time of O(controller_pid) on the controller (C(/proc/PID/stat) field 22, clock
        ticks after boot), recorded in the lock so that a later O(break_stale) never takes a reused pid for the holder.
    type: int
  controller_machine_id:
    description:
      - With O(action=lock), the controller's C(/etc/machine-id), recorded in the lock. When both the holder's lock
        and this one have a machine id, they tell the same controller (two controllers may share a hostname).
    type: str
  break_stale:
    description:
      - With O(action=lock), take over a lock whose holder is dead - it took the lock from the same O(controller)
        and its pid is no longer alive there - and return the old holder in RV(took_over). A lock file left empty
        or malformed by a killed run is taken over too.
      - A live holder, or one from another controller, still fails.
    type: bool
    default: false
  holder_alive:
    description:
      - With O(break_stale), whether the holder's pid is alive on the controller, as the caller checked it there
        (the module runs on the host and cannot see the controller's processes).
      - When omitted, the module checks the pid itself, which is only valid when it runs on that controller.
    type: bool
  kind:
    description:
      - The kind of change, for O(action=record). One of V(process), V(sampler), V(file), V(tc_profile),
        V(systemd_unit), V(container), V(service_pause), V(gateway_config), V(kernel_module), V(build_dir),
        V(sysctl), V(nic_setting), V(driver_param).
    type: str
  params:
    description:
      - What undo needs, for O(action=record); for O(action=mark) the keys given are merged into the entry's
        params (for example the pid of a process recorded by its pidfile before it started).
      - 'V(process): C(pid) with C(start_time) (field 22 of C(/proc/PID/stat); filled in from O(procfs_root) when
        only C(pid) is given), or, when recorded before the start, C(pidfile) with C(cmdline); C(cmdline) (string
        or list); C(pidfile) (removed on undo); C(stop_timeout) (seconds between SIGTERM and SIGKILL, default 10);
        C(process_group) (signal the whole group of a group leader, default false). Undo never signals a pid that
        now belongs to another process.'
      - 'V(sampler): a background counter sampler; the same params and undo as V(process).'
      - 'V(tc_profile): C(interface) and C(profile) (V(tx_cliff) or V(lossy)), optionally C(handle), C(rate_mbit),
        C(burst_kb), C(latency_ms), C(pfifo_limit). Undo deletes the root qdisc inferlab made on that interface, and
        never a foreign one.'
      - 'V(file): C(path) and either C(backup) (a copy taken before the change; undo copies it back with its mode)
        or C(existed=false) (undo removes the file).'
      - 'V(systemd_unit): C(unit) (C(.service) added when missing), optionally C(stop_timeout) (default 90),
        C(command), C(pid), C(start_time). Undo runs C(systemctl stop) then C(systemctl reset-failed); a unit that is
        not loaded (or a host without systemd) has nothing to stop.'
      - 'V(container): C(engine) (V(docker) or V(podman)) and C(name), optionally C(stop_timeout) (default 10),
        C(command), C(pid), C(start_time). Undo runs C(stop -t SECONDS NAME) then C(rm NAME); no such container
        has nothing to stop.'
      - 'V(service_pause): a production service stopped to borrow its GPUs (the paused_service module records it).
        C(manager) (V(process), V(systemd), V(docker), V(podman)) and C(name); for V(process) C(pidfile), C(argv),
        C(environment), C(working_dir), C(log_path); for V(systemd) C(unit); for the container engines C(container);
        optionally C(pid) with C(start_time), C(start_timeout) (default 30) and C(how). Undo starts the service
        again (a detached process from the recorded command, C(systemctl start), C(ENGINE start)) and does nothing
        when it already runs.'
      - 'V(gateway_config): a temporary gateway config (the gateway_fallback module records it). C(kind)
        (V(litellm)), C(config_path), C(backup_path), C(original_sha256), C(instances), C(front) (with
        C(front_backup_path) and C(front_original_sha256)), C(admin_key_file), C(public_model), optionally
        C(original_fallbacks), C(ready_timeout_s), C(drain_timeout_s). Undo puts the original bytes back and restarts
        every instance that runs another config, one at a time behind the front.'
      - 'V(kernel_module): the candidate thunderbolt_net loaded in place of the distribution driver (the
        tbnet_module module records it). C(module_path), C(candidate_srcversion), C(stock_srcversion), C(stock_loaded),
        C(stock_parameters), C(stock_taint), C(tx_e2e), C(interface), C(interface_was_up), C(emulated),
        C(sysfs_root). Undo unloads the candidate and loads the distribution driver, verified through sysfs.'
      - 'V(build_dir): a private build directory (the tbnet_build module records it before making it). C(path)
        (absolute, two levels deep at least, never under C(/lib/modules), C(/boot), C(/etc), C(/usr) or another system
        tree), optionally C(purpose). Undo removes the directory when it carries the C(.inferlab-build-dir) marker or
        is empty, and leaves anything else alone with an error.'
      - 'V(sysctl): a transport sysctl written at run time (the sysctl_layer module records it). C(name) (under
        C(net.core), C(net.ipv4) or C(net.ipv6)), C(path) (its file under C(/proc/sys)), C(previous) and C(value)
        (as text). Undo writes C(previous) back while the value is still C(value), and leaves a value someone else
        set alone with an error.'
      - 'V(nic_setting): the ethtool settings of one group of a NIC (the nic_layer module records it). C(interface),
        C(group) (V(features), V(coalesce) or V(rings)), C(previous) and C(value) (the same setting names, each
        C(on)/C(off) or a whole number). Undo sets C(previous) back for each name still at C(value), and leaves the
        group alone with an error when a name is at neither.'
      - 'V(driver_param): a run-time parameter of a loaded driver (the driver_param_layer module records it). C(driver),
        C(name), C(path) (its file under C(/sys/module/DRIVER/parameters)), C(previous) and C(value). Undo as
        V(sysctl).'
    type: dict
  id:
    description:
      - The entry, for O(action=mark) (required) and O(action=undo) (undo only this entry).
    type: str
  state:
    description:
      - The state O(action=mark) moves the entry to.
    type: str
    choices: [applied, undone]
  procfs_root:
    description:
      - Where procfs is mounted; process start times are read below it.
    type: path
    default: /proc
"""

EXAMPLES = r"""
- name: Take the ledger lock of this host for the run
  inferlab.distributed.change_ledger:
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    action: lock
    run_id: "{{ inferlab_run_dir | basename }}"
    controller: "{{ lookup('ansible.builtin.pipe', 'hostname') }}"
    controller_pid: "{{ inferlab_controller_pid }}"

- name: Record the config file before it is changed
  inferlab.distributed.change_ledger:
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    action: record
    run_id: "{{ inferlab_run_dir | basename }}"
    kind: file
    params:
      path: /etc/inferlab/gateway.yaml
      backup: /var/lib/inferlab/backup/gateway.yaml
  register: gateway_entry

- name: Mark it applied once written
  inferlab.distributed.change_ledger:
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    action: mark
    id: "{{ gateway_entry.id }}"
    state: applied

- name: Record a server before starting it (its pid is not known yet)
  inferlab.distributed.change_ledger:
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    action: record
    kind: process
    params:
      pidfile: /var/lib/inferlab/run/server.pid
      cmdline: [/opt/venv/bin/python, -m, sglang.launch_server, --tp, "2"]
  register: server_entry

- name: Mark it applied with its pid (the start time is read from /proc)
  inferlab.distributed.change_ledger:
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    action: mark
    id: "{{ server_entry.id }}"
    state: applied
    params:
      pid: "{{ server_pid }}"

- name: Undo everything this host's ledger holds
  inferlab.distributed.change_ledger:
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    action: undo
"""

RETURN = r"""
ledger:
  description: Path of the ledger file.
  returned: always
  type: str
  sample: /var/lib/inferlab/ledger/lab-a.jsonl
id:
  description: The entry recorded or marked.
  returned: success, when O(action=record) or O(action=mark)
  type: str
  sample: 20261130T101502Z-process-3fa9
entry:
  description: The line written (or, when nothing changed or in check mode, the line that is current or would be
    written).
  returned: success, when O(action=record) or O(action=mark)
  type: dict
  sample: {id: 20261130T101502Z-process-3fa9, time: "2026-11-30T10:15:02Z", kind: process, state: pending,
           run_id: 20261130T101500Z-experiment,
           params: {pid: 4242, start_time: 81234, cmdline: "sleep 300", stop_timeout: 10.0, process_group: false}}
previous_state:
  description: The state of the entry before O(action=mark).
  returned: success, when O(action=mark)
  type: str
  sample: pending
lock:
  description:
    - The lock holder C({run_id, controller, pid, time}), with C(start_time) and C(machine_id) when given, after
      O(action=lock); the holder released by O(action=unlock) (null when there was no lock); the current holder
      for O(action=status) (null when free, an empty dict when the lock file is malformed).
  returned: success, when O(action=lock), O(action=unlock) or O(action=status)
  type: dict
  sample: {run_id: 20261130T101500Z-experiment, controller: ctl1, pid: 4242, time: "2026-11-30T10:15:00Z"}
held_by:
  description:
    - The holder of a lock that O(action=lock) could not take, as in RV(lock), or C({problem}) for a malformed
      lock file. A caller that may break a stale lock checks this holder's pid on its controller
      and asks again with O(break_stale) and O(holder_alive).
  returned: failure, when another run holds the lock
  type: dict
  sample: {run_id: 20261129T220000Z-experiment, controller: ctl1, pid: 3999, time: "2026-11-29T22:00:00Z"}
took_over:
  description: The dead holder whose lock O(break_stale) took over (C({problem}) for a malformed lock file), or
    null.
  returned: success, when O(action=lock)
  type: dict
  sample: {run_id: 20261129T220000Z-experiment, controller: ctl1, pid: 3999, time: "2026-11-29T22:00:00Z"}
held_before:
  description:
    - Whether this run held the lock already, before this call (which then changed nothing). A role that takes
      the lock for its own work releases it at its end only when it was not held before; a run that locked the
      host for its whole length (the staged experiment) keeps it until its restore.
  returned: success, when O(action=lock)
  type: bool
  sample: false
undone:
  description: Ids undone (or that would be, in check mode), newest first.
  returned: when O(action=undo)
  type: list
  elements: str
  sample: [20261130T101502Z-process-3fa9, 20261130T101501Z-file-0c1d]
failures:
  description: The entries whose undo failed, each C({id, kind, error}); the script calls this C(failed).
  returned: when O(action=undo)
  type: list
  elements: dict
  sample: [{id: 20261130T101501Z-file-0c1d, kind: file,
            error: "backup /var/lib/inferlab/backup/gateway.yaml of /etc/inferlab/gateway.yaml is missing, ..."}]
skipped:
  description: Selected ids that were already undone.
  returned: when O(action=undo)
  type: list
  elements: str
  sample: [20261129T220000Z-file-77aa]
details:
  description: One C({id, kind, state, result, message}) per entry undone or tried, newest first; C(message) says
    what the undo did (for example that a reused pid was not killed).
  returned: when O(action=undo)
  type: list
  elements: dict
  sample: [{id: 20261130T101502Z-process-3fa9, kind: process, state: applied, result: undone,
            message: 'stopped pid 4242 ("sleep 300") with SIGTERM'}]
entries:
  description: The current line of every entry, in order of first appearance.
  returned: success, when O(action=status)
  type: list
  elements: dict
  sample: [{id: 20261130T101501Z-file-0c1d, time: "2026-11-30T10:15:01Z", kind: file, state: applied,
            params: {path: /etc/inferlab/gateway.yaml, backup: /var/lib/inferlab/backup/gateway.yaml,
                     existed: true}}]
open:
  description: Ids of the entries not undone yet (V(pending), V(applied) or V(undo_failed)).
  returned: success, when O(action=status)
  type: list
  elements: str
  sample: [20261130T101501Z-file-0c1d]
problems:
  description: Lines of the ledger that were skipped (a line cut short by a killed writer) and a malformed lock
    file.
  returned: when O(action=undo) or O(action=status)
  type: list
  elements: str
  sample: ["/var/lib/inferlab/ledger/lab-a.jsonl line 7: truncated last line (a writer was killed mid-write),
           ignored: b'{\"id\": \"2026'"]
leftovers:
  description: What V(undone) entries started that still runs, oldest entry first - C(what) names it (a pid,
    C(unit NAME), C(ENGINE container NAME)); processes add C(cmdline), units C(unit), containers C(engine) and
    C(name). A unit or container whose state could not be read is listed too, its message says so.
  returned: success, when O(action=leftovers)
  type: list
  elements: dict
  sample: [{id: 20261130T101502Z-process-3fa9, kind: process, pid: 4243, what: '4243',
            cmdline: [python3, -m, sglang.launch_server, --nnodes, '2'],
            message: '"python3 -m sglang.launch_server --nnodes 2" still runs (a member of the recorded process
              group 4242) although entry 20261130T101502Z-process-3fa9 is undone'}]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 - after the docs, as in community.general

from ansible_collections.inferlab.distributed.plugins.module_utils import (  # noqa: E402
    _ledger_core,
    _ledger_proc,
    _ledger_undo,
    _module_base,
)


class ChangeLedger(_module_base.StateModule):
    state_option = 'action'
    host_option = 'host'

    def __init__(self, module):
        super().__init__(module)
        # the echo of the arguments: an entry's environment values redacted, as in every result
        self.result_extras['invocation'] = {'module_args': dict(
            self.params, params=_ledger_core.redact_params(self.params['params'] or {}))}

    def fail_on(self, err):
        held_by = getattr(err, 'holder', None)
        self.fail(str(err), ledger=self._ledger_path(), **({'held_by': held_by} if held_by is not None else {}))

    def exit(self, **result):
        super().exit(ledger=self._ledger_path(), **result)

    def _ledger_path(self):
        try:
            return _ledger_core.ledger_path(self.ledger_dir, self.host)
        except _ledger_core.LedgerError:
            return None

    def action_lock(self):
        result = _ledger_core.acquire_lock(self.ledger_dir, self.host, self.params['run_id'],
                                           controller=self.params['controller'], pid=self.params['controller_pid'],
                                           start_time=self.params['controller_start_time'],
                                           machine_id=self.params['controller_machine_id'],
                                           break_stale=self.params['break_stale'],
                                           holder_alive=self.params['holder_alive'], check_mode=self.check_mode)
        return dict(changed=result['changed'], lock=result['lock'], took_over=result['took_over'],
                    held_before=result['held_before'], msg=result['message'])

    def action_unlock(self):
        result = _ledger_core.release_lock(self.ledger_dir, self.host, run_id=self.params['run_id'],
                                           check_mode=self.check_mode)
        return dict(changed=result['changed'], lock=result['lock'], msg=result['message'])

    def action_record(self):
        kind = self.params['kind']
        params = self._with_start_time(kind, dict(self.params['params']))
        line = _ledger_core.record(self.ledger_dir, self.host, kind, params, run_id=self.params['run_id'],
                                   check_mode=self.check_mode)
        return dict(changed=True, id=line['id'], entry=_ledger_core.redact_line(line),
                    msg=f'recorded {kind} entry {line["id"]} as pending')

    def action_mark(self):
        entry_id = self.params['id']
        params = self.params['params']
        if params:
            current = {e['id']: e for e in _ledger_core.entries(self.ledger_dir, self.host)}
            if entry_id in current:
                params = self._with_start_time(current[entry_id]['kind'], dict(params),
                                               recorded=current[entry_id]['params'])
        changed, line, previous = _ledger_core.mark(self.ledger_dir, self.host, entry_id, self.params['state'],
                                                    params=params, run_id=self.params['run_id'],
                                                    check_mode=self.check_mode)
        msg = (f'marked {entry_id} {self.params["state"]} (was {previous})' if changed
               else f'{entry_id} is already {previous}')
        return dict(changed=changed, id=entry_id, entry=_ledger_core.redact_line(line), previous_state=previous,
                    msg=msg)

    def action_undo(self):
        ids = [self.params['id']] if self.params['id'] else None
        result = self.undo(ids, _ledger_undo.UndoContext(procfs_root=self.params['procfs_root']),
                           run_id=self.params['run_id'])
        out = dict(changed=result['changed'], undone=result['undone'], failures=result['failed'],
                   skipped=result['skipped'], details=result['details'], problems=result['problems'])
        if result['failed']:
            self.fail(result['message'], ledger=self._ledger_path(), **out)
        return dict(out, msg=result['message'])

    def action_leftovers(self):
        found = _ledger_undo.leftovers(self.ledger_dir, self.host, self.params['procfs_root'])
        return dict(changed=False, leftovers=found, msg=f'{len(found)} leftover process(es)')

    def action_status(self):
        result = _ledger_core.status(self.ledger_dir, self.host)
        return dict(changed=False, entries=result['entries'], open=result['open'], lock=result['lock'],
                    problems=result['problems'],
                    msg=f'{len(result["entries"])} entries, {len(result["open"])} open')

    def _with_start_time(self, kind, params, recorded=None):
        """A process given by pid alone gets its start time (and, unless recorded, its cmdline) read now, while it
        runs."""
        if kind not in ('process', 'sampler') or params.get('pid') in (None, '') \
                or params.get('start_time') not in (None, ''):
            return params
        try:
            pid = int(params['pid'])
        except (TypeError, ValueError):
            return params  # the kind's check names the bad pid
        identity = _ledger_proc.process_identity(pid, self.params['procfs_root'])
        if identity is None:
            stat = f'{self.params["procfs_root"]}/{pid}/stat'
            raise _ledger_core.LedgerError(f'process {pid} is not running (no {stat}), so its start time cannot be '
                                           'recorded; record it while it runs, or give start_time')
        params['start_time'] = identity['start_time']
        if not params.get('cmdline') and not (recorded or {}).get('cmdline') and identity['cmdline']:
            params['cmdline'] = identity['cmdline']
        return params


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            ledger_dir=dict(type='path', required=True),
            host=dict(type='str', required=True),
            action=dict(type='str', required=True,
                        choices=['lock', 'unlock', 'record', 'mark', 'undo', 'status', 'leftovers']),
            run_id=dict(type='str'),
            controller=dict(type='str'),
            controller_pid=dict(type='int'),
            controller_start_time=dict(type='int'),
            controller_machine_id=dict(type='str'),
            break_stale=dict(type='bool', default=False),
            holder_alive=dict(type='bool'),
            kind=dict(type='str'),
            params=dict(type='dict'),
            id=dict(type='str'),
            state=dict(type='str', choices=['applied', 'undone']),
            procfs_root=dict(type='path', default='/proc'),
        ),
        required_if=[
            ('action', 'lock', ['run_id', 'controller', 'controller_pid']),
            ('action', 'unlock', ['run_id']),
            ('action', 'record', ['kind', 'params']),
            ('action', 'mark', ['id', 'state']),
        ],
        supports_check_mode=True,
    )


def main():
    ChangeLedger(build_module()).run()


if __name__ == '__main__':
    main()

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: counter_window
short_description: Open or close a counter window on a host in one call, its sampler through the ledger
version_added: 0.2.0
description:
  - One edge of a counter window of the C(inferlab.distributed.counters) role, in one module run per host, so that
    the snapshots of the hosts are taken close together and a window costs two round trips per host.
  - V(open) records the background sampler in the host's change ledger (pending), starts it (O(sampler_argv),
    C(inferlab_ledger.py sampler start)), marks it applied with its pid and start time, then takes the opening
    snapshot. A window whose sampler is still open is refused. When anything fails after the record, the entry is
    undone (the sampler stopped by PID) before the module fails, and the message says so.
  - V(close) takes the closing snapshot, then stops through the ledger every open sampler entry of this window (by
    its pidfile), whatever happened to the snapshot. An interface missing at the closing (a driver reload removes
    C(thunderbolt0)) is listed in RV(missing), not an error.
  - The snapshot is what M(inferlab.distributed.net_counters), M(inferlab.distributed.tbnet_info) and
    M(inferlab.distributed.nvml_info) return, read by the same module_utils; the counters first.
  - The ledger script, whose C(sampler) subcommand is the sampler, and its parser are installed by the role (once
    per run, with the rest of the host files), not by this module.
  - Its action plugin does the controller's half in the same task, so that an edge is one task per host. V(open)
    keeps the snapshot with the controller's UTC time (RV(opened)) and writes it to
    C(<run_dir>/windows/<window>/open/<host>.json). V(close) writes the samples (which the module returns, so
    there is no fetch) to C(<run_dir>/windows/<window>/samples/<host>.jsonl) and C(.log) and computes the
    deltas (RV(window_result)). V(finish) runs once the closing has run on every host and never reaches the host. It
    reads the openings and closings of O(hosts) from hostvars (C(__counters_windows), C(__counters_closing)), adds
    the skews between their snapshots, and writes C(<run_dir>/windows/<window>/close/<host>.json) and
    C(<run_dir>/fragments/window_<window>/<host>.json). The C(inferlab.distributed.counters) role runs the three.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Only the snapshot is taken; no sampler is started or stopped and nothing is written to the ledger.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  action:
    description: Which edge of the window.
    type: str
    required: true
    choices: [open, close, finish]
  window:
    description: The window's name (letters, digits, C(.), C(_), C(-)), for the messages.
    type: str
    required: true
  run_id:
    description: The run the sampler's ledger entry belongs to (checked against the ledger's lock).
    type: str
    required: true
  ledger_dir:
    description: The host's ledger directory, C(<inferlab_state_dir>/ledger). Required to open or close.
    type: path
  host:
    description: Whose ledger, C(<ledger_dir>/<host>.jsonl); usually C(inventory_hostname).
    type: str
    required: true
  pidfile:
    description: The sampler's pidfile; it names the window's sampler in the ledger. Required to open or close.
    type: path
  files:
    description: The sampler's output and its log. At the closing, RV(files_present) lists those that exist once
      the sampler is stopped.
    type: list
    elements: path
    default: []
  read_files:
    description: At the closing, return the text of each present file of O(files) in RV(file_texts) (the action
      plugin sets it and keeps the texts out of the task's result).
    type: bool
    default: false
  sampler_argv:
    description: The command that starts the sampler (O(action=open)); it prints C({pid, start_time}) as JSON.
    type: list
    elements: str
  interfaces:
    description: Names of the interfaces whose counters are read, for example V(thunderbolt0). Required to open
      or close.
    type: list
    elements: str
  sysfs_root:
    description:
      - Where sysfs is mounted for the interface counters. They are per network namespace, so on a real or lab
        host this stays V(/sys).
    type: path
    default: /sys
  tbnet_sysfs_root:
    description:
      - Where the Thunderbolt facts are read; a fixture tree in the embedded lab, which has no Thunderbolt hardware.
    type: path
    default: /sys
  procfs_root:
    description: Where procfs is mounted (C(net/snmp), C(net/netstat), process identities).
    type: path
    default: /proc
  nvml_snapshot:
    description: Replay this recorded NVML snapshot instead of reading NVML (a fixture).
    type: path
  run_dir:
    description: The run directory on the controller (C(inferlab_run_dir)); read by the action plugin only, which
      requires it.
    type: str
  link_interface:
    description: The direct link's interface, whose Thunderbolt speed, lanes and state are kept with each snapshot
      and whose carrier events are read from the samples; read by the action plugin only, which requires it.
    type: str
  sample_interval_s:
    description: The sampler's interval, kept with the opening; read by the action plugin only.
    type: float
    default: 1.0
  sampler_max_s:
    description: The sampler's own time limit, kept with the opening; read by the action plugin only.
    type: float
    default: 3600.0
  opening:
    description: At the closing, what this host kept of the window's opening (RV(opened)); none when it was not
      opened here. Read by the action plugin only.
    type: dict
  hosts:
    description: For V(finish), the hosts whose snapshots the skews are taken over (C(ansible_play_batch)); read by
      the action plugin only.
    type: list
    elements: str
    default: []
requirements:
  - nvidia-ml-py (module C(pynvml)) and the NVIDIA driver's C(libnvidia-ml.so.1), unless O(nvml_snapshot) is set.
"""

EXAMPLES = r"""
- name: Open window iperf_clean
  inferlab.distributed.counter_window:
    action: open
    window: iperf_clean
    run_id: 20261202T101500Z-link_test
    ledger_dir: /var/lib/inferlab/ledger
    host: "{{ inventory_hostname }}"
    pidfile: /var/lib/inferlab/run/sampler-20261202T101500Z-link_test-iperf_clean.pid
    sampler_argv: [/usr/bin/python3, /var/lib/inferlab/bin/inferlab_ledger.py, sampler, start,
                   --output, /tmp/w.jsonl,
                   --pidfile, /var/lib/inferlab/run/sampler-20261202T101500Z-link_test-iperf_clean.pid,
                   --log, /tmp/w.log, --interface=thunderbolt0]
    interfaces: [thunderbolt0]
"""

RETURN = r"""
msg:
  description: In check mode, at the opening, what the run did not do (no sampler started, nothing recorded).
  returned: check mode, O(action=open)
  type: str
counters:
  description: The interface and TCP counters with their times (M(inferlab.distributed.net_counters)'s RV(counters)).
  returned: success
  type: dict
missing:
  description: Interfaces of O(interfaces) that do not exist at the closing.
  returned: success
  type: list
  elements: str
tbnet:
  description: The Thunderbolt facts (M(inferlab.distributed.tbnet_info)'s RV(tbnet)).
  returned: success
  type: dict
nvml:
  description: The GPU facts (M(inferlab.distributed.nvml_info)'s RV(nvml)).
  returned: success
  type: dict
sampler:
  description: At the opening, the sampler started (C({entry_id, pid}), both null in check mode).
  returned: when O(action=open)
  type: dict
sampler_entries:
  description: At the closing, the ledger entries of this window's sampler that were stopped.
  returned: when O(action=close)
  type: list
  elements: str
files_present:
  description: At the closing, the files of O(files) that exist.
  returned: when O(action=close)
  type: list
  elements: str
file_texts:
  description: At the closing with O(read_files), each present file's text by its path. The action plugin removes it
    from the task's result.
  returned: when O(action=close) and O(read_files)
  type: dict
opened:
  description: At the opening, what the host keeps until the closing - C({run_id, opened_at, open, sampler}), C(open)
    the snapshot with the controller's time and the link's facts (set by the action plugin).
  returned: when O(action=open)
  type: dict
close:
  description: At the closing, the closing snapshot as RV(opened)'s C(open) (set by the action plugin).
  returned: when O(action=close)
  type: dict
window_result:
  description:
    - The window's deltas on this host, as the C(inferlab.distributed.counters) role documents
      C(counters_window_result); none where the window has no opening. V(close) sets it without the skews,
      V(finish) with them.
  returned: when O(action=close) or O(action=finish)
  type: dict
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import (  # noqa: E402
    _counter_window_host,
    _ledger_core,
    _net_counters,
    _nvml,
    _sysfs,
)

SNAPSHOT_ERRORS = (_counter_window_host.WindowError, _net_counters.MissingInterfaceError, _sysfs.SysfsError,
                   _nvml.NvmlError)


def take_snapshot(params, fail_on_missing):
    return _counter_window_host.snapshot(params['interfaces'], fail_on_missing=fail_on_missing,
                                         sysfs_root=params['sysfs_root'], tbnet_sysfs_root=params['tbnet_sysfs_root'],
                                         procfs_root=params['procfs_root'], nvml_snapshot=params['nvml_snapshot'])


def open_window(module):
    params = module.params
    where = 'Opening counter window %s on %s' % (params['window'], params['host'])
    sampler = {'entry_id': None, 'pid': None}
    if not module.check_mode:
        try:
            sampler = _counter_window_host.start_sampler(params['ledger_dir'], params['host'], params['run_id'],
                                                         params['sampler_argv'], params['pidfile'], params['window'])
        except (_counter_window_host.WindowError, _ledger_core.LedgerError) as err:
            module.fail_json(msg='%s failed starting its sampler: %s' % (where, err))
    try:
        edge = take_snapshot(params, fail_on_missing=True)
    except SNAPSHOT_ERRORS as err:
        stopped = ''
        if sampler['entry_id']:
            what = _counter_window_host.stop_sampler(params['ledger_dir'], params['host'], params['run_id'],
                                                     sampler['entry_id'], procfs_root=params['procfs_root'])
            stopped = ' (%s)' % what
        extra = {'missing': err.missing, 'present': err.present} \
            if isinstance(err, _net_counters.MissingInterfaceError) else {}
        module.fail_json(msg='%s failed at the opening snapshot: %s%s' % (where, err, stopped), **extra)
    if module.check_mode:
        edge['msg'] = ('Check mode: the background sampler of window %s is not started on %s and nothing is '
                       'recorded in its ledger; the opening snapshot is taken (it only reads).'
                       % (params['window'], params['host']))
    module.exit_json(changed=sampler['entry_id'] is not None, sampler=sampler, **edge)


def close_window(module):
    params = module.params
    edge, error = None, None
    try:
        edge = take_snapshot(params, fail_on_missing=False)
    except SNAPSHOT_ERRORS as err:
        error = err
    ids, result = [], None
    if not module.check_mode:
        try:
            ids, result = _counter_window_host.stop_samplers(params['ledger_dir'], params['host'], params['run_id'],
                                                             params['pidfile'], procfs_root=params['procfs_root'])
        except _ledger_core.LedgerError as err:
            module.fail_json(msg='Closing counter window %s on %s: its sampler could not be stopped through the '
                                 'ledger: %s%s' % (params['window'], params['host'], err,
                                                   '; the closing snapshot failed too: %s' % error if error else ''))
    if result and result['failed']:
        module.fail_json(msg='Closing counter window %s on %s: stopping its sampler through the ledger failed: %s'
                             % (params['window'], params['host'], result['message']), sampler_entries=ids)
    if error is not None:
        module.fail_json(msg='Closing counter window %s on %s failed at the closing snapshot: %s%s'
                             % (params['window'], params['host'], error,
                                ' (its sampler was stopped through the ledger)' if ids else ''),
                         sampler_entries=ids)
    present = [path for path in params['files'] if os.path.isfile(path)]
    if params['read_files']:
        edge['file_texts'] = dict((path, read_text(path)) for path in present)
    module.exit_json(changed=bool(ids), sampler_entries=ids, files_present=present, **edge)


def read_text(path):
    with open(path, encoding='utf-8', errors='replace') as handle:
        return handle.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type='str', required=True, choices=['open', 'close', 'finish']),
            window=dict(type='str', required=True),
            run_id=dict(type='str', required=True),
            ledger_dir=dict(type='path'),
            host=dict(type='str', required=True),
            pidfile=dict(type='path'),
            sampler_argv=dict(type='list', elements='str'),
            files=dict(type='list', elements='path', default=[]),
            read_files=dict(type='bool', default=False),
            interfaces=dict(type='list', elements='str'),
            sysfs_root=dict(type='path', default='/sys'),
            tbnet_sysfs_root=dict(type='path', default='/sys'),
            procfs_root=dict(type='path', default='/proc'),
            nvml_snapshot=dict(type='path'),
            # read by the action plugin on the controller, never by the module
            run_dir=dict(type='str'),
            link_interface=dict(type='str'),
            sample_interval_s=dict(type='float', default=1.0),
            sampler_max_s=dict(type='float', default=3600.0),
            opening=dict(type='dict'),
            hosts=dict(type='list', elements='str', default=[]),
        ),
        required_if=[('action', 'open', ['sampler_argv', 'ledger_dir', 'pidfile', 'interfaces']),
                     ('action', 'close', ['ledger_dir', 'pidfile', 'interfaces'])],
        supports_check_mode=True,
    )
    if module.params['action'] == 'finish':
        module.fail_json(msg='action=finish runs on the controller, in the counter_window action plugin: run the '
                             'module as inferlab.distributed.counter_window, not through another action')
    if module.params['action'] == 'open':
        open_window(module)
    close_window(module)


if __name__ == '__main__':
    main()

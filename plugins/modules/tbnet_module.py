#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: tbnet_module
short_description: Load the candidate thunderbolt_net for a while, or put the distribution's driver back
version_added: 0.1.0
description:
  - V(candidate) records what is loaded now (srcversion, parameters, taint, whether the direct link is up) in the
    host's change ledger as a V(kernel_module) entry BEFORE any change. Then it takes the link down, unloads the
    stock C(thunderbolt_net) and C(insmod)s the built module from its private build directory, with C(tx_e2e=1) when
    asked. It verifies the result through sysfs, never through insmod's exit code (the stock module accepts
    C(tx_e2e=1) with only a warning). C(parameters/tx_e2e) must exist with mode 0444 and the asked value, and the
    srcversion must be the built module's. A failed verification puts the stock driver back before the module fails.
  - C(tx_e2e=1) is loaded only with the operator's opt-in (O(allow_tx_e2e)), with C(e2e) = Y, and with a peer that
    advertises E2E (C(prtcstns) bit 0), or on a test machine with no peer, the explicit O(peer_override), which the
    result reports.
  - V(stock) is the undo of the open V(kernel_module) entries, the same code a standalone restore runs. It unloads
    the candidate and C(modprobe)s the distribution's driver, then checks that C(tx_e2e) is absent and that the
    srcversion is the distribution's. With O(link_peer) it then brings the direct link back (O(link_addressing))
    even where there was nothing to undo, since a reload on the peer removes this host's interface too.
  - A module path under C(/lib/modules) is refused. Nothing is ever installed, so nothing persists.
  - With O(emulated=true) (the netns lab, whose hosts cannot load modules) it acts on the host's fixture sysfs root
    instead (srcversion, the C(tx_e2e) parameter, the module taint). That is an emulation and says nothing about a
    real driver.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: What is loaded is read from sysfs; nothing is loaded, unloaded or recorded.
  diff_mode:
    support: full
    details: The module's srcversion and parameters before and after.
  platform:
    support: full
    platforms: posix
options:
  state:
    description:
      - V(candidate) loads the built module; V(stock) puts the distribution's driver back.
    type: str
    required: true
    choices: [candidate, stock]
  module_path:
    description:
      - The built C(thunderbolt-net.ko) in its private build directory. Required for V(candidate).
    type: path
  candidate_srcversion:
    description:
      - The built module's srcversion, as its build recorded it. Default C(modinfo -F srcversion) of O(module_path)
        (required with O(emulated=true), where there is no module file to read).
    type: str
  tx_e2e:
    description:
      - Load the candidate with C(tx_e2e=1). Without it the candidate's C(tx_e2e) reads N, which is upstream's
        behaviour.
    type: bool
    default: false
  allow_tx_e2e:
    description:
      - The operator's opt-in for C(tx_e2e=1).
    type: bool
    default: false
  peer_override:
    description:
      - Load C(tx_e2e=1) although no peer advertises E2E, on a test machine with no peer. Reported in the result.
    type: bool
    default: false
  interface:
    description:
      - The direct-link interface. A reload removes it with its addresses (on the peer too) and brings back a bare
        one; with O(link_peer) set, the load is done only once the link is back as O(link_addressing) says
        (see there), otherwise the interface is only set up again when it was up.
    type: str
    default: thunderbolt0
  link_addressing:
    description:
      - How the direct link's address comes back after a reload. V(static) (set by hand or by ifupdown), the module
        sets the interface up and re-adds O(link_address) itself; V(networkd) or V(NetworkManager), it waits, bounded,
        for that manager to do it.
      - After a candidate load this tail runs in the link watchdog (bounded by O(watchdog_deadline_s)), after the
        stock load in the undo (bounded by O(link_timeout_s)). Each waits, after the address, for carrier, at least
        O(link_min_speed_gbps) per lane and O(link_min_lanes) lanes, and an answered ping to O(link_peer).
    type: str
    choices: [static, networkd, NetworkManager]
    default: static
  link_address:
    description:
      - This host's address on the direct link with its prefix length (C(169.254.10.1/30)). Required with
        O(link_peer).
    type: str
    default: ''
  link_min_speed_gbps:
    description:
      - The per-lane speed the link must train at again after a reload (0 checks nothing).
    type: float
    default: 0
  link_min_lanes:
    description:
      - The lanes the link must have again after a reload (0 checks nothing).
    type: int
    default: 0
  link_timeout_s:
    description:
      - Seconds the link gets to come back after the stock driver is loaded again (the undo).
      - A finite number of seconds, more than 0 and at most 3600.
    type: float
    default: 60
  emulated:
    description:
      - Act on the fixture sysfs root of a lab host instead of the kernel.
    type: bool
    default: false
  sysfs_root:
    description:
      - Where sysfs is read (and, emulated, written).
    type: path
    default: /sys
  procfs_root:
    description:
      - Where procfs is read (the kernel taint).
    type: path
    default: /proc
  link_peer:
    description:
      - The peer's address on the direct link. Before a candidate load the module starts the link watchdog on the
        host (C(inferlab_ledger.py watch-link), recorded in the ledger as a process first), loads, and waits for the
        watchdog's verdict. The watchdog brings the link back (O(link_addressing)); when the load does not complete
        (O(load_timeout_s)), or the link is not back and answering a ping to the peer over O(interface) within
        O(watchdog_deadline_s), it unloads the candidate and loads the stock driver itself, without the controller,
        and the module fails. It then watches the link until the candidate is unloaded (O(watchdog_deadline_s)).
        Empty starts no watchdog and waits for no link (a test machine with no peer). V(stock) then brings the link
        back too.
    type: str
    default: ''
    aliases: [watchdog_peer]
  watchdog_deadline_s:
    description:
      - Seconds the direct link gets to carry traffic after a candidate load, and the longest the link may then go
        without an answered ping while the candidate is loaded (the watchdog goes on pinging the peer every second
        until the candidate is unloaded, and puts the stock driver back when the link stalls that long).
      - A finite number of seconds, more than 0 and at most 3600.
    type: float
    default: 30
  load_timeout_s:
    description:
      - Seconds each command of the candidate load (the link down, the unload, the C(insmod)) may take. One that
        outlasts it is killed (or, stuck in the kernel, left behind), the module fails and the stock driver is put
        back. The link watchdog, armed before the load, undoes a load still not done
        3 x O(load_timeout_s) + 30 s after it started, or at once when this module's process is gone.
      - A finite number of seconds, more than 0 and at most 3600.
    type: float
    default: 60
  ledger_script:
    description:
      - The host's ledger script that runs the watchdog (installed by the C(ledger) role). Default
        C(<ledger_dir>/../bin/inferlab_ledger.py).
    type: path
notes:
  - C(insmod), C(rmmod), C(modprobe), C(modinfo) (kmod) and C(ip) (iproute2) are found in the sbin directories.
seealso:
  - module: inferlab.distributed.tbnet_info
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Load the candidate with TX end-to-end flow control
  inferlab.distributed.tbnet_module:
    state: candidate
    module_path: /var/lib/inferlab/build/tbnet-candidate/thunderbolt-net.ko
    tx_e2e: true
    allow_tx_e2e: "{{ inferlab_allow_driver_swap }}"
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"

- name: Put the distribution's driver back
  inferlab.distributed.tbnet_module:
    state: stock
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
"""

RETURN = r"""
module:
  description: >-
    The module as sysfs shows it after the change, C({loaded, srcversion, build_id, parameters, modes, taint}).
  returned: always
  type: dict
before:
  description: The module as sysfs showed it before, same shape.
  returned: always
  type: dict
kernel_taint:
  description: C(/proc/sys/kernel/tainted) before and after, C({before, after}) (integers, or null when unreadable).
  returned: always
  type: dict
entry_id:
  description: The C(kernel_module) ledger entry of the candidate load.
  returned: state is candidate and changed
  type: str
undone:
  description: The ledger entries undone by V(stock).
  returned: state is stock
  type: list
details:
  description: >-
    What each undo did, C({id, result, message}); the candidate's says how long the direct link took to come back
    after the stock load.
  returned: state is stock
  type: list
watchdog:
  description: >-
    The link watchdog, armed before the candidate load and watching the link until the candidate is unloaded,
    C({pid, peer, deadline_s, log, log_offset, entry_id}), or null when none was started.
  returned: state is candidate and changed
  type: dict
link:
  description: >-
    How the direct link came back: after the candidate load as the watchdog saw it, after V(stock) (on every host
    given O(link_peer), whether it had anything to undo: the peer's reload takes this host's link too) as the
    module saw it. C({seconds, interface_s, carrier_s, addressing, actions}) (seconds after the load or the undo;
    C(actions) what was re-established), or null without a peer.
  returned: state is candidate and changed, or state is stock
  type: dict
peer_override:
  description: Whether C(tx_e2e=1) was loaded without a peer advertising E2E.
  returned: state is candidate
  type: bool
emulated:
  description: Whether the change was emulated on a fixture root.
  returned: always
  type: bool
message:
  description: What was done.
  returned: always
  type: str
"""

import math
import os
import sys
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_core,
    _ledger_proc,
    _ledger_undo,
    _module_base,
)
from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_driver as driver
from ansible_collections.inferlab.distributed.plugins.module_utils._tbnet import collect

KIND = 'kernel_module'
# the options that are seconds, and their upper bound (documented with each)
SECONDS_OPTIONS = ('watchdog_deadline_s', 'load_timeout_s', 'link_timeout_s')
MAX_SECONDS = 3600


def kernel_taint(procfs_root):
    try:
        with open('%s/sys/kernel/tainted' % procfs_root) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


class TbnetModule(_module_base.StateModule):
    def __init__(self, module):
        super().__init__(module)
        self.result_extras['emulated'] = self.params['emulated']

    def candidate_entries(self, watchdogs=False):
        """The open candidate loads (and, with ``watchdogs``, the link watchdogs started for them)."""
        def wanted(entry):
            if entry['kind'] == KIND:
                return True
            return watchdogs and entry['kind'] == 'process' and 'watch-link' in entry['params'].get('cmdline', [])
        return self.open_entries(wanted)

    def peer_e2e(self):
        """Whether the peer on the direct link advertises E2E (tbnet_info's reading of the same sysfs)."""
        info = collect(self.params['sysfs_root'], self.params['procfs_root'])
        service = info['interfaces'].get(self.params['interface'], {}).get('service')
        for candidate in info['services']:
            if candidate['device'] == service:
                return bool(candidate['flags'].get('e2e'))
        return False

    def state_candidate(self):
        p = self.params
        if not p['module_path']:
            self.fail('state=candidate needs module_path (the built module in its private build directory)')
        before = driver.module_state(p['sysfs_root'])
        taint_before = kernel_taint(p['procfs_root'])
        try:
            if p['emulated']:
                srcversion = p['candidate_srcversion']
                if not srcversion:
                    self.fail('emulated=true needs candidate_srcversion (there is no module file to read)')
                refusal = driver.emulation_refusal(p['interface'])
                if refusal:
                    self.fail('Nothing was changed: %s' % refusal, before=before)
            else:
                driver.refuse_system_path(p['module_path'])
                srcversion = p['candidate_srcversion'] or driver.modinfo_srcversion(p['module_path'])
            peer_e2e = self.peer_e2e()
            refusal = driver.tx_e2e_refusal(before, peer_e2e, p['tx_e2e'], p['allow_tx_e2e'], p['peer_override'])
        except driver.DriverError as exc:
            self.fail('Nothing was changed: %s' % exc, before=before)
        if refusal:
            self.fail('Nothing was changed: %s' % refusal, before=before)
        if not driver.verify_candidate(before, srcversion, p['tx_e2e']):
            return dict(changed=False, before=before, module=before,
                        kernel_taint={'before': taint_before, 'after': taint_before},
                        peer_override=p['peer_override'], message='the candidate is already loaded')
        if self.candidate_entries():
            self.fail('an earlier candidate load is still open in the ledger: put the stock driver back first '
                      '(state=stock, or playbooks/restore.yml)', before=before)
        script = self.watchdog_script()
        was_up = bool(driver.interface_up(p['sysfs_root'], p['interface']))
        params = {'module_path': p['module_path'], 'candidate_srcversion': srcversion,
                  'stock_srcversion': before['srcversion'], 'stock_build_id': before['build_id'],
                  'stock_loaded': before['loaded'],
                  'stock_parameters': before['parameters'], 'stock_taint': before['taint'], 'tx_e2e': p['tx_e2e'],
                  'interface': p['interface'], 'interface_was_up': was_up, 'emulated': p['emulated'],
                  'sysfs_root': p['sysfs_root'], 'link': self.link()}
        diff = {'before': {'srcversion': before['srcversion'], 'parameters': before['parameters']}}
        if self.check_mode:
            return dict(changed=True, before=before, module=before, diff=diff,
                        kernel_taint={'before': taint_before, 'after': taint_before},
                        peer_override=p['peer_override'], message='would load the candidate')
        try:
            entry = _ledger_core.record(p['ledger_dir'], p['ledger_host'], KIND, params, run_id=p['run_id'])
        except _ledger_core.LedgerError as exc:
            self.fail('Nothing was changed: %s' % exc, before=before)
        # the watchdog is armed before the load: it undoes a load that never completes (this process gone, or a
        # stuck insmod past its bound), a link that does not come back, and one that stalls later
        watchdog = self.start_watchdog(script, entry['id']) if script else None
        ids = [watchdog['entry_id'], entry['id']] if watchdog else [entry['id']]
        try:
            message = driver.load_candidate(params, timeout_s=p['load_timeout_s'])
            _ledger_core.mark(p['ledger_dir'], p['ledger_host'], entry['id'], 'applied', run_id=p['run_id'])
        except (_ledger_core.LedgerError, driver.DriverError, OSError) as exc:
            # load_candidate put the stock driver back, or left that to this undo (a command past its timeout); the
            # watchdog's process entry first
            undone = self.undo(ids, _ledger_undo.UndoContext(procfs_root=p['procfs_root']))
            self.fail('%s (ledger: %s)' % (exc, undone['message']), before=before,
                      module=driver.module_state(p['sysfs_root']))
        link = self.link_verdict(watchdog) if watchdog else None
        after = driver.module_state(p['sysfs_root'])
        diff['after'] = {'srcversion': after['srcversion'], 'parameters': after['parameters']}
        return dict(changed=True, entry_id=entry['id'], before=before, module=after, diff=diff,
                    watchdog=watchdog, link=link,
                    kernel_taint={'before': taint_before, 'after': kernel_taint(p['procfs_root'])},
                    peer_override=p['peer_override'] and p['tx_e2e'] and not peer_e2e, message=message)

    def link(self):
        """The ``link`` param of the entry (how the tail brings the link back), checked before anything changes;
        None without a peer (a test machine: nothing to ping)."""
        p = self.params
        if not p['link_peer']:
            return None
        link = {'addressing': p['link_addressing'], 'address': p['link_address'], 'peer': p['link_peer'],
                'timeout_s': p['link_timeout_s'], 'min_speed_gbps': p['link_min_speed_gbps'],
                'min_lanes': p['link_min_lanes']}
        try:
            return driver.check_link(link)
        except driver.DriverError as exc:
            self.fail('Nothing was changed: %s (set link_address to this host\'s address on the direct link, with its '
                      'prefix length)' % exc)

    def link_verdict(self, watchdog):
        """Wait for the watchdog's verdict on the link (it runs the tail, then goes on watching) and return how the
        link came back; fail when it did not, after the watchdog has put the stock driver back."""
        p = self.params
        bound = p['watchdog_deadline_s'] + p['link_timeout_s'] + 30
        deadline = time.monotonic() + bound
        verdict = None
        while verdict is None and time.monotonic() < deadline:
            verdict = driver.last_json_line(watchdog['log'], watchdog['log_offset'])
            if verdict is None and _ledger_proc.spawned_returncode(watchdog['pid']) is not None:
                verdict = driver.last_json_line(watchdog['log'], watchdog['log_offset']) or {}
            elif verdict is None:
                time.sleep(0.1)
        if verdict is None:
            self.fail('the link watchdog (pid %s) gave no verdict within %gs; see %s, and put the stock driver back '
                      '(state=stock, or playbooks/restore.yml)' % (watchdog['pid'], bound, watchdog['log']))
        if verdict.get('link'):
            return verdict.get('back') or {'seconds': verdict.get('seconds')}
        self.fail('the candidate was loaded, but the direct link did not come back: %s'
                  % (verdict.get('message') or 'the watchdog wrote no verdict to %s' % watchdog['log']),
                  module=driver.module_state(p['sysfs_root']), watchdog=watchdog)

    def watchdog_script(self):
        """The ledger script that will run the watchdog, checked before anything changes; None without a peer."""
        p = self.params
        if not p['link_peer']:
            return None
        script = p['ledger_script'] or os.path.join(os.path.dirname(os.path.abspath(p['ledger_dir'])), 'bin',
                                                    'inferlab_ledger.py')
        companion = os.path.join(os.path.dirname(script), 'inferlab_tbnet_driver.py')
        for path in (script, companion):
            if not os.path.isfile(path):
                self.fail('Nothing was changed: the link watchdog needs %s (the ledger role installs it; '
                          'tasks_from: install)' % path)
        return script

    def start_watchdog(self, script, entry_id):
        """Start the watchdog detached, recorded in the ledger (kind process) before it starts, before the load it
        watches (``entry_id``, still pending). This process is its loader: its death with the load pending, or a
        load still pending past the bound, makes the watchdog undo the load."""
        p = self.params
        state_dir = os.path.dirname(os.path.abspath(p['ledger_dir']))
        pidfile = os.path.join(state_dir, 'run', 'tbnet-watchdog.pid')
        log = os.path.join(state_dir, 'logs', 'tbnet-watchdog.log')
        loader = _ledger_proc.process_identity(os.getpid()) or {}
        argv = [sys.executable, script, 'watch-link', '--ledger-dir', p['ledger_dir'], '--host', p['ledger_host'],
                '--id', entry_id, '--interface', p['interface'], '--peer', p['link_peer'],
                '--deadline', '%g' % p['watchdog_deadline_s'],
                '--load-timeout', '%g' % load_bound(p['load_timeout_s']), '--json']
        if loader:
            argv += ['--loader-pid', str(loader['pid']), '--loader-start-time', str(loader['start_time'])]
        watch = None
        try:
            offset = os.path.getsize(log) if os.path.exists(log) else 0
            watch = _ledger_core.record(p['ledger_dir'], p['ledger_host'], 'process',
                                        {'pidfile': pidfile, 'cmdline': argv, 'process_group': True},
                                        run_id=p['run_id'])
            pid = _ledger_proc.spawn_detached(argv, {'PATH': _ledger_proc.BASE_PATH, 'LANG': 'C.UTF-8'}, log, pidfile)
            identity = _ledger_proc.process_identity(pid, p['procfs_root']) or {}
            _ledger_core.mark(p['ledger_dir'], p['ledger_host'], watch['id'], 'applied', run_id=p['run_id'],
                              params={'pid': pid, 'start_time': identity.get('start_time', 0)})
        except (_ledger_core.LedgerError, OSError) as exc:
            # a watchdog that started after all is stopped first (its entry is newer), then the pending load closed
            ids = ([watch['id']] if watch else []) + [entry_id]
            undone = self.undo(ids, _ledger_undo.UndoContext(procfs_root=p['procfs_root']))
            self.fail('Nothing was changed: the link watchdog did not start, so the candidate was not loaded: %s '
                      '(ledger: %s)' % (exc, undone['message']))
        return {'pid': pid, 'peer': p['link_peer'], 'deadline_s': p['watchdog_deadline_s'], 'log': log,
                'log_offset': offset, 'entry_id': watch['id']}

    def state_stock(self):
        p = self.params
        before = driver.module_state(p['sysfs_root'])
        taint_before = kernel_taint(p['procfs_root'])
        ids = [e['id'] for e in self.candidate_entries(watchdogs=True)]
        outcome = {'undone': [], 'details': [], 'message': 'no candidate load is open in the ledger: nothing to undo'}
        if ids:
            try:
                outcome = self.undo(ids, _ledger_undo.UndoContext(procfs_root=p['procfs_root']))
            except _ledger_core.LedgerError as exc:
                self.fail(str(exc), before=before)
            if outcome['failed']:
                self.fail(outcome['message'], before=before, module=driver.module_state(p['sysfs_root']))
        after = driver.module_state(p['sysfs_root'])
        if driver.PARAMETER in after['parameters'] and not self.check_mode:
            self.fail('parameters/%s is present with no open candidate load in the ledger: a candidate loaded by hand? '
                      'Unload it (rmmod thunderbolt_net; modprobe thunderbolt_net)' % driver.PARAMETER, module=after)
        link = self.link()
        back = None
        if link and not self.check_mode:
            try:
                back = driver.bring_back_link(p['interface'], link, p['sysfs_root'])
            except driver.DriverError as exc:
                self.fail('the distribution\'s driver is loaded, but %s' % exc, module=after, undone=outcome['undone'])
        return dict(changed=bool(ids) or bool(back and back['actions']), undone=outcome['undone'],
                    details=outcome.get('details', []), link=back, before=before, module=after,
                    kernel_taint={'before': taint_before, 'after': kernel_taint(p['procfs_root'])},
                    message=outcome['message'],
                    diff={'before': {'srcversion': before['srcversion'], 'parameters': before['parameters']},
                          'after': {'srcversion': after['srcversion'], 'parameters': after['parameters']}})

    def prepare(self):
        for option in SECONDS_OPTIONS:
            value = self.params[option]
            if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
                self.fail('Nothing was changed: %s must be a finite number of seconds, more than 0 and at most %d, '
                          'got %s' % (option, MAX_SECONDS, value))


def load_bound(load_timeout_s):
    """Seconds the watchdog lets a load stay pending: the load's three commands, each bounded by load_timeout_s
    and KILL_WAIT_S, and a margin."""
    return 3 * (load_timeout_s + driver.KILL_WAIT_S) + 30


def build_module():
    return AnsibleModule(
        argument_spec=_module_base.ledger_argument_spec(
            state=dict(type='str', required=True, choices=['candidate', 'stock']),
            module_path=dict(type='path'),
            candidate_srcversion=dict(type='str'),
            tx_e2e=dict(type='bool', default=False),
            allow_tx_e2e=dict(type='bool', default=False),
            peer_override=dict(type='bool', default=False),
            interface=dict(type='str', default='thunderbolt0'),
            emulated=dict(type='bool', default=False),
            sysfs_root=dict(type='path', default='/sys'),
            procfs_root=dict(type='path', default='/proc'),
            link_peer=dict(type='str', default='', aliases=['watchdog_peer']),
            watchdog_deadline_s=dict(type='float', default=30.0),
            load_timeout_s=dict(type='float', default=60.0),
            link_addressing=dict(type='str', default='static', choices=list(driver.ADDRESSING)),
            link_address=dict(type='str', default=''),
            link_min_speed_gbps=dict(type='float', default=0.0),
            link_min_lanes=dict(type='int', default=0),
            link_timeout_s=dict(type='float', default=60.0),
            ledger_script=dict(type='path'),
        ),
        supports_check_mode=True,
    )


def main():
    TbnetModule(build_module()).run()


if __name__ == '__main__':
    main()

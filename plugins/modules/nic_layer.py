#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nic_layer
short_description: Set a NIC's offloads, coalescing or ring sizes for a run, recorded in the change ledger first
version_added: 0.1.0
description:
  - Sets a NIC's ethtool settings, a group at a time (O(features) with C(ethtool -K), O(coalesce) with C(ethtool -C),
    O(rings) with C(ethtool -G)), transport tunables that a link investigation changes one at a time. ethtool's
    changes last until the next boot or driver reload; nothing is written where a boot reads it again.
  - Before a group is set, every setting of it is read (C(ethtool -k), C(-c) or C(-g)) and checked against what the
    driver has; a name it does not have, an offload that is fixed, a setting it reports as n/a, a ring above its
    pre-set maximum or a driver without the group (a veth has no coalescing or rings) fails here, naming each
    problem, and nothing is changed.
  - Then a V(nic_setting) entry is recorded in the host's change ledger with the values found (C(previous)) and the
    ones wanted, the group is set in one command, read back and the entry marked applied. The ledger's undo (a
    restore, or O(state=undone)) sets C(previous) back for each name still at the value set, and leaves the group
    alone, with an error naming it, when someone else changed a name since.
  - Idempotent. A group whose settings already have their values is not set or recorded.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: Each group is read and checked; nothing is recorded or set.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  interface:
    description:
      - The NIC, for example C(enp1s0f0). Required with O(state=applied); with O(state=undone) it limits the undo
        to its entries.
    type: str
  features:
    description:
      - Offloads by the names C(ethtool -k) prints, each V(true)/V(false) or C(on)/C(off), for example
        C(generic-segmentation-offload) or C(tcp-segmentation-offload).
    type: dict
    default: {}
  coalesce:
    description:
      - Interrupt coalescing by the names C(ethtool -C) takes, for example C(rx-usecs) (a whole number) or
        C(adaptive-rx) (V(true)/V(false)).
    type: dict
    default: {}
  rings:
    description:
      - Ring sizes by the names C(ethtool -G) takes, for example C(rx) and C(tx) (whole numbers, at most the
        driver's pre-set maximum).
    type: dict
    default: {}
  state:
    description:
      - V(applied) sets the groups given; V(undone) undoes the host's open V(nic_setting) entries (newest first).
    type: str
    choices: [applied, undone]
    default: applied
notes:
  - The change ledger's lock must be held by O(run_id) (the P(inferlab.distributed.ledger#role) role's C(lock)).
  - Needs ethtool on the host (Debian and Ubuntu package C(ethtool)).
seealso:
  - module: inferlab.distributed.sysctl_layer
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Generic segmentation offload off on the direct link, for the network-only A/B
  inferlab.distributed.nic_layer:
    interface: "{{ inferlab_link_interface }}"
    features:
      generic-segmentation-offload: false
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"

- name: Interrupt moderation off and the largest receive ring
  inferlab.distributed.nic_layer:
    interface: enp1s0f0
    coalesce: {adaptive-rx: false, rx-usecs: 0}
    rings: {rx: 4096}
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"

- name: Put every NIC setting this host's ledger holds back
  inferlab.distributed.nic_layer:
    state: undone
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"
"""

RETURN = r"""
groups:
  description: Each group given, with the values found, the values wanted and whether it was set.
  returned: always
  type: dict
  sample: {features: {previous: {generic-segmentation-offload: "on"}, value: {generic-segmentation-offload: "off"},
                      changed: true, entry_id: 20261207T061502Z-nic_setting-4242.1234567.1}}
undone:
  description: With O(state=undone), what the ledger's undo said for each entry.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 - after the docs, as in community.general

from ansible_collections.inferlab.distributed.plugins.module_utils import (  # noqa: E402
    _ethtool,
    _ledger_core,
    _ledger_undo,
    _module_base,
)

KIND = 'nic_setting'


class NicLayer:
    def __init__(self, module):
        self.module = module
        self.p = module.params

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **dict({'groups': {}, 'undone': []}, **extra))

    def read(self, prefix, group, after=''):
        """The group's settings now; a failure says ``after`` (what was done) or that nothing was changed."""
        try:
            return _ethtool.read_group(prefix, group, self.p['interface'])
        except _ethtool.EthtoolError as exc:
            self.fail(f'cannot read the {_ethtool.GROUPS[group]["what"]} of {self.p["interface"]}: {exc}. '
                      + (after or 'Nothing was changed'))

    def plan(self, prefix):
        """Each group given, checked against what the NIC has now: ``{group: {previous, value, changed}}``."""
        planned, problems = {}, []
        for group in _ethtool.GROUPS:
            if not self.p[group]:
                continue
            found = self.read(prefix, group)
            try:
                value = _ethtool.check_wanted(group, self.p['interface'], found, self.p[group])
            except _ethtool.EthtoolError as exc:
                problems.append(str(exc))
                continue
            previous = {name: found[name]['value'] for name in value}
            planned[group] = {'previous': previous, 'value': value, 'changed': previous != value, 'entry_id': None}
        if problems:
            self.fail('; '.join(problems) + '. Nothing was changed')
        return planned

    def apply(self):
        if not self.p['interface']:
            self.fail('interface is required with state=applied: name the NIC whose settings to set')
        if not any(self.p[group] for group in _ethtool.GROUPS):
            self.fail('nothing to set: give features, coalesce or rings')
        prefix = _ethtool.ethtool_argv()
        if prefix is None:
            self.fail('ethtool is not installed on this host (Debian and Ubuntu: the ethtool package). Nothing was '
                      'changed')
        planned = self.plan(prefix)
        if self.module.check_mode:
            return planned
        for group, item in planned.items():
            if item['changed']:
                self.set_group(prefix, group, item, planned)
        return planned

    def set_group(self, prefix, group, item, planned):
        interface = self.p['interface']
        params = {'interface': interface, 'group': group, 'previous': item['previous'], 'value': item['value']}
        try:
            entry = _ledger_undo.change(self.p['ledger_dir'], self.p['ledger_host'], KIND, params,
                                        run_id=self.p['run_id'], undo_on_error=False)
        except _ledger_core.LedgerError as exc:
            self.fail(f'could not record the change of the {group} of {interface}: {exc}. It was not made',
                      groups=planned)
        item['entry_id'] = entry.id
        with entry:
            argv = _ethtool.set_argv(prefix, group, interface, item['value'])
            rc, out, err = _ethtool.run(argv)
            if rc != 0:
                self.fail(f'{" ".join(argv)} exited {rc}: {(err.strip() or out.strip())[:300]} (the ledger entry '
                          'stays open: a restore sets back whatever of it took)', groups=planned)
            after = self.read(prefix, group, after=f'It was set ({" ".join(argv)}); the ledger entry stays open for '
                              'the restore')
            wrong = _ethtool.differences(after, item['value'])
            if wrong:
                self.fail(f'set the {group} of {interface} to {item["value"]}, but they read {wrong}: the driver took '
                          'other values. The ledger entry stays open for the restore', groups=planned)

    def undo(self):
        """The ledger's undo of the host's open nic_setting entries (those of O(interface), or all)."""
        try:
            return _ledger_undo.undo_kind(self.p['ledger_dir'], self.p['ledger_host'], KIND,
                                          select=lambda params: self.p['interface'] in (None, params['interface']),
                                          run_id=self.p['run_id'], check_mode=self.module.check_mode)
        except _ledger_core.LedgerError as exc:
            self.fail(str(exc))

    def run(self):
        if self.p['state'] == 'applied':
            planned = self.apply()
            self.module.exit_json(changed=any(item['changed'] for item in planned.values()), groups=planned, undone=[])
        result = self.undo()
        if result['failed']:
            self.fail(f'could not put every NIC setting back: {result["message"]}', undone=result['details'])
        self.module.exit_json(changed=result['changed'], groups={}, undone=result['details'])


def build_module():
    return AnsibleModule(
        argument_spec=_module_base.ledger_argument_spec(
            interface=dict(type='str'),
            features=dict(type='dict', default={}),
            coalesce=dict(type='dict', default={}),
            rings=dict(type='dict', default={}),
            state=dict(type='str', choices=['applied', 'undone'], default='applied'),
        ),
        supports_check_mode=True,
    )


def main():
    NicLayer(build_module()).run()


if __name__ == '__main__':
    main()

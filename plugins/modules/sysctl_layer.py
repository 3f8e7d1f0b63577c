#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: sysctl_layer
short_description: Set transport sysctls for a run, each recorded in the host's change ledger first
version_added: 0.1.0
description:
  - Sets each sysctl of O(settings) (socket buffers and TCP options, the transport tunables both field reports
    changed one at a time) by writing its file under O(proc_sys_root) at run time, never in a file that a boot
    reads again (no C(/etc/sysctl.d)), so a reboot undoes it too.
  - Before each write it reads the value, records a V(sysctl) entry in the host's change ledger with that value
    (C(previous)) and the one it writes, then writes, reads back and marks the entry applied. The ledger's undo (a
    restore, or O(state=undone)) writes C(previous) back exactly, and leaves alone a value someone else set since.
  - Only names under C(net.core), C(net.ipv4) and C(net.ipv6) are taken. Inside a network namespace most of
    C(net.ipv4) is the namespace's own; C(net.core.rmem_max) and C(net.core.wmem_max) are the whole machine's on
    most kernels.
  - Idempotent. A sysctl that already has its value is not written or recorded.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: Each value is read and compared; nothing is recorded or written.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  settings:
    description:
      - The sysctls and the values to write, for example C(net.ipv4.tcp_wmem) set to C(4096 16384 8388608).
        Whitespace inside a value is compared folded.
      - With O(state=undone), the names whose entries to undo (the values are ignored); empty undoes every open
        V(sysctl) entry of the host.
    type: dict
    default: {}
  state:
    description:
      - V(applied) writes O(settings); V(undone) undoes the host's open V(sysctl) entries (newest first).
    type: str
    choices: [applied, undone]
    default: applied
  proc_sys_root:
    description:
      - Where the sysctl files are (a fixture tree in tests).
    type: path
    default: /proc/sys
notes:
  - The change ledger's lock must be held by O(run_id) (the P(inferlab.distributed.ledger#role) role's C(lock)).
seealso:
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: A larger send buffer, for the network-only A/B
  inferlab.distributed.sysctl_layer:
    settings:
      net.ipv4.tcp_wmem: "4096 16384 8388608"
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"

- name: Put every sysctl this host's ledger holds back
  inferlab.distributed.sysctl_layer:
    state: undone
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"
"""

RETURN = r"""
sysctls:
  description: Each sysctl of O(settings) with the value found, the value wanted and whether it was written.
  returned: always
  type: dict
  sample: {net.ipv4.tcp_wmem: {previous: "4096 16384 4194304", value: "4096 16384 8388608", changed: true,
                               entry_id: 20261207T021502Z-sysctl-4242.1234567.1}}
undone:
  description: With O(state=undone), what the ledger's undo said for each entry.
  returned: always
  type: list
  elements: dict
"""

import os  # noqa: E402 - after the docs, as in community.general

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_undo  # noqa: E402


def sysctl_path(root, name):
    """The file of sysctl ``name`` under ``root``; a LedgerError for a name outside the transport's."""
    if not _ledger_core.is_transport_sysctl(name):
        raise _ledger_core.LedgerError(
            f'{name!r} is not a transport sysctl: expected a name under net.core, net.ipv4 or net.ipv6, for example '
            'net.ipv4.tcp_wmem')
    return os.path.join(root, *name.split('.'))


class SysctlLayer:
    def __init__(self, module):
        self.module = module
        self.p = module.params

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def apply(self):
        found, paths = {}, {}
        try:
            for name, wanted in sorted(self.p['settings'].items()):
                path = sysctl_path(self.p['proc_sys_root'], name)
                previous = _ledger_undo.read_sysctl(path)
                if previous is None:
                    self.fail(f'{name} does not exist here ({path}): not a sysctl of this kernel, or not one of this '
                              'network namespace. Nothing was changed for it', sysctls=found)
                value = _ledger_core.sysctl_text(wanted)
                found[name] = {'previous': previous, 'value': value, 'changed': previous != value, 'entry_id': None}
                paths[name] = path
        except _ledger_core.LedgerError as exc:
            self.fail(f'{exc}. Nothing was changed', sysctls=found)
        if self.module.check_mode:
            return found
        for name, item in found.items():
            if not item['changed']:
                continue
            params = {'name': name, 'path': paths[name], 'previous': item['previous'], 'value': item['value']}
            try:
                line = _ledger_core.record(self.p['ledger_dir'], self.p['ledger_host'], 'sysctl', params,
                                           run_id=self.p['run_id'])
                item['entry_id'] = line['id']
                back = _ledger_undo.write_sysctl(params['path'], item['value'])
            except (_ledger_core.LedgerError, OSError) as exc:
                self.fail(f'could not set {name} to {item["value"]!r}: {exc} (the ledger holds every write made '
                          'or about to be made: a restore puts them back)', sysctls=found)
            if back != item['value']:
                self.fail(f'wrote {item["value"]!r} to {name}, but it reads {back!r}: the kernel took another value '
                          '(a maximum elsewhere, or a format it does not parse). The ledger entry stays open for '
                          'the restore', sysctls=found)
            _ledger_core.mark(self.p['ledger_dir'], self.p['ledger_host'], line['id'], 'applied',
                              run_id=self.p['run_id'])
        return found

    def undo(self):
        """The ledger's undo of the host's open sysctl entries (those of O(settings)' names, or all)."""
        names = set(self.p['settings'])
        ids = [entry['id'] for entry in _ledger_core.entries(self.p['ledger_dir'], self.p['ledger_host'])
               if entry['kind'] == 'sysctl' and entry['state'] in _ledger_core.OPEN_STATES
               and (not names or entry['params']['name'] in names)]
        if not ids:
            return {'changed': False, 'details': [], 'failed': [], 'message': 'no open sysctl entry: nothing to undo'}
        try:
            return _ledger_undo.undo(self.p['ledger_dir'], self.p['ledger_host'], ids=ids, run_id=self.p['run_id'],
                                     check_mode=self.module.check_mode)
        except _ledger_core.LedgerError as exc:
            self.fail(str(exc), sysctls={}, undone=[])

    def run(self):
        if self.p['state'] == 'applied':
            found = self.apply()
            self.module.exit_json(changed=any(item['changed'] for item in found.values()), sysctls=found, undone=[])
        result = self.undo()
        if result['failed']:
            self.fail(f'could not put every sysctl back: {result["message"]}', sysctls={}, undone=result['details'])
        self.module.exit_json(changed=result['changed'], sysctls={}, undone=result['details'])


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            settings=dict(type='dict', default={}),
            state=dict(type='str', choices=['applied', 'undone'], default='applied'),
            proc_sys_root=dict(type='path', default='/proc/sys'),
            ledger_dir=dict(type='path', required=True),
            ledger_host=dict(type='str', required=True),
            run_id=dict(type='str'),
        ),
        supports_check_mode=True,
    )


def main():
    SysctlLayer(build_module()).run()


if __name__ == '__main__':
    main()

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
  - Sets each sysctl of O(settings) (socket buffers and TCP options, transport tunables that a link investigation
    changes one at a time) by writing its file under O(proc_sys_root) at run time, never in a file that a boot
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

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_settings, _setting_layer  # noqa: E402


def sysctl_path(root, name):
    """The file of sysctl ``name`` under ``root``; a LedgerError for a name outside the transport's."""
    if not _ledger_settings.is_transport_sysctl(name):
        raise _ledger_core.LedgerError(
            f'{name!r} is not a transport sysctl: expected a name under net.core, net.ipv4 or net.ipv6, for example '
            'net.ipv4.tcp_wmem')
    return os.path.join(root, *name.split('.'))


class Sysctl(_setting_layer.SettingFile):
    kind = 'sysctl'
    result_key = 'sysctls'

    def __init__(self, root):
        self.root = root

    def locate(self, name):
        return sysctl_path(self.root, name)

    def missing(self, name, path):
        return f'{name} does not exist here ({path}): not a sysctl of this kernel, or not one of this network namespace'

    def params(self, name, path, previous, value):
        return {'name': name, 'path': path, 'previous': previous, 'value': value}


def build_module():
    return AnsibleModule(
        argument_spec=_setting_layer.argument_spec(proc_sys_root=dict(type='path', default='/proc/sys')),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    _setting_layer.SettingLayer(module, Sysctl(module.params['proc_sys_root'])).run()


if __name__ == '__main__':
    main()

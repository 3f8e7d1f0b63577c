#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: driver_param_layer
short_description: Set a loaded driver's parameters for a run, each recorded in the host's change ledger first
version_added: 0.1.0
description:
  - Sets each parameter of O(settings) of the loaded driver O(driver) by writing its file under
    C(O(sysfs_root)/module/DRIVER/parameters) at run time, never in a file that a boot or a module load reads
    (no C(/etc/modprobe.d)), so a reboot or a reload undoes it too.
  - Only a parameter the driver lets change while loaded (its file writable, such as C(virtio_net)'s C(napi_tx)) is
    taken. One that is read-only (mode 0444, such as C(virtio_net)'s C(gso)) is set when the driver loads, so
    changing it is a reload, as the candidate C(thunderbolt_net)'s C(tx_e2e) is
    (P(inferlab.distributed.tbnet_module#module)), so it fails here, with nothing changed.
  - Before each write it reads the value, records a V(driver_param) entry in the host's change ledger with that
    value (C(previous)) and the one it writes, then writes, reads back and marks the entry applied. The ledger's undo
    (a restore, or O(state=undone)) writes C(previous) back exactly, and leaves alone a value someone else set since.
  - Idempotent. A parameter that already has its value is not written or recorded.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: Each parameter is read and checked; nothing is recorded or written.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  driver:
    description:
      - The loaded driver (its module name, as under C(/sys/module)), for example C(virtio_net) or C(ixgbe).
        Required with O(state=applied).
    type: str
  settings:
    description:
      - The parameters and the values to write, for example C(napi_tx) set to C(0).
      - With O(state=undone), the names whose entries to undo (the values are ignored); empty undoes every open
        V(driver_param) entry of the host.
    type: dict
    default: {}
  state:
    description:
      - V(applied) writes O(settings); V(undone) undoes the host's open V(driver_param) entries (newest first).
    type: str
    choices: [applied, undone]
    default: applied
  sysfs_root:
    description:
      - Where sysfs is (a fixture tree in tests).
    type: path
    default: /sys
notes:
  - The change ledger's lock must be held by O(run_id) (the P(inferlab.distributed.ledger#role) role's C(lock)).
seealso:
  - module: inferlab.distributed.sysctl_layer
  - module: inferlab.distributed.nic_layer
"""

EXAMPLES = r"""
- name: The virtio NIC's transmit NAPI off, for the network-only A/B
  inferlab.distributed.driver_param_layer:
    driver: virtio_net
    settings:
      napi_tx: "N"
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"

- name: Put every driver parameter this host's ledger holds back
  inferlab.distributed.driver_param_layer:
    state: undone
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ ledger_run_id }}"
"""

RETURN = r"""
parameters:
  description: Each parameter of O(settings) with the value found, the value wanted and whether it was written.
  returned: always
  type: dict
  sample: {napi_tx: {previous: "Y", value: "N", changed: true,
                     entry_id: 20261207T061502Z-driver_param-4242.1234567.1}}
undone:
  description: With O(state=undone), what the ledger's undo said for each entry.
  returned: always
  type: list
  elements: dict
"""

import os  # noqa: E402 - after the docs, as in community.general
import stat  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_settings, _setting_layer  # noqa: E402


class DriverParam(_setting_layer.SettingFile):
    kind = 'driver_param'
    result_key = 'parameters'

    def __init__(self, sysfs_root, driver):
        self.sysfs_root = sysfs_root
        self.driver = driver

    def locate(self, name):
        return _ledger_settings.driver_param_path(self.sysfs_root, self.driver, name)

    def missing(self, name, path):
        loaded = os.path.isdir(os.path.join(self.sysfs_root, 'module', self.driver))
        return (f'{self.driver} has no parameter {name} ({path})' if loaded
                else f'{self.driver} is not loaded here (no {os.path.dirname(os.path.dirname(path))})')

    def refuse(self, name, path):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o222:
            return None
        return (f"{self.driver}'s parameter {name} is read-only while it is loaded (mode {mode:04o}): it is set when "
                'the driver loads, so changing it is a reload with the parameter, not a write')

    def params(self, name, path, previous, value):
        return {'driver': self.driver, 'name': name, 'path': path, 'previous': previous, 'value': value}


def build_module():
    return AnsibleModule(
        argument_spec=_setting_layer.argument_spec(driver=dict(type='str'),
                                                   sysfs_root=dict(type='path', default='/sys')),
        required_if=[('state', 'applied', ['driver'])],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    _setting_layer.SettingLayer(module, DriverParam(module.params['sysfs_root'], module.params['driver'])).run()


if __name__ == '__main__':
    main()

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: counter_snapshot
short_description: One edge of a counter window in one call, the counters, the link and the GPUs
version_added: 0.2.0
description:
  - What the C(inferlab.distributed.counters) role reads at each edge of a window, in one module run instead of
    three, so that the snapshots of the two hosts are taken closer together and the window costs one round trip
    per host per edge.
  - RV(counters) and RV(missing) are what M(inferlab.distributed.net_counters) returns, RV(tbnet) what
    M(inferlab.distributed.tbnet_info) returns, RV(nvml) what M(inferlab.distributed.nvml_info) returns; the same
    module_utils read them. The counters are read first, as they are what the window measures.
  - Nothing is reset or written, so the module changes nothing.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads files.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  interfaces:
    description: Names of the interfaces whose counters are read, for example V(thunderbolt0).
    type: list
    elements: str
    required: true
  fail_on_missing:
    description:
      - Fail when an interface in O(interfaces) does not exist (at a window's opening). When V(false) (at its
        closing: a driver reload removes the interface), a missing interface is listed in RV(missing).
    type: bool
    default: true
  sysfs_root:
    description:
      - Where sysfs is mounted for the interface counters. They are per network namespace, so on a real or lab
        host this stays V(/sys).
    type: path
    default: /sys
  tbnet_sysfs_root:
    description:
      - Where the Thunderbolt facts are read (C(bus/thunderbolt), C(class/net)); a fixture tree in the embedded lab,
        which has no Thunderbolt hardware.
    type: path
    default: /sys
  procfs_root:
    description: Where procfs is mounted (C(net/snmp), C(net/netstat), the GPU processes' names).
    type: path
    default: /proc
  nvml_snapshot:
    description:
      - Replay this recorded NVML snapshot instead of reading NVML (a fixture, as in
        M(inferlab.distributed.nvml_info)'s O(inferlab.distributed.nvml_info#module:snapshot)).
    type: path
requirements:
  - nvidia-ml-py (module C(pynvml)) and the NVIDIA driver's C(libnvidia-ml.so.1), unless O(nvml_snapshot) is set.
"""

EXAMPLES = r"""
- name: Snapshot the opening of a window
  inferlab.distributed.counter_snapshot:
    interfaces: [thunderbolt0, eth0]
  register: opening
"""

RETURN = r"""
counters:
  description: The interface and TCP counters with their times (M(inferlab.distributed.net_counters)'s RV(counters)).
  returned: success
  type: dict
missing:
  description: Interfaces of O(interfaces) that do not exist (only when O(fail_on_missing=false)).
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
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _counters, _nvml, _tbnet  # noqa: E402
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import SysfsError  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type='list', elements='str', required=True),
            fail_on_missing=dict(type='bool', default=True),
            sysfs_root=dict(type='path', default='/sys'),
            tbnet_sysfs_root=dict(type='path', default='/sys'),
            procfs_root=dict(type='path', default='/proc'),
            nvml_snapshot=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        counters, missing = _counters.collect(list(dict.fromkeys(params['interfaces'])),
                                              sysfs_root=params['sysfs_root'], procfs_root=params['procfs_root'],
                                              fail_on_missing=params['fail_on_missing'])
        tbnet = _tbnet.collect(sysfs_root=params['tbnet_sysfs_root'], procfs_root=params['procfs_root'])
        if params['nvml_snapshot']:
            nvml = _nvml.load_snapshot(params['nvml_snapshot'])
        else:
            try:
                pynvml = _nvml.import_pynvml()
            except ImportError as err:
                module.fail_json(msg=missing_required_lib('nvidia-ml-py', reason='to read GPU facts from NVML'),
                                 exception=str(err))
            nvml = _nvml.collect(pynvml, procfs_root=params['procfs_root'])
    except _counters.MissingInterfaceError as err:
        module.fail_json(msg=str(err), missing=err.missing, present=err.present)
    except (SysfsError, _nvml.NvmlError) as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=False, counters=counters, missing=missing, tbnet=tbnet, nvml=nvml)


if __name__ == '__main__':
    main()

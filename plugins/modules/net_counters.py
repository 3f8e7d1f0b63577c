#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: net_counters
short_description: Sample interface and TCP counters with timestamps
version_added: 0.1.0
description:
  - Reads every counter under C(class/net/IF/statistics/) of the given interfaces (receiver CRC, missed, length
    and overrun errors included), their carrier transition counters (C(carrier_changes), C(carrier_up_count),
    C(carrier_down_count)), their C(operstate) and C(mtu), every C(Tcp:) field of C(net/snmp) and every C(TcpExt:)
    field of C(net/netstat).
  - Each sample carries a monotonic and a wall-clock time, so two samples taken around a workload give rates over
    the same bounded window. Use the P(inferlab.distributed.counter_delta#filter) filter to subtract them.
  - Counters are read, never reset, so the module changes nothing.
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
    description:
      - Names of the interfaces to sample, for example V(thunderbolt0).
    type: list
    elements: str
    required: true
  sysfs_root:
    description:
      - Where sysfs is mounted.
      - Interface counters are per network namespace, so on a real or lab host this stays V(/sys); other roots
        are for tests.
    type: path
    default: /sys
  procfs_root:
    description:
      - Where procfs is mounted; C(net/snmp) and C(net/netstat) are read below it.
    type: path
    default: /proc
  fail_on_missing:
    description:
      - Fail when an interface in O(interfaces) does not exist, naming it and listing the interfaces present.
      - When V(false), a missing interface is listed in RV(missing) and left out of RV(counters.interfaces).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Sample counters before the workload
  inferlab.distributed.net_counters:
    interfaces: [thunderbolt0]
  register: before

- name: Sample counters after the workload
  inferlab.distributed.net_counters:
    interfaces: [thunderbolt0]
  register: after

- name: Show what the workload cost the link
  ansible.builtin.debug:
    msg: "{{ before.counters | inferlab.distributed.counter_delta(after.counters) }}"
"""

RETURN = r"""
counters:
  description: One sample of the counters.
  returned: success
  type: dict
  contains:
    time:
      description: C(monotonic) is C(time.monotonic()) (for intervals), C(wall) seconds since the epoch.
      returned: success
      type: dict
      sample: {monotonic: 81234.50123, wall: 1796032800.25}
    interfaces:
      description:
        - Per interface, C(operstate), C(mtu) and every file of C(statistics/) as an integer.
        - C(carrier), the interface's carrier transitions (C(class/net/IF/carrier_changes), Linux 3.15+, and
          C(carrier_up_count) and C(carrier_down_count), 4.16+); V(null) for a file the kernel does not have.
      returned: success
      type: dict
      sample:
        thunderbolt0:
          operstate: up
          mtu: 1500
          statistics: {rx_bytes: 123456, rx_packets: 100, rx_crc_errors: 0, rx_missed_errors: 0,
                       rx_length_errors: 0, rx_over_errors: 0, rx_errors: 0, tx_bytes: 654321, tx_packets: 120}
          carrier: {carrier_changes: 4, carrier_up_count: 2, carrier_down_count: 2}
    tcp:
      description: Every C(Tcp:) field of C(net/snmp); C(RetransSegs), C(OutSegs), C(InSegs) and C(InErrs) always.
      returned: success
      type: dict
      sample: {InSegs: 1460, OutSegs: 892, RetransSegs: 0, InErrs: 0, MaxConn: -1}
    tcp_ext:
      description: Every C(TcpExt:) field of C(net/netstat).
      returned: success
      type: dict
      sample: {TCPLostRetransmit: 0, TCPTimeouts: 2, TCPSynRetrans: 0}
missing:
  description:
    - Interfaces of O(interfaces) that do not exist. On success it is non-empty only with O(fail_on_missing=false);
      a failure for a missing interface returns it too.
  returned: success, and on failure for a missing interface
  type: list
  elements: str
  sample: [thunderbolt1]
present:
  description: Interfaces that exist, when the module failed because one of O(interfaces) does not.
  returned: failure
  type: list
  elements: str
  sample: [lo, eth0]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils._net_counters import (  # noqa: E402
    MissingInterfaceError,
    collect,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import SysfsError  # noqa: E402


class NetCounters:
    def __init__(self, module):
        self.module = module

    def run(self):
        params = self.module.params
        interfaces = list(dict.fromkeys(params['interfaces']))
        try:
            counters, missing = collect(interfaces, sysfs_root=params['sysfs_root'],
                                        procfs_root=params['procfs_root'],
                                        fail_on_missing=params['fail_on_missing'])
        except MissingInterfaceError as err:
            self.module.fail_json(msg=str(err), missing=err.missing, present=err.present)
        except SysfsError as err:
            self.module.fail_json(msg=str(err))
        self.module.exit_json(changed=False, counters=counters, missing=missing)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type='list', elements='str', required=True),
            sysfs_root=dict(type='path', default='/sys'),
            procfs_root=dict(type='path', default='/proc'),
            fail_on_missing=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )


def main():
    NetCounters(build_module()).run()


if __name__ == '__main__':
    main()

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: tbnet_info
short_description: Read Thunderbolt/USB4 networking facts from sysfs
version_added: 0.1.0
description:
  - Reads every Thunderbolt domain, XDomain peer (another host on the cable), the services that peer advertises
    (ThunderboltIP is the one with key V(network)), the network interface bound to each service and the state of the
    C(thunderbolt_net) kernel module.
  - Link speed is reported per lane, as sysfs prints it (V(20.0 Gb/s)), and as the link total (per lane x lanes),
    because host-to-host links normally run on one lane only and that is the number a link test should expect.
  - The ThunderboltIP capability bits of the peer (C(prtcstns)) are decoded, since whether end-to-end flow control
    is used depends on the peer advertising bit 0 as much as on the local C(e2e) parameter.
  - Missing pieces (no Thunderbolt bus, no peer, module not loaded) are facts, listed in RV(tbnet.notes). Malformed
    values fail the module with the file path and the value read.
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
  sysfs_root:
    description:
      - Where sysfs is mounted.
      - Point it at a fixture tree to read recorded or made-up hardware (the embedded lab does, through the
        C(inferlab_tbnet_sysfs_root) inventory variable). Symlinks inside the tree must be relative.
    type: path
    default: /sys
  procfs_root:
    description:
      - Where procfs is mounted; the kernel release is read from C(sys/kernel/osrelease) below it.
    type: path
    default: /proc
notes:
  - Formats follow the kernel's C(Documentation/ABI/testing/sysfs-bus-thunderbolt).
seealso:
  - name: sysfs-bus-thunderbolt
    description: The kernel's description of the Thunderbolt sysfs files.
    link: https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-thunderbolt
"""

EXAMPLES = r"""
- name: Read Thunderbolt facts
  inferlab.distributed.tbnet_info:
  register: tb

- name: Stop if the direct link runs slower than expected
  ansible.builtin.assert:
    that:
      - tb.tbnet.peers | length > 0
      - tb.tbnet.peers[0].rx_speed_gbps >= inferlab_link_min_speed_gbps
    fail_msg: >-
      expected a Thunderbolt peer at >= {{ inferlab_link_min_speed_gbps }} Gb/s per lane, found
      {{ tb.tbnet.peers }}; notes: {{ tb.tbnet.notes }}

- name: Read a fixture tree instead of the real sysfs
  inferlab.distributed.tbnet_info:
    sysfs_root: /srv/lab/host-a/sys
    procfs_root: /srv/lab/host-a/proc
"""

RETURN = r"""
tbnet:
  description: Thunderbolt networking facts.
  returned: success
  type: dict
  contains:
    kernel_release:
      description: Kernel release (C(uname -r)); null when C(sys/kernel/osrelease) is missing.
      returned: success
      type: str
      sample: 6.1.0-27-amd64
    domains:
      description: Thunderbolt domains (one per host controller).
      returned: success
      type: list
      elements: dict
      sample:
        - device: domain0
          unique_id: d3010000-0062-8718-239d-a7c6e2610c21
          security: user
          iommu_dma_protection: true
          host_router: {device: 0-0, vendor_name: Intel, device_name: Raptor Lake Thunderbolt 4, generation: 4}
    peers:
      description:
        - XDomain peers, that is other hosts connected over Thunderbolt/USB4.
        - Speeds are floats in Gb/s per lane; C(*_link_gbps) is per lane x lanes. Missing files give null.
      returned: success
      type: list
      elements: dict
      sample:
        - device: 0-1
          device_name: lab-b
          vendor_name: Intel Corp.
          unique_id: 9a0bd1e8-8f2c-4b1e-a8c3-2fe0c1a2b3c4
          rx_speed_gbps: 20.0
          tx_speed_gbps: 20.0
          rx_lanes: 1
          tx_lanes: 1
          rx_link_gbps: 20.0
          tx_link_gbps: 20.0
    services:
      description:
        - Services the peers advertise. C(flags) is decoded for the ThunderboltIP service (key V(network)) only
          and is null for others.
        - C(prtcstns) is the hex bitmask exactly as sysfs prints it.
      returned: success
      type: list
      elements: dict
      sample:
        - device: 0-1.0
          peer: 0-1
          key: network
          prtcid: 1
          prtcvers: 1
          prtcrevs: 1
          prtcstns: '0x00000007'
          flags: {e2e: true, match_frags_id: true, 64k_frames: true}
          interface: thunderbolt0
    interfaces:
      description: Network interfaces bound to a Thunderbolt service, by name.
      returned: success
      type: dict
      sample: {thunderbolt0: {service: 0-1.0, peer: 0-1}}
    module:
      description:
        - State of the C(thunderbolt_net) module. C(parameters) holds every file under C(parameters/) as read
          (V(Y)/V(N) for booleans); C(tx_e2e) appears only with a driver that has it.
        - C(srcversion) and C(taint) are null for a built-in driver; C(taint) is an empty string when not tainted.
      returned: success
      type: dict
      sample: {loaded: true, parameters: {e2e: Y}, srcversion: 8D5F6C2E1A7B3C9D0E4F1A2, taint: ''}
    loading:
      description:
        - Whether the kernel would load an unsigned module. C(lockdown) is the active mode of
          C(kernel/security/lockdown) (null without the lockdown LSM), C(sig_enforce) is
          C(module/module/parameters/sig_enforce), and C(unsigned_refused) is true when either is on.
        - C(kernel_version) is C(uname -v) (C(sys/kernel/version) below O(procfs_root)); C(version_signature) is
          Ubuntu's C(version_signature) below O(procfs_root), null on other distributions.
      returned: success
      type: dict
      sample: {kernel_version: '#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-10-01)', version_signature: null,
               lockdown: none, sig_enforce: false, unsigned_refused: false}
    notes:
      description: Facts about what is missing, in words.
      returned: success
      type: list
      elements: str
      sample: ['no XDomain peer: no other host is connected over Thunderbolt/USB4']
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import SysfsError  # noqa: E402
from ansible_collections.inferlab.distributed.plugins.module_utils._tbnet import collect  # noqa: E402


class TbnetInfo:
    def __init__(self, module):
        self.module = module

    def run(self):
        params = self.module.params
        try:
            tbnet = collect(sysfs_root=params['sysfs_root'], procfs_root=params['procfs_root'])
        except SysfsError as err:
            self.module.fail_json(msg=str(err))
        self.module.exit_json(changed=False, tbnet=tbnet)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type='path', default='/sys'),
            procfs_root=dict(type='path', default='/proc'),
        ),
        supports_check_mode=True,
    )


def main():
    TbnetInfo(build_module()).run()


if __name__ == '__main__':
    main()

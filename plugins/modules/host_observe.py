#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: host_observe
short_description: Observe a ring host for its verification in one call
version_added: 0.2.0
description:
  - Reads what the P(inferlab.distributed.host_verify_state#filter) filter judges, in one call on the host - the
    Thunderbolt facts (as M(inferlab.distributed.tbnet_info)), the direct link's state and counters (as
    M(inferlab.distributed.net_counters)), IPv4 addresses (C(ip -j -4 addr show dev IF)) and queueing disciplines
    (C(tc -j qdisc show dev IF)), the GPUs (as
    M(inferlab.distributed.nvml_info)), a ping of the peer across the link, the model path and the space free on
    its filesystem, and one real chat completion from each original service.
  - The ping runs while the rest is read. A link, ping, path or service that is missing or does not answer is an
    observation, for the filter to judge with its expected value and variable; the module fails only for what
    cannot be read at all (a malformed sysfs file, NVML without C(nvidia-ml-py) and no snapshot).
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It only reads, pings and sends chat completions, in check mode too.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  link_interface:
    description:
      - The direct link's interface, for example V(thunderbolt0).
    type: str
    required: true
  link_kind:
    description:
      - What the link is. V(thunderbolt) reads the Thunderbolt peer (O(tbnet_sysfs_root)); V(ethernet) reads the
        NIC itself (C(nic)) through O(sysfs_root) and C(ethtool), and adds it to the identity.
    type: str
    choices: [thunderbolt, ethernet]
    default: thunderbolt
  peer_address:
    description:
      - The peer's address on the direct link, pinged through O(link_interface).
    type: str
    required: true
  ping_count:
    description:
      - How many echo requests, 0.2 s apart, each waited for up to 1 s.
    type: int
    default: 3
  model_path:
    description:
      - The model's path; whether it exists, and the space free on its filesystem (C(df)'s avail).
    type: path
    required: true
  services:
    description:
      - The original services to ask, each with C(name), C(url) (the OpenAI base URL, for example
        V(http://127.0.0.1:8000/v1)) and C(model).
    type: list
    elements: dict
    default: []
  prompt:
    description:
      - The chat message sent to each service.
    type: str
    default: Reply with one short sentence about verification.
  max_tokens:
    description:
      - C(max_tokens) of each chat completion.
    type: int
    default: 16
  request_timeout_s:
    description:
      - Seconds each chat completion may take.
    type: float
    default: 30
  service_ready_timeout_s:
    description:
      - After a restart (the restore's proof), ask each service again until it answers a completion, for up to its
        own C(ready_timeout_s) in O(services) or else this many seconds, counted from the module's start, with
        pauses of 1 s doubling to 10 s. Each answer then has C(wait) (C(ready_timeout_s), C(waited_s),
        C(attempts)). Unset, each service is asked once.
    type: float
  tbnet_sysfs_root:
    description:
      - Where the Thunderbolt facts and the host's identity (the host router's PCI ids, the peer, DMI firmware) are
        read (a fixture tree in the lab and the tests).
    type: path
    default: /sys
  nvml_snapshot:
    description:
      - A recorded NVML snapshot to replay instead of asking NVML; empty means live NVML.
    type: path
  sysfs_root:
    description:
      - Where sysfs is mounted for the interface counters (per network namespace, so V(/sys) on a host).
    type: path
    default: /sys
  procfs_root:
    description:
      - Where procfs is mounted.
    type: path
    default: /proc
requirements:
  - C(ping) (iputils), C(ip) and C(tc) (iproute2) on the host; C(ethtool) for an Ethernet link's driver,
    firmware and offloads (without it they are null, and C(nic.notes) names the package).
  - nvidia-ml-py (module C(pynvml)) and the NVIDIA driver, unless O(nvml_snapshot) is set.
seealso:
  - module: inferlab.distributed.tbnet_info
  - module: inferlab.distributed.net_counters
  - module: inferlab.distributed.nvml_info
"""

EXAMPLES = r"""
- name: Observe the host
  inferlab.distributed.host_observe:
    link_interface: thunderbolt0
    peer_address: 169.254.177.2
    model_path: /models/qwen
    services:
      - {name: original-a, url: "http://127.0.0.1:8000/v1", model: qwen}
  register: observed
"""

RETURN = r"""
tbnet:
  description: The Thunderbolt facts, as M(inferlab.distributed.tbnet_info) returns them.
  returned: success
  type: dict
identity:
  description:
    - What the host runs on, for aggregating runs (C(inferlab matrix)) - C({format, host_router {domain, pci_slot,
      pci_vendor, pci_device, pci_id, generation, nvm_version, vendor_name, device_name}, peer {device, vendor_id,
      device_id, id, vendor_name, device_name, rx_speed_gbps, rx_lanes, tx_speed_gbps, tx_lanes}, kernel_release,
      driver {loaded, srcversion, parameters}, firmware {bios_vendor, bios_version, board_vendor, board_name,
      product_name}, missing}); on an Ethernet link also C(nic {interface, driver, driver_version, firmware_version,
      speed_mbps, pci_id}).
    - C(missing) names each attribute that was absent or unreadable (its value is null); nothing is guessed.
  returned: success
  type: dict
nic:
  description:
    - An Ethernet link's NIC (O(link_kind=ethernet) only) - C({interface, present, speed_mbps, duplex, carrier,
      carrier_changes, mtu, operstate, pci {vendor, device, subsystem_vendor, subsystem_device, slot, driver, id},
      driver, driver_version, firmware_version, bus_info, offloads {NAME {on, fixed}}, missing, notes}).
    - C(speed_mbps) is null while the link is down or the speed unknown; C(pci) is null for a virtual NIC.
  returned: when O(link_kind=ethernet)
  type: dict
net:
  description: The direct link's counters, as M(inferlab.distributed.net_counters) returns them, with C(missing)
    (the interface when it does not exist).
  returned: success
  type: dict
addresses:
  description: The output of C(ip -j -4 addr show dev IF); empty when C(ip) failed (a missing interface).
  returned: success
  type: str
qdiscs:
  description: The output of C(tc -j qdisc show dev IF) for the direct link; null when C(tc) failed or is missing.
  returned: success
  type: str
nvml:
  description: The GPUs, as M(inferlab.distributed.nvml_info) returns them.
  returned: success
  type: dict
ping:
  description: The ping's exit code (null when it could not run), stdout and stderr.
  returned: success
  type: dict
  sample: {rc: 0, stdout: "PING 169.254.177.2 ...", stderr: ""}
storage:
  description: Whether the model path exists and the bytes free on its filesystem (null when unreadable).
  returned: success
  type: dict
  sample: {model_path: /models/qwen, exists: true, disk_free_bytes: 500000000000}
services:
  description:
    - Per service, the service, the HTTP status (null without an answer), the reply's JSON and an error; with
      O(service_ready_timeout_s), C(wait) too.
  returned: success
  type: list
  elements: dict
"""

import http.client  # noqa: E402 - after the docs, as in community.general
import json  # noqa: E402
import urllib.error  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.urls import open_url  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _host_observe, _nvml  # noqa: E402
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import SysfsError  # noqa: E402

USER_AGENT = 'inferlab-host-observe/1'


def post_json(url, body, timeout_s):
    """``(status, text)`` of a POST; an HTTP error status is an answer, a refused or cut connection an OSError."""
    try:
        response = open_url(url, method='POST', data=json.dumps(body), timeout=timeout_s, use_proxy=False,
                            headers={'Content-Type': 'application/json'}, http_agent=USER_AGENT)
        return response.status, response.read().decode('utf-8', 'replace')
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode('utf-8', 'replace')
    except http.client.HTTPException as err:
        raise OSError('%s: %s' % (type(err).__name__, err)) from err


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            link_interface=dict(type='str', required=True),
            link_kind=dict(type='str', default='thunderbolt', choices=list(_host_observe.LINK_KINDS)),
            peer_address=dict(type='str', required=True),
            ping_count=dict(type='int', default=3),
            model_path=dict(type='path', required=True),
            services=dict(type='list', elements='dict', default=[]),
            prompt=dict(type='str', default='Reply with one short sentence about verification.'),
            max_tokens=dict(type='int', default=16, no_log=False),  # a count of tokens, not a secret
            request_timeout_s=dict(type='float', default=30),
            service_ready_timeout_s=dict(type='float'),
            tbnet_sysfs_root=dict(type='path', default='/sys'),
            nvml_snapshot=dict(type='path'),
            sysfs_root=dict(type='path', default='/sys'),
            procfs_root=dict(type='path', default='/proc'),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    incomplete = [s for s in params['services'] if not all(s.get(k) for k in ('name', 'url', 'model'))]
    if incomplete:
        module.fail_json(msg='every service needs name, url and model (inferlab_original_services); found %s'
                             % json.dumps(incomplete))
    if params['ping_count'] < 1:
        module.fail_json(msg='ping_count must be at least 1, got %d' % params['ping_count'])
    try:
        observed = _host_observe.observe(
            params['link_interface'], params['peer_address'], params['model_path'], params['services'], post_json,
            ping_count=params['ping_count'], prompt=params['prompt'], max_tokens=params['max_tokens'],
            request_timeout_s=params['request_timeout_s'], tbnet_sysfs_root=params['tbnet_sysfs_root'],
            nvml_snapshot=params['nvml_snapshot'], sysfs_root=params['sysfs_root'],
            procfs_root=params['procfs_root'], link_kind=params['link_kind'],
            service_ready_timeout_s=params['service_ready_timeout_s'])
    except (SysfsError, _nvml.NvmlError) as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=False, **observed)


if __name__ == '__main__':
    main()

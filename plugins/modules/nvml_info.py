#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nvml_info
short_description: Read GPU facts through NVML, or replay a recorded snapshot
version_added: 0.1.0
description:
  - Reads, per GPU, the name, UUID, PCI bus id, memory, temperature, power, utilisation, PCIe link, uncorrected
    volatile ECC errors, clocks event reasons and the compute processes, through NVML (C(pynvml) from
    C(nvidia-ml-py)).
  - Each field is read on its own. A field NVML does not support (ECC on consumer cards, for one) is null; any other
    NVML error on a field is null plus an entry in RV(nvml.notes), so one failing sensor hides nothing else.
  - With O(snapshot), replays a recorded snapshot instead, with the same fields. This is how the embedded lab, which
    has no GPU, and the unit tests get GPU facts; the inventory variable C(inferlab_nvml_snapshot) carries the path.
  - M(inferlab.distributed.nvml_snapshot) records a host's facts as such a snapshot, to replay elsewhere.
  - 'Snapshot file format C(inferlab.nvml_snapshot/1): a JSON object with C(format), C(recorded_at) (UTC, ISO 8601),
    C(hostname), C(driver_version), C(cuda_driver_version) and C(gpus), a list of objects with exactly the fields
    of RV(nvml.gpus). Null means NVML did not answer for that field.'
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reading and replaying change nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  snapshot:
    description:
      - Path of a recorded snapshot to replay instead of asking NVML. C(nvidia-ml-py) is not needed then.
      - An empty string means live NVML, so the inventory variable can be passed through unchanged.
    type: path
  procfs_root:
    description:
      - Where procfs is mounted; the name of each compute process is read from C(PID/comm) below it.
    type: path
    default: /proc
requirements:
  - nvidia-ml-py (module C(pynvml)) and the NVIDIA driver's C(libnvidia-ml.so.1), unless O(snapshot) is set.
seealso:
  - module: inferlab.distributed.nvml_snapshot
"""

EXAMPLES = r"""
- name: Read GPU facts (live, or the lab's snapshot)
  inferlab.distributed.nvml_info:
    snapshot: "{{ inferlab_nvml_snapshot }}"
  register: gpu

- name: Stop if a GPU is missing
  ansible.builtin.assert:
    that: gpu.nvml.gpus | length == inferlab_gpu_count
    fail_msg: >-
      expected {{ inferlab_gpu_count }} GPUs (inferlab_gpu_count), NVML shows {{ gpu.nvml.gpus | length }}:
      {{ gpu.nvml.gpus | map(attribute='name') | list }}
"""

RETURN = r"""
nvml:
  description: GPU facts.
  returned: success
  type: dict
  contains:
    source:
      description: Where the facts come from.
      returned: success
      type: str
      choices: [nvml, snapshot]
      sample: nvml
    driver_version:
      description: NVIDIA driver version.
      returned: success
      type: str
      sample: 580.95.05
    cuda_driver_version:
      description: CUDA version the driver supports, as NVML encodes it (1000 x major + 10 x minor).
      returned: success
      type: int
      sample: 13000
    gpus:
      description:
        - One entry per GPU. C(power_*_w) are watts (NVML gives milliwatts); memory is in bytes.
        - C(ecc_uncorrected_volatile) and C(clocks_event_reasons) are null where NVML does not support them.
        - C(compute_processes[].name) is C(PID/comm) (null when not readable, for example another PID namespace);
          C(used_memory_bytes) is null where NVML cannot tell.
      returned: success
      type: list
      elements: dict
      sample:
        - index: 0
          name: NVIDIA GeForce RTX 5090
          uuid: GPU-5f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f
          pci_bus_id: '00000000:01:00.0'
          memory_total_bytes: 34190917632
          memory_free_bytes: 33666629632
          memory_used_bytes: 524288000
          temperature_c: 38
          power_usage_w: 31.5
          power_limit_w: 575.0
          utilization_gpu_pct: 0
          utilization_memory_pct: 0
          pcie_link_gen_current: 5
          pcie_link_gen_max: 5
          pcie_link_width_current: 16
          pcie_link_width_max: 16
          ecc_uncorrected_volatile: null
          clocks_event_reasons: 1
          compute_processes: [{pid: 1234, name: python3, used_memory_bytes: 1048576}]
    notes:
      description: NVML errors met on single fields, and for a replay where it was recorded.
      returned: success
      type: list
      elements: str
      sample: ['GPU 0 temperature_c: NVML error GpuIsLost (GPU is lost); reported as null']
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _nvml  # noqa: E402


def read(module):
    """The facts: the replayed snapshot, or live NVML."""
    params = module.params
    try:
        if params['snapshot']:
            return _nvml.load_snapshot(params['snapshot'])
        return _nvml.read_live(params['procfs_root'])
    except ImportError as err:
        module.fail_json(msg=missing_required_lib('nvidia-ml-py', reason='to read GPU facts from NVML'),
                         exception=str(err))
    except _nvml.NvmlError as err:
        module.fail_json(msg=str(err))


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            snapshot=dict(type='path'),
            procfs_root=dict(type='path', default='/proc'),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    module.exit_json(changed=False, nvml=read(module))


if __name__ == '__main__':
    main()

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nvml_snapshot
short_description: Record this host's GPU facts through NVML as a snapshot file, to replay elsewhere
version_added: 0.1.0
description:
  - Reads the GPU facts that M(inferlab.distributed.nvml_info) reads, through live NVML, and writes them to O(dest)
    as a snapshot file (format C(inferlab.nvml_snapshot/1)), which M(inferlab.distributed.nvml_info) replays with
    its O(inferlab.distributed.nvml_info#module:snapshot) option, the embedded lab and the unit tests included.
  - The file carries the time of recording and the readings of the moment (temperature, power, memory in use), so
    every run writes it again and reports a change.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads NVML, reports the change and writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  dest:
    description:
      - Path of the snapshot file to write (atomically, mode 0644). Its directory must exist.
    type: path
    required: true
  procfs_root:
    description:
      - Where procfs is mounted; the name of each compute process is read from C(PID/comm) below it.
    type: path
    default: /proc
requirements:
  - nvidia-ml-py (module C(pynvml)) and the NVIDIA driver's C(libnvidia-ml.so.1).
seealso:
  - module: inferlab.distributed.nvml_info
"""

EXAMPLES = r"""
- name: Record this host's GPUs for replay in the lab
  inferlab.distributed.nvml_snapshot:
    dest: /var/tmp/nvml-snapshot.json
"""

RETURN = r"""
dest:
  description: The snapshot file written (or, in check mode, that would be).
  returned: success
  type: str
  sample: /var/tmp/nvml-snapshot.json
nvml:
  description: What was recorded, as M(inferlab.distributed.nvml_info) returns it.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _nvml  # noqa: E402


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            dest=dict(type='path', required=True),
            procfs_root=dict(type='path', default='/proc'),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    dest = module.params['dest']
    try:
        nvml = _nvml.read_live(module.params['procfs_root'])
        if not module.check_mode:
            _nvml.write_snapshot(dest, _nvml.snapshot_document(nvml))
    except ImportError as err:
        module.fail_json(msg=missing_required_lib('nvidia-ml-py', reason='to read GPU facts from NVML'),
                         exception=str(err))
    except _nvml.NvmlError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=True, dest=dest, nvml=nvml)


if __name__ == '__main__':
    main()

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: fragment
short_description: Write one JSON fragment into the run directory on the controller
version_added: 0.2.0
description:
  - Writes C(<inferlab_run_dir>/<dir>/<name>.json) on the controller, the evidence of one step of a run, which
    C(inferlab report) assembles into the record.
  - An action plugin. The write happens in the controller's Ansible process and never reaches the host, whatever
    host the task runs for.
  - The JSON is written as C(to_nice_json) writes it (indent 4, keys sorted), atomically (a temporary file beside
    it, then a rename), mode C(0644).
  - The run directory comes from the variable C(inferlab_run_dir), which C(inferlab run) sets.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  action:
    support: full
    description: The write runs in the action plugin, on the controller.
  check_mode:
    support: full
    details: Controller-side evidence, not a host change. It is written in check mode too, and never reported as
      changed, so that idempotence checks stay meaningful.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  dir:
    description:
      - Directory inside the run directory, for example C(fragments/verify) or C(known_good); parts made of letters,
        digits, C(.), C(_) and C(-), separated by C(/). Anything that would leave the run directory is refused.
    type: str
    required: true
  name:
    description:
      - The file's name without C(.json). By default the host's (C(inventory_hostname)); a fragment that is not one
        host's (a deployment across the ring, for example) gets a name of its own.
    type: str
  content:
    description: The JSON object to write.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Record the restore of this host
  inferlab.distributed.fragment:
    dir: fragments/restore
    content:
      host: "{{ inventory_hostname }}"
      verified: true
"""

RETURN = r"""
path:
  description: The fragment written.
  returned: success
  type: str
  sample: /srv/runs/20261202T101500Z-experiment/fragments/restore/lab-a.json
"""

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: heartbeat_check
short_description: Fail when the heartbeat has not renewed every dead man's switch recently
version_added: 0.3.0
description:
  - Reads the status file of the controller's heartbeat (C(inferlab_ledger.py heartbeat --status-file)), which keeps
    per host the time of the last renewal its C(renew) process confirmed and the last error (a renew process that
    exited or could not start, with its last line of error output; a renew file that is gone).
  - Fails naming each host whose last confirmed renewal is older than O(within_s) (or that never renewed that long
    after the heartbeat's start, or never renewed and has an error), with its reason; and when the heartbeat itself
    stopped (with its reason, the playbook ended or the run's journal stalled) or is gone.
  - With O(wait_s), waits up to that long for what has not happened yet (the status of this run, each host's first
    renewal), failing at once on an error. Run right after the heartbeat starts, a refused host or a rejected host
    key fails the run in seconds, not at the switch's deadline.
  - An action plugin. It reads the file in the controller's Ansible process, whatever host the task runs for.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  action:
    support: full
    description: The check runs in the action plugin, on the controller.
  check_mode:
    support: full
    details: It only reads.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  status_file:
    description: The heartbeat's status file on the controller.
    type: path
    required: true
  run_id:
    description: The run whose heartbeat it must be (a status file of another run is not one yet).
    type: str
  within_s:
    description: Seconds within which every host's last renewal must have been confirmed (the experiment uses half
      the switch's deadline).
    type: float
    required: true
  wait_s:
    description: Seconds to wait for what has not happened yet; V(0) judges once.
    type: float
    default: 0
"""

EXAMPLES = r"""
- name: Check that every switch renewed within half its deadline
  inferlab.distributed.heartbeat_check:
    status_file: /var/lib/inferlab/run/heartbeat.json
    run_id: 20261202T101500Z-experiment
    within_s: 900
"""

RETURN = r"""
hosts:
  description: Per host, what the status file says (C(renewals), C(restarts), C(last_renewal), C(last_error),
    C(last_error_time); times in seconds since the epoch).
  returned: always
  type: dict
  sample: {"lab-a": {"renewals": 12, "restarts": 0, "last_renewal": 1764670500.2, "last_error": null,
           "last_error_time": null}}
problems:
  description: One C(HOST - reason) line per switch at risk, the host's name first (C(heartbeat) for the heartbeat
    itself), as the message lists them.
  returned: always
  type: list
  elements: str
"""

#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight_check
short_description: Assert a precondition, or note it for the site dry run and go on
version_added: 0.3.0
description:
  - Exactly M(ansible.builtin.assert) in a stage; the options are its own.
  - With the variable C(inferlab_preflight_collect) true (C(playbooks/preflight.yml), the site dry run), a condition
    that is false, or that cannot be evaluated, does not fail the task. Its message is appended, with the host and
    the task's name, to C(<inferlab_run_dir>/preflight/problems.jsonl) on the controller, and the play goes on; the
    dry run's last play lists every problem noted and fails when there is one.
  - So a stage's checks are written once, in its role, and both the stage and the dry run run them.
  - An action plugin; nothing reaches the host.
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
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  that:
    description: Conditions, as M(ansible.builtin.assert) takes them (raw Jinja2 expressions); all must be true.
    type: list
    elements: str
    required: true
  fail_msg:
    description:
      - What failed, as the project words it - what was expected, what was found, which variable to set.
    type: str
    aliases: [msg]
    default: Assertion failed
  success_msg:
    description: The message when every condition holds.
    type: str
    default: All assertions passed
  quiet:
    description: Print less, as M(ansible.builtin.assert)'s option.
    type: bool
    default: false
notes:
  - A problem is one JSON line, C({host, check, message}), written with one append; hosts that fail at once never
    interleave their lines.
"""

EXAMPLES = r"""
- name: Stop if iperf3 is missing
  inferlab.distributed.preflight_check:
    that: __link_test_iperf3.rc == 0
    fail_msg: >-
      Stop if iperf3 is missing on {{ inventory_hostname }}: expected an iperf3 binary on PATH, found none;
      install the Debian package iperf3
    quiet: true
"""

RETURN = r"""
preflight_problem:
  description: In a dry run, the problem noted (C(host), C(check), C(message)).
  returned: when a condition failed in a dry run
  type: dict
  sample: {host: lab-a, check: Stop if iperf3 is missing, message: "Stop if iperf3 is missing on lab-a: ..."}
"""

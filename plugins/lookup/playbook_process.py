# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: playbook_process
short_description: The ansible-playbook process running this play, by pid and start time
version_added: 0.1.0
description:
  - Returns C({pid, start_time}) of the nearest ancestor of the process evaluating the lookup (itself included) whose
    command line runs C(ansible-playbook), with its start time (field 22 of C(/proc/PID/stat)), so that a watcher can
    tell when that very process ends (a reused pid has another start time).
  - The experiment's heartbeat watches it, and stops renewing the dead man's switches when the playbook is gone.
  - Runs on the controller; Linux only (it reads procfs).
options:
  procfs_root:
    description: Where procfs is mounted.
    type: path
    default: /proc
author:
  - inferlab developers (@inferlab)
"""

EXAMPLES = r"""
- name: Show the playbook's process
  ansible.builtin.debug:
    msg: "{{ lookup('inferlab.distributed.playbook_process') }}"
"""

RETURN = r"""
_raw:
  description: One dict, C({pid, start_time}).
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc as proc

PROGRAM = 'ansible-playbook'


def runs_playbook(pid, procfs_root):
    argv = proc.read_proc_cmdline(pid, procfs_root) or []
    return any(os.path.basename(arg) == PROGRAM for arg in argv[:2])


def playbook_process(pid, procfs_root='/proc'):
    """``{pid, start_time}`` of the ansible-playbook process above ``pid``: the outermost of the nearest run of
    ancestors whose command line runs ansible-playbook (a worker forked by it carries the same command line)."""
    seen, found = [], None
    while pid and pid not in seen:
        seen.append(pid)
        info = proc.read_proc_stat(pid, procfs_root)
        if info is None:
            break
        if runs_playbook(pid, procfs_root):
            found = {'pid': pid, 'start_time': info['start_time']}
        elif found is not None:
            return found
        pid = info['ppid']
    if found is not None:
        return found
    raise AnsibleLookupError('no %s process among the ancestors of pid %s (%s): is this play run by ansible-playbook '
                             'on this machine?' % (PROGRAM, seen[0] if seen else pid, ' <- '.join(map(str, seen))))


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [playbook_process(os.getpid(), self.get_option('procfs_root'))]

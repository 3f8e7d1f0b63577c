# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of inferlab.distributed.fragment: the write happens on the controller, in this process.

It used to be a role (a directory task and a copy task, delegated to localhost, per fragment); as an action it is
one task that never reaches the host, which took a fifth of the staged experiment's tasks out of it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain
from ansible_collections.inferlab.distributed.plugins.plugin_utils._run_fragment import (
    FragmentError,
    write_fragment,
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True  # controller-side evidence: written in check mode too
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec={
            "dir": {"type": "str", "required": True},
            "name": {"type": "str"},
            "content": {"type": "dict", "required": True},
        })[1]
        name = args["name"] if args["name"] else task_vars.get("inventory_hostname")
        try:
            path = write_fragment(plain(task_vars.get("inferlab_run_dir") or ""), args["dir"], plain(name),
                                  plain(args["content"]))
        except (FragmentError, OSError) as exc:
            raise AnsibleActionFail("fragment %s/%s: %s" % (args["dir"], name, exc)) from exc
        # never reported as changed, so that idempotence checks stay meaningful
        result.update(changed=False, path=path)
        return result

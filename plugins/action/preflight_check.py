# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of inferlab.distributed.preflight_check: ansible.builtin.assert, except in a site dry run.

A stage's checks live once, in its role's tasks. The stage runs them and stops at the first problem; the site dry
run (playbooks/preflight.yml) runs the same tasks with inferlab_preflight_collect true, and a check that fails (or
cannot be evaluated) then notes its message in the run directory and lets the play go on, so that every problem of
every host is listed at once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain
from ansible_collections.inferlab.distributed.plugins.plugin_utils._preflight import PreflightError, note_problem

# `assert` is a keyword: the module cannot be named in an import statement
AssertAction = importlib.import_module("ansible.plugins.action.assert").ActionModule


class ActionModule(AssertAction):

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        # a play may set it from an expression (experiment.yml: ansible_check_mode), which task_vars hold untemplated
        collect = boolean(self._templar.template(task_vars.get("inferlab_preflight_collect", False)), strict=False)
        if not collect:
            return super().run(tmp, task_vars)
        try:
            result = super().run(tmp, task_vars)
        except AnsibleError as exc:  # a condition that cannot be evaluated, often because an earlier check failed
            result = {"failed": True, "msg": "not checked: %s" % (exc.message if hasattr(exc, "message") else exc)}
        if not result.get("failed"):
            return result
        message = result.get("msg")
        message = " ".join(message) if isinstance(message, list) else message
        try:
            problem = note_problem(plain(task_vars.get("inferlab_run_dir") or ""), task_vars.get("inventory_hostname"),
                                   self._task.get_name(), plain(message))
        except (PreflightError, OSError) as exc:
            raise AnsibleActionFail("preflight_check: %s" % exc) from exc
        return {"changed": False, "failed": False, "preflight_problem": problem,
                "msg": "noted for the preflight's report: %s" % problem["message"]}

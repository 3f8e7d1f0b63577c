# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Leave-one-out filters for the leave_one_out role: the plan of whole runs (every configuration once per round)
and the verdict per member (does the cluster's tok/s follow it).

Two filters live in this file, so each one's documentation is in a sidecar file named after it
(plugins/filter/<filter>.yml). The logic is in plugins/module_utils/_leave_one_out.py (standard library only); these
wrappers turn its errors into AnsibleFilterError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _leave_one_out
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def leave_one_out_plan(ring, left_out, rounds):
    """See plugins/filter/leave_one_out_plan.yml."""
    try:
        return _leave_one_out.leave_one_out_plan(plain(ring), plain(left_out), plain(rounds))
    except ValueError as exc:
        raise AnsibleFilterError("leave_one_out_plan: %s" % exc) from None


def leave_one_out_verdict(runs, figure, threshold):
    """See plugins/filter/leave_one_out_verdict.yml."""
    try:
        return _leave_one_out.leave_one_out_verdict(plain(runs), plain(figure), plain(threshold))
    except ValueError as exc:
        raise AnsibleFilterError("leave_one_out_verdict: %s" % exc) from None


class FilterModule(object):
    def filters(self):
        return {"leave_one_out_plan": leave_one_out_plan, "leave_one_out_verdict": leave_one_out_verdict}

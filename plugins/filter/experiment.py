# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The experiment_plan_problems, experiment_plan and experiment_plan_line filters: the staged experiment's plan,
checked and previewed.

Their DOCUMENTATION, EXAMPLES and RETURN are in the sidecar files experiment_plan_problems.yml, experiment_plan.yml
and experiment_plan_line.yml beside this file. The logic is in
plugins/plugin_utils/_experiment_plan.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _experiment_plan
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def experiment_plan_problems(selected, table, layer_values=None):
    return _experiment_plan.plan_problems(plain(selected), plain(table), plain(layer_values))


def experiment_plan(selected, table):
    return _experiment_plan.preview(plain(selected), plain(table))


def experiment_plan_line(row):
    return _experiment_plan.plan_line(plain(row))


class FilterModule(object):
    def filters(self):
        return {'experiment_plan_problems': experiment_plan_problems, 'experiment_plan': experiment_plan,
                'experiment_plan_line': experiment_plan_line}

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The preflight_problems filter: what a site dry run noted (playbooks/preflight.yml).

Its DOCUMENTATION, EXAMPLES and RETURN are in the sidecar file preflight_problems.yml beside this file. The logic is
in plugins/plugin_utils/_preflight.py, beside the note the action plugin preflight_check writes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _preflight
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def preflight_problems(run_dir):
    return _preflight.read_problems(plain(run_dir))


class FilterModule(object):
    def filters(self):
        return {'preflight_problems': preflight_problems}

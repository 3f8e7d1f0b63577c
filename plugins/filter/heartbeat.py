# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heartbeat_children filter: the renew processes of the experiment's heartbeat. Its DOCUMENTATION, EXAMPLES
and RETURN are in heartbeat_children.yml beside this file; the logic is in plugins/plugin_utils/_heartbeat_children.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _heartbeat_children
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def heartbeat_children(hosts):
    return _heartbeat_children.children(plain(hosts))


class FilterModule(object):
    def filters(self):
        return {'heartbeat_children': heartbeat_children}

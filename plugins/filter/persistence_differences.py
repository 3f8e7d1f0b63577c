# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The persistence_differences filter: how two persistence_snapshot results differ.

Its DOCUMENTATION, EXAMPLES and RETURN are in the sidecar file persistence_differences.yml beside it, where
ansible-doc finds them. The logic is in plugins/module_utils/_persistence_compare.py (standard library only, beside
_persistence.py, which the persistence_snapshot module runs); this wrapper turns its errors into AnsibleFilterError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _persistence, _persistence_compare
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def persistence_differences(before, after):
    """``{differences, taint: {before, after, note}, problems}`` between two persistence snapshots."""
    try:
        return _persistence_compare.compare(plain(before), plain(after))
    except _persistence.PersistenceError as exc:
        raise AnsibleFilterError('persistence_differences: %s' % exc) from exc


class FilterModule(object):
    def filters(self):
        return {'persistence_differences': persistence_differences}

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tp_wire_overhead filter: a served mode's link bytes against what its TP all-reduces must move. Its
DOCUMENTATION, EXAMPLES and RETURN are in tp_wire_overhead.yml beside this file; the logic is
plugins/module_utils/_nccl.py's batches_wire_overhead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _nccl
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def tp_wire_overhead(batches, model_config, tp_size, observed_bytes_sent, verify_width=None):
    try:
        return _nccl.batches_wire_overhead(plain(batches), plain(model_config), int(tp_size),
                                           plain(observed_bytes_sent),
                                           None if verify_width is None else int(verify_width))
    except (_nccl.NcclInputError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('tp_wire_overhead: %s' % exc) from exc


class FilterModule(object):
    def filters(self):
        return {'tp_wire_overhead': tp_wire_overhead}

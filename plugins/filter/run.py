# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run_id filter: the id of the run that a ledger entry, a lock or a counter window carries. Its DOCUMENTATION,
EXAMPLES and RETURN are in run_id.yml beside this file. Every role derives the id here, so that the run that holds a
host's lock is never refused by its own records (the staged experiment locks every host for its whole length)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath


def run_id(run_dir, given=''):
    if given:
        return str(given)
    return posixpath.basename(str(run_dir or '').rstrip('/'))


class FilterModule(object):
    def filters(self):
        return {'run_id': run_id}

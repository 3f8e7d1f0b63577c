# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The options of the modules that record their change in the host's change ledger before making it
    (plugins/module_utils/_ledger_core.py): whose ledger, where, and the run. A module whose option means more
    (required in one state only) documents it itself: ansible-core merges each option's keys, the module's over the
    fragment's, so such a module sets C(required: false) itself."""

    DOCUMENTATION = r"""
options:
  ledger_dir:
    description:
      - The host's ledger directory, C(<inferlab_state_dir>/ledger).
    type: path
    required: true
  ledger_host:
    description:
      - Whose ledger (the file C(<ledger_dir>/<ledger_host>.jsonl)), the inventory name, usually
        C(inventory_hostname).
    type: str
    required: true
  run_id:
    description:
      - The run, stamped into the ledger lines (the filter P(inferlab.distributed.run_id#filter) derives it); a
        change fails when another run holds the ledger's lock.
    type: str
"""

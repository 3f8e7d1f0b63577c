# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side helper shared by the filter plugins."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping


def plain(value):
    """Ansible's lazy mappings, lists and tagged strings as plain dicts, lists and str.

    The module_utils behind the filters are standard library only and check for exactly those types, so every
    filter hands them its arguments through this.
    """
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value

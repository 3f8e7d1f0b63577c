# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang launch filters: sglang_launch_argv, sglang_launch_environment, sglang_spec_problems.

Several filters live in this file, so each one's DOCUMENTATION, EXAMPLES and RETURN are in a sidecar file named
after it (plugins/filter/<filter>.yml), where ansible-doc finds them. The logic is in
plugins/plugin_utils/_sglang_launch.py (standard library only); these wrappers turn its SpecError into
AnsibleFilterError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _sglang_launch
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def _call(name, function, *args):
    try:
        return function(*[plain(arg) for arg in args])
    except _sglang_launch.SpecError as exc:
        raise AnsibleFilterError("%s: malformed SGLang rank spec: %s" % (name, exc)) from None


def sglang_launch_argv(spec):
    """See plugins/filter/sglang_launch_argv.yml."""
    return _call("sglang_launch_argv", _sglang_launch.launch_argv, spec)


def sglang_launch_environment(spec):
    """See plugins/filter/sglang_launch_environment.yml."""
    return _call("sglang_launch_environment", _sglang_launch.launch_environment, spec)


def sglang_spec_problems(spec, ring=None):
    """See plugins/filter/sglang_spec_problems.yml."""
    return _call("sglang_spec_problems", _sglang_launch.spec_problems, spec, ring)


class FilterModule(object):
    """inferlab SGLang launch filters."""

    def filters(self):
        return {
            "sglang_launch_argv": sglang_launch_argv,
            "sglang_launch_environment": sglang_launch_environment,
            "sglang_spec_problems": sglang_spec_problems,
        }

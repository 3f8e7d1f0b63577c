# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llama.cpp RPC ring filters: llamacpp_rpc_server_argv, llamacpp_server_argv, llamacpp_spec_problems (the launch) and
llamacpp_metrics_delta (what the server counted in a window).

Several filters live in this file, so each one's DOCUMENTATION, EXAMPLES and RETURN are in a sidecar file named
after it (plugins/filter/<filter>.yml). The logic is in plugins/plugin_utils/_llamacpp_launch.py (standard library
only); these wrappers turn its SpecError into AnsibleFilterError. The metrics are parsed by
plugins/module_utils/_llamacpp.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import _llamacpp
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _llamacpp_launch
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def _call(name, function, *args):
    try:
        return function(*[plain(arg) for arg in args])
    except _llamacpp_launch.SpecError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc)) from None


def llamacpp_rpc_server_argv(spec):
    """See plugins/filter/llamacpp_rpc_server_argv.yml."""
    return _call("llamacpp_rpc_server_argv", _llamacpp_launch.rpc_server_argv, spec)


def llamacpp_server_argv(spec):
    """See plugins/filter/llamacpp_server_argv.yml."""
    return _call("llamacpp_server_argv", _llamacpp_launch.server_argv, spec)


def llamacpp_spec_problems(spec, kind):
    """See plugins/filter/llamacpp_spec_problems.yml."""
    return _call("llamacpp_spec_problems", _llamacpp_launch.spec_problems, spec, kind)


def llamacpp_metrics_delta(before, after):
    """See plugins/filter/llamacpp_metrics_delta.yml."""
    if not isinstance(before, str) or not isinstance(after, str):
        return {"problems": ["the window's /metrics were not both read (the server did not answer)"]}
    try:
        return _llamacpp.metrics_delta(_llamacpp.parse_metrics(before), _llamacpp.parse_metrics(after))
    except _llamacpp.MetricsError as exc:
        return {"problems": ["/metrics could not be read: %s" % exc]}


class FilterModule(object):
    """inferlab llama.cpp launch filters."""

    def filters(self):
        return {
            "llamacpp_rpc_server_argv": llamacpp_rpc_server_argv,
            "llamacpp_server_argv": llamacpp_server_argv,
            "llamacpp_spec_problems": llamacpp_spec_problems,
            "llamacpp_metrics_delta": llamacpp_metrics_delta,
        }

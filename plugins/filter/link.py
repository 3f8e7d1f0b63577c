# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Link test filters: iperf3 and ping summaries, the asymmetry and flow-sweep verdicts, the A/B condition table, and
the day-one pair matrix (its schedule and its verdict per host), and the elimination ladder for a suspect (its runs and
its verdict per step).

Several filters live in this file, so each one's DOCUMENTATION, EXAMPLES and RETURN are in a sidecar file named
after it (plugins/filter/<filter>.yml), as ansible-core does for its own filters; ansible-doc reads those. The logic
is in plugins/plugin_utils/_iperf3.py and _link_verdict.py (standard library only); these wrappers turn their
ValueErrors into AnsibleFilterError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _link_verdict,
    _pair_schedule,
    _pair_verdict,
    _suspect_ladder,
)
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _iperf3
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain


def _registered_stdout(value, name):
    """Accept a registered command result (a dict with stdout) as well as the text itself.

    iperf3's own report has no top-level stdout, so a mapping with one is a registered result.
    """
    if isinstance(value, Mapping) and "stdout" in value:
        stdout = value.get("stdout")
        if not stdout:
            how = ("failed with rc %s" % value.get("rc")) if value.get("rc") else "exited 0"
            raise AnsibleFilterError("%s: the command %s and printed nothing on stdout; stderr: %s"
                                     % (name, how, (value.get("stderr") or "").strip()[-300:] or "(empty)"))
        return stdout
    return value


def _call(name, function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc)) from None


def iperf3_summary(result):
    """See plugins/filter/iperf3_summary.yml."""
    result = plain(_registered_stdout(result, "iperf3_summary"))
    return _call("iperf3_summary", _iperf3.iperf3_summary, result)


def asymmetry_verdict(a_to_b, b_to_a, host_a, host_b, threshold=_link_verdict.DEFAULT_THRESHOLD, control=None):
    """See plugins/filter/asymmetry_verdict.yml."""
    return _call("asymmetry_verdict", _link_verdict.asymmetry_verdict, a_to_b, b_to_a, host_a, host_b,
                 threshold=threshold, control=plain(control))


def flow_limit(by_flows, threshold=_link_verdict.DEFAULT_THRESHOLD):
    """See plugins/filter/flow_limit.yml."""
    return _call("flow_limit", _link_verdict.flow_limit, plain(by_flows), threshold=threshold)


def ping_summary(stdout):
    """See plugins/filter/ping_summary.yml."""
    return _call("ping_summary", _link_verdict.ping_summary, _registered_stdout(stdout, "ping_summary"))


def link_condition_table(runs, metrics=None):
    """See plugins/filter/link_condition_table.yml."""
    return _call("link_condition_table", _link_verdict.link_condition_table, plain(runs), metrics=plain(metrics))


def pair_schedule(hosts, concurrency=None):
    """See plugins/filter/pair_schedule.yml."""
    return _call("pair_schedule", _pair_schedule.pair_schedule, plain(hosts), concurrency=plain(concurrency))


def pair_host_verdicts(tests, hosts, threshold=_link_verdict.DEFAULT_THRESHOLD):
    """See plugins/filter/pair_host_verdicts.yml."""
    return _call("pair_host_verdicts", _pair_verdict.pair_host_verdicts, plain(tests), plain(hosts),
                 threshold=threshold)


def suspect_ladder_runs(settings):
    """See plugins/filter/suspect_ladder_runs.yml."""
    return _call("suspect_ladder_runs", _suspect_ladder.ladder_runs, plain(settings))


def suspect_ladder_verdict(results, hosts, settings, threshold=_link_verdict.DEFAULT_THRESHOLD):
    """See plugins/filter/suspect_ladder_verdict.yml."""
    return _call("suspect_ladder_verdict", _suspect_ladder.ladder_verdict, plain(results), plain(hosts),
                 plain(settings), threshold)


class FilterModule(object):
    """inferlab link test filters."""

    def filters(self):
        return {
            "iperf3_summary": iperf3_summary,
            "asymmetry_verdict": asymmetry_verdict,
            "flow_limit": flow_limit,
            "ping_summary": ping_summary,
            "link_condition_table": link_condition_table,
            "pair_schedule": pair_schedule,
            "pair_host_verdicts": pair_host_verdicts,
            "suspect_ladder_runs": suspect_ladder_runs,
            "suspect_ladder_verdict": suspect_ladder_verdict,
        }

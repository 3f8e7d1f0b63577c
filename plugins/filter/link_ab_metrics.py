# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Flatten one link test suite's result into the metrics the A/B comparison table sets side by side."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: link_ab_metrics
short_description: The comparable metrics of one link test suite, flat
version_added: 0.1.0
author: inferlab developers (@inferlab)
description:
  - From a C(link_test_result) fragment, per direction (C(a_to_b), C(b_to_a)) and per host, the numbers an A/B
    comparison sets side by side, each named by what it is.
  - Throughput is the bidirectional test's receiver-side rate in Gb/s; retransmissions are iperf3's own count and the
    host's C(RetransSegs) delta and its share of segments sent; receiver errors are the sum of the crc, over, missed
    and length counters in the test's window; probes give loss and p50/p99 round-trip times.
  - A metric the suite did not measure is null, so the table counts it as missing, never as zero.
options:
  _input:
    description: One link test result (the fragment link_test writes).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: One row of the A/B table
  ansible.builtin.set_fact:
    row: {condition: stock, repetition: 1, metrics: "{{ link_test_result | inferlab.distributed.link_ab_metrics }}"}
"""

RETURN = r"""
_value:
  description: Metric name to number (or null).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils._net_counters import RX_ERROR_COUNTERS


def _sum(values):
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _gbps(bps):
    return None if bps is None else round(bps / 1e9, 3)


def link_ab_metrics(result):
    if not isinstance(result, dict) or "tests" not in result or "pair" not in result:
        raise AnsibleFilterError("link_ab_metrics expects a link test result (with pair and tests)")
    pair, tests = result["pair"], result["tests"]
    hosts = {"a": pair["a"], "b": pair["b"]}
    metrics = {}
    asymmetry = tests.get("asymmetry") or {}
    retransmits = asymmetry.get("iperf3_retransmits") or {}
    for direction in ("a_to_b", "b_to_a"):
        metrics["%s_gbps" % direction] = _gbps(asymmetry.get("%s_bps" % direction))
        metrics["%s_iperf3_retransmits" % direction] = retransmits.get(direction)
    for test_name in ("asymmetry", "probes"):
        counters = (tests.get(test_name) or {}).get("host_counters") or {}
        for key, host in hosts.items():
            host_counters = counters.get(host) or {}
            prefix = "%s_%s" % (test_name, key)
            metrics["%s_tcp_retrans" % prefix] = host_counters.get("RetransSegs")
            metrics["%s_tcp_retrans_pct" % prefix] = host_counters.get("retrans_pct")
            rx_errors = [host_counters.get(k) for k in RX_ERROR_COUNTERS] if host_counters else []
            metrics["%s_rx_errors" % prefix] = _sum(rx_errors) if host_counters else None
    for test_name in ("probes", "loaded_probes"):
        for direction in ("a_to_b", "b_to_a"):
            probe = (tests.get(test_name) or {}).get(direction) or {}
            prefix = "%s_%s" % (test_name, direction)
            metrics["%s_loss_pct" % prefix] = probe.get("loss_pct")
            metrics["%s_p50_ms" % prefix] = probe.get("p50_ms")
            metrics["%s_p99_ms" % prefix] = probe.get("p99_ms")
    return metrics


class FilterModule(object):
    def filters(self):
        return {"link_ab_metrics": link_ab_metrics}

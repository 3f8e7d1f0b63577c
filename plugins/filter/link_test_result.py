# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Assemble the link_test role's results: per-test figures, per-host window deltas side by side, and verdicts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: link_test_result
short_description: Assemble a link test suite's results and verdicts
version_added: 0.1.0
author: inferlab developers (@inferlab)
description:
  - Turns what the link_test role collected (iperf3 summaries, ping summaries, counter window results of both hosts)
    into the suite's record fragment, with the asymmetry verdict, the flow sweep's characterisation of a weak
    direction, and per-host counter deltas attached to every test.
  - Directions are named from the first ring host (C(a), the iperf3 client) to the second (C(b), the server).
options:
  _input:
    description:
      - "A dict with C(a), C(b), C(interface), C(addresses) (C(a), C(b)), C(driver_layer), C(started), C(finished),
        C(thresholds) (C(asymmetry), C(flow)), C(results) (per test, per run: iperf3_summary results; the soak's
        runs as C(rc), C(stdout) and C(stderr), parsed here one at a time), C(pings) and C(windows) (per host, per
        test), and for a soak C(soak) (C(duration_s), C(interval_s), C(probe_s))."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Judge the link tests
  ansible.builtin.set_fact:
    result: "{{ inputs | inferlab.distributed.link_test_result }}"
"""

RETURN = r"""
_value:
  description: The fragment written under C(fragments/link_test/<a>.json); see record.schema.json C($defs/link_test).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import (
    LinkVerdictError,
    asymmetry_verdict,
    flow_limit,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._net_counters import RX_ERROR_COUNTERS
from ansible_collections.inferlab.distributed.plugins.plugin_utils._iperf3 import Iperf3ParseError, iperf3_summary

# Counters of each host's window shown beside every test: TCP retransmissions and the receiver-error family.
TCP_COUNTERS = ("RetransSegs", "OutSegs")
TCP_EXT_COUNTERS = ("TCPLostRetransmit", "TCPTimeouts")
LINK_COUNTERS = RX_ERROR_COUNTERS + ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped", "rx_packets", "tx_packets",
                                     "carrier_changes")
# The link events (the link_events filter's kinds) that mean the link itself went away for a moment.
FLAP_EVENTS = ("carrier", "gone", "back", "counters_reset")


def _host_counters(window, interface):
    """The counters of one host's window that matter next to a test result (None when not measured)."""
    window = window or {}
    link = (window.get("interfaces") or {}).get(interface) or {}
    counters = dict((k, (window.get("tcp") or {}).get(k)) for k in TCP_COUNTERS)
    counters.update((k, (window.get("tcp_ext") or {}).get(k)) for k in TCP_EXT_COUNTERS)
    counters.update((k, link.get(k)) for k in LINK_COUNTERS)
    retrans, out = counters["RetransSegs"], counters["OutSegs"]
    # retransmitted segments as a share of segments sent: comparable across runs of different throughput
    counters["retrans_pct"] = round(100.0 * retrans / out, 3) if isinstance(retrans, int) and out else None
    counters["resets"] = list(window.get("resets") or [])
    counters["link_retrained"] = window.get("link_retrained")
    return counters


def _receiver_bps(summary, direction):
    part = (summary or {}).get(direction) or {}
    return part.get("receiver_bps")


def _retransmits(summary, direction):
    part = (summary or {}).get(direction) or {}
    return part.get("retransmits")


def _side_by_side(forward, reverse):
    """Each direction alone: the a -> b run's intervals beside the b -> a run's (-R), second by second (as many as
    the shorter run has)."""
    rows = []
    ahead_rows, back_rows = (forward or {}).get("intervals") or [], (reverse or {}).get("intervals") or []
    for ahead, back in zip(ahead_rows, back_rows, strict=False):
        rows.append(dict(ahead, reverse_bps=back.get("reverse_bps"),
                         omitted=bool(ahead.get("omitted") or back.get("omitted"))))
    return rows


def link_test_result(inputs):
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("link_test_result expects a dict, got %s" % type(inputs).__name__)
    try:
        return _assemble(inputs)
    except LinkVerdictError as exc:
        raise AnsibleFilterError("link_test_result: %s" % exc) from exc
    except KeyError as exc:
        raise AnsibleFilterError("link_test_result: missing input %s" % exc) from exc


def _assemble(inputs):
    a, b, interface = inputs["a"], inputs["b"], inputs["interface"]
    results, pings, windows = inputs.get("results") or {}, inputs.get("pings") or {}, inputs.get("windows") or {}
    thresholds = inputs["thresholds"]

    def counters(test):
        return {a: _host_counters((windows.get("a") or {}).get(test), interface),
                b: _host_counters((windows.get("b") or {}).get(test), interface)}

    tests, verdicts = {}, {}
    weak = None
    if "asymmetry" in results:
        runs = results["asymmetry"]
        # --bidir: one run, both directions at once; iperf3 before 3.16 (one thread for both): each direction alone,
        # a_to_b as sent and b_to_a with -R (iperf3_summary reports that under `reverse`)
        together = "bidir" in runs
        forward, reverse = (runs["bidir"], runs["bidir"]) if together else (runs["a_to_b"], runs["b_to_a"])
        a_to_b, b_to_a = _receiver_bps(forward, "forward"), _receiver_bps(reverse, "reverse")
        verdict = asymmetry_verdict(a_to_b, b_to_a, a, b, threshold=thresholds["asymmetry"])
        weak = verdict.get("weak_direction")
        tests["asymmetry"] = {
            "a_to_b_bps": a_to_b, "b_to_a_bps": b_to_a,
            "mode": "bidir" if together else "each direction alone",
            "iperf3_version": inputs.get("iperf3_version"),
            "iperf3_retransmits": {"a_to_b": _retransmits(forward, "forward"),
                                   "b_to_a": _retransmits(reverse, "reverse")},
            "host_counters": counters("asymmetry"),
            "verdict": verdict,
            "intervals": (forward.get("intervals") or []) if together else _side_by_side(forward, reverse),
        }
        verdicts["asymmetry"] = verdict["text"] if together else (
            "%s (each direction alone: iperf3 %s runs --bidir in one thread)" % (verdict["text"],
                                                                                 inputs.get("iperf3_version")))
    if "flow_sweep" in results:
        runs = results["flow_sweep"]
        sweep = {"a_to_b": {}, "b_to_a": {}}
        for name, summary in runs.items():
            direction, _sep, flows = name.rpartition("_")
            # -R runs measure server -> client only, which iperf3_summary reports under `reverse`.
            sweep[direction][flows] = _receiver_bps(summary, "reverse" if direction == "b_to_a" else "forward")
        limits = dict((d, flow_limit(sweep[d], threshold=thresholds["flow"])) for d in ("a_to_b", "b_to_a"))
        tests["flow_sweep"] = dict(sweep, limits=limits, host_counters=counters("flow_sweep"))
        if weak:
            key = "a_to_b" if weak.get("from") == a else "b_to_a"
            verdicts["flow_sweep"] = "%s -> %s (the weak direction): %s" % (
                weak["from"], weak["to"], limits[key]["text"])
        elif "asymmetry" in results:
            verdicts["flow_sweep"] = "no weak direction to characterise"
    if "window" in results:
        summary = results["window"]["a_to_b"]
        tests["window"] = {"window_bytes": inputs.get("window_bytes"), "a_to_b_bps": _receiver_bps(summary, "forward"),
                           "iperf3_retransmits": _retransmits(summary, "forward"), "host_counters": counters("window")}
    for test in ("probes", "loaded_probes"):
        a_probe, b_probe = (pings.get("a") or {}).get(test), (pings.get("b") or {}).get(test)
        if a_probe is None and b_probe is None:
            continue
        tests[test] = {"a_to_b": a_probe, "b_to_a": b_probe, "host_counters": counters(test)}
        if test == "loaded_probes" and (results.get("loaded_probes") or {}).get("load"):
            load = results["loaded_probes"]["load"]
            tests[test]["load"] = {"a_to_b_bps": _receiver_bps(load, "forward"),
                                   "b_to_a_bps": _receiver_bps(load, "reverse")}
        verdicts[test] = "; ".join(
            "%s -> %s: %s%% loss, p50 %s ms, p99 %s ms" % (src, dst, p["loss_pct"], p["p50_ms"], p["p99_ms"])
            for src, dst, p in ((a, b, a_probe), (b, a, b_probe)) if p)

    if "soak" in results:
        tests["soak"] = _soak(results["soak"], inputs.get("soak") or {}, windows, a, b)
        tests["soak"]["host_counters"] = counters("soak")
        verdicts["soak"] = tests["soak"]["text"]

    driver_layer = inputs.get("driver_layer") or "kernel"
    return {
        "pair": {"a": a, "b": b, "interface": interface,
                 "a_address": inputs["addresses"]["a"], "b_address": inputs["addresses"]["b"]},
        "driver_layer": driver_layer,
        "transport_label": "emulated" if driver_layer == "emulated" else "kernel",
        "started": inputs["started"],
        "finished": inputs["finished"],
        "tests": tests,
        "verdicts": verdicts,
    }


def _soak_probe(index, name, run):
    """One soak probe from its command result: rates both ways, or the reason it has none."""
    probe = {"name": name, "index": index, "started_at": None, "ok": False, "error": None,
             "a_to_b_bps": None, "b_to_a_bps": None, "retransmits": {"a_to_b": None, "b_to_a": None}}
    run = run or {}
    stdout = run.get("stdout") or ""
    if not stdout.strip().startswith("{"):
        probe["error"] = "no iperf3 report (exit %s): %s" % (run.get("rc"), (run.get("stderr") or "").strip())
        return probe
    try:
        summary = iperf3_summary(stdout)
    except Iperf3ParseError as exc:
        probe["error"] = "the iperf3 report could not be read (exit %s): %s" % (run.get("rc"), exc)
        return probe
    probe.update(started_at=summary.get("started_at"), ok=summary["ok"], error=summary["error"],
                 a_to_b_bps=_receiver_bps(summary, "forward"), b_to_a_bps=_receiver_bps(summary, "reverse"),
                 retransmits={"a_to_b": _retransmits(summary, "forward"), "b_to_a": _retransmits(summary, "reverse")})
    return probe


def _soak(runs, settings, windows, a, b):
    """The soak: its probes in order, each host's link events from the soak's window, and a sentence."""
    probes = [_soak_probe(index, name, runs[name]) for index, name in enumerate(sorted(runs))]
    events = dict((host, list((((windows.get(side) or {}).get("soak") or {}).get("link_events")) or []))
                  for side, host in (("a", a), ("b", b)))
    flaps = dict((host, sum(1 for e in host_events if e.get("kind") in FLAP_EVENTS))
                 for host, host_events in events.items())
    failed = sum(1 for p in probes if not p["ok"])
    rates = sorted(p[d] for p in probes if p["ok"] for d in ("a_to_b_bps", "b_to_a_bps") if p[d] is not None)
    text = "%d probe(s) every %s s over %s s, %d failed; link events: %s" % (
        len(probes), settings.get("interval_s"), settings.get("duration_s"), failed,
        ", ".join("%d on %s" % (flaps[host], host) for host in (a, b)))
    if rates:
        text += "; slowest direction of a probe %.2f Gb/s, fastest %.2f Gb/s" % (rates[0] / 1e9, rates[-1] / 1e9)
    return {"duration_s": settings.get("duration_s"), "interval_s": settings.get("interval_s"),
            "probe_s": settings.get("probe_s"), "probes": probes, "failed_probes": failed,
            "events": events, "link_flaps": flaps, "text": text}


class FilterModule(object):
    def filters(self):
        return {"link_test_result": link_test_result}

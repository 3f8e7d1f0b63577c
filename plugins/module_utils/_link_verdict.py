# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge link measurements: direction asymmetry, the flow sweep, ping statistics, and the A/B condition table.

Every verdict says what was observed, never why: elimination yields a theory, not a diagnosis. Ratios are rounded
to two decimals and the rounded ratio is what is compared with the threshold, so the text a person reads never
contradicts the verdict; a ratio exactly at the threshold counts as the finding (asymmetric, per-flow limit).

Standard library only, Python 3.8+ syntax: this file may run on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from fractions import Fraction

from ansible_collections.inferlab.distributed.plugins.module_utils._ping import parse_ping

DEFAULT_THRESHOLD = 1.5


class LinkVerdictError(ValueError):
    """The input cannot be judged (wrong type, negative throughput, bad threshold, ...)."""


# --- helpers -----------------------------------------------------------------------------------------------------

def _is_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _rate(value, what):
    """A throughput in bit/s: a non-negative number, a numeric string, or None (not measured)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise LinkVerdictError("%s must be a throughput in bit/s, got %r" % (what, value)) from None
    if not _is_number(value) or math.isnan(value) or math.isinf(value):
        raise LinkVerdictError("%s must be a throughput in bit/s, got %r" % (what, value))
    if value < 0:
        raise LinkVerdictError("%s must not be negative, got %r" % (what, value))
    return float(value)


def _threshold(value):
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise LinkVerdictError("threshold must be a number above 1, got %r" % (value,)) from None
    if not _is_number(value) or math.isnan(value) or math.isinf(value) or value <= 1:
        raise LinkVerdictError("threshold must be a number above 1 (a strong/weak ratio), got %r" % (value,))
    return float(value)


def _host(value, what):
    if not isinstance(value, str) or not value:
        raise LinkVerdictError("%s must be a non-empty host name, got %r" % (what, value))
    return value


def _ratio(strong, weak):
    return round(strong / weak, 2)


def format_bps(bps):
    """``9300000000.0`` -> ``'9.30 Gbit/s'``; None -> ``'not measured'``."""
    if bps is None:
        return "not measured"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return "%.2f %s" % (bps / scale, unit)
    return "%g bit/s" % bps


def _fmt_threshold(threshold):
    return "%gx" % threshold


def _arrow(source, target):
    return "%s -> %s" % (source, target)


# --- asymmetry ---------------------------------------------------------------------------------------------------

def _control_check(path, measured, measured_bps, reference, reference_bps, threshold):
    """Compare a suspect path with an exonerated one, both seen from the control host over its own links."""
    check = {
        "path": path,
        "measured": measured,
        "measured_bps": measured_bps,
        "reference": reference,
        "reference_bps": reference_bps,
        "ratio": None,
        "weak": None,
    }
    if not measured_bps or not reference_bps:
        return check
    check["ratio"] = _ratio(max(measured_bps, reference_bps), min(measured_bps, reference_bps))
    check["weak"] = measured_bps < reference_bps and check["ratio"] >= threshold
    return check


def _control_data(control, host_a, host_b):
    if not isinstance(control, dict):
        raise LinkVerdictError("control must be a dict {host: C, to: {%s: {tx_bps, rx_bps}, %s: {...}}}, got %s"
                               % (host_a, host_b, type(control).__name__))
    host_c = _host(control.get("host"), "control.host")
    if host_c in (host_a, host_b):
        raise LinkVerdictError("control.host must be a third host, not one of the pair: %s" % host_c)
    to = control.get("to")
    if not isinstance(to, dict):
        raise LinkVerdictError("control.to must be a dict keyed by %s and %s, got %s"
                               % (host_a, host_b, type(to).__name__))
    missing = [host for host in (host_a, host_b) if host not in to]
    if missing:
        raise LinkVerdictError("control.to must have an entry for %s and %s, missing %s (found %s)"
                               % (host_a, host_b, ", ".join(missing), sorted(str(k) for k in to)))
    rates = {}
    for host in (host_a, host_b):
        entry = to[host]
        if not isinstance(entry, dict):
            raise LinkVerdictError("control.to.%s must be a dict {tx_bps, rx_bps}, got %s"
                                   % (host, type(entry).__name__))
        rates[host] = {
            # tx_bps: the control host transmits to `host` (C -> host): host's receive path.
            # rx_bps: the control host receives from `host` (host -> C): host's transmit path.
            "tx": _rate(entry.get("tx_bps"), "control.to.%s.tx_bps" % host),
            "rx": _rate(entry.get("rx_bps"), "control.to.%s.rx_bps" % host),
        }
    return host_c, rates


def _narrow(host_c, rates, weak_from, weak_to, threshold):
    """Use the control host's results to narrow which end of the weak direction is the one observed weak.

    The weak direction weak_from -> weak_to implicates weak_from's transmit path and weak_to's receive path; the
    strong direction exonerates weak_to's transmit and weak_from's receive. From the control host C:
    - weak_from's transmit (weak_from -> C) is compared with weak_to's transmit (weak_to -> C): C's receive is common;
    - weak_to's receive (C -> weak_to) is compared with weak_from's receive (C -> weak_from): C's transmit is common.
    A path is weak from C when the reference is faster by at least the threshold. A path C found fine is dropped
    from possible_ends; a path C could not judge (a 0 or missing result) stays.
    """
    checks = [
        _control_check("%s's transmit path" % weak_from, _arrow(weak_from, host_c), rates[weak_from]["rx"],
                       _arrow(weak_to, host_c), rates[weak_to]["rx"], threshold),
        _control_check("%s's receive path" % weak_to, _arrow(host_c, weak_to), rates[weak_to]["tx"],
                       _arrow(host_c, weak_from), rates[weak_from]["tx"], threshold),
    ]
    weak = [c for c in checks if c["weak"] is True]
    unknown = [c for c in checks if c["weak"] is None]
    fine = [c for c in checks if c["weak"] is False]
    if not weak and not unknown:
        ends = [c["path"] for c in checks]
        text = "%s; control host %s could not reproduce it (both look fine from %s)" % (
            " or ".join(ends), host_c, host_c)
    else:
        ends = [c["path"] for c in checks if c["weak"] is not False]
        parts = []
        if len(weak) == 2:
            parts.append("%s (both observed from control host %s)" % (" and ".join(c["path"] for c in weak), host_c))
        elif weak:
            parts.append("%s (observed from control host %s)" % (weak[0]["path"], host_c))
        parts.extend("%s (control host %s could not judge it: no traffic measured on %s or %s)"
                     % (c["path"], host_c, c["measured"], c["reference"]) for c in unknown)
        text = " or ".join(parts)
        if fine:
            text += "; %s looks fine from control host %s" % (fine[0]["path"], host_c)
    return ends, {"host": host_c, "checks": checks, "text": text}


def asymmetry_verdict(a_to_b, b_to_a, host_a, host_b, threshold=DEFAULT_THRESHOLD, control=None):
    """Judge the two directions of a link (receiver-side throughput in bit/s) for asymmetry.

    Returns ``{verdict, ratio, threshold, weak_direction, possible_ends, unmeasured, control, a_to_b_bps,
    b_to_a_bps, text}``; ``verdict`` is ``symmetric``, ``asymmetric`` or ``no traffic`` (a direction is None or 0:
    nothing to compare, re-run the test). ``ratio`` is strong/weak rounded to two decimals; ``ratio >= threshold``
    is asymmetric. Two hosts cannot tell the ends of the weak direction apart, so ``possible_ends`` names the
    sender's transmit path and the receiver's receive path; ``control`` (``{host: C, to: {A: {tx_bps, rx_bps},
    B: {...}}}``, tx = C -> end, rx = end -> C) may narrow it, see ``_narrow``; it is validated always but only
    used for an asymmetric verdict (``control`` in the result is None otherwise).
    """
    host_a = _host(host_a, "host_a")
    host_b = _host(host_b, "host_b")
    if host_a == host_b:
        raise LinkVerdictError("host_a and host_b must differ, both are %s" % host_a)
    threshold = _threshold(threshold)
    ab = _rate(a_to_b, "a_to_b (%s)" % _arrow(host_a, host_b))
    ba = _rate(b_to_a, "b_to_a (%s)" % _arrow(host_b, host_a))
    control_rates = None if control is None else _control_data(control, host_a, host_b)
    result = {
        "verdict": None,
        "ratio": None,
        "threshold": threshold,
        "weak_direction": None,
        "possible_ends": [],
        "unmeasured": [],
        "control": None,
        "a_to_b_bps": ab,
        "b_to_a_bps": ba,
        "text": "",
    }
    directions = ((host_a, host_b, ab), (host_b, host_a, ba))
    unmeasured = [(src, dst, bps) for src, dst, bps in directions if not bps]
    if unmeasured:
        result["verdict"] = "no traffic"
        result["unmeasured"] = [_arrow(src, dst) for src, dst, dummy in unmeasured]
        result["text"] = "no traffic measured %s; symmetry not judged, re-run the test" % ", ".join(
            "%s (%s)" % (_arrow(src, dst), "0 bit/s" if bps == 0 else "no result") for src, dst, bps in unmeasured)
        return result

    ratio = _ratio(max(ab, ba), min(ab, ba))
    result["ratio"] = ratio
    limits = "ratio %.2fx, threshold %s" % (ratio, _fmt_threshold(threshold))
    if ratio < threshold:
        result["verdict"] = "symmetric"
        result["text"] = "symmetric (%s)" % limits
        return result

    weak_from, weak_to = (host_a, host_b) if ab < ba else (host_b, host_a)
    result["verdict"] = "asymmetric"
    result["weak_direction"] = {"from": weak_from, "to": weak_to}
    ends = ["%s's transmit path" % weak_from, "%s's receive path" % weak_to]
    ends_text = " or ".join(ends)
    if control_rates is not None:
        ends, result["control"] = _narrow(control_rates[0], control_rates[1], weak_from, weak_to, threshold)
        ends_text = result["control"]["text"]
    result["possible_ends"] = ends
    result["text"] = "asymmetric: %s is weak (%s); observed, cause not determined: %s" % (
        _arrow(weak_from, weak_to), limits, ends_text)
    return result


# --- flow sweep --------------------------------------------------------------------------------------------------

def _flows(key):
    if isinstance(key, bool):
        raise LinkVerdictError("flow counts must be positive integers, got %r" % (key,))
    if isinstance(key, str):
        key = key.strip()
        if not key.isdigit():
            raise LinkVerdictError("flow counts must be positive integers, got %r" % (key,))
        key = int(key)
    if isinstance(key, float) and key.is_integer():
        key = int(key)
    if not isinstance(key, int) or key < 1:
        raise LinkVerdictError("flow counts must be positive integers, got %r" % (key,))
    return key


def flow_limit(by_flows, threshold=DEFAULT_THRESHOLD):
    """Characterise a weak direction by its flow sweep: ``{1: bps, 2: bps, 4: bps}`` (total bit/s per flow count).

    ``ratio`` = the best multi-flow total / the one-flow total (two decimals). ``ratio >= threshold``: more flows
    recover the rate, a ``per-flow limit``; otherwise a ``per-host limit``; ``no traffic`` when one flow measured 0
    or None. Only characterise a direction already judged weak: a healthy direction has no limit to characterise.
    """
    if not isinstance(by_flows, dict):
        raise LinkVerdictError("by_flows must be a dict {flows: bit/s}, got %s" % type(by_flows).__name__)
    threshold = _threshold(threshold)
    points = {}
    for key, value in by_flows.items():
        flows = _flows(key)
        if flows in points:
            raise LinkVerdictError("flow count %d appears twice in by_flows" % flows)
        points[flows] = _rate(value, "by_flows[%d]" % flows)
    if 1 not in points:
        raise LinkVerdictError("by_flows needs the one-flow result (key 1), got flow counts %s" % sorted(points))
    if len(points) < 2:
        raise LinkVerdictError("by_flows needs at least one result with more than one flow, got only 1 flow")

    result = {
        "kind": None,
        "ratio": None,
        "threshold": threshold,
        "one_flow_bps": points[1],
        "best_flows": None,
        "best_bps": None,
        "points": [{"flows": flows, "bps": points[flows]} for flows in sorted(points)],
        "text": "",
    }
    many = [(bps, flows) for flows, bps in points.items() if flows > 1 and bps is not None]
    if not points[1] or not many:
        result["kind"] = "no traffic"
        result["text"] = "no traffic measured with %s; flow sweep not judged" % (
            "1 flow" if not points[1] else "more than 1 flow")
        return result
    best_bps, best_flows = max(many, key=lambda item: (item[0], -item[1]))
    ratio = _ratio(best_bps, points[1])
    result.update(ratio=ratio, best_flows=best_flows, best_bps=best_bps)
    limits = "%d flows reach %s, %.2fx one flow's %s (threshold %s)" % (
        best_flows, format_bps(best_bps), ratio, format_bps(points[1]), _fmt_threshold(threshold))
    if ratio >= threshold:
        result["kind"] = "per-flow limit"
        result["text"] = "per-flow limit: %s; more flows recover the rate (observed, cause not determined)" % limits
    else:
        result["kind"] = "per-host limit"
        result["text"] = ("per-host limit: %s; more flows do not recover the rate (observed, cause not determined)"
                          % limits)
    return result


# --- ping --------------------------------------------------------------------------------------------------------

def percentile_nearest_rank(values, pct):
    """Nearest-rank percentile: the smallest value such that at least pct % of the values are <= it.

    With the n values sorted ascending, it is the value at 1-based rank ``ceil(pct / 100 * n)`` (rank 1 for a
    tiny pct). No interpolation: the result is always one of the values. Exact arithmetic (fractions), so
    ``pct=99, n=100`` is rank 99, not 100 by a rounding accident. None for an empty list.
    """
    if not values:
        return None
    pct = Fraction(str(pct))
    if pct <= 0 or pct > 100:
        raise LinkVerdictError("percentile must be in (0, 100], got %s" % pct)
    ordered = sorted(values)
    rank = max(1, int(math.ceil(pct * len(ordered) / 100)))
    return ordered[rank - 1]


def ping_summary(stdout):
    """Summarise iputils ping output (LC_ALL=C) via ``_ping.parse_ping``.

    ``{transmitted, received, errors, duplicates, loss_pct, mean_ms, min_ms, max_ms, mdev_ms, p50_ms, p99_ms,
    replies}``: mean/min/max/mdev are ping's own ``rtt`` line; p50/p99 are nearest-rank percentiles (see
    ``percentile_nearest_rank``) of the per-reply times (kept in ``replies_ms`` for distributions),
    ``replies`` is how many reply lines there were (0 with
    ``ping -q``, then p50/p99 are None). No replies at all: every rtt field None, loss as ping reports it (100).
    Raises PingParseError (a ValueError) when the output has no statistics line.
    """
    if not isinstance(stdout, str):
        raise LinkVerdictError("ping output must be a string, got %s" % type(stdout).__name__)
    parsed = parse_ping(stdout)
    rtt = parsed["rtt_ms"] or {}
    replies = parsed["replies_ms"]
    return {
        "transmitted": parsed["transmitted"],
        "received": parsed["received"],
        "errors": parsed["errors"],
        "duplicates": parsed["duplicates"],
        "loss_pct": parsed["loss_pct"],
        "mean_ms": rtt.get("avg"),
        "min_ms": rtt.get("min"),
        "max_ms": rtt.get("max"),
        "mdev_ms": rtt.get("mdev"),
        "p50_ms": percentile_nearest_rank(replies, 50),
        "p99_ms": percentile_nearest_rank(replies, 99),
        "replies": len(replies),
        "replies_ms": list(replies),
    }


# --- A/B condition table -----------------------------------------------------------------------------------------

def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def link_condition_table(runs, metrics=None):
    """Per condition (in first-seen order) and metric: ``{median, min, max, n}`` over the repetitions.

    ``runs``: ``[{condition, repetition, metrics: {name: number|None}}]``. None values (and a metric a run lacks)
    are skipped; a metric with no value in a condition gives ``{median: None, min: None, max: None, n: 0}``.
    ``metrics``: the names to tabulate, in order; default every name seen, in first-seen order. A requested name
    that no run has is an error (a typo would otherwise give an all-null column). The median of an even count is
    the mean of the two middle values. Returns a list ``[{condition, repetitions, metrics: {name: {...}}}]``,
    a list so the order survives JSON with sorted keys.
    """
    if not isinstance(runs, list):
        raise LinkVerdictError("runs must be a list of {condition, repetition, metrics}, got %s"
                               % type(runs).__name__)
    conditions = {}
    seen_metrics = []
    for index, run in enumerate(runs):
        where = "runs[%d]" % index
        if not isinstance(run, dict):
            raise LinkVerdictError("%s must be a dict {condition, repetition, metrics}, got %s"
                                   % (where, type(run).__name__))
        condition = run.get("condition")
        if not isinstance(condition, str) or not condition:
            raise LinkVerdictError("%s.condition must be a non-empty string, got %r" % (where, condition))
        values = run.get("metrics")
        if not isinstance(values, dict):
            raise LinkVerdictError("%s.metrics must be a dict {name: number|null}, got %s"
                                   % (where, type(values).__name__))
        entry = conditions.setdefault(condition, {"repetitions": [], "values": {}})
        repetition = run.get("repetition")
        if repetition is not None and repetition in entry["repetitions"]:
            raise LinkVerdictError("%s: condition %s repetition %r appears twice" % (where, condition, repetition))
        entry["repetitions"].append(repetition)
        for name, value in values.items():
            if name not in seen_metrics:
                seen_metrics.append(name)
            if value is None:
                continue
            if not _is_number(value) or math.isnan(value):
                raise LinkVerdictError("%s.metrics.%s must be a number or null, got %r" % (where, name, value))
            entry["values"].setdefault(name, []).append(value)

    if metrics is None:
        metrics = seen_metrics
    elif not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise LinkVerdictError("metrics must be a list of metric names, got %r" % (metrics,))
    unknown = [m for m in metrics if m not in seen_metrics]
    if unknown:
        raise LinkVerdictError("metrics %s appear in no run (runs have %s)" % (", ".join(unknown), seen_metrics))

    table = []
    for condition, entry in conditions.items():
        row = {"condition": condition, "repetitions": entry["repetitions"], "metrics": {}}
        for name in metrics:
            values = entry["values"].get(name, [])
            row["metrics"][name] = {
                "median": _median(values) if values else None,
                "min": min(values) if values else None,
                "max": max(values) if values else None,
                "n": len(values),
            }
        table.append(row)
    return table

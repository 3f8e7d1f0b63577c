# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Leave-one-out on a serving cluster: which whole runs to make (the whole ring, then the ring with each member left
out, every configuration once per round, rounds repeated), and which member the cluster's tok/s follows.

The finding sought is "every configuration that hit the cliff included the host": a claim about every run,
not a mean. So a member is named only when every run without it was faster than every run of every configuration
that included it (no overlap at all), over at least MIN_ROUNDS rounds, and its absence lifted the median by the
threshold. Three rounds because complete separation is also what chance gives now and then: with r runs on each side
and no effect at all, every run without the member beats every run with it with probability 1 / C(2r, r), 1/6 for
two rounds, 1/20 for three, 1/252 for five.
Fewer rounds, overlapping runs or a smaller lift are said as such, never as a finding. Observed, never a cause.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import (
    LinkVerdictError,
    _median,
    _rate,
    _threshold,
)

WHOLE = "whole ring"
MIN_ROUNDS = 3


def _hosts(value, what):
    if not isinstance(value, (list, tuple)) or not all(isinstance(h, str) and h for h in value) \
            or len(set(value)) != len(value):
        raise LinkVerdictError("%s must be a list of distinct host names, got %r" % (what, value))
    return list(value)


def config_label(left_out):
    return WHOLE if left_out is None else "without %s" % left_out


def leave_one_out_plan(ring, left_out, rounds):
    """``[{label, left_out, ring, round}]``: each round serves the whole ring, then the ring without each host of
    ``left_out`` in turn (interleaved, so that a drift of the machine spreads over every configuration)."""
    ring = _hosts(ring, "ring")
    left_out = _hosts(left_out, "left_out")
    if len(ring) < 3:
        raise LinkVerdictError("leave-one-out needs a ring of three or more (two hosts left when one is out), got %d "
                               "(%s)" % (len(ring), ", ".join(ring)))
    strangers = [h for h in left_out if h not in ring]
    if strangers or not left_out:
        raise LinkVerdictError("left_out must name one or more ring hosts (%s), got %r" % (", ".join(ring), left_out))
    if ring[0] in left_out:
        raise LinkVerdictError("the head %s cannot be left out: it holds the model and serves the API; put another "
                               "host first in the ring to leave it out" % ring[0])
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise LinkVerdictError("rounds must be a whole number, 1 or more, got %r" % (rounds,))
    plan = []
    for number in range(1, rounds + 1):
        for host in [None] + left_out:
            plan.append({"label": config_label(host), "left_out": host,
                         "ring": [h for h in ring if h != host], "round": number})
    return plan


def _runs_by_config(runs, figure):
    if not isinstance(runs, (list, tuple)) or not runs:
        raise LinkVerdictError("runs must be a non-empty list of {left_out, round, figures}, got %r" % (runs,))
    by_config = {}
    for index, run in enumerate(runs):
        if not isinstance(run, dict) or not isinstance(run.get("figures"), dict):
            raise LinkVerdictError("runs[%d] must be a dict with figures, got %r" % (index, run))
        left_out = run.get("left_out")
        if left_out is not None and (not isinstance(left_out, str) or not left_out):
            raise LinkVerdictError("runs[%d].left_out must be a host name or null, got %r" % (index, left_out))
        value = _rate(run["figures"].get(figure), "runs[%d].figures.%s" % (index, figure))
        by_config.setdefault(left_out, []).append(value)
    if None not in by_config:
        raise LinkVerdictError("runs has no run of the whole ring (left_out null): nothing to compare with")
    return by_config


def _spread(values):
    measured = [v for v in values if v is not None]
    return {"values": list(values), "n": len(measured), "median": _median(measured) if measured else None,
            "min": min(measured) if measured else None, "max": max(measured) if measured else None}


def _fmt(value):
    return "-" if value is None else "%.1f" % value


def _host_verdict(host, by_config, rounds, threshold, figure):
    """One left-out host judged; a claim needs another member left out too, because a ring one host smaller may be
    faster whoever leaves it (fewer hops): only a lift that leaving the others out does not give names a host."""
    without = _spread(by_config[host])
    including = _spread([v for other, values in by_config.items() if other != host for v in values])
    whole = _spread(by_config[None])
    lift = round(without["median"] / whole["median"], 2) if without["median"] and whole["median"] else None
    separated = bool(without["n"] and including["n"] and without["min"] > including["max"])
    figures = ("without %s: %s runs, %s-%s (median %s); every run with it: %s runs, %s-%s; the whole ring's median "
               "%s") % (
        host, without["n"], _fmt(without["min"]), _fmt(without["max"]), _fmt(without["median"]), including["n"],
        _fmt(including["min"]), _fmt(including["max"]), _fmt(whole["median"]))
    if lift is None:
        verdict, text = "not measured", "no %s measured without %s or for the whole ring" % (figure, host)
    elif lift < threshold:
        verdict = "no clear difference"
        text = "leaving %s out moves the median %.2fx (threshold %gx): no clear difference; %s" % (
            host, lift, threshold, figures)
    elif rounds < MIN_ROUNDS:
        verdict = "not claimed"
        text = ("leaving %s out lifts the median %.2fx, from %d round(s) only: not claimed (repeat the whole runs, "
                "leave_one_out_rounds %d or more); %s" % (host, lift, rounds, MIN_ROUNDS, figures))
    elif len(by_config) < 3:
        verdict = "not claimed"
        text = ("leaving %s out lifts the median %.2fx, but no other member was left out: a ring one host smaller may "
                "be faster whoever leaves it; not claimed (leave every member out in turn); %s" % (host, lift, figures))
    elif not separated:
        verdict = "not claimed"
        text = ("leaving %s out lifts the median %.2fx, but runs with and without it overlap: not claimed; %s"
                % (host, lift, figures))
    else:
        verdict = "the cluster follows it"
        text = ("every run that included %s was slower than every run without it: leaving it out lifts the median "
                "%.2fx (threshold %gx); %s; observed, cause not determined" % (host, lift, threshold, figures))
    return {"verdict": verdict, "lift": lift, "separated": separated, "without": without, "with": including,
            "text": text}


def leave_one_out_verdict(runs, figure, threshold):
    """``{figure, threshold, rounds, configurations: {label: spread}, hosts: {HOST: {verdict, lift, separated,
    without, with, text}}, named: [hosts], text}``. ``runs``: ``[{left_out: host|null, round, figures: {figure:
    value}}]``; ``threshold``: the lift of the median (above 1) that counts."""
    if not isinstance(figure, str) or not figure:
        raise LinkVerdictError("figure must name a figure of the runs, got %r" % (figure,))
    threshold = _threshold(threshold)
    by_config = _runs_by_config(runs, figure)
    rounds = min(len(values) for values in by_config.values())
    hosts = dict((host, _host_verdict(host, by_config, rounds, threshold, figure))
                 for host in by_config if host is not None)
    named = sorted(h for h, v in hosts.items() if v["verdict"] == "the cluster follows it")
    if named:
        text = "; ".join(hosts[h]["text"] for h in named)
    elif any(v["verdict"] == "not claimed" for v in hosts.values()):
        text = "no member named: " + "; ".join(v["text"] for v in hosts.values() if v["verdict"] == "not claimed")
    else:
        text = "no member named: leaving any one out made no clear difference to %s (threshold %gx)" % (
            figure, threshold)
    return {"figure": figure, "threshold": threshold, "rounds": rounds,
            "configurations": dict((config_label(h), _spread(v)) for h, v in by_config.items()),
            "hosts": hosts, "named": named, "text": text}

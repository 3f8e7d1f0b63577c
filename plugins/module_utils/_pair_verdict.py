# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge the day-one matrix of every ordered pair: which host's transmit (or receive) path is weak against every
peer, and which single pair is weak.

Each test is judged against the same receiver's (or the same sender's) other tests, as a suspect is judged
against a control host that sends to the same server:

- a test S -> R is weak on S's side when the other senders reach R faster: the median of ``K -> R`` over every
  other K, divided by ``S -> R``, is at or above the threshold; weak on R's side when S reaches the other receivers
  faster (the median of ``S -> K`` over ``S -> R``);
- a host whose every test as the sender is weak on its side has a weak transmit path ("against every peer": a host
  fault), whose every test as the receiver is weak on its side a weak receive path; a test weak on one side that no
  host verdict explains is one weak pair (a cable, a port, the pair's path through the switch);
- with two hosts there is no other sender or receiver to compare with: the pair's asymmetry verdict
  (``_link_verdict.asymmetry_verdict``) is all two hosts can say, and no host is named here.

Observed, never a diagnosis: the texts say what was measured against what, and that the cause was not determined.
Ratios are rounded to two decimals before they are compared, as in ``_link_verdict``.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import (
    DEFAULT_THRESHOLD,
    LinkVerdictError,
    _median,
    _rate,
    _threshold,
    format_bps,
)

HOST_VERDICTS = ("clean", "transmit weak", "receive weak", "transmit and receive weak", "not judged")


def _matrix(tests, hosts):
    """``{(sender, receiver): bps}`` from ``[{from, to, bps}]``; every ordered pair of ``hosts`` once."""
    if not isinstance(tests, (list, tuple)):
        raise LinkVerdictError("tests must be a list of {from, to, bps}, got %r" % (tests,))
    rates = {}
    for test in tests:
        if not isinstance(test, dict) or test.get("from") not in hosts or test.get("to") not in hosts \
                or test.get("from") == test.get("to"):
            raise LinkVerdictError("each test needs from and to, two different hosts of %s; got %r"
                                   % (", ".join(hosts), test))
        key = (test["from"], test["to"])
        if key in rates:
            raise LinkVerdictError("the test %s -> %s is given twice" % key)
        rates[key] = _rate(test.get("bps"), "bps of %s -> %s" % key)
    missing = ["%s -> %s" % (a, b) for a in hosts for b in hosts if a != b and (a, b) not in rates]
    if missing:
        raise LinkVerdictError("the matrix lacks the tests %s: every ordered pair is tested" % ", ".join(missing))
    return rates


def _ratio(reference, bps):
    """reference / bps rounded, or None when either is missing or the test moved nothing (judged apart)."""
    if reference is None or not bps:
        return None
    return round(reference / bps, 2)


def _side(rates, hosts, sender, receiver, threshold):
    """One test judged against the receiver's other senders and the sender's other receivers."""
    bps = rates[(sender, receiver)]
    others_to_receiver = [rates[(k, receiver)] for k in hosts if k not in (sender, receiver)]
    sender_to_others = [rates[(sender, k)] for k in hosts if k not in (sender, receiver)]
    known_in = [v for v in others_to_receiver if v]
    known_out = [v for v in sender_to_others if v]
    receiver_reference = _median(known_in) if known_in else None
    sender_reference = _median(known_out) if known_out else None
    tx_ratio, rx_ratio = _ratio(receiver_reference, bps), _ratio(sender_reference, bps)
    return {"from": sender, "to": receiver, "bps": bps,
            # what the other senders reach this receiver with, and what this sender reaches the others with
            "receiver_reference_bps": receiver_reference, "sender_reference_bps": sender_reference,
            "sender_side_ratio": tx_ratio, "receiver_side_ratio": rx_ratio,
            "weak_on_sender_side": (not bps) or (tx_ratio is not None and tx_ratio >= threshold),
            "weak_on_receiver_side": (not bps) or (rx_ratio is not None and rx_ratio >= threshold)}


def _host_text(host, verdict, sent, received, threshold):
    if verdict == "clean":
        return "%s: clean (no test of it weak on its side; threshold %gx)" % (host, threshold)
    parts = []
    if verdict in ("transmit weak", "transmit and receive weak"):
        parts.append("its transmit path is weak against every peer: it sends %s where the other senders reach the "
                     "same receivers at %s" % (
                         ", ".join("%s to %s" % (format_bps(t["bps"]), t["to"]) for t in sent),
                         ", ".join(format_bps(t["receiver_reference_bps"]) for t in sent)))
    if verdict in ("receive weak", "transmit and receive weak"):
        parts.append("its receive path is weak against every peer: it receives %s where the same senders reach the "
                     "others at %s" % (
                         ", ".join("%s from %s" % (format_bps(t["bps"]), t["from"]) for t in received),
                         ", ".join(format_bps(t["sender_reference_bps"]) for t in received)))
    return "%s: %s (threshold %gx); observed, a characterization, cause not determined" % (
        host, "; ".join(parts), threshold)


def pair_host_verdicts(tests, hosts, threshold=DEFAULT_THRESHOLD):
    """The matrix's verdicts: ``{hosts: {HOST: {verdict, weak_transmit, weak_receive, sent, received, text}},
    weak_pairs: [{from, to, bps, ..., text}], suspects: [hosts with a weak path], threshold, judged, text}``.
    ``tests``: ``[{from, to, bps}]`` (receiver-side bit/s of one single-flow test), every ordered pair once."""
    if not isinstance(hosts, (list, tuple)) or len(set(hosts)) != len(hosts) or len(hosts) < 2 \
            or not all(isinstance(h, str) and h for h in hosts):
        raise LinkVerdictError("hosts must be two or more distinct host names, got %r" % (hosts,))
    threshold = _threshold(threshold)
    rates = _matrix(tests, list(hosts))
    judged = len(hosts) >= 3
    sides = {key: _side(rates, hosts, key[0], key[1], threshold) for key in rates}
    result = {"hosts": {}, "weak_pairs": [], "suspects": [], "threshold": threshold, "judged": judged, "text": ""}
    for host in hosts:
        sent = [sides[(host, k)] for k in hosts if k != host]
        received = [sides[(k, host)] for k in hosts if k != host]
        weak_tx = judged and all(t["weak_on_sender_side"] for t in sent)
        weak_rx = judged and all(t["weak_on_receiver_side"] for t in received)
        verdict = ("not judged" if not judged else "transmit and receive weak" if weak_tx and weak_rx
                   else "transmit weak" if weak_tx else "receive weak" if weak_rx else "clean")
        result["hosts"][host] = {
            "verdict": verdict, "weak_transmit": weak_tx, "weak_receive": weak_rx, "sent": sent, "received": received,
            "text": ("%s: not judged (two hosts: a host and its cable look the same; see the pair's asymmetry "
                     "verdict)" % host) if not judged else _host_text(host, verdict, sent, received, threshold)}
        if weak_tx or weak_rx:
            result["suspects"].append(host)
    if judged:
        for (sender, receiver), side in sorted(sides.items()):
            explained = result["hosts"][sender]["weak_transmit"] or result["hosts"][receiver]["weak_receive"]
            if (side["weak_on_sender_side"] or side["weak_on_receiver_side"]) and not explained:
                result["weak_pairs"].append(dict(side, text=(
                    "%s -> %s is weak alone: %s, where the other senders reach %s at %s and %s reaches the others at "
                    "%s (threshold %gx); one pair, not a host: a cable, a port or the pair's path through the switch "
                    "may be the cause, not determined" % (
                        sender, receiver, format_bps(side["bps"]), receiver, format_bps(side["receiver_reference_bps"]),
                        sender, format_bps(side["sender_reference_bps"]), threshold))))
    result["text"] = "; ".join(
        [result["hosts"][h]["text"] for h in result["suspects"]] + [p["text"] for p in result["weak_pairs"]]) or (
        "every host clean: no test weak against the others (threshold %gx)" % threshold if judged else
        "two hosts: no host verdict, see the pair's asymmetry verdict")
    return result

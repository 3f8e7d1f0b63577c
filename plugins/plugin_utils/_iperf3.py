# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Summarise the client side of an iperf3 (3.x) TCP run made with ``-J``.

Directions are named from the client: ``forward`` is client -> server, ``reverse`` is server -> client.
- plain run: ``forward`` only (``reverse`` is None);
- ``--bidir``: both, ``reverse`` read from ``end.sum_sent_bidir_reverse`` / ``end.sum_received_bidir_reverse``;
- ``-R`` (reverse mode): the one measured direction is server -> client, so it is under ``reverse`` and ``forward``
  is None. A caller that reads ``forward`` of a ``-R`` run gets None, never the wrong direction.

Standard library only, Python 3.8+ syntax: this file may run on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

TAIL_CHARS = 200


class Iperf3ParseError(ValueError):
    """The text is not a complete iperf3 client JSON report."""


def _tail(text):
    text = text or ""
    if len(text) <= TAIL_CHARS:
        return repr(text)
    return "...%r" % text[-TAIL_CHARS:]


def _load(result):
    if isinstance(result, dict):
        return result
    if isinstance(result, bytes):
        result = result.decode("utf-8", "replace")
    if not isinstance(result, str):
        raise Iperf3ParseError("iperf3 result must be the JSON text of `iperf3 -J` or its parsed dict, got %s"
                               % type(result).__name__)
    if not result.strip():
        raise Iperf3ParseError("iperf3 output is empty (was iperf3 run with -J, and did it start at all?)")
    try:
        data = json.loads(result)
    except ValueError as exc:
        raise Iperf3ParseError("iperf3 output is not valid JSON (%s; truncated output?); it ends with %s"
                               % (exc, _tail(result))) from None
    if not isinstance(data, dict):
        raise Iperf3ParseError("iperf3 JSON must be an object, got %s; it ends with %s"
                               % (type(data).__name__, _tail(result)))
    return data


def _section(data, key, where):
    value = data.get(key)
    if not isinstance(value, dict):
        raise Iperf3ParseError("iperf3 JSON: %s.%s must be an object, got %s"
                               % (where, key, "nothing" if value is None else type(value).__name__))
    return value


def _number(section, key, where, required=True):
    value = section.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Iperf3ParseError("iperf3 JSON: %s.%s must be a number, got %r" % (where, key, value))
    return value


def _direction(end, sent_key, received_key):
    sent = _section(end, sent_key, "end")
    received = _section(end, received_key, "end")
    return {
        "sender_bps": float(_number(sent, "bits_per_second", "end." + sent_key)),
        "receiver_bps": float(_number(received, "bits_per_second", "end." + received_key)),
        "bytes": int(_number(received, "bytes", "end." + received_key)),
        "sender_bytes": int(_number(sent, "bytes", "end." + sent_key)),
        "retransmits": _number(sent, "retransmits", "end." + sent_key, required=False),
        "seconds": float(_number(received, "seconds", "end." + received_key)),
    }


def _intervals(data, bidir, reverse_mode):
    intervals = data.get("intervals")
    if intervals is None:
        return []
    if not isinstance(intervals, list):
        raise Iperf3ParseError("iperf3 JSON: intervals must be a list, got %s" % type(intervals).__name__)
    rows = []
    for index, interval in enumerate(intervals):
        where = "intervals[%d]" % index
        if not isinstance(interval, dict):
            raise Iperf3ParseError("iperf3 JSON: %s must be an object, got %s" % (where, type(interval).__name__))
        total = _section(interval, "sum", where)
        bps = float(_number(total, "bits_per_second", where + ".sum"))
        row = {
            "start": float(_number(total, "start", where + ".sum")),
            "end": float(_number(total, "end", where + ".sum")),
            "forward_bps": None if reverse_mode else bps,
            "reverse_bps": bps if reverse_mode else None,
            "omitted": bool(total.get("omitted", False)),
        }
        if bidir:
            back = _section(interval, "sum_bidir_reverse", where)
            row["reverse_bps"] = float(_number(back, "bits_per_second", where + ".sum_bidir_reverse"))
        rows.append(row)
    return rows


def iperf3_summary(result):
    """Summarise the client's ``iperf3 -J`` report (text or parsed dict); see the module docstring for directions.

    Returns ``{ok, error, started_at, bidir, reverse_mode, streams, duration_s, requested_duration_s, version,
    local_host, remote_host, forward, reverse, intervals}``. A report with an ``error`` key gives ``ok: False``, the
    error text, and no measurements (``forward``/``reverse`` None, ``intervals`` empty): numbers of an aborted run are
    not comparable with a complete one. Raises Iperf3ParseError (a ValueError) for text that is not a complete client
    report: invalid or truncated JSON, no ``end`` section, the server's report, a UDP run.
    """
    data = _load(result)
    start = data.get("start") if isinstance(data.get("start"), dict) else {}
    test_start = start.get("test_start") if isinstance(start.get("test_start"), dict) else {}
    connected = start.get("connected") if isinstance(start.get("connected"), list) else []
    first = connected[0] if connected and isinstance(connected[0], dict) else {}
    timestamp = start.get("timestamp") if isinstance(start.get("timestamp"), dict) else {}
    timesecs = timestamp.get("timesecs")
    summary = {
        "ok": True,
        "error": None,
        # when the client started, in whole seconds since the epoch (iperf3's start.timestamp), None if absent
        "started_at": timesecs if isinstance(timesecs, (int, float)) and not isinstance(timesecs, bool) else None,
        "bidir": False,
        "reverse_mode": bool(test_start.get("reverse", 0)),
        "streams": test_start.get("num_streams"),
        "duration_s": None,
        "requested_duration_s": test_start.get("duration"),
        "version": start.get("version"),
        "local_host": first.get("local_host"),
        "remote_host": first.get("remote_host"),
        "forward": None,
        "reverse": None,
        "intervals": [],
    }

    if "error" in data:
        summary["ok"] = False
        summary["error"] = str(data["error"])
        return summary

    if "accepted_connection" in start and "connecting_to" not in start:
        raise Iperf3ParseError("iperf3 JSON is the server's report (start.accepted_connection); pass the client's "
                               "`iperf3 -c ... -J` output, whose directions this summary names")
    if "end" not in data:
        raise Iperf3ParseError("iperf3 JSON has no end section (the run did not finish?); it has %s"
                               % sorted(data))
    end = _section(data, "end", "(top)")
    if not end:
        raise Iperf3ParseError("iperf3 JSON has an empty end section and no error: the run did not finish")
    protocol = test_start.get("protocol", "TCP")
    if protocol != "TCP":
        raise Iperf3ParseError("iperf3 JSON is a %s run; only TCP runs are summarised" % protocol)

    bidir = "sum_sent_bidir_reverse" in end or "sum_received_bidir_reverse" in end
    reverse_mode = summary["reverse_mode"]
    if bidir and reverse_mode:
        raise Iperf3ParseError("iperf3 JSON claims both --bidir and -R (reverse mode), which iperf3 refuses")
    summary["bidir"] = bidir

    measured = _direction(end, "sum_sent", "sum_received")
    if reverse_mode:
        summary["reverse"] = measured
    else:
        summary["forward"] = measured
        if bidir:
            summary["reverse"] = _direction(end, "sum_sent_bidir_reverse", "sum_received_bidir_reverse")
    summary["duration_s"] = measured["seconds"]

    if summary["streams"] is None:
        streams = end.get("streams")
        if isinstance(streams, list) and streams:
            summary["streams"] = len(streams) // 2 if bidir else len(streams)
    summary["intervals"] = _intervals(data, bidir, reverse_mode)
    return summary

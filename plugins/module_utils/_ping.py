# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse the output of iputils `ping` (Debian's `iputils-ping`), run with LC_ALL=C."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SUMMARY = re.compile(
    r"^(?P<transmitted>\d+) packets transmitted, (?P<received>\d+) (?:packets )?received"
    r"(?:, \+(?P<errors>\d+) errors)?(?:, \+(?P<duplicates>\d+) duplicates)?"
    r", (?P<loss>[\d.]+)% packet loss",
    re.MULTILINE,
)
_RTT = re.compile(r"^rtt min/avg/max/mdev = (?P<min>[\d.]+)/(?P<avg>[\d.]+)/(?P<max>[\d.]+)/(?P<mdev>[\d.]+) ms",
                  re.MULTILINE)
_REPLY = re.compile(r"^\d+ bytes from .*? icmp_seq=(?P<seq>\d+) .*?time=(?P<time>[\d.]+) ms", re.MULTILINE)


class PingParseError(ValueError):
    pass


def parse_ping(output):
    """Return transmitted/received/loss_pct, the rtt summary (ms, None when nothing came back) and each reply's rtt.

    Raises PingParseError when the statistics line is absent (ping never got to send, or the output was cut).
    """
    summary = _SUMMARY.search(output or "")
    if summary is None:
        raise PingParseError("no ping statistics line in output: %r" % (output or "")[-200:])
    rtt = _RTT.search(output)
    return {
        "transmitted": int(summary.group("transmitted")),
        "received": int(summary.group("received")),
        "errors": int(summary.group("errors") or 0),
        "duplicates": int(summary.group("duplicates") or 0),
        "loss_pct": float(summary.group("loss")),
        "rtt_ms": {k: float(rtt.group(k)) for k in ("min", "avg", "max", "mdev")} if rtt else None,
        "replies_ms": [float(m.group("time")) for m in _REPLY.finditer(output)],
    }

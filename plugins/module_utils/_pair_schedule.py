# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The day-one asymmetry test of every ordered pair of ring hosts, scheduled in rounds.

Each ordered pair (sender -> receiver) is one single-flow test, each direction measured alone. Tests that share no
host run together in one round, so N hosts cost a bounded number of rounds, not N(N-1) tests one after the other:
the circle method (a round-robin tournament) pairs every two hosts once in N-1 rounds (N even) or N rounds (N odd,
one host sits out each round); each of those rounds runs once in each direction. So 2(N-1) rounds for an even N,
2N for an odd N: 8 hosts take 14 rounds of one test's duration, against 56 tests in sequence.

A round may be cut into batches of at most ``concurrency`` tests (1: every test alone, as on a switch whose
fabric the tests would share, like the lab's, where the CPUs are the switch).

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class PairScheduleError(ValueError):
    """The hosts or the concurrency cannot be scheduled."""


def _hosts(hosts):
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, str) and h for h in hosts):
        raise PairScheduleError("hosts must be a list of host names, got %r" % (hosts,))
    if len(set(hosts)) != len(hosts):
        raise PairScheduleError("hosts must be distinct, got %s" % ", ".join(hosts))
    if len(hosts) < 2:
        raise PairScheduleError("a pair test needs at least two hosts, got %d" % len(hosts))
    return list(hosts)


def matchings(hosts):
    """The circle method: rounds of unordered pairs in which each host appears at most once; every two hosts meet
    in exactly one round. ``hosts`` order is kept (the first host stays, the others rotate)."""
    ring = list(hosts) + ([None] if len(hosts) % 2 else [])  # None: the host that sits out
    count = len(ring)
    rounds = []
    for _round in range(count - 1):
        pairs = [(ring[i], ring[count - 1 - i]) for i in range(count // 2)]
        rounds.append([p for p in pairs if None not in p])
        ring = [ring[0], ring[-1]] + ring[1:-1]
    return rounds


def pair_schedule(hosts, concurrency=None):
    """The rounds of ordered pairs: a list of rounds, each a list of ``{from, to}``; no host twice in a round, every
    ordered pair exactly once. ``concurrency`` (None: a whole round at once) cuts each round into batches."""
    hosts = _hosts(hosts)
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise PairScheduleError("concurrency must be a whole number of tests >= 1 (or null: a round at once), got %r"
                                % (concurrency,))
    rounds = []
    for matching in matchings(hosts):
        for forward in (True, False):
            tests = [{"from": a, "to": b} if forward else {"from": b, "to": a} for a, b in matching]
            step = concurrency or len(tests)
            rounds.extend(tests[i:i + step] for i in range(0, len(tests), step))
    return rounds


def round_count(host_count):
    """Rounds a whole round at a time costs for ``host_count`` hosts: 2(N-1) for an even N, 2N for an odd N."""
    return 2 * (host_count - 1) if host_count % 2 == 0 else 2 * host_count

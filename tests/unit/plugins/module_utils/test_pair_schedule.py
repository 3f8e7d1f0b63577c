# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The day-one pair schedule: every ordered pair once, no host twice in a round, 2(N-1) rounds (N even) or 2N
(N odd), and batches of a bounded concurrency."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _pair_schedule


@pytest.mark.parametrize("count", range(2, 9))
def test_every_ordered_pair_once_no_host_twice_in_a_round(count):
    hosts = [f"h{i}" for i in range(count)]
    rounds = _pair_schedule.pair_schedule(hosts)
    tests = [(t["from"], t["to"]) for r in rounds for t in r]
    assert sorted(tests) == sorted(itertools.permutations(hosts, 2))
    for round_ in rounds:
        ends = [h for t in round_ for h in (t["from"], t["to"])]
        assert len(ends) == len(set(ends)), round_
    assert len(rounds) == _pair_schedule.round_count(count) == (2 * (count - 1) if count % 2 == 0 else 2 * count)
    # bounded: from four hosts on, fewer rounds than tests (two or three hosts have no two tests without a shared host)
    assert len(rounds) < len(tests) or count <= 3


def test_four_hosts_take_six_rounds_of_two_tests():
    rounds = _pair_schedule.pair_schedule(["a", "b", "c", "d"])
    assert [len(r) for r in rounds] == [2] * 6
    assert rounds[0] == [{"from": "a", "to": "d"}, {"from": "b", "to": "c"}]
    assert rounds[1] == [{"from": "d", "to": "a"}, {"from": "c", "to": "b"}]  # the same pairs, the other way


def test_a_bounded_concurrency_cuts_rounds_into_batches():
    rounds = _pair_schedule.pair_schedule([f"h{i}" for i in range(8)], concurrency=1)
    assert len(rounds) == 56 and all(len(r) == 1 for r in rounds)
    assert [len(r) for r in _pair_schedule.pair_schedule([f"h{i}" for i in range(8)], concurrency=3)][:2] == [3, 1]


@pytest.mark.parametrize(("hosts", "concurrency", "message"), [
    (["a"], None, "at least two hosts, got 1"),
    (["a", "a"], None, "hosts must be distinct, got a, a"),
    ("ab", None, "hosts must be a list of host names"),
    (["a", ""], None, "hosts must be a list of host names"),
    (["a", "b"], 0, "concurrency must be a whole number of tests >= 1"),
    (["a", "b"], True, "concurrency must be a whole number of tests >= 1"),
])
def test_bad_input_is_refused(hosts, concurrency, message):
    with pytest.raises(_pair_schedule.PairScheduleError, match=message):
        _pair_schedule.pair_schedule(hosts, concurrency)

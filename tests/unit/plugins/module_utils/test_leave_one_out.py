# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Leave-one-out: the plan of whole runs (rounds interleave every configuration; the head never left out) and the
member the cluster's tok/s follows, named only when every run without it beat every run with it over two rounds
("every configuration that hit the cliff included the host"); one round, overlapping runs and
small lifts are said, never claimed; malformed input refused."""

from __future__ import annotations

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _leave_one_out
from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import LinkVerdictError

RING = ["lab-a", "lab-b", "lab-c", "lab-d"]
FIGURE = "single_stream_decode_tok_s"


def runs(values):
    """``{left_out: [tok/s per round]}`` -> the runs the role keeps."""
    return [{"left_out": left_out, "round": number + 1, "figures": {FIGURE: value}}
            for left_out, series in values.items() for number, value in enumerate(series)]


def test_each_round_serves_the_whole_ring_then_each_member_left_out():
    plan = _leave_one_out.leave_one_out_plan(RING, ["lab-c", "lab-d"], 2)
    assert [(p["label"], p["round"]) for p in plan] == [
        ("whole ring", 1), ("without lab-c", 1), ("without lab-d", 1),
        ("whole ring", 2), ("without lab-c", 2), ("without lab-d", 2)]
    assert plan[1]["ring"] == ["lab-a", "lab-b", "lab-d"] and plan[1]["left_out"] == "lab-c"
    assert plan[0]["ring"] == RING and plan[0]["left_out"] is None


@pytest.mark.parametrize("ring, left_out, rounds, message", [
    (["lab-a", "lab-b"], ["lab-b"], 1, r"needs a ring of three or more .* got 2 \(lab-a, lab-b\)"),
    (RING, ["lab-x"], 1, r"left_out must name one or more ring hosts"),
    (RING, [], 1, r"left_out must name one or more ring hosts"),
    (RING, ["lab-a"], 1, "the head lab-a cannot be left out: it holds the model"),
    (RING, ["lab-c"], 0, "rounds must be a whole number, 1 or more, got 0"),
    (RING, ["lab-c", "lab-c"], 1, "left_out must be a list of distinct host names"),
    ("lab-a", ["lab-c"], 1, "ring must be a list of distinct host names"),
])
def test_a_plan_that_cannot_run_is_refused(ring, left_out, rounds, message):
    with pytest.raises(LinkVerdictError, match=message):
        _leave_one_out.leave_one_out_plan(ring, left_out, rounds)


def test_the_member_every_slow_run_included_is_named_with_its_figures():
    # the cliff's shape: the cluster crawls whenever lab-c serves, runs flat without it
    result = _leave_one_out.leave_one_out_verdict(runs({
        None: [20.1, 21.0, 19.5], "lab-b": [20.4, 19.9, 21.2], "lab-c": [40.2, 41.0, 39.6], "lab-d": [20.8, 20.0, 19.7],
    }), FIGURE, 1.1)
    assert result["named"] == ["lab-c"] and result["rounds"] == 3
    verdict = result["hosts"]["lab-c"]
    assert verdict["verdict"] == "the cluster follows it" and verdict["separated"] and verdict["lift"] == 2.0
    assert verdict["text"] == (
        "every run that included lab-c was slower than every run without it: leaving it out lifts the median 2.00x "
        "(threshold 1.1x); without lab-c: 3 runs, 39.6-41.0 (median 40.2); every run with it: 9 runs, 19.5-21.2; "
        "the whole ring's median 20.1; observed, cause not determined")
    assert [result["hosts"][h]["verdict"] for h in ("lab-b", "lab-d")] == ["no clear difference"] * 2
    assert result["configurations"]["without lab-c"]["median"] == 40.2
    assert result["text"] == verdict["text"]


@pytest.mark.parametrize("rounds", [1, 2])
def test_fewer_than_three_rounds_are_said_and_not_claimed(rounds):
    # two rounds apart: chance alone gives that one time in six
    result = _leave_one_out.leave_one_out_verdict(
        runs({None: [20.0] * rounds, "lab-b": [20.0] * rounds, "lab-c": [40.0] * rounds}), FIGURE, 1.1)
    assert result["named"] == [] and result["hosts"]["lab-c"]["verdict"] == "not claimed"
    assert f"from {rounds} round(s) only: not claimed (repeat the whole runs, leave_one_out_rounds 3 or more)" \
        in result["text"]


def test_one_member_left_out_alone_is_not_claimed_a_smaller_ring_may_be_faster_whoever_leaves():
    result = _leave_one_out.leave_one_out_verdict(
        runs({None: [20.0, 21.0, 19.0], "lab-c": [40.0, 41.0, 44.0]}), FIGURE, 1.1)
    assert result["named"] == [] and result["hosts"]["lab-c"]["verdict"] == "not claimed"
    assert "but no other member was left out: a ring one host smaller may be faster whoever leaves it" in result["text"]


def test_overlapping_runs_are_not_claimed_however_large_the_median_lift():
    result = _leave_one_out.leave_one_out_verdict(
        runs({None: [20.0, 30.0, 45.0], "lab-b": [21.0, 30.0, 44.0], "lab-c": [40.0, 41.0, 44.0]}), FIGURE, 1.1)
    verdict = result["hosts"]["lab-c"]
    assert verdict["verdict"] == "not claimed" and not verdict["separated"] and verdict["lift"] == 1.37
    assert "runs with and without it overlap: not claimed" in verdict["text"]


def test_a_clean_cluster_names_no_member():
    result = _leave_one_out.leave_one_out_verdict(runs({
        None: [48.2, 47.9], "lab-b": [49.0, 48.1], "lab-c": [47.5, 48.8], "lab-d": [48.0, 49.3]}), FIGURE, 1.1)
    assert result["named"] == []
    assert result["text"] == ("no member named: leaving any one out made no clear difference to "
                              "single_stream_decode_tok_s (threshold 1.1x)")


def test_a_failed_run_counts_as_not_measured_not_as_slow():
    result = _leave_one_out.leave_one_out_verdict(
        runs({None: [20.0, None], "lab-b": [20.0, 21.0], "lab-c": [None, None]}), FIGURE, 1.1)
    assert result["hosts"]["lab-c"]["verdict"] == "not measured"
    assert result["configurations"]["whole ring"] == {"values": [20.0, None], "n": 1, "median": 20.0, "min": 20.0,
                                                      "max": 20.0}


@pytest.mark.parametrize("given, figure, threshold, message", [
    ([], FIGURE, 1.1, "runs must be a non-empty list"),
    ([{"left_out": "lab-c"}], FIGURE, 1.1, r"runs\[0\] must be a dict with figures"),
    (runs({"lab-c": [1.0]}), FIGURE, 1.1, "runs has no run of the whole ring"),
    (runs({None: ["fast"]}), FIGURE, 1.1, "runs\\[0\\].figures.single_stream_decode_tok_s must be a throughput"),
    (runs({None: [1.0]}), "", 1.1, "figure must name a figure"),
    (runs({None: [1.0]}), FIGURE, 1.0, "threshold must be a number above 1"),
    (runs({None: [1.0]}), FIGURE, "x", "threshold must be a number above 1"),
    ([{"left_out": 3, "figures": {}}], FIGURE, 1.1, r"runs\[0\].left_out must be a host name or null"),
])
def test_malformed_runs_are_refused(given, figure, threshold, message):
    with pytest.raises(LinkVerdictError, match=message):
        _leave_one_out.leave_one_out_verdict(given, figure, threshold)

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import math
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import (
    LinkVerdictError,
    asymmetry_verdict,
    flow_limit,
    format_bps,
    link_condition_table,
    percentile_nearest_rank,
    ping_summary,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._ping import PingParseError

PING = Path(__file__).resolve().parents[2] / "fixtures" / "ping"
G = 1e9


def control(a_tx, a_rx, b_tx, b_rx, host="lab-c"):
    """tx = control host -> end (the end's receive path), rx = end -> control host (the end's transmit path)."""
    return {"host": host, "to": {"lab-a": {"tx_bps": a_tx, "rx_bps": a_rx},
                                 "lab-b": {"tx_bps": b_tx, "rx_bps": b_rx}}}


# --- asymmetry ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("a_to_b", "b_to_a", "threshold", "verdict", "ratio", "weak"),
    [
        (9.3 * G, 9.3 * G, 1.5, "symmetric", 1.0, None),
        (9.3 * G, 8.94 * G, 1.5, "symmetric", 1.04, None),
        (15.0, 10.0, 1.5, "asymmetric", 1.5, ("lab-b", "lab-a")),        # exactly at the threshold: asymmetric
        (10.0, 15.0, 1.5, "asymmetric", 1.5, ("lab-a", "lab-b")),
        (14.9, 10.0, 1.5, "symmetric", 1.49, None),
        (14.96, 10.0, 1.5, "asymmetric", 1.5, ("lab-b", "lab-a")),       # 1.496 shows as 1.50x: judged as shown
        (9.3 * G, 3.0 * G, 1.5, "asymmetric", 3.1, ("lab-b", "lab-a")),
        (9.3 * G, 3.0 * G, 4, "symmetric", 3.1, None),
        (2, 1, 2.0, "asymmetric", 2.0, ("lab-b", "lab-a")),              # ints are fine
        ("9300000000", "3000000000.0", "1.5", "asymmetric", 3.1, ("lab-b", "lab-a")),  # numeric strings
    ],
)
def test_asymmetry(a_to_b, b_to_a, threshold, verdict, ratio, weak):
    result = asymmetry_verdict(a_to_b, b_to_a, "lab-a", "lab-b", threshold=threshold)
    assert result["verdict"] == verdict
    assert result["ratio"] == ratio
    assert result["ratio"] >= 1
    assert result["threshold"] == float(threshold)
    assert result["control"] is None
    assert result["unmeasured"] == []
    if weak is None:
        assert result["weak_direction"] is None
        assert result["possible_ends"] == []
        assert result["text"].startswith("symmetric (ratio ")
    else:
        assert result["weak_direction"] == {"from": weak[0], "to": weak[1]}
        assert result["possible_ends"] == [f"{weak[0]}'s transmit path", f"{weak[1]}'s receive path"]
        assert "observed, cause not determined" in result["text"]


def test_asymmetry_texts():
    assert asymmetry_verdict(9.3 * G, 8.94 * G, "lab-a", "lab-b")["text"] == "symmetric (ratio 1.04x, threshold 1.5x)"
    assert asymmetry_verdict(2.9 * G, 8.99 * G, "lab-a", "lab-b")["text"] == (
        "asymmetric: lab-a -> lab-b is weak (ratio 3.10x, threshold 1.5x); observed, cause not determined: "
        "lab-a's transmit path or lab-b's receive path")
    assert asymmetry_verdict(9.3 * G, 3.0 * G, "lab-a", "lab-b", threshold=2)["text"] == (
        "asymmetric: lab-b -> lab-a is weak (ratio 3.10x, threshold 2x); observed, cause not determined: "
        "lab-b's transmit path or lab-a's receive path")


def test_asymmetry_never_claims_a_cause():
    for result in (asymmetry_verdict(9.3 * G, 3.0 * G, "lab-a", "lab-b"),
                   asymmetry_verdict(9.3 * G, 3.0 * G, "lab-a", "lab-b", control=control(9 * G, 9 * G, 9 * G, 3 * G))):
        lowered = result["text"].lower()
        assert "observed" in lowered
        for word in ("diagnos", "caused by", "because", "root cause", "is the cause"):
            assert word not in lowered


@pytest.mark.parametrize(
    ("a_to_b", "b_to_a", "unmeasured", "text"),
    [
        (0, 9.3 * G, ["lab-a -> lab-b"], "no traffic measured lab-a -> lab-b (0 bit/s); symmetry not judged"),
        (9.3 * G, None, ["lab-b -> lab-a"], "no traffic measured lab-b -> lab-a (no result); symmetry not judged"),
        (0.0, 0, ["lab-a -> lab-b", "lab-b -> lab-a"], "no traffic measured lab-a -> lab-b (0 bit/s), lab-b -> lab-a"),
        (None, None, ["lab-a -> lab-b", "lab-b -> lab-a"], "no traffic measured lab-a -> lab-b (no result), "),
    ],
)
def test_asymmetry_without_traffic(a_to_b, b_to_a, unmeasured, text):
    result = asymmetry_verdict(a_to_b, b_to_a, "lab-a", "lab-b", control=control(1, 1, 1, 1))
    assert result["verdict"] == "no traffic"
    assert result["ratio"] is None
    assert result["weak_direction"] is None
    assert result["possible_ends"] == []
    assert result["control"] is None
    assert result["unmeasured"] == unmeasured
    assert result["text"].startswith(text)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a_to_b": -1.0}, r"a_to_b \(lab-a -> lab-b\) must not be negative"),
        ({"b_to_a": "fast"}, r"b_to_a \(lab-b -> lab-a\) must be a throughput in bit/s, got 'fast'"),
        ({"a_to_b": [1.0]}, "must be a throughput"),
        ({"a_to_b": {"bps": 1}}, "must be a throughput"),
        ({"a_to_b": True}, "must be a throughput"),
        ({"a_to_b": float("nan")}, "must be a throughput"),
        ({"a_to_b": float("inf")}, "must be a throughput"),
        ({"threshold": 1}, "threshold must be a number above 1"),
        ({"threshold": 0.5}, "threshold must be a number above 1"),
        ({"threshold": "x"}, "threshold must be a number above 1"),
        ({"threshold": None}, "threshold must be a number above 1"),
        ({"threshold": float("inf")}, "threshold must be a number above 1"),
        ({"host_a": ""}, "host_a must be a non-empty host name"),
        ({"host_b": None}, "host_b must be a non-empty host name"),
        ({"host_b": "lab-a"}, "host_a and host_b must differ"),
        ({"control": "lab-c"}, "control must be a dict"),
        ({"control": {"host": "lab-c"}}, "control.to must be a dict"),
        ({"control": {"host": "lab-a", "to": {}}}, "control.host must be a third host"),
        ({"control": {"to": {}}}, "control.host must be a non-empty host name"),
        ({"control": {"host": "lab-c", "to": {"lab-a": {}}}}, "must have an entry for lab-a and lab-b, missing lab-b"),
        ({"control": {"host": "lab-c", "to": {"lab-a": {}, "lab-b": 5}}}, r"control.to.lab-b must be a dict"),
        ({"control": control(1, -1, 1, 1)}, r"control.to.lab-a.rx_bps must not be negative"),
        # a malformed control is reported even when the link is symmetric
        ({"a_to_b": 1.0, "b_to_a": 1.0, "control": {"host": "lab-c", "to": []}}, "control.to must be a dict"),
    ],
)
def test_asymmetry_bad_input(kwargs, message):
    args = {"a_to_b": 9.3 * G, "b_to_a": 3.0 * G, "host_a": "lab-a", "host_b": "lab-b"}
    args.update(kwargs)
    with pytest.raises(LinkVerdictError, match=message):
        asymmetry_verdict(**args)


# Weak direction lab-b -> lab-a: suspects lab-b's transmit (lab-b -> lab-c vs lab-a -> lab-c) and
# lab-a's receive (lab-c -> lab-a vs lab-c -> lab-b).
@pytest.mark.parametrize(
    ("ctl", "ends", "weak", "text"),
    [
        (control(a_tx=9 * G, a_rx=9.1 * G, b_tx=9 * G, b_rx=3.2 * G), ["lab-b's transmit path"], [True, False],
         "lab-b's transmit path (observed from control host lab-c); "
         "lab-a's receive path looks fine from control host lab-c"),
        (control(a_tx=3 * G, a_rx=9.1 * G, b_tx=9 * G, b_rx=9 * G), ["lab-a's receive path"], [False, True],
         "lab-a's receive path (observed from control host lab-c); "
         "lab-b's transmit path looks fine from control host lab-c"),
        (control(a_tx=3 * G, a_rx=9 * G, b_tx=9 * G, b_rx=3 * G), ["lab-b's transmit path", "lab-a's receive path"],
         [True, True], "lab-b's transmit path and lab-a's receive path (both observed from control host lab-c)"),
        (control(a_tx=9 * G, a_rx=9 * G, b_tx=9 * G, b_rx=9 * G), ["lab-b's transmit path", "lab-a's receive path"],
         [False, False], "lab-b's transmit path or lab-a's receive path; control host lab-c could not reproduce it"),
        # exactly at the threshold from the control host counts as weak
        (control(a_tx=9 * G, a_rx=6 * G, b_tx=9 * G, b_rx=4 * G), ["lab-b's transmit path"], [True, False], None),
        # below the threshold: fine
        (control(a_tx=9 * G, a_rx=5.9 * G, b_tx=9 * G, b_rx=4 * G), ["lab-b's transmit path", "lab-a's receive path"],
         [False, False], None),
        # the suspect faster than the reference is not weak
        (control(a_tx=9 * G, a_rx=3 * G, b_tx=9 * G, b_rx=9 * G), ["lab-b's transmit path", "lab-a's receive path"],
         [False, False], None),
        # the control host measured nothing towards lab-a: that path stays possible, unjudged
        (control(a_tx=None, a_rx=9 * G, b_tx=9 * G, b_rx=9 * G), ["lab-a's receive path"], [False, None],
         "lab-a's receive path (control host lab-c could not judge it: no traffic measured on lab-c -> lab-a or "
         "lab-c -> lab-b); lab-b's transmit path looks fine from control host lab-c"),
        (control(a_tx=0, a_rx=0, b_tx=0, b_rx=0), ["lab-b's transmit path", "lab-a's receive path"], [None, None],
         None),
        (control(a_tx=9 * G, a_rx=9 * G, b_tx=9 * G, b_rx=2 * G, host="lab-z"), ["lab-b's transmit path"],
         [True, False], "lab-b's transmit path (observed from control host lab-z)"),
    ],
)
def test_control_host_narrows(ctl, ends, weak, text):
    result = asymmetry_verdict(9.3 * G, 3.0 * G, "lab-a", "lab-b", control=ctl)
    assert result["verdict"] == "asymmetric"
    assert result["weak_direction"] == {"from": "lab-b", "to": "lab-a"}
    assert result["possible_ends"] == ends
    checks = result["control"]["checks"]
    assert [c["weak"] for c in checks] == weak
    assert [(c["measured"], c["reference"]) for c in checks] == [
        (f"lab-b -> {ctl['host']}", f"lab-a -> {ctl['host']}"),
        (f"{ctl['host']} -> lab-a", f"{ctl['host']} -> lab-b")]
    assert result["text"].startswith("asymmetric: lab-b -> lab-a is weak (ratio 3.10x, threshold 1.5x); "
                                     "observed, cause not determined: ")
    assert result["text"].endswith(result["control"]["text"])
    if text is not None:
        assert result["control"]["text"].startswith(text)


def test_control_host_narrows_other_direction():
    """Weak lab-a -> lab-b: suspects lab-a's transmit (lab-a -> C) and lab-b's receive (C -> lab-b)."""
    result = asymmetry_verdict(3.0 * G, 9.3 * G, "lab-a", "lab-b",
                               control=control(a_tx=9 * G, a_rx=3 * G, b_tx=9 * G, b_rx=9 * G))
    assert result["possible_ends"] == ["lab-a's transmit path"]
    result = asymmetry_verdict(3.0 * G, 9.3 * G, "lab-a", "lab-b",
                               control=control(a_tx=9 * G, a_rx=9 * G, b_tx=2 * G, b_rx=9 * G))
    assert result["possible_ends"] == ["lab-b's receive path"]


def test_control_ignored_when_symmetric():
    result = asymmetry_verdict(9.3 * G, 9.2 * G, "lab-a", "lab-b", control=control(1 * G, 9 * G, 9 * G, 1 * G))
    assert result["verdict"] == "symmetric"
    assert result["control"] is None
    assert result["possible_ends"] == []


# --- flow sweep --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("by_flows", "threshold", "kind", "ratio", "best_flows"),
    [
        ({1: 3.58 * G, 2: 8.4 * G, 4: 8.7 * G}, 1.5, "per-flow limit", 2.43, 4),   # an observed per-flow limit
        ({"1": 3.58 * G, "2": 8.4 * G, "4": 8.7 * G}, 1.5, "per-flow limit", 2.43, 4),  # keys as strings
        ({1: 3.58 * G, 2: 3.6 * G, 4: 3.7 * G}, 1.5, "per-host limit", 1.03, 4),
        ({1: 10.0, 2: 15.0}, 1.5, "per-flow limit", 1.5, 2),                        # exactly at the threshold
        ({1: 10.0, 2: 14.9}, 1.5, "per-host limit", 1.49, 2),
        ({1: 10.0, 2: 20.0, 4: 20.0}, 1.5, "per-flow limit", 2.0, 2),               # tie: fewest flows named
        ({1: 10.0, 2: 9.0, 8: 8.0}, 1.5, "per-host limit", 0.9, 2),                 # more flows even lose
        ({1: 10.0, 4: 25.0}, 3, "per-host limit", 2.5, 4),
        ({1: 10.0, 2: None, 4: 16.0}, 1.5, "per-flow limit", 1.6, 4),               # a missing point is skipped
        ({1.0: 10, 2.0: 20}, 1.5, "per-flow limit", 2.0, 2),                        # integral float keys
    ],
)
def test_flow_limit(by_flows, threshold, kind, ratio, best_flows):
    result = flow_limit(by_flows, threshold=threshold)
    assert result["kind"] == kind
    assert result["ratio"] == ratio
    assert result["best_flows"] == best_flows
    assert [p["flows"] for p in result["points"]] == sorted(int(k) for k in by_flows)
    assert result["text"].startswith(kind + ": ")
    assert "observed, cause not determined" in result["text"]


def test_flow_limit_text():
    assert flow_limit({1: 3.58 * G, 2: 8.4 * G, 4: 8.7 * G})["text"] == (
        "per-flow limit: 4 flows reach 8.70 Gbit/s, 2.43x one flow's 3.58 Gbit/s (threshold 1.5x); "
        "more flows recover the rate (observed, cause not determined)")
    assert flow_limit({1: 3.58 * G, 4: 3.7 * G})["text"] == (
        "per-host limit: 4 flows reach 3.70 Gbit/s, 1.03x one flow's 3.58 Gbit/s (threshold 1.5x); "
        "more flows do not recover the rate (observed, cause not determined)")


@pytest.mark.parametrize(
    ("by_flows", "text"),
    [
        ({1: 0, 2: 8 * G}, "no traffic measured with 1 flow"),
        ({1: None, 2: 8 * G}, "no traffic measured with 1 flow"),
        ({1: 8 * G, 2: None, 4: None}, "no traffic measured with more than 1 flow"),
    ],
)
def test_flow_limit_without_traffic(by_flows, text):
    result = flow_limit(by_flows)
    assert result["kind"] == "no traffic"
    assert result["ratio"] is None
    assert result["text"].startswith(text)


@pytest.mark.parametrize(
    ("by_flows", "threshold", "message"),
    [
        ([1, 2], 1.5, "by_flows must be a dict"),
        ({2: 1.0, 4: 2.0}, 1.5, r"needs the one-flow result \(key 1\), got flow counts \[2, 4\]"),
        ({1: 1.0}, 1.5, "at least one result with more than one flow"),
        ({"one": 1.0, 2: 1.0}, 1.5, "flow counts must be positive integers, got 'one'"),
        ({0: 1.0, 1: 1.0}, 1.5, "flow counts must be positive integers, got 0"),
        ({1.5: 1.0, 1: 1.0}, 1.5, "flow counts must be positive integers, got 1.5"),
        ({True: 1.0, 2: 1.0}, 1.5, "flow counts must be positive integers, got True"),
        ({1: 1.0, "1": 2.0, 2: 1.0}, 1.5, "flow count 1 appears twice"),
        ({1: "x", 2: 1.0}, 1.5, r"by_flows\[1\] must be a throughput"),
        ({1: 1.0, 2: -1.0}, 1.5, r"by_flows\[2\] must not be negative"),
        ({1: 1.0, 2: 2.0}, 1.0, "threshold must be a number above 1"),
    ],
)
def test_flow_limit_bad_input(by_flows, threshold, message):
    with pytest.raises(LinkVerdictError, match=message):
        flow_limit(by_flows, threshold=threshold)


# --- percentiles and ping ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [
        ([15, 20, 35, 40, 50], 5, 15),       # the textbook nearest-rank example
        ([15, 20, 35, 40, 50], 30, 20),
        ([15, 20, 35, 40, 50], 40, 20),      # rank exactly 2
        ([15, 20, 35, 40, 50], 50, 35),
        ([15, 20, 35, 40, 50], 100, 50),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 25, 7),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 50, 8),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 75, 15),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 99, 20),
        ([1, 2, 3, 4], 50, 2),               # no interpolation: one of the values
        (list(range(1, 101)), 99, 99),       # exact arithmetic: rank 99, not 100
        (list(range(1, 101)), 29, 29),       # 0.29 * 100 is 28.999... in floats
        (list(range(1, 1001)), 99, 990),
        ([0.2, 0.1], 50, 0.1),               # unsorted input
        ([7.0], 99, 7.0),
        ([7.0], 1, 7.0),
        ([], 50, None),
    ],
)
def test_percentile_nearest_rank(values, pct, expected):
    assert percentile_nearest_rank(values, pct) == expected


@pytest.mark.parametrize("pct", [0, -1, 100.5])
def test_percentile_out_of_range(pct):
    with pytest.raises(LinkVerdictError, match="percentile must be in"):
        percentile_nearest_rank([1, 2], pct)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ok.txt", {"transmitted": 3, "received": 3, "errors": 0, "duplicates": 0, "loss_pct": 0.0, "mean_ms": 0.053,
                    "min_ms": 0.048, "max_ms": 0.061, "mdev_ms": 0.005, "p50_ms": 0.052, "p99_ms": 0.061,
                    "replies": 3}),
        ("partial_loss.txt", {"transmitted": 4, "received": 3, "errors": 0, "duplicates": 0, "loss_pct": 25.0,
                              "mean_ms": 0.748, "min_ms": 0.105, "max_ms": 1.93, "mdev_ms": 0.836, "p50_ms": 0.21,
                              "p99_ms": 1.93, "replies": 3}),
        ("unreachable.txt", {"transmitted": 3, "received": 0, "errors": 3, "duplicates": 0, "loss_pct": 100.0,
                             "mean_ms": None, "min_ms": None, "max_ms": None, "mdev_ms": None, "p50_ms": None,
                             "p99_ms": None, "replies": 0}),
        ("loopback_20.txt", {"transmitted": 20, "received": 20, "errors": 0, "duplicates": 0, "loss_pct": 0.0,
                             "mean_ms": 0.046, "min_ms": 0.038, "max_ms": 0.075, "mdev_ms": 0.007, "p50_ms": 0.045,
                             "p99_ms": 0.075, "replies": 20}),
        ("loopback_quiet.txt", {"transmitted": 5, "received": 5, "errors": 0, "duplicates": 0, "loss_pct": 0.0,
                                "mean_ms": 0.034, "min_ms": 0.011, "max_ms": 0.042, "mdev_ms": 0.011,
                                "p50_ms": None, "p99_ms": None, "replies": 0}),
    ],
)
def test_ping_summary(name, expected):
    output = (PING / name).read_text()
    summary = ping_summary(output)
    replies_ms = summary.pop("replies_ms")
    assert summary == expected
    times = [float(line.rsplit("time=", 1)[1].split()[0]) for line in output.splitlines() if "time=" in line]
    assert replies_ms == times


def test_ping_p50_from_replies():
    """loopback_20.txt: 20 replies, p50 = rank 10 of the sorted times, p99 = rank 20."""
    output = (PING / "loopback_20.txt").read_text()
    times = sorted(float(line.rsplit("time=", 1)[1].split()[0]) for line in output.splitlines() if "time=" in line)
    assert len(times) == 20
    summary = ping_summary(output)
    assert summary["p50_ms"] == times[9]
    assert summary["p99_ms"] == times[19] == summary["max_ms"]


@pytest.mark.parametrize("output", ["", (PING / "truncated.txt").read_text(), "ping: unknown host x"])
def test_ping_summary_without_statistics(output):
    with pytest.raises(PingParseError, match="no ping statistics line"):
        ping_summary(output)


@pytest.mark.parametrize("output", [None, 5, ["64 bytes"]])
def test_ping_summary_wrong_type(output):
    with pytest.raises(LinkVerdictError, match="ping output must be a string"):
        ping_summary(output)


# --- A/B table ---------------------------------------------------------------------------------------------------

RUNS = [
    {"condition": "tx_e2e", "repetition": 1, "metrics": {"gbps": 17.8, "retrans": 0, "tok_s": 77.1}},
    {"condition": "baseline", "repetition": 1, "metrics": {"gbps": 9.1, "retrans": 12, "tok_s": 48.4}},
    {"condition": "baseline", "repetition": 2, "metrics": {"gbps": 9.3, "retrans": None, "tok_s": 48.0}},
    {"condition": "tx_e2e", "repetition": 2, "metrics": {"gbps": 17.2, "retrans": 2, "tok_s": None}},
    {"condition": "baseline", "repetition": 3, "metrics": {"gbps": 8.9, "retrans": 20}},
    {"condition": "tx_e2e", "repetition": 3, "metrics": {"gbps": 17.5, "retrans": 1, "tok_s": None}},
    {"condition": "baseline", "repetition": 4, "metrics": {"gbps": 9.5, "retrans": 14, "tok_s": None}},
]


def test_condition_table():
    table = link_condition_table(RUNS, ["gbps", "retrans", "tok_s"])
    assert [row["condition"] for row in table] == ["tx_e2e", "baseline"]   # first seen
    tx, base = table
    assert tx["repetitions"] == [1, 2, 3]
    assert base["repetitions"] == [1, 2, 3, 4]
    assert tx["metrics"]["gbps"] == {"median": 17.5, "min": 17.2, "max": 17.8, "n": 3}
    assert tx["metrics"]["retrans"] == {"median": 1, "min": 0, "max": 2, "n": 3}
    assert tx["metrics"]["tok_s"] == {"median": 77.1, "min": 77.1, "max": 77.1, "n": 1}
    assert base["metrics"]["gbps"]["median"] == pytest.approx(9.2)            # even n: mean of the middle two
    assert base["metrics"]["gbps"]["n"] == 4
    assert base["metrics"]["retrans"] == {"median": 14, "min": 12, "max": 20, "n": 3}
    assert base["metrics"]["tok_s"] == {"median": 48.2, "min": 48.0, "max": 48.4, "n": 2}


def test_condition_table_all_null_and_default_metrics():
    runs = [{"condition": "a", "repetition": 1, "metrics": {"x": None, "y": 1}},
            {"condition": "b", "repetition": 1, "metrics": {"y": 2, "x": 3}},
            {"condition": "a", "repetition": 2, "metrics": {"x": None}}]
    table = link_condition_table(runs)
    assert list(table[0]["metrics"]) == ["x", "y"]
    assert table[0]["metrics"]["x"] == {"median": None, "min": None, "max": None, "n": 0}
    assert table[0]["metrics"]["y"] == {"median": 1, "min": 1, "max": 1, "n": 1}
    assert table[1]["metrics"]["x"] == {"median": 3, "min": 3, "max": 3, "n": 1}
    assert link_condition_table([]) == []
    assert link_condition_table(runs, ["y"])[1]["metrics"] == {"y": {"median": 2, "min": 2, "max": 2, "n": 1}}


@pytest.mark.parametrize(
    ("runs", "metrics", "message"),
    [
        ({"condition": "a"}, None, "runs must be a list"),
        (["a"], None, r"runs\[0\] must be a dict"),
        ([{"repetition": 1, "metrics": {}}], None, r"runs\[0\]\.condition must be a non-empty string"),
        ([{"condition": "a", "repetition": 1}], None, r"runs\[0\]\.metrics must be a dict"),
        ([{"condition": "a", "metrics": {"x": "9.1"}}], None, r"runs\[0\]\.metrics\.x must be a number or null"),
        ([{"condition": "a", "metrics": {"x": True}}], None, "must be a number or null"),
        ([{"condition": "a", "metrics": {"x": math.nan}}], None, "must be a number or null"),
        ([{"condition": "a", "repetition": 1, "metrics": {}}, {"condition": "a", "repetition": 1, "metrics": {}}],
         None, r"runs\[1\]: condition a repetition 1 appears twice"),
        ([{"condition": "a", "metrics": {"gbps": 1}}], ["gpbs"],
         r"metrics gpbs appear in no run \(runs have \['gbps'\]\)"),
        ([{"condition": "a", "metrics": {"gbps": 1}}], "gbps", "metrics must be a list of metric names"),
    ],
)
def test_condition_table_bad_input(runs, metrics, message):
    with pytest.raises(LinkVerdictError, match=message):
        link_condition_table(runs, metrics)


@pytest.mark.parametrize(
    ("bps", "text"),
    [(9.3e9, "9.30 Gbit/s"), (850e6, "850.00 Mbit/s"), (1500.0, "1.50 kbit/s"), (12.0, "12 bit/s"),
     (0.0, "0 bit/s"), (None, "not measured")],
)
def test_format_bps(bps, text):
    assert format_bps(bps) == text

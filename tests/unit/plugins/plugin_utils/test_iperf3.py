# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""iperf3_summary on real iperf3 3.12 reports recorded on loopback (see tests/unit/fixtures/iperf3/README.md)."""

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.plugin_utils._iperf3 import Iperf3ParseError, iperf3_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "iperf3"


def text(name):
    return (FIXTURES / name).read_text()


def report(name):
    return json.loads(text(name))


@pytest.mark.parametrize(
    ("name", "bidir", "reverse_mode", "streams", "forward_rx", "reverse_rx", "forward_retrans", "reverse_retrans"),
    [
        ("plain.json", False, False, 1, 37125542246.64163, None, 51, None),
        ("plain_p4.json", False, False, 4, 31077458948.183876, None, 13, None),
        ("bidir.json", True, False, 1, 14586525855.896358, 11933336264.61796, 62, 93),
        ("bidir_p4.json", True, False, 4, 12293949022.424387, 10821990691.086105, 8, 12),
        ("reverse.json", False, True, 1, None, 29570314730.862747, None, 43),
    ],
)
def test_directions(name, bidir, reverse_mode, streams, forward_rx, reverse_rx, forward_retrans, reverse_retrans):
    summary = iperf3_summary(text(name))
    assert summary["ok"] is True
    assert summary["error"] is None
    assert summary["started_at"] == json.loads(text(name))["start"]["timestamp"]["timesecs"] > 1796037500
    assert summary["bidir"] is bidir
    assert summary["reverse_mode"] is reverse_mode
    assert summary["streams"] == streams
    assert summary["version"] == "iperf 3.12"
    assert summary["requested_duration_s"] == 2
    assert 1.9 < summary["duration_s"] < 2.1
    for key, rx, retrans in (("forward", forward_rx, forward_retrans), ("reverse", reverse_rx, reverse_retrans)):
        if rx is None:
            assert summary[key] is None
        else:
            assert summary[key]["receiver_bps"] == rx
            assert summary[key]["retransmits"] == retrans
            assert summary[key]["sender_bps"] > 0
            assert 0 < summary[key]["bytes"] <= summary[key]["sender_bytes"]
    assert len(summary["intervals"]) == 2
    for interval in summary["intervals"]:
        assert interval["start"] < interval["end"]
        assert interval["omitted"] is False
        assert (interval["forward_bps"] is None) is (forward_rx is None)
        assert (interval["reverse_bps"] is None) is (reverse_rx is None)


def test_bidir_exact():
    summary = iperf3_summary(text("bidir.json"))
    assert summary["forward"] == {"sender_bps": 14625450923.3202, "receiver_bps": 14586525855.896358,
                                  "bytes": 3654156288, "sender_bytes": 3656777728, "retransmits": 62,
                                  "seconds": 2.004127}
    assert summary["reverse"] == {"sender_bps": 11968136656.489487, "receiver_bps": 11933336264.61796,
                                  "bytes": 2989490176, "sender_bytes": 2992373760, "retransmits": 93,
                                  "seconds": 2.004127}
    assert summary["intervals"][0] == {"start": 0.0, "end": 1.000517, "forward_bps": 16683655715.667046,
                                       "reverse_bps": 11938157061.195007, "omitted": False}
    assert summary["local_host"] == summary["remote_host"] == "127.0.0.1"


def test_reverse_mode_never_reports_forward():
    """-R measures server -> client only: it must not be readable as forward."""
    summary = iperf3_summary(text("reverse.json"))
    assert summary["forward"] is None
    assert summary["reverse"]["receiver_bps"] == 29570314730.862747
    assert [i["forward_bps"] for i in summary["intervals"]] == [None, None]


def test_parsed_dict_same_as_text():
    assert iperf3_summary(report("bidir_p4.json")) == iperf3_summary(text("bidir_p4.json"))
    assert iperf3_summary(text("plain.json").encode()) == iperf3_summary(text("plain.json"))


def test_error_run():
    summary = iperf3_summary(text("error_refused.json"))
    assert summary["ok"] is False
    assert summary["error"] == "unable to connect to server: Connection refused"
    assert summary["started_at"] is None  # the report of a run that never connected has no start timestamp
    assert summary["forward"] is None
    assert summary["reverse"] is None
    assert summary["intervals"] == []


def test_error_after_partial_run_reports_no_numbers():
    data = report("bidir.json")
    data["error"] = "control socket has closed unexpectedly"
    summary = iperf3_summary(data)
    assert (summary["ok"], summary["error"]) == (False, "control socket has closed unexpectedly")
    assert summary["forward"] is None and summary["intervals"] == []
    assert summary["bidir"] is False and summary["streams"] == 1


def test_truncated_shows_tail():
    truncated = text("truncated.json")
    with pytest.raises(Iperf3ParseError, match="not valid JSON") as info:
        iperf3_summary(truncated)
    assert repr(truncated[-40:])[1:-1] in str(info.value)
    assert "truncated" in str(info.value)


def without(name, *path):
    data = report(name)
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return data


def replaced(name, value, *path):
    data = report(name)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        (None, "got NoneType"),
        (42, "got int"),
        (["not", "a", "report"], "got list"),
        ("[1, 2]", "must be an object, got list"),
        ("iperf3: error - unable to connect to server", "not valid JSON"),
        (without("plain.json", "end"), "no end section"),
        (replaced("plain.json", {}, "end"), "empty end section"),
        (replaced("plain.json", [], "end"), r"\(top\)\.end must be an object, got list"),
        (without("bidir.json", "end", "sum_received"), "end.sum_received must be an object, got nothing"),
        (without("bidir.json", "end", "sum_received_bidir_reverse"),
         "end.sum_received_bidir_reverse must be an object"),
        (replaced("plain.json", "fast", "end", "sum_received", "bits_per_second"),
         "end.sum_received.bits_per_second must be a number, got 'fast'"),
        (replaced("plain.json", True, "end", "sum_sent", "bytes"), "end.sum_sent.bytes must be a number"),
        (replaced("plain.json", "UDP", "start", "test_start", "protocol"), "UDP run"),
        (replaced("bidir.json", 1, "start", "test_start", "reverse"), "both --bidir and -R"),
        (replaced("plain.json", {"a": 1}, "intervals"), "intervals must be a list"),
        (replaced("plain.json", [1], "intervals"), r"intervals\[0\] must be an object"),
        (without("bidir.json", "intervals", 1, "sum_bidir_reverse"), r"intervals\[1\]\.sum_bidir_reverse"),
    ],
)
def test_malformed(result, message):
    with pytest.raises(Iperf3ParseError, match=message):
        iperf3_summary(result)


def test_server_report_rejected():
    data = report("plain.json")
    start = data["start"]
    del start["connecting_to"]
    start["accepted_connection"] = {"host": "127.0.0.1", "port": 58200}
    with pytest.raises(Iperf3ParseError, match="server's report"):
        iperf3_summary(data)


def test_error_is_value_error():
    assert issubclass(Iperf3ParseError, ValueError)


def test_missing_retransmits_is_none():
    summary = iperf3_summary(without("reverse.json", "end", "sum_sent", "retransmits"))
    assert summary["reverse"]["retransmits"] is None


def test_streams_counted_when_test_start_lacks_them():
    assert iperf3_summary(without("bidir_p4.json", "start", "test_start", "num_streams"))["streams"] == 4
    assert iperf3_summary(without("plain_p4.json", "start", "test_start", "num_streams"))["streams"] == 4


def test_input_not_modified():
    data = report("bidir.json")
    before = copy.deepcopy(data)
    iperf3_summary(data)
    assert data == before

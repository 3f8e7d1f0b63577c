# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The day-one matrix judged per host: a transmit path weak against every peer (an observed suspect: about
3.6 Gb/s out where the others send 8-9.3 to the same receivers, while it receives at full rate) against one weak
pair (a cable or a port), a receive path, a clean cluster, and two hosts (no host verdict)."""

from __future__ import annotations

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _pair_verdict
from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import LinkVerdictError

HOSTS = ("lab-a", "lab-b", "lab-c", "lab-d")
G = 1e9


def matrix(rate, hosts=HOSTS):
    """Every ordered pair's test, its rate from ``rate(sender, receiver)`` in Gb/s."""
    return [{"from": s, "to": r, "bps": rate(s, r) * G} for s in hosts for r in hosts if s != r]


def clean(sender, receiver):
    return 9.3 - 0.1 * HOSTS.index(sender) + 0.05 * HOSTS.index(receiver)  # a little spread, none weak


def test_a_host_whose_transmit_path_is_weak_against_every_peer_is_named_with_its_numbers():
    result = _pair_verdict.pair_host_verdicts(matrix(lambda s, r: 3.58 if s == "lab-c" else clean(s, r)), HOSTS)
    assert result["suspects"] == ["lab-c"] and result["weak_pairs"] == []
    verdict = result["hosts"]["lab-c"]
    assert verdict["verdict"] == "transmit weak" and not verdict["weak_receive"]
    assert [h["verdict"] for n, h in result["hosts"].items() if n != "lab-c"] == ["clean"] * 3
    assert verdict["text"].startswith("lab-c: its transmit path is weak against every peer: it sends 3.58 Gbit/s to "
                                      "lab-a, 3.58 Gbit/s to lab-b, 3.58 Gbit/s to lab-d where the other senders "
                                      "reach the same receivers at ")
    assert verdict["text"].endswith("(threshold 1.5x); observed, a characterization, cause not determined")
    assert [t["sender_side_ratio"] for t in verdict["sent"]] == [2.54, 2.57, 2.63]  # 9.1, 9.2, 9.4 over 3.58


def test_one_weak_pair_is_a_cable_or_a_port_not_a_host():
    result = _pair_verdict.pair_host_verdicts(
        matrix(lambda s, r: 2.0 if (s, r) == ("lab-b", "lab-d") else clean(s, r)), HOSTS)
    assert result["suspects"] == [] and all(h["verdict"] == "clean" for h in result["hosts"].values())
    [pair] = result["weak_pairs"]
    assert (pair["from"], pair["to"], pair["bps"]) == ("lab-b", "lab-d", 2.0 * G)
    assert "one pair, not a host: a cable, a port or the pair's path through the switch" in pair["text"]


def test_a_weak_receive_path_is_told_from_a_weak_transmit_path():
    result = _pair_verdict.pair_host_verdicts(matrix(lambda s, r: 4.0 if r == "lab-a" else clean(s, r)), HOSTS)
    assert result["suspects"] == ["lab-a"] and result["hosts"]["lab-a"]["verdict"] == "receive weak"
    assert "its receive path is weak against every peer" in result["text"]


def test_a_clean_cluster_names_no_suspect():
    result = _pair_verdict.pair_host_verdicts(matrix(clean), HOSTS)
    assert result["suspects"] == [] and result["weak_pairs"] == []
    assert result["text"] == "every host clean: no test weak against the others (threshold 1.5x)"


def test_a_test_that_moved_nothing_is_weak_where_it_is():
    result = _pair_verdict.pair_host_verdicts(matrix(lambda s, r: 0.0 if s == "lab-d" else clean(s, r)), HOSTS)
    assert result["suspects"] == ["lab-d"] and result["hosts"]["lab-d"]["verdict"] == "transmit weak"


def test_two_hosts_get_no_host_verdict():
    result = _pair_verdict.pair_host_verdicts(matrix(lambda s, r: 3.5 if s == "a" else 9.3, ("a", "b")), ["a", "b"])
    assert result["judged"] is False and result["suspects"] == []
    assert result["hosts"]["a"]["verdict"] == "not judged"
    assert result["text"] == "two hosts: no host verdict, see the pair's asymmetry verdict"


def test_three_hosts_judge_against_the_one_other_sender():
    hosts = HOSTS[:3]
    result = _pair_verdict.pair_host_verdicts(matrix(lambda s, r: 3.5 if s == "lab-b" else 9.3, hosts), hosts)
    assert result["suspects"] == ["lab-b"] and result["weak_pairs"] == []


@pytest.mark.parametrize(("tests", "hosts", "message"), [
    (matrix(clean)[:-1], HOSTS, "the matrix lacks the tests lab-d -> lab-c"),
    (matrix(clean) + [{"from": "lab-a", "to": "lab-b", "bps": 1}], HOSTS, "lab-a -> lab-b is given twice"),
    ([{"from": "lab-a", "to": "lab-a", "bps": 1}], HOSTS, "two different hosts"),
    ([{"from": "lab-a", "to": "lab-z", "bps": 1}], HOSTS, "two different hosts"),
    ([dict(t, bps=-1) for t in matrix(clean)], HOSTS, "must not be negative"),
    (matrix(clean), ["lab-a"], "two or more distinct host names"),
    ("no", HOSTS, "tests must be a list"),
])
def test_bad_input_is_refused(tests, hosts, message):
    with pytest.raises(LinkVerdictError, match=message):
        _pair_verdict.pair_host_verdicts(tests, hosts)

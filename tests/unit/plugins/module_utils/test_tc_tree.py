"""Tests of _tc's qdisc trees: what the ledger records before a tc change (``tree``), the tc argv that make it again
(``qdisc_argv``, ``rebuild_commands``), what cannot be made again (``rebuild_problem``) and the restore's comparison
(``tree_differences``), on `tc -j qdisc show` output from tests/unit/fixtures/tc/ (see capture.sh there)."""

from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _tc

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tc"


def tree(name):
    return _tc.tree(_tc.parse_qdiscs((FIXTURES / f"{name}.json").read_text()))


@pytest.mark.parametrize(("name", "argv"), [
    ("site_fq", ["fq", "limit", "10000", "flow_limit", "100", "buckets", "1024", "orphan_mask", "1023", "quantum",
                 "3028b", "initial_quantum", "15140b", "maxrate", "125000000bps", "low_rate_threshold", "68750bps",
                 "refill_delay", "40000us", "timer_slack", "10000ns", "horizon", "10000000us", "horizon_drop"]),
    # codel keeps its times in 1024 ns units and shows them rounded down: one microsecond more is the same unit
    ("site_fq_codel", ["fq_codel", "limit", "10240", "flows", "1024", "quantum", "1514", "target", "5000us",
                       "interval", "100000us", "memory_limit", "33554432b", "drop_batch", "64", "ecn"]),
    ("site_netem", ["netem", "limit", "1000", "delay", "10000us", "loss", "1%"]),
    ("tx_cliff", ["tbf", "rate", "37500000bps", "burst", "65512b", "latency", "50000us"]),
    ("site_bfifo", ["bfifo", "limit", "102400b"]),
    ("site_pfifo_fast", ["pfifo_fast"]),
    ("site_htb_no_class", ["htb", "r2q", "5", "default", "10", "direct_qlen", "1000"]),
    ("site_mq", ["mq"]),
])
def test_each_kind_back_to_its_tc_arguments(name, argv):
    assert _tc.rebuild_problem(tree(name)) is None
    assert _tc.qdisc_argv(tree(name)[0]) == argv


def test_a_tree_is_the_egress_qdiscs_root_first():
    assert tree("tx_cliff_with_ingress") == [
        {"kind": "tbf", "handle": "1ab:", "parent": None, "options": {"rate": 12500000, "burst": 32762, "lat": 20000}}]
    assert tree("clean_veth") == [{"kind": "noqueue", "handle": "0:", "parent": None, "options": {}}]
    assert [q["parent"] for q in tree("site_mq")] == [None, "2:1"]


def test_a_site_tbf_with_a_pfifo_child_is_made_again_parent_first():
    assert _tc.rebuild_commands("tb0", tree("site_tbf_pfifo"), _tc.parse_qdiscs(
        (FIXTURES / "lossy.json").read_text())) == [
        ["tc", "qdisc", "del", "dev", "tb0", "root"],
        ["tc", "qdisc", "add", "dev", "tb0", "root", "handle", "5:", "tbf", "rate", "2500000000bps", "burst",
         "65000b", "latency", "50000us"],
        ["tc", "qdisc", "replace", "dev", "tb0", "parent", "5:1", "handle", "10:", "pfifo", "limit", "50"],
    ]


@pytest.mark.parametrize("default", ["clean_veth", "clean_pfifo_fast", "default_fq_codel"])
def test_a_kernel_default_root_comes_back_by_deleting_ours(default):
    lossy = _tc.parse_qdiscs((FIXTURES / "lossy.json").read_text())
    assert _tc.rebuild_commands("tb0", tree(default), lossy, tc="/sbin/tc") == [
        ["/sbin/tc", "qdisc", "del", "dev", "tb0", "root"]]


def test_nothing_to_do_when_the_tree_is_there():
    lossy = _tc.parse_qdiscs((FIXTURES / "lossy.json").read_text())
    assert _tc.rebuild_commands("tb0", tree("lossy"), lossy) == []


@pytest.mark.parametrize(("qdisc", "words"), [
    ({"kind": "cake", "handle": "1:", "parent": None, "options": {"bandwidth": 1}}, "cake is not a qdisc kind"),
    ({"kind": "tbf", "handle": "1:", "parent": None, "options": {"rate": 1, "burst": 1, "lat": 1, "overhead": 14}},
     "tbf 1: has overhead, which inferlab cannot set back"),
    ({"kind": "tbf", "handle": "1:", "parent": None, "options": {"rate": 1, "burst": 1}}, "tbf 1: lacks lat"),
    ({"kind": "netem", "handle": "1:", "parent": None,
      "options": {"limit": 1000, "delay": {"delay": 0.01, "jitter": 0.002, "correlation": 0}}},
     "netem with jitter"),
    ({"kind": "fq_codel", "handle": "1:", "parent": None, "options": {"limit": "many"}}, "limit 'many' is not a count"),
    ({"kind": "pfifo", "handle": "1:", "parent": None, "options": {"limit": True}}, "is not a count"),
])
def test_what_cannot_be_made_again_is_named(qdisc, words):
    assert words in _tc.rebuild_problem([qdisc])
    with pytest.raises(_tc.TreeError, match=words):
        _tc.rebuild_commands("tb0", [qdisc], [])


def test_an_htb_with_classes_cannot_be_made_again():
    classes = (FIXTURES / "site_htb_classes.txt").read_text()
    assert _tc.count_classes(classes, "htb") == 1
    assert _tc.rebuild_problem(tree("foreign_htb"), htb_classes=1) == (
        "htb 1: has 1 classes, which are not recorded")


@pytest.mark.parametrize(("value", "words"), [
    ("fq", "a qdisc tree is a list of qdiscs, got str"),
    ([{"kind": "fq", "handle": "1:"}], "qdisc 0 of the tree is not"),
    ([{"kind": "fq", "handle": "root", "parent": None, "options": {}}], "qdisc 0 of the tree is not"),
    ([{"kind": "pfifo", "handle": "2:", "parent": "1:1", "options": {}}], "the root of a qdisc tree comes first"),
    ([{"kind": "tbf", "handle": "1:", "parent": None, "options": {"rate": 1, "burst": 1, "lat": 1}},
      {"kind": "pfifo", "handle": "2:", "parent": "7:1", "options": {"limit": 1}}], "hang from no qdisc of the tree"),
])
def test_malformed_trees_are_refused(value, words):
    assert words in _tc.rebuild_problem(value)
    with pytest.raises(_tc.TreeError, match=words):
        _tc.rebuild_commands("tb0", value, [])


@pytest.mark.parametrize("text", ["{", '{"kind": "tbf"}', '[{"kind": "tbf"}]', "[1]"])
def test_malformed_tc_output_is_refused(text):
    with pytest.raises(_tc.TcError):
        _tc.parse_qdiscs(text)


def test_differences_name_gone_new_and_changed_qdiscs():
    fq = tree("site_fq")
    assert _tc.tree_differences(fq, fq) == []
    changed = [dict(fq[0], options=dict(fq[0]["options"], flow_limit=200))]
    assert _tc.tree_differences(fq, changed) == ["fq 8001: root: flow_limit 100, now 200"]
    assert _tc.tree_differences(tree("site_tbf_pfifo"), tree("tx_cliff")) == [
        "root: tbf 5: root (burst 65000, lat 50000, rate 2500000000), now tbf 1ab: root (burst 65512, lat 50000, "
        "rate 37500000)",
        "pfifo 10: parent 5:1 is gone",
    ]
    assert _tc.tree_differences(tree("site_mq"), tree("site_mq")) == []


def test_a_rebuilt_tbf_reads_back_within_what_the_kernel_rounds():
    """iproute2 6.1 read back 65375 bytes and 50001 us after one rebuild of 65500 bytes, 50000 us at 1 Gbit/s."""
    before = tree("lossy")
    after = [dict(before[0], options={"rate": 125000000, "burst": 65375, "lat": 50001}), before[1]]
    assert _tc.tree_differences(before, after) == []
    worse = [dict(before[0], options={"rate": 125000000, "burst": 64000, "lat": 50001}), before[1]]
    assert _tc.tree_differences(before, worse) == ["tbf 1ab: root: burst 65500, now 64000"]

"""Tests of _tc: the tc argv of each link profile, and the profile read back from real `tc -j qdisc show` output.

The fixtures in tests/unit/fixtures/tc/ were captured with real tc (iproute2 6.1, kernel 6.18) on a throwaway veth in
a throwaway network namespace by tests/unit/fixtures/tc/capture.sh.
"""

import json
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_settings, _tc

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tc"
TX_CLIFF = {"rate_mbit": 300, "burst_kb": 64, "latency_ms": 50}
LOSSY = {"rate_mbit": 1000, "burst_kb": 64, "latency_ms": 50, "pfifo_limit": 10}


def fixture(name):
    return (FIXTURES / f"{name}.json").read_text()


def classified(name):
    return _tc.classify(_tc.parse_qdiscs(fixture(name)))


# --- argv ------------------------------------------------------------------------------------------------------


def test_argv_of_each_command():
    assert _tc.show_argv("thunderbolt0") == ["tc", "-j", "qdisc", "show", "dev", "thunderbolt0"]
    assert _tc.tbf_argv("thunderbolt0", TX_CLIFF, tc="/usr/sbin/tc") == [
        "/usr/sbin/tc", "qdisc", "replace", "dev", "thunderbolt0", "root", "handle", "1ab:", "tbf",
        "rate", "300mbit", "burst", "64kb", "latency", "50ms"]
    assert _tc.pfifo_argv("thunderbolt0", LOSSY) == [
        "tc", "qdisc", "replace", "dev", "thunderbolt0", "parent", "1ab:1", "handle", "1ac:", "pfifo", "limit", "10"]
    assert _tc.delete_root_argv("tb0") == ["tc", "qdisc", "del", "dev", "tb0", "root"]


def test_wanted_parameters_defaults_and_overrides():
    assert _tc.wanted_parameters("clean", rate_mbit=5) == {}
    assert _tc.wanted_parameters("tx_cliff") == TX_CLIFF
    assert _tc.wanted_parameters("tx_cliff", pfifo_limit=10) == TX_CLIFF  # pfifo_limit is lossy's only
    assert _tc.wanted_parameters("lossy") == LOSSY
    assert _tc.wanted_parameters("lossy", rate_mbit=500, burst_kb=32, latency_ms=20, pfifo_limit=5) == {
        "rate_mbit": 500, "burst_kb": 32, "latency_ms": 20, "pfifo_limit": 5}


@pytest.mark.parametrize("profile, kwargs, words", [
    ("netem", {}, "unknown link profile 'netem'"),
    ("tx_cliff", {"rate_mbit": 0}, "rate_mbit must be a positive integer, got 0"),
    ("lossy", {"pfifo_limit": -1}, "pfifo_limit must be a positive integer"),
    ("tx_cliff", {"burst_kb": True}, "burst_kb must be a positive integer"),
    ("tx_cliff", {"latency_ms": 1.5}, "latency_ms must be a positive integer"),
])
def test_wanted_parameters_refused(profile, kwargs, words):
    with pytest.raises(_tc.TcError, match=words):
        _tc.wanted_parameters(profile, **kwargs)


# --- reading and classifying real tc output ----------------------------------------------------------------------


@pytest.mark.parametrize("name, profile, parameters, reason", [
    ("clean_veth", "clean", {}, "the kernel default root qdisc (noqueue 0:)"),
    ("clean_pfifo_fast", "clean", {}, "the kernel default root qdisc (pfifo_fast 0:)"),
    ("tx_cliff", "tx_cliff", {"rate_mbit": 300, "burst_kb": 63.98, "latency_ms": 50}, "tbf 1ab: alone"),
    ("tx_cliff_stats", "tx_cliff", {"rate_mbit": 300, "burst_kb": 63.98, "latency_ms": 50}, "tbf 1ab: alone"),
    ("tx_cliff_100mbit", "tx_cliff", {"rate_mbit": 100, "burst_kb": 31.99, "latency_ms": 20}, "tbf 1ab: alone"),
    ("tx_cliff_with_ingress", "tx_cliff", {"rate_mbit": 100, "burst_kb": 31.99, "latency_ms": 20},
     "tbf 1ab: alone"),
    ("lossy", "lossy", {"rate_mbit": 1000, "burst_kb": 63.96, "latency_ms": 50, "pfifo_limit": 10},
     "tbf 1ab: with pfifo 1ac: limit 10"),
    ("lossy_limit20", "lossy", {"rate_mbit": 1000, "burst_kb": 63.96, "latency_ms": 50, "pfifo_limit": 20},
     "tbf 1ab: with pfifo 1ac: limit 20"),
    ("lossy_after_tbf_replace", "lossy",
     {"rate_mbit": 1000, "burst_kb": 63.96, "latency_ms": 50, "pfifo_limit": 6315536},
     "tbf 1ab: with pfifo 1ac: limit 6315536"),
    ("foreign_htb", "foreign", {}, "a root qdisc inferlab did not make: htb 1: root"),
    ("foreign_tbf_auto_handle", "foreign", {}, "a root qdisc inferlab did not make: tbf 8002: root"),
    ("foreign_child", "foreign", {},
     "the tbf 1ab: of inferlab with children it did not make: tbf 1ab: root, bfifo 9: parent 1ab:1"),
])
def test_classify_real_output(name, profile, parameters, reason):
    result = classified(name)
    assert result == {"profile": profile, "parameters": parameters, "reason": reason}
    assert _tc.classify_output(fixture(name)) == result


def test_parse_keeps_every_qdisc():
    qdiscs = _tc.parse_qdiscs(fixture("tx_cliff_with_ingress"))
    assert qdiscs == [
        {"kind": "tbf", "handle": "1ab:", "parent": None, "root": True,
         "options": {"rate": 12500000, "burst": 32762, "lat": 20000}},
        {"kind": "ingress", "handle": "ffff:", "parent": "ffff:fff1", "root": False, "options": {}},
    ]


def test_older_iproute2_prints_strings():
    """iproute2 before 5.x printed tbf's rate, burst and lat as strings (sprint_rate, sprint_size, sprint_time)."""
    old = json.dumps([{"kind": "tbf", "handle": "1ab:", "root": True, "refcnt": 2,
                       "options": {"rate": "300Mbit", "burst": "64Kb", "lat": "50.0ms"}},
                      {"kind": "pfifo", "handle": "1ac:", "parent": "1ab:1", "options": {"limit": 10}}])
    result = _tc.classify_output(old)
    assert result["profile"] == "lossy"
    assert result["parameters"] == {"rate_mbit": 300, "burst_kb": 64, "latency_ms": 50, "pfifo_limit": 10}
    assert _tc.rate_bytes("1Gbit") == 125e6
    assert _tc.size_bytes("65512b") == 65512
    assert _tc.time_us("800us") == 800


def test_unreadable_tbf_options_are_foreign():
    odd = json.dumps([{"kind": "tbf", "handle": "1ab:", "root": True, "options": {"rate": "fast"}}])
    result = _tc.classify_output(odd)
    assert result["profile"] == "foreign"
    assert "no burst, lat" in result["reason"]
    odd = json.dumps([{"kind": "tbf", "handle": "1ab:", "root": True,
                       "options": {"rate": "fast", "burst": 1, "lat": 1}}])
    assert "rate 'fast' is not a quantity tc prints" in _tc.classify_output(odd)["reason"]


def test_empty_output_is_clean():
    assert _tc.parse_qdiscs("") == []
    assert _tc.classify([])["profile"] == "clean"


@pytest.mark.parametrize("text, words", [
    (fixture("lossy")[:60], "not JSON"),  # a cut-short real output
    ("Cannot find device \"itc9\"\n", "not JSON"),
    ('{"kind": "tbf"}', "printed dict, expected a list"),
    ('[{"handle": "1ab:"}]', 'without "kind" and "handle"'),
    ('["tbf"]', 'without "kind" and "handle"'),
])
def test_malformed_output(text, words):
    with pytest.raises(_tc.TcError, match=words):
        _tc.parse_qdiscs(text)


# --- comparing and planning --------------------------------------------------------------------------------------


def test_rounded_read_back_counts_as_the_same():
    assert _tc.same_parameters(classified("tx_cliff")["parameters"], TX_CLIFF)
    assert _tc.same_parameters(classified("lossy")["parameters"], LOSSY)
    assert _tc.same_parameters({}, {})
    assert not _tc.same_parameters(classified("tx_cliff_100mbit")["parameters"], TX_CLIFF)
    assert not _tc.same_parameters(classified("lossy_limit20")["parameters"], LOSSY)
    assert not _tc.same_parameters(classified("tx_cliff")["parameters"], LOSSY)
    assert not _tc.same_parameters(dict(TX_CLIFF, burst_kb=60), TX_CLIFF)
    assert not _tc.same_parameters(dict(TX_CLIFF, latency_ms=49), TX_CLIFF)
    # measured: at 20 Gbit/s a 64 kb burst reads back 536 bytes short, a 256 kb one 2144 bytes short
    fast = {"rate_mbit": 20000, "burst_kb": 256, "latency_ms": 50}
    assert _tc.same_parameters(dict(fast, burst_kb=(256 * 1024 - 2144) / 1024), fast)
    assert not _tc.same_parameters(dict(fast, burst_kb=250), fast)
    assert not _tc.same_parameters(dict(TX_CLIFF, burst_kb=64.5), TX_CLIFF)  # never more than asked


TBF_300 = ["replace", "root", "tbf", "300mbit"]
TBF_1000 = ["replace", "root", "tbf", "1000mbit"]
PFIFO_10 = ["replace", "pfifo", "10"]
DEL = ["del", "root"]


def short(argv):
    """The words of a tc argv that tell the commands of a plan apart."""
    keep = {"replace", "del", "root", "tbf", "pfifo"}
    return [w for w in argv[2:] if w in keep or w.endswith("mbit") or w.isdigit()]


@pytest.mark.parametrize("current, profile, kwargs, expected", [
    ("clean_veth", "clean", {}, []),
    ("clean_pfifo_fast", "clean", {}, []),
    ("clean_veth", "tx_cliff", {}, [TBF_300]),
    ("tx_cliff", "tx_cliff", {}, []),
    ("tx_cliff_with_ingress", "tx_cliff", {"rate_mbit": 100, "burst_kb": 32, "latency_ms": 20}, []),
    ("tx_cliff_100mbit", "tx_cliff", {}, [TBF_300]),
    ("lossy", "tx_cliff", {}, [DEL, TBF_300]),
    ("clean_veth", "lossy", {}, [TBF_1000, PFIFO_10]),
    ("lossy", "lossy", {}, []),
    ("lossy_limit20", "lossy", {}, [PFIFO_10]),
    ("lossy_after_tbf_replace", "lossy", {}, [PFIFO_10]),
    ("lossy", "lossy", {"rate_mbit": 300}, [["replace", "root", "tbf", "300mbit"], PFIFO_10]),
    ("tx_cliff", "lossy", {"rate_mbit": 300}, [PFIFO_10]),
    ("tx_cliff", "lossy", {}, [TBF_1000, PFIFO_10]),
    ("tx_cliff", "clean", {}, [DEL]),
    ("lossy", "clean", {}, [DEL]),
    ("foreign_htb", "tx_cliff", {"force": True}, [DEL, TBF_300]),
    ("foreign_child", "clean", {"force": True}, [DEL]),
])
def test_plan(current, profile, kwargs, expected):
    force = kwargs.pop("force", False)
    wanted = _tc.wanted_parameters(profile, **kwargs)
    commands = _tc.plan("tb0", classified(current), profile, wanted, force=force)
    assert [short(c) for c in commands] == expected
    assert all(c[:2] == ["tc", "qdisc"] and c[3:5] == ["dev", "tb0"] for c in commands)


@pytest.mark.parametrize("current", ["foreign_htb", "foreign_tbf_auto_handle", "foreign_child"])
@pytest.mark.parametrize("profile", ["clean", "tx_cliff", "lossy"])
def test_plan_refuses_a_foreign_root(current, profile):
    with pytest.raises(_tc.ForeignQdiscError) as exc:
        _tc.plan("tb0", classified(current), profile, _tc.wanted_parameters(profile))
    message = str(exc.value)
    assert message.startswith(f"tb0: {classified(current)['reason']}; refusing to ")
    assert "force: true" in message and "tc qdisc del dev tb0 root" in message


# --- the ledger's tc_profile kind (its undo classifies with this module) ------------------------------------------


def test_the_ledger_records_every_profile_but_clean():
    assert set(_ledger_settings.TC_PROFILES) == set(_tc.PROFILES) - {"clean"}

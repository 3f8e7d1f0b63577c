"""Link profiles on a real interface: the tc argv of _tc applied with the real tc to a throwaway veth pair in a
throwaway network namespace, read back and classified, then removed by the ledger's tc_profile undo.

Needs root, `ip` and `tc`; skipped otherwise. Everything it makes is named with an `itc` prefix and lives in its own
namespace (169.254.251.0/30); deleting the namespace in the `finally` removes the veth pair with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_undo, _tc

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
IP, TC = shutil.which("ip", path=SBIN), shutil.which("tc", path=SBIN)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a network namespace and veth pair"),
    pytest.mark.skipif(not IP or not TC, reason="needs `ip` and `tc` (Debian package iproute2)"),
]


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, env=dict(os.environ, LC_ALL="C"),
                          timeout=30)


@pytest.fixture
def netns():
    """``(namespace, interface)``: a veth pair itc<N>a/itc<N>b inside a namespace of its own, both ends up."""
    tag = f"{os.getpid() % 100000}{os.urandom(1).hex()}"
    ns, a, b = f"itc{tag}", f"itc{tag}a", f"itc{tag}b"
    sh(IP, "netns", "add", ns)
    try:
        sh(IP, "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b)
        sh(IP, "-n", ns, "addr", "add", "169.254.251.1/30", "dev", a)
        sh(IP, "-n", ns, "addr", "add", "169.254.251.2/30", "dev", b)
        for dev in (a, b):
            sh(IP, "-n", ns, "link", "set", dev, "up")
        yield ns, a
    finally:
        sh(IP, "netns", "del", ns, check=False)
    assert ns not in sh(IP, "netns", "list").stdout


def in_ns(ns, argv):
    return sh(IP, "netns", "exec", ns, *argv)


def current(ns, dev):
    return _tc.classify_output(in_ns(ns, _tc.show_argv(dev, TC)).stdout)


def apply(ns, dev, profile, force=False, **kwargs):
    """What the module does, without Ansible: plan from the real state, run, read back. Returns the commands run."""
    wanted = _tc.wanted_parameters(profile, **kwargs)
    commands = _tc.plan(dev, current(ns, dev), profile, wanted, force=force, tc=TC)
    for argv in commands:
        in_ns(ns, argv)
    after = current(ns, dev)
    assert after["profile"] == profile, after
    assert _tc.same_parameters(after["parameters"], wanted), (after, wanted)
    return commands


def verbs(commands):
    return [" ".join(c[1:3]) + (" pfifo" if "pfifo" in c else " tbf" if "tbf" in c else "") for c in commands]


def test_profiles_on_a_real_veth(netns):
    ns, dev = netns
    assert current(ns, dev)["profile"] == "clean"
    assert verbs(apply(ns, dev, "tx_cliff")) == ["qdisc replace tbf"]
    assert apply(ns, dev, "tx_cliff") == []  # idempotent against the kernel's rounded read-back
    assert verbs(apply(ns, dev, "tx_cliff", rate_mbit=20000, burst_kb=64)) == ["qdisc replace tbf"]
    assert apply(ns, dev, "tx_cliff", rate_mbit=20000, burst_kb=64) == []
    assert verbs(apply(ns, dev, "lossy")) == ["qdisc replace tbf", "qdisc replace pfifo"]
    assert apply(ns, dev, "lossy") == []
    assert verbs(apply(ns, dev, "lossy", pfifo_limit=20)) == ["qdisc replace pfifo"]
    assert verbs(apply(ns, dev, "lossy", rate_mbit=500, pfifo_limit=20)) == [
        "qdisc replace tbf", "qdisc replace pfifo"]  # the tbf replace resets the child's limit: set again
    assert verbs(apply(ns, dev, "tx_cliff")) == ["qdisc del", "qdisc replace tbf"]
    assert verbs(apply(ns, dev, "clean")) == ["qdisc del"]
    assert apply(ns, dev, "clean") == []


def test_a_foreign_root_qdisc_is_refused_then_forced(netns):
    ns, dev = netns
    in_ns(ns, [TC, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"])
    assert current(ns, dev)["profile"] == "foreign"
    with pytest.raises(_tc.ForeignQdiscError):
        apply(ns, dev, "tx_cliff")
    assert current(ns, dev)["profile"] == "foreign"
    assert verbs(apply(ns, dev, "lossy", force=True)) == ["qdisc del", "qdisc replace tbf", "qdisc replace pfifo"]


def test_the_ledger_undo_removes_the_profile_for_real(netns, tmp_path):
    ns, dev = netns
    ledger_dir, host = str(tmp_path / "ledger"), "itc-host"
    ctx = _ledger_undo.UndoContext(tc_command=[IP, "netns", "exec", ns, TC])
    # a pending entry whose change never happened: nothing to remove
    _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": "tx_cliff"})
    # recorded before, applied, marked: the way the link_profile role does it
    line = _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": "lossy"})
    apply(ns, dev, "lossy")
    _ledger_core.mark(ledger_dir, host, line["id"], "applied")
    result = _ledger_undo.undo(ledger_dir, host, ctx=ctx)
    assert not result["failed"], result
    assert [d["message"].split(" (")[0] for d in result["details"]] == [
        f"removed the lossy profile from {dev}", f"no tx_cliff profile on {dev}"]
    assert current(ns, dev)["profile"] == "clean"
    # a foreign root qdisc is never deleted by the undo
    in_ns(ns, [TC, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"])
    _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": "tx_cliff"})
    result = _ledger_undo.undo(ledger_dir, host, ctx=ctx)
    assert "not deleting it" in result["failed"][0]["error"]
    assert current(ns, dev)["profile"] == "foreign"


def tree_now(ns, dev):
    return _tc.tree(_tc.parse_qdiscs(in_ns(ns, _tc.show_argv(dev, TC)).stdout))


def kernel_has(ns, dev, kind):
    """Whether this kernel has the qdisc ``kind`` (sch_fq, sch_fq_codel, sch_netem are modules some kernels lack)."""
    made = sh(IP, "netns", "exec", ns, TC, "qdisc", "add", "dev", dev, "root", "handle", "77:", kind, check=False)
    sh(IP, "netns", "exec", ns, TC, "qdisc", "del", "dev", dev, "root", check=False)
    return made.returncode == 0


# a site's own qdiscs (and the lab's stock driver profile, set outside the ledger), as `tc qdisc` arguments
SITE_TREES = {
    "stock_driver_lossy": [["root", "handle", "1ab:", "tbf", "rate", "1000mbit", "burst", "64kb", "latency", "50ms"],
                           ["parent", "1ab:1", "handle", "1ac:", "pfifo", "limit", "10"]],
    "tbf_shaper_with_pfifo": [["root", "handle", "5:", "tbf", "rate", "20gbit", "burst", "64kb", "latency", "50ms"],
                              ["parent", "5:1", "handle", "10:", "pfifo", "limit", "50"]],
    "bfifo": [["root", "handle", "3:", "bfifo", "limit", "100kb"]],
    "htb_without_classes": [["root", "handle", "1:", "htb", "default", "10", "r2q", "5"]],
    "mq": [["root", "handle", "2:", "mq"]],
    "fq": [["root", "handle", "8001:", "fq", "limit", "5000", "flow_limit", "50", "quantum", "3028",
            "maxrate", "1gbit"]],
    "fq_codel": [["root", "handle", "8001:", "fq_codel", "limit", "2048", "target", "7ms", "interval", "150ms",
                  "noecn"]],
    "netem": [["root", "handle", "8001:", "netem", "delay", "10ms", "loss", "1%"]],
}


@pytest.mark.parametrize("site", sorted(SITE_TREES))
@pytest.mark.parametrize("profile", ["tx_cliff", "lossy", "clean"])
def test_the_undo_puts_back_the_whole_tree_for_real(netns, tmp_path, site, profile):
    """What the link_profile role does (read the tree, record it, apply, mark), then the restore's undo: the tree
    read back is the one recorded (a tbf's burst within what the kernel rounds, see _tc.tree_differences)."""
    ns, dev = netns
    kind = SITE_TREES[site][0][3]
    if kind in ("fq", "fq_codel", "netem") and not kernel_has(ns, dev, kind):
        pytest.skip(f"this kernel has no {kind} qdisc")
    for argv in SITE_TREES[site]:
        in_ns(ns, [TC, "qdisc", "replace" if argv[0] == "parent" else "add", "dev", dev, *argv])
    before = tree_now(ns, dev)
    assert _tc.rebuild_problem(before) is None
    ledger_dir, host = str(tmp_path / "ledger"), "itc-host"
    line = _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": profile,
                                                                "qdiscs": before})
    changed = apply(ns, dev, profile, force=True)  # force: what the module does once the tree can be put back
    assert bool(_tc.tree_differences(before, tree_now(ns, dev))) == bool(changed)  # (lossy on lossy: no change)
    _ledger_core.mark(ledger_dir, host, line["id"], "applied")
    result = _ledger_undo.undo(ledger_dir, host, ctx=_ledger_undo.UndoContext(tc_command=[IP, "netns", "exec", ns,
                                                                                          TC]))
    assert not result["failed"], result
    assert result["details"][0]["message"].startswith(
        f"put back the qdiscs of {dev} from before the {profile}" if changed else f"{dev} has the qdiscs recorded")
    assert _tc.tree_differences(before, tree_now(ns, dev)) == []


def test_a_default_root_comes_back_and_an_entry_whose_change_never_happened_changes_nothing(netns, tmp_path):
    ns, dev = netns
    before = tree_now(ns, dev)  # noqueue 0:, the veth's default
    ledger_dir, host = str(tmp_path / "ledger"), "itc-host"
    ctx = _ledger_undo.UndoContext(tc_command=[IP, "netns", "exec", ns, TC])
    _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": "lossy", "qdiscs": before})
    result = _ledger_undo.undo(ledger_dir, host, ctx=ctx)  # pending, never applied
    assert "nothing to put back" in result["details"][0]["message"]
    _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": "lossy", "qdiscs": before})
    apply(ns, dev, "lossy")
    assert not _ledger_undo.undo(ledger_dir, host, ctx=ctx)["failed"]
    assert tree_now(ns, dev) == before


def test_the_undo_leaves_qdiscs_someone_else_put_there_since(netns, tmp_path):
    ns, dev = netns
    before = tree_now(ns, dev)
    ledger_dir, host = str(tmp_path / "ledger"), "itc-host"
    _ledger_core.record(ledger_dir, host, "tc_profile", {"interface": dev, "profile": "tx_cliff", "qdiscs": before})
    in_ns(ns, [TC, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"])
    result = _ledger_undo.undo(ledger_dir, host, ctx=_ledger_undo.UndoContext(tc_command=[IP, "netns", "exec", ns,
                                                                                          TC]))
    assert "not the tx_cliff profile this entry made" in result["failed"][0]["error"]
    assert [q["kind"] for q in tree_now(ns, dev)] == ["htb"]

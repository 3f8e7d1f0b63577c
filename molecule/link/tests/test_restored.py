"""After the restore that ends converge: no link profile of ours is left (the restore's tc_profile undo removes the
root qdisc; the lab's stock-driver profile comes back at the next driver reload, not here), and no iperf3 server and
no sampler is left on any ring host."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import RING  # noqa: E402

from inferlab.lab import control as lab  # noqa: E402

testinfra_hosts = RING


def test_no_link_profile_is_left(host):
    tc = lab.load_tc()
    assert tc.classify_output(host.check_output("tc -j qdisc show dev thunderbolt0"))["profile"] == "clean"


def test_no_test_process_is_left(host):
    assert host.run("pgrep -x iperf3").rc == 1, "no iperf3 server may be left running"
    # the bracket keeps pgrep from matching the shell that runs it
    assert host.run("pgrep -f '[i]nferlab_sampler'").rc == 1, "no sampler may be left running"

"""After the restore that ends converge: no profile, no iperf3 server, no sampler on any ring host."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import RING  # noqa: E402

testinfra_hosts = RING


def test_no_link_profile_is_left(host):
    assert "tbf" not in host.check_output("tc qdisc show dev thunderbolt0")


def test_no_test_process_is_left(host):
    assert host.run("pgrep -x iperf3").rc == 1, "no iperf3 server may be left running"
    # the bracket keeps pgrep from matching the shell that runs it
    assert host.run("pgrep -f '[i]nferlab_sampler'").rc == 1, "no sampler may be left running"

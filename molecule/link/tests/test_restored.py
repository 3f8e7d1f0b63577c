"""After the restore that ends converge: the link shows the stock driver's profile again (the one the lab gave it at
`lab up`), and no iperf3 server and no sampler is left on any ring host."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING  # noqa: E402

from inferlab import lab  # noqa: E402

testinfra_hosts = RING


def test_the_stock_drivers_profile_is_back(host):
    stock = json.loads((LAB_DIR / "link.json").read_text())["driver_profiles"]["stock"]
    tc = lab.load_tc()
    assert tc.classify_output(host.check_output("tc -j qdisc show dev thunderbolt0"))["profile"] == stock


def test_no_test_process_is_left(host):
    assert host.run("pgrep -x iperf3").rc == 1, "no iperf3 server may be left running"
    # the bracket keeps pgrep from matching the shell that runs it
    assert host.run("pgrep -f '[i]nferlab_sampler'").rc == 1, "no sampler may be left running"

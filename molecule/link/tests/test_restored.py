"""After the restore that ends converge: each ring host's link has the qdisc tree it had before the suite (each
tc_profile entry recorded the tree it replaced, and its undo puts exactly that back: the lab's stock-driver profile,
which the clean play removed), its send buffer sysctl the value read before the write, its generic segmentation
offload as found before it was turned off, and no iperf3 server and no
sampler is left on any ring host."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING, host_ledger, lab_host, own_processes  # noqa: E402

from inferlab.lab import status as lab_status  # noqa: E402
from inferlab.lab.tc_module import load_tc  # noqa: E402

testinfra_hosts = RING


def test_the_link_has_the_labs_profile_back(host):
    link = json.loads((LAB_DIR / "link.json").read_text())
    expected = lab_status.expected_link_profile(lab_host(host), link.get("driver_profiles"))
    # read with the lab's own copy of the collection's tc logic, the one its link daemon applied the profile with
    found = load_tc(link["tc_module"]).classify_output(host.check_output("tc -j qdisc show dev thunderbolt0"))
    assert expected and found["profile"] == expected, found


def test_no_test_process_is_left(host):
    assert own_processes(host, "(^|/)[i]perf3 ") == [], "no iperf3 server may be left running"
    # the bracket keeps pgrep from matching the shell that runs it
    assert own_processes(host, "[i]nferlab_ledger.py sampler ") == [], "no sampler may be left running"


def test_the_send_buffer_sysctl_is_back_as_it_was_found(host):
    entries = [e for e in host_ledger(host.backend.get_hostname()).values() if e["kind"] == "sysctl"]
    assert entries and {e["state"] for e in entries} == {"undone"}, entries
    entry = entries[-1]  # this converge's (a lab kept between scenarios keeps earlier ones, undone)
    assert entry["params"]["value"] == "4096 16384 65536", entry
    found = " ".join(host.file("/proc/sys/net/ipv4/tcp_wmem").content_string.split())
    assert found == entry["params"]["previous"] != entry["params"]["value"], found


def test_the_links_offload_is_back_as_it_was_found(host):
    entries = [e for e in host_ledger(host.backend.get_hostname()).values() if e["kind"] == "nic_setting"]
    assert entries and {e["state"] for e in entries} == {"undone"}, entries
    entry = entries[-1]
    assert entry["params"]["value"] == {"generic-segmentation-offload": "off"}, entry
    features = host.check_output("ethtool -k thunderbolt0")
    assert f"generic-segmentation-offload: {entry['params']['previous']['generic-segmentation-offload']}" in features
    assert "generic-segmentation-offload: on" in features, features

"""The lab hosts after verify.yml: real sshd, direct link, readable counters, services, and the written snapshot."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import INVENTORY, REPO_ROOT, RING, RUN_DIR, assert_records_valid, lab_host  # noqa: E402

testinfra_hosts = RING


def test_host_has_its_own_hostname_and_etc(host):
    name = host.backend.get_hostname()
    assert host.check_output("hostname") == name
    assert host.file("/etc/hostname").content_string.strip() == name
    assert Path("/etc/hostname").read_text().strip() != name, "the lab must not write the controller's /etc"


def test_sshd_listens_on_the_management_address_only(host):
    entry = lab_host(host)
    assert host.socket(f"tcp://{entry['management']['address']}:22").is_listening
    assert not host.socket("tcp://0.0.0.0:22").is_listening


def test_direct_link_has_its_address_and_is_up(host):
    entry = lab_host(host)
    link = host.interface("thunderbolt0")
    assert link.exists
    assert entry["link"]["address"] in link.addresses
    assert host.file("/sys/class/net/thunderbolt0/mtu").content_string.strip() == "1500"
    assert host.file("/sys/class/net/thunderbolt0/operstate").content_string.strip() == "up"


def test_link_counters_are_readable_and_moved_by_verification(host):
    stats = "/sys/class/net/thunderbolt0/statistics"
    for name in ("rx_bytes", "tx_bytes", "rx_crc_errors", "rx_over_errors", "rx_missed_errors", "rx_length_errors"):
        assert host.file(f"{stats}/{name}").content_string.strip().isdigit(), name
    # verify.yml pinged the peer over the link: the real counters saw those packets.
    assert int(host.file(f"{stats}/rx_packets").content_string) >= 3
    snmp = host.file("/proc/net/snmp").content_string
    assert "RetransSegs" in snmp


def test_original_service_answers_a_real_request(host):
    entry = lab_host(host)
    service = entry["services"][0]
    script = (
        "import json, urllib.request;"
        f"req = urllib.request.Request('{service['url']}/chat/completions', "
        f"data=json.dumps({{'model': '{service['model']}', 'messages': [{{'role': 'user', 'content': 'hi'}}], "
        "'max_tokens': 8}).encode(), headers={'Content-Type': 'application/json'});"
        "print(urllib.request.urlopen(req, timeout=10).read().decode())"
    )
    reply = json.loads(host.check_output(f'python3 -c "{script}"'))
    assert reply["choices"][0]["message"]["content"].strip()
    assert reply["usage"]["completion_tokens"] > 0


def test_known_good_snapshot_was_written_and_matches_the_schema(host):
    name = host.backend.get_hostname()
    snapshot = json.loads((RUN_DIR / "known_good" / f"{name}.json").read_text())
    assert snapshot["host"] == name
    assert snapshot["ok"] is True
    assert [c["name"] for c in snapshot["checks"] if not c["ok"]] == []
    assert snapshot["link"]["rx_speed_gbps"] == 20.0 and snapshot["link"]["rx_lanes"] == 1
    assert snapshot["layers"]["driver_layer"] == "emulated"
    schema = json.loads((REPO_ROOT / "src" / "inferlab" / "schemas" / "record.schema.json").read_text())
    jsonschema.validate(snapshot, {"$defs": schema["$defs"], "$ref": "#/$defs/host_state"})
    assert json.loads((RUN_DIR / "fragments" / "verify" / f"{name}.json").read_text()) == snapshot


def test_the_direct_link_passes_as_the_ethernet_link_it_also_is(host):
    """A veth pair is an Ethernet link to the kernel: verified as one (inferlab_link_kind ethernet), it passes on
    its NIC's negotiated speed and duplex, read through the real sysfs and ethtool, with no Thunderbolt check."""
    name = host.backend.get_hostname()
    state = json.loads((RUN_DIR / "fragments" / "verify_ethernet" / f"{name}.json").read_text())
    assert [c["name"] for c in state["checks"] if not c["ok"]] == [] and state["ok"] is True
    names = [c["name"] for c in state["checks"]]
    assert "link duplex" in names and "link peer present" not in names and "link lanes" not in names
    link = state["link"]
    assert (link["kind"], link["speed_mbps"], link["duplex"], link["driver"]) == ("ethernet", 10000, "full", "veth")
    assert link["offloads"]["tcp-segmentation-offload"]["on"] is True  # as found, recorded
    assert state["identity"]["nic"]["driver"] == "veth" and state["identity"]["nic"]["pci_id"] is None
    schema = json.loads((REPO_ROOT / "src" / "inferlab" / "schemas" / "record.schema.json").read_text())
    jsonschema.validate(state, {"$defs": schema["$defs"], "$ref": "#/$defs/host_state"})


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0


def test_the_installed_package_and_collection_verify_the_lab_in_check_mode():
    """The wheel and the galaxy tarball installed into a fresh venv (tests/install/run.sh; make test's `install` gate
    builds it first, else this does), then `inferlab run verify --check` from that venv against this lab, run from
    outside the checkout with none of its settings."""
    script, venv_dir = REPO_ROOT / "tests" / "install" / "run.sh", REPO_ROOT / ".cache" / "install"
    done = subprocess.run(["bash", str(script), str(venv_dir), INVENTORY], capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "install: passed" in done.stdout

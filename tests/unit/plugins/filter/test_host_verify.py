"""host_verify_state: every check fails with expected/found/variable, and a healthy host passes."""

import copy
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.host_verify import host_verify_state

PING_OK = (Path(__file__).resolve().parents[2] / "fixtures" / "ping" / "ok.txt").read_text()
PING_LOST = (Path(__file__).resolve().parents[2] / "fixtures" / "ping" / "unreachable.txt").read_text()

EXPECTED = {
    "link_interface": "thunderbolt0", "link_address": "169.254.177.1", "peer_address": "169.254.177.2",
    "link_mtu": 1500, "min_speed_gbps": "20.0", "min_lanes": "1", "gpu_count": "1",
    "gpu_name": "NVIDIA GeForce RTX 5090", "gpu_min_free_mib": "20000", "allowed_compute_processes": [],
    "min_disk_free_gb": "1",
}


def healthy():
    return {
        "host": "lab-a",
        "time": "2026-11-30T10:00:00Z",
        "layers": {"process_manager": "process", "driver_layer": "emulated", "tbnet_sysfs_root": "/x/sysfs",
                   "nvml_snapshot": "/x/nvml.json", "state_dir": "/x/state"},
        "tbnet": {
            "kernel_release": "6.1.0-57-amd64",
            "peers": [{"device": "0-1", "device_name": "lab-b", "rx_speed_gbps": 20.0, "tx_speed_gbps": 20.0,
                       "rx_lanes": 1, "tx_lanes": 1}],
            "interfaces": {"thunderbolt0": {"service": "0-1.0", "peer": "0-1"}},
            "module": {"loaded": True, "parameters": {"e2e": "Y"}, "srcversion": "ABC", "taint": ""},
            "notes": [],
        },
        "net": {"interfaces": {"thunderbolt0": {"operstate": "up", "mtu": 1500, "statistics": {}}}, "missing": []},
        "addresses": json.dumps([{"ifname": "thunderbolt0", "addr_info": [{"local": "169.254.177.1"}]}]),
        "nvml": {"source": "snapshot", "driver_version": "580.95.05",
                 "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-1",
                           "memory_total_bytes": 34190917632, "memory_free_bytes": 33000000000,
                           "compute_processes": []}]},
        "ping": {"rc": 0, "stdout": PING_OK, "stderr": ""},
        "storage": {"model_path": "/x/model", "exists": True, "disk_free_bytes": 50 * 10**9},
        "services": [{"service": {"name": "original-a", "url": "http://169.254.77.2:8000/v1", "model": "m"},
                      "status": 200, "json": {"choices": [{"message": {"content": "Verified."}}],
                                              "usage": {"completion_tokens": 2}}}],
    }


def test_healthy_host_passes():
    state = host_verify_state(healthy(), EXPECTED)
    assert [c["name"] for c in state["checks"] if not c["ok"]] == []
    assert state["ok"] is True
    assert state["link"]["rx_speed_gbps"] == 20.0
    assert state["link"]["ping_to_peer"]["received"] == 3
    assert state["services"][0]["completion_tokens"] == 2
    assert state["storage"]["disk_free_gb"] == 50.0
    assert state["identity"] is None  # an observation without one (an older host_observe) records none


def test_the_identity_is_passed_through_for_the_record():
    identity = {"format": "inferlab.host_identity/1", "host_router": None, "peer": None, "kernel_release": None,
                "driver": {}, "firmware": {}, "missing": ["/sys/class/dmi/id/bios_version"]}
    assert host_verify_state(dict(healthy(), identity=identity), EXPECTED)["identity"] == identity


def _set(path, value):
    def mutate(observed):
        target = observed
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


CASES = [
    ("speed below expectation", None, {"min_speed_gbps": "25.0"}, "link speed", "inferlab_link_min_speed_gbps",
     "expected >= 25.0 Gb/s per lane both ways, found rx 20.0 Gb/s, tx 20.0 Gb/s"),
    ("speed not reported", _set(["tbnet", "peers", 0, "rx_speed_gbps"], None), {}, "link speed",
     "inferlab_link_min_speed_gbps", "found rx None Gb/s, tx 20.0 Gb/s"),
    ("wrong interface name", None, {"link_interface": "thunderbolt9"}, "link interface exists",
     "inferlab_link_interface", "expected interface thunderbolt9, found interfaces ['thunderbolt0']"),
    ("interface down", _set(["net", "interfaces", "thunderbolt0", "operstate"], "down"), {}, "link interface up",
     "inferlab_link_interface", "found down"),
    ("wrong MTU", None, {"link_mtu": 9000}, "link MTU", "inferlab_link_mtu", "expected 9000, found 1500"),
    ("address missing", _set(["addresses"], "[]"), {}, "link address", "inferlab_link_address",
     "found no IPv4 address"),
    ("no peer", _set(["tbnet", "interfaces"], {}), {}, "link peer present", "inferlab_link_interface",
     "no service bound to thunderbolt0"),
    ("one lane short", _set(["tbnet", "peers", 0, "tx_lanes"], 1), {"min_lanes": "2"}, "link lanes",
     "inferlab_link_min_lanes", "found rx 1, tx 1"),
    ("peer silent", _set(["ping"], {"rc": 1, "stdout": PING_LOST, "stderr": ""}), {}, "link ping to peer",
     "inferlab_link_peer_address", "100.0% loss"),
    ("GPU count", None, {"gpu_count": "2"}, "GPU count", "inferlab_gpu_count", "expected 2, found 1"),
    ("GPU model", None, {"gpu_name": "NVIDIA GeForce RTX 4090"}, "GPU model", "inferlab_gpu_name",
     "found ['NVIDIA GeForce RTX 5090']"),
    ("GPU memory", None, {"gpu_min_free_mib": "40000"}, "GPU free memory", "inferlab_gpu_min_free_mib",
     "expected >= 40000 MiB free on each GPU"),
    ("GPU process", _set(["nvml", "gpus", 0, "compute_processes"], [{"pid": 7, "name": "python3"}]), {},
     "no unexpected GPU processes", "inferlab_allowed_compute_processes", "python3 (pid 7, GPU 0)"),
    ("model path", _set(["storage", "exists"], False), {}, "model path exists", "inferlab_model_path",
     "found missing"),
    ("disk", None, {"min_disk_free_gb": "100"}, "disk free", "inferlab_min_disk_free_gb", "found 50.0 GB"),
    ("service down", _set(["services", 0], {"service": {"name": "original-a", "url": "http://x/v1", "model": "m"},
                                            "status": -1, "msg": "Status code was -1: Connection refused"}),
     {}, "service original-a answers", "inferlab_original_services", "Connection refused"),
    ("service empty text", _set(["services", 0, "json", "choices"], [{"message": {"content": " "}}]), {},
     "service original-a answers", "inferlab_original_services", "no text or no usage tokens"),
]


@pytest.mark.parametrize(("label", "mutate", "expected_override", "check", "variable", "found"), CASES,
                         ids=[c[0] for c in CASES])
def test_each_failure_names_expected_found_and_variable(label, mutate, expected_override, check, variable, found):
    observed = healthy()
    if mutate:
        mutate(observed)
    state = host_verify_state(observed, {**EXPECTED, **expected_override})
    failed = [c for c in state["checks"] if not c["ok"]]
    assert state["ok"] is False
    assert check in [c["name"] for c in failed]
    failure = next(c for c in failed if c["name"] == check)
    assert failure["message"].startswith("Stop if ")
    assert "on lab-a" in failure["message"]
    assert f"set {variable}" in failure["message"]
    assert found in failure["message"]


def test_input_types_are_checked():
    with pytest.raises(AnsibleFilterError, match="expects two dicts"):
        host_verify_state([], EXPECTED)


def test_observations_are_not_mutated():
    observed = healthy()
    before = copy.deepcopy(observed)
    host_verify_state(observed, EXPECTED)
    assert observed == before


def production(*processes, free_bytes=4_000_000_000):
    """A host in production: its original replica's scheduler holds most of the card."""
    observed = healthy()
    observed["nvml"]["gpus"][0].update(memory_free_bytes=free_bytes, compute_processes=list(processes))
    return observed


SCHEDULER = {"pid": 4100, "name": "sglang::schedul", "used_memory_bytes": 29_000_000_000}
ON_PRODUCTION = {**EXPECTED, "gpu_min_free_mib": "30000", "original_gpu_processes": ["sglang::scheduler"]}


def test_a_host_in_production_passes_with_the_originals_memory_counted_as_freed_by_the_pause():
    state = host_verify_state(production(SCHEDULER), ON_PRODUCTION)
    assert [c["name"] for c in state["checks"] if not c["ok"]] == []
    [memory] = [c for c in state["checks"] if c["name"] == "GPU free memory"]
    assert memory["found"] == "GPU 0: 3814 MiB free + 27656 MiB held by the original services"
    # the known-good snapshot records the production processes, for the restore to prove them back
    assert state["gpus"][0]["compute_processes"] == [SCHEDULER]


def test_a_production_host_without_its_processes_in_the_inventory_is_refused_twice():
    state = host_verify_state(production(SCHEDULER), {**ON_PRODUCTION, "original_gpu_processes": []})
    failed = {c["name"]: c["message"] for c in state["checks"] if not c["ok"]}
    assert "sglang::schedul (pid 4100, GPU 0)" in failed["no unexpected GPU processes"]
    assert "3814 MiB free + 0 MiB held by the original services" in failed["GPU free memory"]


@pytest.mark.parametrize("name", ["sglang::scheduler", "sglang::schedul"])  # NVML's full title, or comm's cut
def test_the_original_process_is_known_by_its_name_or_comms_cut(name):
    state = host_verify_state(production({**SCHEDULER, "name": name}), ON_PRODUCTION)
    assert state["ok"] is True


@pytest.mark.parametrize("name", ["sglang::sched", "sglang::scheduler_TP0x", "python3", None])
def test_an_unknown_process_beside_production_is_refused_by_name_and_pid(name):
    stranger = {"pid": 5200, "name": name, "used_memory_bytes": 500_000_000}
    state = host_verify_state(production(SCHEDULER, stranger), ON_PRODUCTION)
    failed = {c["name"]: c["message"] for c in state["checks"] if not c["ok"]}
    assert list(failed) == ["no unexpected GPU processes"]
    assert f"found ['{name} (pid 5200, GPU 0)']" in failed["no unexpected GPU processes"]
    assert "expected only ['sglang::scheduler']" in failed["no unexpected GPU processes"]


FIXTURES_TC = Path(__file__).resolve().parents[2] / "fixtures" / "tc"


def test_the_link_qdiscs_are_kept_for_the_known_good_snapshot():
    observed = dict(healthy(), qdiscs=(FIXTURES_TC / "lossy_limit20.json").read_text())
    assert host_verify_state(observed, EXPECTED)["link"]["qdiscs"] == [
        {"kind": "tbf", "handle": "1ab:", "parent": None, "options": {"rate": 125000000, "burst": 65500, "lat": 50000}},
        {"kind": "pfifo", "handle": "1ac:", "parent": "1ab:1", "options": {"limit": 20}},
    ]


@pytest.mark.parametrize("text", [None, "not json"])
def test_link_qdiscs_not_read_are_none(text):
    observed = dict(healthy(), qdiscs=text)
    assert host_verify_state(observed, EXPECTED)["link"]["qdiscs"] is None
    assert host_verify_state(healthy(), EXPECTED)["link"]["qdiscs"] is None  # an older host_observe read none


# An Ethernet link (a 10 GbE NIC), verified by what it is: no Thunderbolt peer is looked for.
ETHERNET_EXPECTED = dict(EXPECTED, link_kind="ethernet", link_interface="enp1s0f0", min_speed_gbps="10.0",
                         link_duplex="full")


def ethernet_host(**nic):
    observed = healthy()
    observed["tbnet"] = {"kernel_release": "6.1.0-28-amd64", "peers": [], "interfaces": {}, "module": {},
                         "notes": ["no Thunderbolt domain under /sys/bus/thunderbolt/devices"]}
    observed["net"] = {"interfaces": {"enp1s0f0": {"operstate": "up", "mtu": 1500, "statistics": {}}}, "missing": []}
    observed["addresses"] = json.dumps([{"ifname": "enp1s0f0", "addr_info": [{"local": "169.254.177.1"}]}])
    observed["nic"] = dict({"interface": "enp1s0f0", "present": True, "speed_mbps": 10000, "duplex": "full",
                            "carrier": True, "carrier_changes": 4, "mtu": 1500, "operstate": "up",
                            "pci": {"id": "8086:1563", "driver": "ixgbe"}, "driver": "ixgbe",
                            "driver_version": "6.1.0-28-amd64", "firmware_version": "0x800003df, 1.1767.0",
                            "bus_info": "0000:01:00.0", "offloads": {"generic-receive-offload": {"on": True,
                                                                                                 "fixed": False}},
                            "missing": [], "notes": []}, **nic)
    return observed


def test_an_ethernet_link_passes_on_what_it_is():
    state = host_verify_state(ethernet_host(), ETHERNET_EXPECTED)
    assert [c["name"] for c in state["checks"] if not c["ok"]] == []
    names = [c["name"] for c in state["checks"]]
    assert "link speed" in names and "link duplex" in names
    assert "link peer present" not in names and "link lanes" not in names
    link = state["link"]
    assert (link["kind"], link["speed_mbps"], link["duplex"], link["driver"], link["firmware_version"]) \
        == ("ethernet", 10000, "full", "ixgbe", "0x800003df, 1.1767.0")
    assert link["offloads"] == {"generic-receive-offload": {"on": True, "fixed": False}}
    assert "peer_present" not in link and "rx_lanes" not in link


@pytest.mark.parametrize("nic, expected, name, message", [
    ({"speed_mbps": 1000}, {}, "link speed",
     "Stop if the Ethernet link enp1s0f0 negotiated below the expected speed on lab-a: expected >= 10.0 Gb/s "
     "negotiated, found 1000 Mb/s; set inferlab_link_min_speed_gbps"),
    ({"speed_mbps": None, "carrier": False, "operstate": "down"}, {}, "link speed",
     "found no speed (carrier False, operstate down)"),
    ({"duplex": "half"}, {}, "link duplex",
     "Stop if the Ethernet link enp1s0f0 is not at the expected duplex on lab-a: expected full, found half; set "
     "inferlab_link_duplex"),
    ({}, {"min_speed_gbps": "25.0"}, "link speed", "expected >= 25.0 Gb/s negotiated, found 10000 Mb/s"),
])
def test_an_ethernet_link_that_is_not_what_was_expected_is_named(nic, expected, name, message):
    state = host_verify_state(ethernet_host(**nic), dict(ETHERNET_EXPECTED, **expected))
    [failed] = [c for c in state["checks"] if not c["ok"]]
    assert failed["name"] == name and message in failed["message"]


def test_a_thunderbolt_expectation_on_an_ethernet_host_fails_on_the_peer():
    """The default kind is thunderbolt: an Ethernet host verified without inferlab_link_kind says what is missing."""
    state = host_verify_state(ethernet_host(), dict(ETHERNET_EXPECTED, link_kind=None))
    failed = [c["name"] for c in state["checks"] if not c["ok"]]
    assert failed == ["link peer present", "link speed", "link lanes"]
    assert state["link"]["kind"] == "thunderbolt"


def test_an_unknown_link_kind_is_refused():
    with pytest.raises(AnsibleFilterError, match="link_kind must be one of thunderbolt, ethernet, got 'infiniband'"):
        host_verify_state(ethernet_host(), dict(ETHERNET_EXPECTED, link_kind="infiniband"))


def test_a_check_that_follows_from_a_failed_one_says_it_cannot_be_measured_and_why():
    """The issue's new user: a missing model path also failed the disk check with "found None GB". A check that
    cannot be made without an earlier one says so, naming that check and its variable."""
    observed = healthy()
    observed["storage"] = {"model_path": "/models/qwen", "exists": False, "disk_free_bytes": None}
    observed["nvml"]["gpus"] = []
    state = host_verify_state(observed, {**EXPECTED, "link_interface": "thunderbolt9"})
    messages = {c["name"]: c["message"] for c in state["checks"] if not c["ok"]}
    assert messages["disk free"] == (
        "Stop if the model's disk is too full on lab-a: expected >= 1.0 GB free, found nothing, it cannot be "
        "measured: the model path /models/qwen is missing ('model path exists' failed); set inferlab_model_path")
    assert messages["link MTU"].endswith("found nothing, it cannot be measured: interface thunderbolt9 is missing "
                                         "('link interface exists' failed); set inferlab_link_interface")
    assert "found nothing, it cannot be measured: no GPU was found ('GPU count' failed); set inferlab_gpu_count" \
        in messages["GPU free memory"]
    # a check whose own value failed, with its cause present, keeps its own words
    assert "found None GB" not in " ".join(messages.values())


def test_a_check_that_fails_on_its_own_keeps_its_own_variable():
    observed = healthy()
    state = host_verify_state(observed, {**EXPECTED, "min_disk_free_gb": "100"})
    [disk] = [c for c in state["checks"] if c["name"] == "disk free"]
    assert disk["variable"] == "inferlab_min_disk_free_gb" and "found 50.0 GB" in disk["message"]

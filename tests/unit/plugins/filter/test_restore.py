import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.restore import restore_differences, restore_problems

KNOWN_GOOD = {
    "kernel_release": "6.1.0-57-amd64",
    "link": {"operstate": "up", "mtu": 1500, "peer_present": True, "rx_speed_gbps": 20.0, "tx_speed_gbps": 20.0,
             "rx_lanes": 1, "tx_lanes": 1},
    "tbnet_module": {"loaded": True, "parameters": {"e2e": "Y"}, "srcversion": "A1B2"},
    "gpus": [{"uuid": "GPU-1", "name": "NVIDIA GeForce RTX 5090"}],
    "services": [{"name": "original-a", "ok": True}],
    "checks": [{"name": "link speed", "ok": True}],
}


def test_identical_state_has_no_differences():
    assert restore_differences(copy.deepcopy(KNOWN_GOOD), KNOWN_GOOD) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("tbnet_module", "parameters"), {"e2e": "Y", "tx_e2e": "Y"},
         "thunderbolt_net parameters: known-good {'e2e': 'Y'}, now {'e2e': 'Y', 'tx_e2e': 'Y'}"),
        (("tbnet_module", "srcversion"), "FFFF", "thunderbolt_net srcversion: known-good 'A1B2', now 'FFFF'"),
        (("link", "rx_speed_gbps"), 10.0, "link rx speed (Gb/s per lane): known-good 20.0, now 10.0"),
        (("link", "operstate"), "down", "link operstate: known-good 'up', now 'down'"),
    ],
)
def test_changed_fields_are_named(path, value, expected):
    current = copy.deepcopy(KNOWN_GOOD)
    current[path[0]][path[1]] = value
    assert restore_differences(current, KNOWN_GOOD) == [expected]


def test_service_that_stopped_answering_and_failed_checks():
    current = copy.deepcopy(KNOWN_GOOD)
    current["services"][0]["ok"] = False
    current["checks"][0] = {"name": "link speed", "ok": False, "message": "Stop if slow"}
    assert restore_differences(current, KNOWN_GOOD) == [
        "check failed: Stop if slow",
        "service original-a answered before the change and does not now",
    ]


def test_without_known_good_only_checks_count():
    current = copy.deepcopy(KNOWN_GOOD)
    current["link"]["mtu"] = 9000
    assert restore_differences(current, None) == []


def test_bad_input():
    with pytest.raises(AnsibleFilterError):
        restore_differences("x", None)


PRODUCTION = {**KNOWN_GOOD, "gpus": [{"index": 0, "uuid": "GPU-1", "name": "NVIDIA GeForce RTX 5090",
                                      "compute_processes": [{"pid": 4100, "name": "sglang::schedul",
                                                             "used_memory_bytes": 29_000_000_000}]}]}


def test_the_production_processes_back_on_their_gpu_under_new_pids_are_no_difference():
    current = copy.deepcopy(PRODUCTION)
    current["gpus"][0]["compute_processes"][0].update(pid=5300, used_memory_bytes=28_900_000_000)
    assert restore_differences(current, PRODUCTION) == []


@pytest.mark.parametrize(("processes", "now"), [
    ([], "{0: []}"),  # the original replica did not come back
    ([{"pid": 5300, "name": "sglang::schedul"}, {"pid": 5301, "name": "sglang::schedul"}],
     "{0: ['sglang::schedul', 'sglang::schedul']}"),  # an experiment server left beside it
])
def test_gpu_processes_that_differ_from_the_known_good_are_named(processes, now):
    current = copy.deepcopy(PRODUCTION)
    current["gpus"][0]["compute_processes"] = processes
    assert restore_differences(current, PRODUCTION) == [
        f"GPU processes: known-good {{0: ['sglang::schedul']}}, now {now}"]


def test_a_known_good_from_before_gpu_processes_were_recorded_compares_none():
    assert restore_differences(copy.deepcopy(PRODUCTION), KNOWN_GOOD) == []


# the link's queueing disciplines: the lab's stock driver profile (tbf 1000 Mbit/s with a pfifo of 10 packets)
STOCK_QDISCS = [
    {"kind": "tbf", "handle": "1ab:", "parent": None, "options": {"rate": 125000000, "burst": 65500, "lat": 50000}},
    {"kind": "pfifo", "handle": "1ac:", "parent": "1ab:1", "options": {"limit": 10}},
]
DEFAULT_QDISCS = [{"kind": "noqueue", "handle": "0:", "parent": None, "options": {}}]


def with_qdiscs(state, qdiscs):
    state = copy.deepcopy(state)
    state["link"]["qdiscs"] = qdiscs
    return state


def test_a_restore_that_left_the_link_without_its_qdiscs_is_not_verified():
    differences = restore_differences(with_qdiscs(KNOWN_GOOD, DEFAULT_QDISCS), with_qdiscs(KNOWN_GOOD, STOCK_QDISCS))
    assert differences == [
        "link qdiscs: root: tbf 1ab: root (burst 65500, lat 50000, rate 125000000), now noqueue 0: root (known-good: "
        "tbf 1ab: root (burst 65500, lat 50000, rate 125000000), pfifo 1ac: parent 1ab:1 (limit 10))",
        "link qdiscs: pfifo 1ac: parent 1ab:1 is gone (known-good: tbf 1ab: root (burst 65500, lat 50000, "
        "rate 125000000), pfifo 1ac: parent 1ab:1 (limit 10))",
    ]


def test_changed_qdisc_options_are_named_and_a_rebuilt_tbf_burst_is_no_difference():
    rebuilt = copy.deepcopy(STOCK_QDISCS)
    rebuilt[0]["options"]["burst"] = 65375  # what one rebuild of 65500 bytes at 1 Gbit/s reads back (iproute2 6.1)
    assert restore_differences(with_qdiscs(KNOWN_GOOD, rebuilt), with_qdiscs(KNOWN_GOOD, STOCK_QDISCS)) == []
    rebuilt[1]["options"]["limit"] = 1000
    [difference] = restore_differences(with_qdiscs(KNOWN_GOOD, rebuilt), with_qdiscs(KNOWN_GOOD, STOCK_QDISCS))
    assert difference.startswith("link qdiscs: pfifo 1ac: parent 1ab:1: limit 10, now 1000")


def test_qdiscs_unread_after_the_restore_are_a_difference_and_a_snapshot_without_them_compares_none():
    [difference] = restore_differences(with_qdiscs(KNOWN_GOOD, None), with_qdiscs(KNOWN_GOOD, STOCK_QDISCS))
    assert difference.startswith("link qdiscs: not read")
    assert restore_differences(with_qdiscs(KNOWN_GOOD, DEFAULT_QDISCS), KNOWN_GOOD) == []


ETHERNET_KNOWN_GOOD = dict(KNOWN_GOOD, link={
    "kind": "ethernet", "operstate": "up", "mtu": 9000, "speed_mbps": 10000, "duplex": "full", "driver": "ixgbe",
    "driver_version": "6.1.0-28-amd64", "firmware_version": "0x800003df, 1.1767.0",
    "offloads": {"generic-receive-offload": {"on": True, "fixed": False},
                 "large-receive-offload": {"on": False, "fixed": False}}})


def test_an_ethernet_link_back_as_it_was_has_no_differences():
    assert restore_differences(copy.deepcopy(ETHERNET_KNOWN_GOOD), ETHERNET_KNOWN_GOOD) == []


def test_an_ethernet_link_that_came_back_different_is_named_each_offload_alone():
    current = copy.deepcopy(ETHERNET_KNOWN_GOOD)
    current["link"]["speed_mbps"] = 1000
    current["link"]["offloads"]["generic-receive-offload"]["on"] = False
    current["link"]["offloads"]["tx-nocache-copy"] = {"on": True, "fixed": False}
    assert restore_differences(current, ETHERNET_KNOWN_GOOD) == [
        "link speed (Mb/s): known-good 10000, now 1000",
        "link offload generic-receive-offload: known-good on, now off",
        "link offload tx-nocache-copy: known-good absent, now on"]
    current["link"]["offloads"] = None
    assert "link offloads: not read now (known-good: 2 read)" in restore_differences(current, ETHERNET_KNOWN_GOOD)


def test_restore_problems_names_where_each_problem_was_found():
    hostvars = {"lab-a": {"__restore_differences": ["link MTU: known-good 1500, now 9000"]},
                "lab-b": {"__restore_differences": []},
                "lab-gw": {}}
    assert restore_problems(hostvars, ["lab-a", "lab-b", "lab-gw"], ["router: no worker"]) == [
        "lab-a: link MTU: known-good 1500, now 9000",
        "lab-gw: the restore did not run",
        "controller: router: no worker",
    ]
    assert restore_problems(hostvars, ["lab-b"]) == []
    assert restore_problems(hostvars, ["absent"], None) == ["absent: the restore did not run"]


@pytest.mark.parametrize("hosts", ["lab-a", [1]])
def test_restore_problems_refuses_what_is_not_a_list_of_hosts(hosts):
    with pytest.raises(AnsibleFilterError, match="restore_problems expects a list of host names"):
        restore_problems({}, hosts)

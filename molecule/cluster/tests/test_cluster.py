"""The cluster lab after verify.yml and link_pairs.yml: every host's Ethernet link verified by what it is, the
day-one matrix naming the suspect's transmit path and nothing else, every iperf3 server stopped through the ledger."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import RING, RUN_DIR, assert_records_valid, host_ledger, own_processes  # noqa: E402

testinfra_hosts = RING
HOSTS = ["lab-a", "lab-b", "lab-c", "lab-d"]


def matrix() -> dict:
    paths = sorted(RUN_DIR.glob("**/fragments/link_pairs/*.json"))
    assert len(paths) == 1, paths
    return json.loads(paths[0].read_text())


def test_every_host_passed_as_an_ethernet_link(host):
    name = host.backend.get_hostname()
    [path] = RUN_DIR.glob(f"**/fragments/verify/{name}.json")
    state = json.loads(path.read_text())
    assert state["ok"] is True, [c for c in state["checks"] if not c["ok"]]
    assert (state["link"]["kind"], state["link"]["interface"], state["link"]["speed_mbps"]) == ("ethernet", "eth1",
                                                                                                10000)
    assert "link peer present" not in [c["name"] for c in state["checks"]]


def test_the_matrix_tested_every_ordered_pair_in_six_rounds():
    result = matrix()
    assert result["hosts"] == HOSTS and len(result["rounds"]) == 6
    assert sorted((t["from"], t["to"]) for t in result["tests"]) == sorted(
        (a, b) for a in HOSTS for b in HOSTS if a != b)
    assert all(t["error"] is None and t["bps"] > 0 for t in result["tests"]), result["tests"]


def test_the_matrix_names_the_suspects_transmit_path_and_nothing_else():
    verdicts = matrix()["verdicts"]
    assert verdicts["suspects"] == ["lab-c"] and verdicts["weak_pairs"] == [], verdicts["text"]
    assert verdicts["hosts"]["lab-c"]["verdict"] == "transmit weak"
    assert "lab-c: its transmit path is weak against every peer" in verdicts["text"]
    # the emulation's shape: the suspect's one flow well under the port's rate, the others near it
    sent = {(t["from"], t["to"]): t["bps"] for t in matrix()["tests"]}
    suspect = [bps for (a, _b), bps in sent.items() if a == "lab-c"]
    others = [bps for (a, _b), bps in sent.items() if a != "lab-c"]
    assert max(suspect) * 1.5 < min(others), (suspect, others)


def test_every_iperf3_server_was_stopped_through_the_ledger(host):
    name = host.backend.get_hostname()
    assert own_processes(host, "(^|/)[i]perf3 ") == []
    entries = [e for e in host_ledger(name).values() if e["kind"] == "process"]
    assert entries and {e["state"] for e in entries} == {"undone"}, entries


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0

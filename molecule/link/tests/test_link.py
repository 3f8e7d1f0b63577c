"""The link suite's verdicts under the lab's link profiles (the restore's end state: test_restored.py)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import RING, RUN_DIR, assert_records_valid, lab_host  # noqa: E402

testinfra_hosts = RING[:1]  # the suite's results live in the first ring host's fragments


def suite(condition: str) -> dict:
    return json.loads((RUN_DIR / "fragments" / f"link_test_{condition}" / "lab-a.json").read_text())


def test_clean_link_is_symmetric(host):
    verdict = suite("clean")["tests"]["asymmetry"]["verdict"]
    assert verdict["verdict"] == "symmetric", verdict["text"]
    assert suite("clean")["verdicts"]["flow_sweep"] == "no weak direction to characterise"


def test_the_clean_suites_windows_were_exported_for_node_exporter(host):
    """counters_prometheus_textfile_dir was set for the clean suite: each closed window is a .prom file there, whole
    (written under another name, then renamed: nothing else is left), with the window's own deltas."""
    directory = f"{lab_host(host)['state_dir']}/node_exporter_textfile"
    files = host.file(directory).listdir()
    assert "inferlab_window_asymmetry.prom" in files and "inferlab_window_probes.prom" in files, files
    assert all(name.startswith("inferlab_window_") and name.endswith(".prom") for name in files), files
    text = host.file(f"{directory}/inferlab_window_asymmetry.prom").content_string
    assert "# TYPE inferlab_window_counter_delta gauge" in text and text.endswith("\n")
    retrans = suite("clean")["tests"]["asymmetry"]["host_counters"]["lab-a"]["RetransSegs"]
    assert (f'inferlab_window_counter_delta{{host="lab-a",interface="",window="asymmetry",counter="RetransSegs"}} '
            f"{retrans}\n") in text


def test_tx_cliff_on_b_names_b_to_a_as_weak(host):
    result = suite("tx_cliff")
    verdict = result["tests"]["asymmetry"]["verdict"]
    assert verdict["verdict"] == "asymmetric", verdict["text"]
    assert verdict["weak_direction"]["from"] == "lab-b" and verdict["weak_direction"]["to"] == "lab-a"
    assert verdict["ratio"] > verdict["threshold"]
    assert "lab-b's transmit path or lab-a's receive path" in verdict["text"]
    assert "observed" in verdict["text"]


def test_flow_sweep_calls_a_tbf_cap_a_per_host_limit(host):
    result = suite("tx_cliff")
    assert result["tests"]["flow_sweep"]["limits"]["b_to_a"]["kind"] == "per-host limit"
    assert result["verdicts"]["flow_sweep"].startswith("lab-b -> lab-a (the weak direction): per-host limit")


def test_lossy_retransmits_far_more_than_clean(host):
    clean = suite("clean")["tests"]["asymmetry"]["host_counters"]["lab-b"]
    lossy = suite("lossy")["tests"]["asymmetry"]["host_counters"]["lab-b"]
    # An unshaped veth at full speed retransmits too (about 1% of segments here), by a varying amount: compare the
    # shaped host's retransmission rate with the clean run's, never assert zero.
    assert lossy["retrans_pct"] > 10 * max(clean["retrans_pct"], 0.5), (clean, lossy)
    assert lossy["RetransSegs"] > 1000
    assert suite("lossy")["transport_label"] == "emulated"


@pytest.mark.parametrize("condition", ["clean", "tx_cliff", "lossy"])
def test_every_test_carries_both_hosts_window_deltas(host, condition):
    for test in suite(condition)["tests"].values():
        counters = test["host_counters"]
        assert set(counters) == {"lab-a", "lab-b"}
        assert all(isinstance(c["RetransSegs"], int) for c in counters.values())


def test_ab_table_sets_the_driver_states_side_by_side(host):
    """Each condition came from a reload on both hosts and the link's return; the driver, not a tc profile the
    roles set, made the stock condition lossy (the lab's link hardware gives each driver its profile)."""
    ab = json.loads((RUN_DIR / "fragments" / "link_ab" / "lab-a.json").read_text())
    assert ab["shaped_host"] is None and ab["transport_label"] == "emulated"
    table = {row["condition"]: row["metrics"] for row in ab["table"]}
    assert list(table) == ["candidate", "stock"]
    assert [(run["condition"], run["repetition"]) for run in ab["runs"]] == [("candidate", 1), ("stock", 1)]
    for run in ab["runs"]:
        for name, driver in run["driver"].items():
            assert driver["state"] == run["condition"] and driver["changed"], (name, run)
            assert 0 < driver["link_back_s"] < 60, (name, run)
    stock, candidate = table["stock"], table["candidate"]
    stock_retrans = stock["asymmetry_b_tcp_retrans_pct"]["median"]
    assert stock_retrans > 10 * max(candidate["asymmetry_b_tcp_retrans_pct"]["median"], 0.5)
    assert stock["b_to_a_gbps"]["median"] < candidate["b_to_a_gbps"]["median"]


@pytest.mark.parametrize("ring_host", ["lab-a", "lab-b"])
def test_the_soak_counted_and_placed_the_flap_on_both_hosts(host, ring_host):
    """lab-a's end went down and up inside the soak (converge.yml): on both ends the soak's window counted the
    carrier's transitions (the kernel's own counters) and its samples placed them in time."""
    soak = suite("soak")["tests"]["soak"]
    window = json.loads((RUN_DIR / "fragments" / "window_soak" / f"{ring_host}.json").read_text())
    delta = window["interfaces"]["thunderbolt0"]
    assert delta["carrier_changes"] >= 2 and delta["carrier_down_count"] >= 1 and delta["carrier_up_count"] >= 1
    carrier = [e for e in soak["events"][ring_host] if e["kind"] == "carrier"]
    assert sum(e["changes"] for e in carrier) == delta["carrier_changes"], soak["events"]
    assert all(window["opened_at"] < e["at"] for e in carrier)
    assert soak["link_flaps"][ring_host] >= 1
    assert soak["host_counters"][ring_host]["carrier_changes"] == delta["carrier_changes"]


def test_the_soak_probed_every_interval_and_plots_its_timeline(host, tmp_path):
    """15 s at a probe every 3 s: five probes, each with its rates or the reason it has none (the one that met
    the flap may fail), and the timeline plot the report shows."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
    from inferlab.plots import link as link_plots  # pylint: disable=import-outside-toplevel

    result = suite("soak")
    soak = result["tests"]["soak"]
    assert [p["index"] for p in soak["probes"]] == [0, 1, 2, 3, 4]
    assert all(p["ok"] == (p["error"] is None) for p in soak["probes"]), soak["probes"]
    assert sum(1 for p in soak["probes"] if p["ok"]) >= 3, soak["probes"]
    assert result["verdicts"]["soak"].startswith("5 probe(s) every 3.0 s over 15.0 s, ")
    png = link_plots.soak_timeline(result, tmp_path / "soak.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0

"""link_test_result: real iperf3 and ping fixtures in, the record's link test fragment out."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.link_test_result import link_test_result
from ansible_collections.inferlab.distributed.tests.unit.linkfixtures import inputs, iperf3, ping, soak_inputs


def test_fragment_keeps_directions():  # its schema: tests/package/test_report_link.py
    result = link_test_result(inputs())
    bidir = iperf3("bidir.json")
    assert result["tests"]["asymmetry"]["a_to_b_bps"] == bidir["forward"]["receiver_bps"]
    assert result["tests"]["asymmetry"]["b_to_a_bps"] == bidir["reverse"]["receiver_bps"]
    assert result["tests"]["asymmetry"]["host_counters"]["lab-b"]["RetransSegs"] == 700
    assert result["tests"]["asymmetry"]["host_counters"]["lab-b"]["rx_crc_errors"] == 3
    assert result["tests"]["asymmetry"]["host_counters"]["lab-b"]["retrans_pct"] == 7.0
    # -R runs are server -> client: their rate comes from `reverse`, never from an empty `forward`.
    assert result["tests"]["flow_sweep"]["b_to_a"]["1"] == iperf3("reverse.json")["reverse"]["receiver_bps"]
    assert result["tests"]["loaded_probes"]["a_to_b"]["loss_pct"] == 25.0
    assert result["transport_label"] == "emulated"
    # loaded_probes had no window on lab-b: its counters are reported as unmeasured, not as zero
    assert result["tests"]["loaded_probes"]["host_counters"]["lab-b"]["RetransSegs"] is None


def test_weak_direction_is_characterised_by_the_sweep():
    data = inputs()
    bidir = dict(data["results"]["asymmetry"]["bidir"])
    bidir["reverse"] = dict(bidir["reverse"], receiver_bps=bidir["forward"]["receiver_bps"] / 4)
    data["results"]["asymmetry"]["bidir"] = bidir
    capped = dict(iperf3("reverse.json"))
    capped["reverse"] = dict(capped["reverse"], receiver_bps=3e8)
    data["results"]["flow_sweep"]["b_to_a_1"] = capped
    data["results"]["flow_sweep"]["b_to_a_4"] = capped
    result = link_test_result(data)
    assert result["verdicts"]["asymmetry"].startswith("asymmetric: lab-b -> lab-a is weak")
    assert "lab-b's transmit path or lab-a's receive path" in result["verdicts"]["asymmetry"]
    assert result["verdicts"]["flow_sweep"].startswith("lab-b -> lab-a (the weak direction): per-host limit")


def test_an_iperf3_before_3_16_measures_each_direction_alone_and_says_so():
    """iperf3 3.12 runs --bidir's two directions in one thread: the asymmetry test runs a plain run and a -R run, one
    after the other, and the result names the mode and the version, never a one-thread bottleneck as an asymmetry."""
    data = inputs(iperf3_version="3.12")
    data["results"]["asymmetry"] = {"a_to_b": iperf3("plain.json"), "b_to_a": iperf3("reverse.json")}
    asymmetry = link_test_result(data)["tests"]["asymmetry"]
    assert asymmetry["a_to_b_bps"] == iperf3("plain.json")["forward"]["receiver_bps"]
    assert asymmetry["b_to_a_bps"] == iperf3("reverse.json")["reverse"]["receiver_bps"]
    assert (asymmetry["mode"], asymmetry["iperf3_version"]) == ("each direction alone", "3.12")
    # the two runs' seconds side by side, as --bidir's intervals carry both directions
    first = asymmetry["intervals"][0]
    assert (first["forward_bps"], first["reverse_bps"]) == (iperf3("plain.json")["intervals"][0]["forward_bps"],
                                                            iperf3("reverse.json")["intervals"][0]["reverse_bps"])
    assert None not in (first["forward_bps"], first["reverse_bps"])
    assert link_test_result(data)["verdicts"]["asymmetry"].endswith(
        "(each direction alone: iperf3 3.12 runs --bidir in one thread)")
    assert link_test_result(inputs())["tests"]["asymmetry"]["mode"] == "bidir"


def test_symmetric_link_has_nothing_to_characterise():
    data = inputs()
    bidir = dict(data["results"]["asymmetry"]["bidir"])
    bidir["reverse"] = dict(bidir["reverse"], receiver_bps=bidir["forward"]["receiver_bps"])
    data["results"]["asymmetry"]["bidir"] = bidir
    result = link_test_result(data)
    assert result["verdicts"]["asymmetry"].startswith("symmetric")
    assert result["verdicts"]["flow_sweep"] == "no weak direction to characterise"


@pytest.mark.parametrize("bad", [None, [], "x"])
def test_wrong_input_type(bad):
    with pytest.raises(AnsibleFilterError, match="expects a dict"):
        link_test_result(bad)


def test_missing_input_is_named():
    data = inputs()
    del data["thresholds"]
    with pytest.raises(AnsibleFilterError, match="missing input 'thresholds'"):
        link_test_result(data)


def test_ab_metrics_flatten_a_result_and_keep_unmeasured_as_none():
    from ansible_collections.inferlab.distributed.plugins.filter.link_ab_metrics import link_ab_metrics

    result = link_test_result(inputs())
    metrics = link_ab_metrics(result)
    assert metrics["a_to_b_gbps"] == round(iperf3("bidir.json")["forward"]["receiver_bps"] / 1e9, 3)
    assert metrics["asymmetry_b_tcp_retrans"] == 700
    assert metrics["asymmetry_b_tcp_retrans_pct"] == 7.0
    assert metrics["asymmetry_b_rx_errors"] == 3
    assert metrics["loaded_probes_a_to_b_loss_pct"] == 25.0
    assert metrics["loaded_probes_b_to_a_p99_ms"] == ping("ok.txt")["p99_ms"]
    del result["tests"]["probes"]
    assert link_ab_metrics(result)["probes_a_to_b_loss_pct"] is None
    with pytest.raises(AnsibleFilterError, match="expects a link test result"):
        link_ab_metrics({"tests": {}})


def test_a_soak_records_every_probe_and_each_hosts_link_events():
    result = link_test_result(soak_inputs())
    soak = result["tests"]["soak"]
    bidir = iperf3("bidir.json")
    first, refused, cut, silent = soak["probes"]
    assert (first["ok"], first["index"], first["started_at"]) == (True, 0, 1796037536)
    rates = (bidir["forward"]["receiver_bps"], bidir["reverse"]["receiver_bps"])
    assert (first["a_to_b_bps"], first["b_to_a_bps"]) == rates
    assert (refused["ok"], refused["error"]) == (False, "unable to connect to server: Connection refused")
    assert not cut["ok"] and cut["error"].startswith("the iperf3 report could not be read (exit 124): ")
    assert silent["error"] == "no iperf3 report (exit 124): iperf3: interrupt - the client has terminated"
    assert soak["failed_probes"] == 3
    # an unreadable sample is listed with the events but is not a flap of the link
    assert soak["link_flaps"] == {"lab-a": 1, "lab-b": 1} and len(soak["events"]["lab-b"]) == 2
    assert soak["host_counters"]["lab-a"]["RetransSegs"] == 5
    assert result["verdicts"]["soak"].startswith(
        "4 probe(s) every 60.0 s over 240.0 s, 3 failed; link events: 1 on lab-a, 1 on lab-b; slowest direction")

"""link_test_result: real iperf3 and ping fixtures in, the record's link test fragment out."""

from pathlib import Path

import jsonschema
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.link_test_result import link_test_result
from ansible_collections.inferlab.distributed.plugins.module_utils._iperf3 import iperf3_summary
from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import ping_summary
from inferlab import record

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def iperf3(name):
    return iperf3_summary((FIXTURES / "iperf3" / name).read_text())


def ping(name):
    return ping_summary((FIXTURES / "ping" / name).read_text())


def window(retrans, crc=0):
    return {"interfaces": {"thunderbolt0": {"rx_crc_errors": crc, "rx_packets": 100}},
            "tcp": {"RetransSegs": retrans, "OutSegs": 10000},
            "tcp_ext": {"TCPLostRetransmit": 0}, "resets": [], "link_retrained": False}


def inputs(**override):
    data = {
        "a": "lab-a", "b": "lab-b", "interface": "thunderbolt0",
        "addresses": {"a": "169.254.177.1", "b": "169.254.177.2"}, "driver_layer": "emulated",
        "started": "2026-11-30T10:00:00Z", "finished": "2026-11-30T10:01:00Z", "window_bytes": 1048576,
        "thresholds": {"asymmetry": 1.5, "flow": 1.5},
        "results": {
            "asymmetry": {"bidir": iperf3("bidir.json")},
            "flow_sweep": {"a_to_b_1": iperf3("plain.json"), "b_to_a_1": iperf3("reverse.json"),
                           "a_to_b_4": iperf3("plain_p4.json"), "b_to_a_4": iperf3("reverse.json")},
            "window": {"a_to_b": iperf3("plain.json")},
            "loaded_probes": {"load": iperf3("bidir_p4.json")},
        },
        "pings": {"a": {"probes": ping("ok.txt"), "loaded_probes": ping("partial_loss.txt")},
                  "b": {"probes": ping("ok.txt"), "loaded_probes": ping("ok.txt")}},
        "windows": {"a": {t: window(5) for t in ("asymmetry", "flow_sweep", "window", "probes", "loaded_probes")},
                    "b": {t: window(700, crc=3) for t in ("asymmetry", "flow_sweep", "window", "probes")}},
    }
    data.update(override)
    return data


def test_fragment_matches_the_record_schema_and_keeps_directions():
    result = link_test_result(inputs())
    schema = record.load_schema()
    jsonschema.validate(result, {"$defs": schema["$defs"], "$ref": "#/$defs/link_test"})
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

"""Link test inputs built from the real iperf3 and ping fixtures, shared by the filter and report tests."""

from pathlib import Path

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import ping_summary
from ansible_collections.inferlab.distributed.plugins.plugin_utils._iperf3 import iperf3_summary

FIXTURES = Path(__file__).resolve().parent / "fixtures"


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

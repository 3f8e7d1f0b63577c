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


def soak_inputs():
    """Three soak probes as the role keeps them (command results): a whole report, a run refused while the link was
    away, a report cut short by the timeout; the soak window's events on both hosts."""
    fixtures = FIXTURES / "iperf3"
    runs = {"probe_0000": {"rc": 0, "stdout": (fixtures / "bidir.json").read_text(), "stderr": ""},
            "probe_0001": {"rc": 1, "stdout": (fixtures / "error_refused.json").read_text(), "stderr": ""},
            "probe_0002": {"rc": 124, "stdout": (fixtures / "truncated.json").read_text(), "stderr": ""},
            "probe_0003": {"rc": 124, "stdout": "", "stderr": "iperf3: interrupt - the client has terminated"}}
    flap = {"kind": "carrier", "interface": "thunderbolt0", "at": "2026-11-30T11:19:20.000000Z", "t_wall": 1796037560.0,
            "since_s": 1.0, "changes": 2, "up": 1, "down": 1}
    windows = {"a": {"soak": dict(window(5), link_events=[flap])},
               "b": {"soak": dict(window(5), link_events=[flap, dict(flap, kind="unreadable_sample")])}}
    return inputs(results={"soak": runs}, pings={}, windows=windows,
                  soak={"duration_s": 240.0, "interval_s": 60.0, "probe_s": 5})

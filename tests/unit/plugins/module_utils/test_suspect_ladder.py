# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The elimination ladder judged step by step: an observed suspect (one flow 3.58 Gb/s, two or four flows
8.4-8.7, an 8 MB window 6.6, Nagle off 2.7, a control host 8.1 against the same server, receive 9.3), a clean host,
the lab's emulation (a per-flow cap, the window without effect), runs that moved nothing, and malformed input."""

from __future__ import annotations

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _suspect_ladder
from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import LinkVerdictError

G = 1e9
HOSTS = {"suspect": "lab-c", "server": "lab-a", "control": "lab-b"}
SETTINGS = {"duration_s": 3, "flows": [1, 2, 4], "window_bytes": 8388608, "message_sizes": [4096, 65536, 1048576],
            "nagle_message_bytes": 4096, "loopback": True}
REPORT = {"flows_1": 3.58, "flows_2": 8.4, "flows_4": 8.7, "window_large": 6.6, "size_4096": 3.58,
          "size_65536": 3.7, "size_1048576": 3.8, "nagle_on": 3.58, "nagle_off": 2.7, "receive": 9.3,
          "control": 8.1, "loopback": 40.0}
CLEAN = dict.fromkeys(REPORT, 9.3)


def gbit(rates):
    return dict((name, None if value is None else value * G) for name, value in rates.items())


def judge(rates, settings=None, threshold=1.5):
    return _suspect_ladder.ladder_verdict(gbit(rates), HOSTS, settings or SETTINGS, threshold)


def test_the_runs_follow_the_reports_order_with_their_iperf3_arguments():
    runs = _suspect_ladder.ladder_runs(SETTINGS)
    assert [r["name"] for r in runs] == ["flows_1", "flows_2", "flows_4", "window_large", "size_4096", "size_65536",
                                         "size_1048576", "nagle_on", "nagle_off", "receive", "control", "loopback"]
    by_name = dict((r["name"], r) for r in runs)
    assert by_name["flows_4"] == {"name": "flows_4", "path": "suspect", "args": ["-P", "4", "-t", "3"]}
    assert by_name["window_large"]["args"] == ["-w", "8388608", "-t", "3"]
    assert by_name["nagle_off"]["args"] == ["-l", "4096", "-N", "-t", "3"]
    assert by_name["receive"] == {"name": "receive", "path": "receive", "args": ["-R", "-t", "3"]}
    assert [r["path"] for r in runs[-2:]] == ["control", "loopback"]
    assert "loopback" not in [r["name"] for r in _suspect_ladder.ladder_runs(dict(SETTINGS, loopback=False))]


def test_the_reports_suspect_is_characterized_step_by_step():
    result = judge(REPORT)
    steps = result["steps"]
    assert result["order"] == ["flows", "window", "nagle", "message_sizes", "control", "loopback"]
    assert steps["flows"]["verdict"] == "per flow" and steps["flows"]["figures"]["ratio"] == 2.43
    assert steps["window"]["verdict"] == "helps partly"
    assert steps["window"]["text"] == (
        "helps partly: one flow with a 8 MiB window: 6.60 Gbit/s against 3.58 Gbit/s with the default window "
        "(1.84x, threshold 1.5x); 59 % of the way to the 8.70 Gbit/s that parallel flows reach")
    # Nagle off: 2.7 against 3.58 is 1.33x, under the threshold: the report called it worse, this threshold does not
    assert steps["nagle"]["verdict"] == "no clear effect" and steps["nagle"]["figures"]["ratio"] == 1.33
    assert judge(REPORT, threshold=1.3)["steps"]["nagle"]["verdict"] == "Nagle off hurts"
    assert steps["message_sizes"]["verdict"] == "flat"
    assert steps["control"]["verdict"] == "the suspect's sender"
    assert steps["control"]["text"] == (
        "the suspect's sender: control host lab-b sends 8.10 Gbit/s to lab-a where lab-c sends 3.58 Gbit/s (2.26x, "
        "threshold 1.5x); the same server receives faster from another host: lab-c's transmit path, not lab-a's "
        "receive path; lab-c receives 9.30 Gbit/s from lab-a (2.60x its sending)")
    assert steps["loopback"]["verdict"] == "loopback fast"
    assert all(step["does_not_show"] for step in steps.values())
    assert result["theory"] == (
        "a theory, not a cause: the limit is per flow; it is on lab-c's sending side; a large window helps partly; "
        "the host's own TCP over loopback is fast; what inside lab-c causes it was not determined, and leaving it out "
        "of the ring works around it")


def test_a_clean_host_shows_no_effect_and_no_theory():
    result = judge(CLEAN)
    verdicts = dict((name, step["verdict"]) for name, step in result["steps"].items())
    assert verdicts == {"flows": "per host", "window": "no clear effect", "nagle": "no clear effect",
                        "message_sizes": "flat", "control": "not the suspect alone", "loopback": "loopback slow too"}
    # "per host" with no gap: the flows step alone names nothing weak; the summary still says what was observed
    assert result["theory"].startswith("a theory, not a cause: the limit is per host; a control host shows it too")


def test_the_labs_emulation_a_per_flow_cap_that_a_window_does_not_lift():
    lab = {"flows_1": 0.0338, "flows_2": 0.0647, "flows_4": 0.0884, "window_large": 0.0341, "size_4096": 0.0330,
           "size_65536": 0.0336, "size_1048576": 0.0338, "nagle_on": 0.0330, "nagle_off": 0.0329, "receive": 0.088,
           "control": 0.085, "loopback": 5.0}
    steps = judge(lab)["steps"]
    assert steps["flows"]["verdict"] == "per flow" and steps["window"]["verdict"] == "no clear effect"
    assert steps["control"]["verdict"] == "the suspect's sender"


def test_message_sizes_that_matter_are_named_in_order():
    rates = dict(REPORT, size_4096=1.0, size_65536=2.0, size_1048576=3.6)
    step = judge(rates)["steps"]["message_sizes"]
    assert step["verdict"] == "grows with size"
    assert step["text"] == ("grows with size: 4 KiB 1.00 Gbit/s, 64 KiB 2.00 Gbit/s, 1 MiB 3.60 Gbit/s (3.60x between "
                            "4 KiB and 1 MiB, threshold 1.5x)")


def test_runs_that_moved_nothing_are_not_judged():
    result = judge(dict(REPORT, flows_1=0.0, control=None, loopback=None, nagle_off=None))
    steps = result["steps"]
    for name in ("flows", "window", "nagle", "control", "loopback"):
        assert steps[name]["verdict"] == "not measured", name
    assert steps["control"]["text"] == "the control step: no traffic measured, not judged; re-run the ladder"
    assert result["theory"] == "nothing characterized: the steps measured no clear effect (see each step)"


def test_without_the_loopback_run_its_step_says_so():
    rates = dict(REPORT)
    del rates["loopback"]
    step = judge(rates, settings=dict(SETTINGS, loopback=False))["steps"]["loopback"]
    assert step["verdict"] == "not run"


@pytest.mark.parametrize("settings, message", [
    ("nope", "settings must be a dict"),
    (dict(SETTINGS, duration_s=0), "duration_s must be a whole number of seconds, 1 or more, got 0"),
    (dict(SETTINGS, duration_s=True), "duration_s must be a whole number"),
    (dict(SETTINGS, flows=[1]), r"flows must hold 1 and at least one larger count .*\[1\]"),
    (dict(SETTINGS, flows=[]), "flows must be a non-empty list of positive integers"),
    (dict(SETTINGS, window_bytes="8M"), r"window_bytes must be a non-empty list of positive integers, got \['8M'\]"),
    (dict(SETTINGS, message_sizes=[4096, -1]), "message_sizes must be a non-empty list of positive integers"),
    (dict(SETTINGS, nagle_message_bytes=None), "nagle_message_bytes must be"),
])
def test_malformed_settings_are_refused_with_what_was_found(settings, message):
    with pytest.raises(LinkVerdictError, match=message):
        _suspect_ladder.ladder_runs(settings)


@pytest.mark.parametrize("results, hosts, message", [
    ([], HOSTS, "results must be a dict"),
    ({}, {"suspect": "lab-c", "server": "lab-a"}, "hosts must name the suspect, the server and the control host"),
    ({}, dict(HOSTS, control="lab-c"), "must be three hosts"),
    ({"flows_8": 1.0}, HOSTS, "results has runs the ladder does not make: flows_8"),
    ({"flows_1": "fast"}, HOSTS, "the run flows_1 must be a throughput in bit/s, got 'fast'"),
    ({"flows_1": -1}, HOSTS, "the run flows_1 must not be negative"),
])
def test_malformed_results_are_refused(results, hosts, message):
    with pytest.raises(LinkVerdictError, match=message):
        _suspect_ladder.ladder_verdict(results, hosts, SETTINGS, 1.5)


def test_a_threshold_that_is_not_a_ratio_is_refused():
    with pytest.raises(LinkVerdictError, match="threshold must be a number above 1"):
        _suspect_ladder.ladder_verdict({}, HOSTS, SETTINGS, 1.0)

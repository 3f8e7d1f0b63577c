# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import subprocess
from collections import OrderedDict
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import link
from ansible_collections.inferlab.distributed.plugins.module_utils import _link_verdict
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _iperf3
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[4]
FIXTURES = REPO_ROOT / "tests" / "unit" / "fixtures"
NAMES = ["iperf3_summary", "asymmetry_verdict", "flow_limit", "ping_summary", "link_condition_table", "pair_schedule",
         "pair_host_verdicts", "suspect_ladder_runs", "suspect_ladder_verdict"]


def fixture(*parts):
    return FIXTURES.joinpath(*parts).read_text()


def test_registered():
    filters = link.FilterModule().filters()
    assert sorted(filters) == sorted(NAMES)
    for name in NAMES:
        assert filters[name] is getattr(link, name)


@pytest.mark.parametrize("name", NAMES)
def test_sidecar_documentation(name):
    """Several filters share link.py, so each is documented in plugins/filter/<name>.yml, named after it."""
    import yaml

    doc = yaml.safe_load((REPO_ROOT / "plugins" / "filter" / f"{name}.yml").read_text())
    assert doc["DOCUMENTATION"]["name"] == name
    assert doc["EXAMPLES"].strip()
    assert doc["RETURN"]["_value"]["description"]
    assert not hasattr(link, "DOCUMENTATION")   # it would shadow every sidecar in ansible-doc


def test_iperf3_summary_accepts_text_dict_and_registered_result():
    stdout = fixture("iperf3", "bidir.json")
    expected = _iperf3.iperf3_summary(stdout)
    registered = {"changed": False, "rc": 0, "stdout": stdout, "stderr": "", "cmd": ["iperf3"],
                  "start": "2026-11-30 11:18:01.000001", "end": "2026-11-30 11:18:03.100000", "delta": "0:00:02.1"}
    assert link.iperf3_summary(stdout) == expected
    assert link.iperf3_summary(registered) == expected
    assert link.iperf3_summary(OrderedDict(json.loads(stdout))) == expected


def test_iperf3_summary_error_run_is_not_an_exception():
    result = link.iperf3_summary(fixture("iperf3", "error_refused.json"))
    assert (result["ok"], result["error"]) == (False, "unable to connect to server: Connection refused")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (fixture("iperf3", "truncated.json"), r"^iperf3_summary: iperf3 output is not valid JSON .*it ends with "),
        ('{"start": {}, "intervals": []}', "^iperf3_summary: iperf3 JSON has no end section"),
        (17, "^iperf3_summary: iperf3 result must be the JSON text"),
        ({"rc": 1, "stdout": "", "stderr": "iperf3: error - unable to connect\n"},
         r"^iperf3_summary: the command failed with rc 1 and printed nothing on stdout; stderr: iperf3: error"),
        ({"rc": 0, "stdout": "", "stderr": ""},
         r"^iperf3_summary: the command exited 0 and printed nothing on stdout; stderr: \(empty\)$"),
    ],
)
def test_iperf3_summary_errors(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        link.iperf3_summary(value)


def test_asymmetry_verdict():
    ends = OrderedDict([("lab-a", {"tx_bps": 9e9, "rx_bps": 9.1e9}), ("lab-b", {"tx_bps": 9e9, "rx_bps": 3.2e9})])
    ctl = OrderedDict(host="lab-c", to=ends)
    result = link.asymmetry_verdict(9.3e9, 3.0e9, "lab-a", "lab-b", control=ctl)
    assert result["possible_ends"] == ["lab-b's transmit path"]
    assert link.asymmetry_verdict(9.3e9, 8.94e9, "lab-a", "lab-b")["text"] == "symmetric (ratio 1.04x, threshold 1.5x)"
    assert link.asymmetry_verdict(0, 9e9, "lab-a", "lab-b")["verdict"] == "no traffic"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((1e9, 1e9, "lab-a", "lab-a"), {}, "^asymmetry_verdict: host_a and host_b must differ"),
        ((1e9, "x", "lab-a", "lab-b"), {}, "^asymmetry_verdict: b_to_a"),
        ((1e9, 1e9, "lab-a", "lab-b"), {"threshold": 0.9}, "^asymmetry_verdict: threshold must be"),
        ((1e9, 1e9, "lab-a", "lab-b"), {"control": ["lab-c"]}, "^asymmetry_verdict: control must be a dict"),
    ],
)
def test_asymmetry_verdict_errors(args, kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        link.asymmetry_verdict(*args, **kwargs)


def test_flow_limit():
    assert link.flow_limit({"1": 3.58e9, "2": 8.4e9, "4": 8.7e9})["kind"] == "per-flow limit"
    assert link.flow_limit({1: 3.58e9, 4: 3.7e9}, threshold=2)["kind"] == "per-host limit"
    with pytest.raises(AnsibleFilterError, match=r"^flow_limit: by_flows needs the one-flow result"):
        link.flow_limit({2: 1.0, 4: 2.0})


def test_ping_summary():
    stdout = fixture("ping", "partial_loss.txt")
    assert link.ping_summary(stdout) == _link_verdict.ping_summary(stdout)
    registered = {"rc": 1, "stdout": fixture("ping", "unreachable.txt"), "stderr": ""}
    assert link.ping_summary(registered)["loss_pct"] == 100.0
    with pytest.raises(AnsibleFilterError, match="^ping_summary: no ping statistics line"):
        link.ping_summary(fixture("ping", "truncated.txt"))
    with pytest.raises(AnsibleFilterError, match="^ping_summary: the command failed with rc 2"):
        link.ping_summary({"rc": 2, "stdout": "", "stderr": "ping: unknown host lab-x"})
    with pytest.raises(AnsibleFilterError, match="^ping_summary: ping output must be a string"):
        link.ping_summary(None)


def test_link_condition_table():
    runs = (OrderedDict(condition="b", repetition=1, metrics={"x": 1.0}),
            {"condition": "a", "repetition": 1, "metrics": {"x": 3.0}})
    table = link.link_condition_table(runs, ("x",))
    assert [row["condition"] for row in table] == ["b", "a"]
    with pytest.raises(AnsibleFilterError, match="^link_condition_table: metrics y appear in no run"):
        link.link_condition_table(list(runs), ["y"])


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars:
    bidir: "{{ lookup('ansible.builtin.file', fixtures ~ '/iperf3/bidir.json') }}"
    reverse: "{{ lookup('ansible.builtin.file', fixtures ~ '/iperf3/reverse.json') }}"
    ping: "{{ lookup('ansible.builtin.file', fixtures ~ '/ping/loopback_20.txt') }}"
    sweep: {1: 3.58e9, 2: 8.4e9, 4: 8.7e9}
    runs:
      - {condition: baseline, repetition: 1, metrics: {gbps: 9.1, retrans: 12}}
      - {condition: baseline, repetition: 2, metrics: {gbps: 9.3, retrans: null}}
      - {condition: tx_e2e, repetition: 1, metrics: {gbps: 17.8, retrans: 0}}
  tasks:
    - name: Every filter through Ansible's own templating (lazy containers, native types)
      vars:
        summary: "{{ bidir | inferlab.distributed.iperf3_summary }}"
        rev: "{{ reverse | from_json | inferlab.distributed.iperf3_summary }}"
        asym: >-
          {{ summary.forward.receiver_bps | inferlab.distributed.asymmetry_verdict(
               summary.reverse.receiver_bps * 0.3, 'lab-a', 'lab-b', control={'host': 'lab-c', 'to': {
               'lab-a': {'tx_bps': 9e9, 'rx_bps': 9e9}, 'lab-b': {'tx_bps': 9e9, 'rx_bps': 2e9}}}) }}
        flows: "{{ sweep | inferlab.distributed.flow_limit }}"
        pings: "{{ ping | inferlab.distributed.ping_summary }}"
        table: "{{ runs | inferlab.distributed.link_condition_table(['gbps', 'retrans']) }}"
      ansible.builtin.assert:
        that:
          - summary.ok and summary.bidir and summary.reverse.retransmits == 93
          - rev.forward is none and rev.reverse.receiver_bps > 0
          - asym.verdict == 'asymmetric'
          - "asym.weak_direction == {'from': 'lab-b', 'to': 'lab-a'}"
          - asym.possible_ends == ["lab-b's transmit path"]
          - flows.kind == 'per-flow limit' and flows.ratio == 2.43
          - pings.p50_ms == 0.045 and pings.p99_ms == 0.075
          - table | map(attribute='condition') | list == ['baseline', 'tx_e2e']
          - table[0].metrics.gbps.median == 9.2 and table[0].metrics.retrans.n == 1
        fail_msg: "{{ summary }} {{ asym }} {{ flows }} {{ pings }} {{ table }}"
"""


def test_filters_in_a_real_playbook(tmp_path):
    playbook = tmp_path / "link_filters.yml"
    playbook.write_text(PLAYBOOK)
    proc = subprocess.run(
        [ansible_playbook(), "-i", "localhost,", "-c", "local", str(playbook), "-e", "fixtures=" + str(FIXTURES)],
        cwd=REPO_ROOT, env=playbook_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "ok=1" in proc.stdout


def test_the_pair_filters_wrap_their_errors():
    with pytest.raises(AnsibleFilterError, match="pair_schedule: a pair test needs at least two hosts, got 1"):
        link.pair_schedule(["lab-a"])
    with pytest.raises(AnsibleFilterError, match="pair_host_verdicts: the matrix lacks the tests lab-b -> lab-a"):
        link.pair_host_verdicts([{"from": "lab-a", "to": "lab-b", "bps": 1e9}], ["lab-a", "lab-b"])
    both_ways = [{"from": "lab-a", "to": "lab-b", "bps": 1e9}, {"from": "lab-b", "to": "lab-a", "bps": 1e9}]
    assert link.pair_host_verdicts(both_ways, ["lab-a", "lab-b"])["judged"] is False


def test_the_ladder_filters_wrap_their_errors():
    with pytest.raises(AnsibleFilterError, match="suspect_ladder_runs: flows must hold 1 and at least one larger"):
        link.suspect_ladder_runs({"duration_s": 3, "flows": [2, 4], "window_bytes": 1, "message_sizes": [1],
                                  "nagle_message_bytes": 1})
    with pytest.raises(AnsibleFilterError, match="suspect_ladder_verdict: the suspect, the server and the control"):
        link.suspect_ladder_verdict({}, {"suspect": "a", "server": "a", "control": "c"}, {}, 1.5)

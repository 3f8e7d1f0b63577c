# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import copy
import json
import subprocess
from collections import OrderedDict
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import sglang
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _sglang_launch
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[4]
TABLE = json.loads((REPO_ROOT / "tests" / "unit" / "fixtures" / "sglang" / "specs.json").read_text())
CASES = {case["name"]: case for case in TABLE["cases"]}
NAMES = ["sglang_launch_argv", "sglang_launch_environment", "sglang_spec_problems"]


def test_registered():
    filters = sglang.FilterModule().filters()
    assert sorted(filters) == sorted(NAMES)
    for name in NAMES:
        assert filters[name] is getattr(sglang, name)


@pytest.mark.parametrize("name", NAMES)
def test_sidecar_documentation(name):
    """Several filters share sglang.py, so each is documented in plugins/filter/<name>.yml, named after it."""
    doc = yaml.safe_load((REPO_ROOT / "plugins" / "filter" / f"{name}.yml").read_text())
    assert doc["DOCUMENTATION"]["name"] == name
    assert doc["DOCUMENTATION"]["options"]["_input"]["type"] == "dict"
    assert doc["EXAMPLES"].strip()
    assert doc["RETURN"]["_value"]["description"]
    assert not hasattr(sglang, "DOCUMENTATION")


@pytest.mark.parametrize("name", list(CASES))
def test_filters_match_the_table(name):
    case = CASES[name]
    ring = None if case["ring_host"] is None else dict(TABLE["ring"], host=case["ring_host"])
    assert sglang.sglang_launch_argv(case["spec"]) == case["argv"]
    assert sglang.sglang_launch_environment(case["spec"]) == case["environment"]
    assert sglang.sglang_spec_problems(case["spec"], ring) == []


def test_mappings_tuples_and_str_subclasses_are_accepted():
    class Tagged(str):
        """Stands for the str subclasses Ansible hands to filters (tagged and unsafe strings)."""

    case = copy.deepcopy(CASES["tp2_nextn_rank0"])
    spec = OrderedDict(case["spec"])
    spec["launcher"] = tuple(Tagged(part) for part in spec["launcher"])
    spec["model_path"] = Tagged(spec["model_path"])
    spec["speculative"] = OrderedDict(spec["speculative"], algorithm=Tagged("NEXTN"))
    argv = sglang.sglang_launch_argv(spec)
    assert argv == case["argv"]
    assert {type(arg) for arg in argv} == {str}
    assert sglang.sglang_spec_problems(spec, OrderedDict(TABLE["ring"], host=Tagged("lab-a"))) == []


def test_problems_come_through():
    spec = dict(CASES["tp2_nextn_rank0"]["spec"], speculative={"algorithm": "NEXTN", "num_steps": 3,
                                                               "eagle_topk": 1, "num_draft_tokens": 5})
    assert sglang.sglang_spec_problems(spec, TABLE["ring"]) == [{
        "field": "speculative.num_draft_tokens", "expected": "4 (num_steps + 1 with eagle_topk 1)", "found": 5,
        "message": "with eagle_topk 1 SGLang 0.5.23 silently changes num_draft_tokens 5 to num_steps + 1 = 4; set it "
                   "to 4"}]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: sglang.sglang_launch_argv(dict(CASES["replica"]["spec"], tp_size="1")),
     "sglang_launch_argv: malformed SGLang rank spec: tp_size must be an integer, got '1'"),
    (lambda: sglang.sglang_launch_argv("--tp-size 2"),
     "sglang_launch_argv: malformed SGLang rank spec: spec must be a dict, got str"),
    (lambda: sglang.sglang_launch_environment(dict(CASES["replica"]["spec"], environment={"A": 1.5})),
     "sglang_launch_environment: malformed SGLang rank spec: environment.A must be a string or an integer, got 1.5"),
    (lambda: sglang.sglang_spec_problems({k: v for k, v in CASES["replica"]["spec"].items() if k != "port"}),
     "sglang_spec_problems: malformed SGLang rank spec: spec is missing the required key port"),
    (lambda: sglang.sglang_spec_problems(CASES["replica"]["spec"], {"size": 1}),
     "sglang_spec_problems: malformed SGLang rank spec: ring needs rank0_link_address"),
    (lambda: sglang.sglang_spec_problems(dict(CASES["replica"]["spec"], speculative={"algo": "NEXTN"})),
     "sglang_spec_problems: malformed SGLang rank spec: speculative has unknown keys algo"),
])
def test_malformed_spec_is_a_filter_error(call, message):
    with pytest.raises(AnsibleFilterError) as caught:
        call()
    assert str(caught.value).startswith(message)
    assert not isinstance(caught.value.__cause__, _sglang_launch.SpecError)


INVENTORY = """
ring:
  hosts:
    lab-a: {inferlab_link_address: 169.254.177.1, bind: 169.254.77.1}
    lab-b: {inferlab_link_address: 169.254.177.2, bind: 169.254.77.2}
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
"""

PLAYBOOK = """
- name: SGLang launch filters on a two-host ring
  hosts: ring
  gather_facts: false
  vars:
    speculative: {algorithm: NEXTN, num_steps: 3, eagle_topk: 1, num_draft_tokens: "{{ 2 + 2 }}"}
    rank_spec:
      launcher: [python3, -m, sglang.launch_server]
      model_path: /models/Qwen3-30B-A3B-FP8
      tp_size: "{{ groups['ring'] | length }}"
      nnodes: "{{ groups['ring'] | length }}"
      node_rank: "{{ groups['ring'].index(inventory_hostname) }}"
      dist_init_addr: "{{ hostvars[groups['ring'][0]]['inferlab_link_address'] }}:50000"
      host: "{{ bind }}"
      port: 30000
      max_running_requests: 48
      speculative: "{{ speculative }}"
      link_interface: thunderbolt0
      nccl_debug: INFO
    ordered_ring:
      hosts: "{{ groups['ring'] }}"
      link_addresses: "{{ dict(groups['ring'] | zip(groups['ring'] | map('extract', hostvars,
                                                                         'inferlab_link_address'))) }}"
      host: "{{ inventory_hostname }}"
    role_ring:
      size: "{{ groups['ring'] | length }}"
      rank0_link_address: "{{ hostvars[groups['ring'][0]]['inferlab_link_address'] }}"
    wrong_rank: "{{ rank_spec | combine({'node_rank': 1 - groups['ring'].index(inventory_hostname)}) }}"
  tasks:
    - name: Build and check
      vars:
        argv: "{{ rank_spec | inferlab.distributed.sglang_launch_argv }}"
        env: "{{ rank_spec | inferlab.distributed.sglang_launch_environment }}"
        problems: "{{ rank_spec | inferlab.distributed.sglang_spec_problems(ordered_ring) }}"
        role_problems: "{{ rank_spec | inferlab.distributed.sglang_spec_problems(role_ring) }}"
        wrong: "{{ wrong_rank | inferlab.distributed.sglang_spec_problems(ordered_ring) }}"
        rank: "{{ groups['ring'].index(inventory_hostname) }}"
      ansible.builtin.assert:
        that:
          - argv == ['python3', '-m', 'sglang.launch_server', '--model-path', '/models/Qwen3-30B-A3B-FP8',
                     '--tp-size', '2', '--nnodes', '2', '--node-rank', rank | string,
                     '--dist-init-addr', '169.254.177.1:50000', '--host', bind, '--port', '30000',
                     '--max-running-requests', '48', '--speculative-algorithm', 'NEXTN',
                     '--speculative-num-steps', '3', '--speculative-eagle-topk', '1',
                     '--speculative-num-draft-tokens', '4']
          - env | dict2items | map(attribute='key') | list == ['NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME',
                                                              'NCCL_IB_DISABLE', 'NCCL_DEBUG']
          - env.NCCL_SOCKET_IFNAME == '=thunderbolt0' and env.GLOO_SOCKET_IFNAME == 'thunderbolt0'
          - env.NCCL_IB_DISABLE == '1' and env.NCCL_DEBUG == 'INFO'
          - problems == [] and role_problems == []
          - wrong | map(attribute='field') | list == ['node_rank']
        fail_msg: "{{ argv }} {{ env }} {{ problems }} {{ role_problems }} {{ wrong }}"
"""


def test_filters_in_a_real_playbook(tmp_path):
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    proc = subprocess.run(
        [ansible_playbook(), "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
        cwd=REPO_ROOT, env=playbook_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.count("ok=1") == 2

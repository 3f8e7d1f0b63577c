"""The network-only A/B's condition checks (roles/link_ab/tasks/preflight.yml) in a real ansible-playbook run on the
controller, as the staged experiment's plan runs them: which conditions the ring hosts' driver layer can produce,
refused before anything changes, and in a dry run noted with every other problem."""

import json
import subprocess
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[2]

PLAYBOOK = """
- name: The plan's check of the A/B's conditions
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check the conditions
      ansible.builtin.include_role:
        name: inferlab.distributed.link_ab
        tasks_from: preflight
    - name: Say the play went on
      ansible.builtin.debug:
        msg: went on
"""

PROFILES = [{"name": "stock", "hook": "link_profile", "profile": "lossy"},
            {"name": "candidate", "hook": "link_profile", "profile": "clean"}]


def run_plan(tmp_path, layer, **extra_vars):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"ring": {"hosts": {
        "gpu-a": {"inferlab_driver_layer": layer}, "gpu-b": {"inferlab_driver_layer": layer}}}}}}))
    playbook = tmp_path / "plan.yml"
    playbook.write_text(PLAYBOOK)
    extra = json.dumps({"inferlab_run_dir": str(tmp_path), **extra_vars})
    return subprocess.run(
        [ansible_playbook(), "-i", str(inventory), "-c", "local", str(playbook),
         "-e", extra], cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"), capture_output=True,
        text=True, timeout=120, check=False)


def said(proc):
    return " ".join(proc.stdout.split())  # the callback folds long messages


@pytest.mark.parametrize("layer", ["kernel", "emulated"])
def test_driver_states_can_be_produced_on_either_layer(tmp_path, layer):
    proc = run_plan(tmp_path, layer)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout


def test_tc_profiles_are_refused_on_the_kernel_layer_before_anything_changes(tmp_path):
    proc = run_plan(tmp_path, "kernel", link_ab_conditions=PROFILES)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("Stop if the link_ab conditions stock, candidate cannot be produced: their hook link_profile emulates a "
            "driver with a tc profile and needs inferlab_driver_layer 'emulated' on link_ab_host gpu-b, found "
            "'kernel'; on real hosts compare driver states" in said(proc))
    assert "went on" not in proc.stdout


def test_tc_profiles_run_on_the_emulated_layer(tmp_path):
    assert run_plan(tmp_path, "emulated", link_ab_conditions=PROFILES).returncode == 0


def test_a_condition_without_its_hooks_key_is_named(tmp_path):
    conditions = [{"name": "stock", "hook": "driver"}, {"name": "candidate", "hook": "driver", "driver": "candidate"}]
    proc = run_plan(tmp_path, "kernel", link_ab_conditions=conditions)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("found conditions ['stock', 'candidate'], without their hook's key: stock and link_ab_host gpu-b; set "
            "link_ab_conditions / link_ab_host" in said(proc))


def test_tunable_conditions_need_their_mappings_and_known_nic_groups(tmp_path):
    fine = [{"name": "as-found", "hook": "nic", "nic": {}},
            {"name": "no-gso", "hook": "nic", "nic": {"features": {"generic-segmentation-offload": False}}}]
    assert run_plan(tmp_path, "kernel", link_ab_conditions=fine).returncode == 0
    conditions = [{"name": "pause", "hook": "nic", "nic": {"pause": {"rx": False}}},
                  {"name": "napi", "hook": "driver_param"}]
    proc = run_plan(tmp_path, "kernel", link_ab_conditions=conditions)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "found conditions ['pause', 'napi'], without their hook's key: pause, napi and link_ab_host" in said(proc)


def test_a_dry_run_notes_every_problem_and_goes_on(tmp_path):
    conditions = [PROFILES[0], {"name": "stock", "hook": "link_profile", "profile": "clean"}]
    proc = run_plan(tmp_path, "kernel", link_ab_conditions=conditions, inferlab_preflight_collect=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout
    lines = (tmp_path / "preflight" / "problems.jsonl").read_text().splitlines()
    messages = [json.loads(line)["message"] for line in lines]
    assert len(messages) == 2
    assert messages[0].startswith("Stop if the A/B comparison is ill-defined: expected two conditions with distinct "
                                  "names")
    assert messages[1].startswith("Stop if the link_ab conditions stock, stock cannot be produced")

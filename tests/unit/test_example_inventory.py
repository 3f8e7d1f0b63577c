"""The example inventory (inventory/example/), as an operator copies it: the staged experiment's plan passes on it
once the opt-ins are set, and names them while they are not; so does the plan that serves on a site in production
(inventory/plans/serve_in_production.yml). A real ansible-playbook run of
roles/experiment/tasks/plan.yml on the controller; no host is contacted."""

import json
from pathlib import Path

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import (
    EXPERIMENT_PLAN_PLAYBOOK,
    run_playbook,
    said,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "inventory" / "example" / "hosts.yml"


def run_plan(tmp_path, *plan_files, **extra_vars):
    plans = [arg for name in plan_files for arg in ("-e", f"@{REPO_ROOT / 'inventory' / 'plans' / name}")]
    return run_playbook(tmp_path, EXPERIMENT_PLAN_PLAYBOOK, EXAMPLE, *plans, inferlab_run_dir=str(tmp_path),
                        inferlab_topology_kept_file=str(tmp_path / "topology.json"), **extra_vars)


def test_the_example_passes_the_whole_plan_once_its_opt_ins_are_set(tmp_path):
    proc = run_plan(tmp_path, inferlab_allow_pause_production=True, inferlab_allow_driver_swap=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout
    plan = json.loads((tmp_path / "fragments" / "experiment" / "plan.json").read_text())
    assert {"tp2_baseline", "tp2_nextn", "candidate_build", "tp2_nextn_candidate"} <= set(plan["selected"])


def test_the_example_as_shipped_names_its_opt_ins(tmp_path):
    proc = run_plan(tmp_path)
    assert proc.returncode == 2, proc.stdout[-3000:]
    text = said(proc)
    assert "inferlab_allow_pause_production" in text and "inferlab_allow_driver_swap" in text
    assert "went on" not in proc.stdout


def test_serving_in_production_pauses_behind_the_fallback_and_needs_only_that_opt_in(tmp_path):
    proc = run_plan(tmp_path, "serve_in_production.yml", inferlab_allow_pause_production=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "fragments" / "experiment" / "plan.json").read_text())
    assert plan["selected"] == ["verify", "prober", "fallback", "pause", "tp2_baseline", "tp2_nextn"]
    refused = run_plan(tmp_path, "serve_in_production.yml")
    assert refused.returncode == 2 and "inferlab_allow_pause_production" in said(refused)
    assert "inferlab_allow_driver_swap" not in said(refused)

"""The staged experiment's plan against its ring's hosts, refused before anything connects or changes: on a ring
whose links are Ethernet (inferlab_link_kind), the stages that swap the thunderbolt_net driver, naming the stages
and the hosts (a plan without them goes on); a Windows member, naming what inferlab would need for it; a quarantine an
earlier run kept, naming the command that ends it. A real
ansible-playbook run of roles/experiment/tasks/plan.yml on the controller."""

import json

import pytest

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import (
    EXPERIMENT_PLAN_PLAYBOOK,
    run_playbook,
    said,
)


def run_plan(tmp_path, stages, kind, extra_vars=None, **second_host):
    host = {"inferlab_allow_driver_swap": True, "inferlab_allow_pause_production": True}
    if kind:
        host["inferlab_link_kind"] = kind
    inventory = {"all": {"children": {"ring": {"hosts": {"gpu-a": host, "gpu-b": {**host, **second_host}}}}}}
    # no kept quarantine unless a test writes one there
    return run_playbook(tmp_path, EXPERIMENT_PLAN_PLAYBOOK, inventory, inferlab_run_dir=str(tmp_path),
                        **({"experiment_stages": stages} if stages else {}),
                        inferlab_topology_kept_file=str(tmp_path / "topology.json"), **(extra_vars or {}))


def test_driver_stages_on_an_ethernet_ring_are_refused_before_anything_changes(tmp_path):
    proc = run_plan(tmp_path, ["verify", "known_good", "candidate_build", "link_ab"], "ethernet")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("The plan's stages candidate_build, link_ab swap the thunderbolt_net driver, and the link of gpu-a, "
            "gpu-b is not Thunderbolt (inferlab_link_kind); nothing was changed. Drop those stages from "
            "experiment_stages.") in said(proc)
    assert "went on" not in proc.stdout


@pytest.mark.parametrize(("stages", "kind"), [
    (["verify", "known_good", "candidate_build", "link_ab"], None),  # Thunderbolt by default
    (["verify", "known_good", "candidate_build", "link_ab"], "thunderbolt"),
    (["verify", "known_good", "control"], "ethernet"),
])
def test_a_plan_the_links_can_run_goes_on(tmp_path, stages, kind):
    proc = run_plan(tmp_path, stages, kind)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout


@pytest.mark.parametrize("windows", [{"ansible_connection": "winrm"}, {"ansible_connection": "psrp"},
                                     {"ansible_shell_type": "powershell"}])
def test_a_windows_member_is_refused_at_the_plan_naming_what_it_would_need(tmp_path, windows):
    proc = run_plan(tmp_path, ["verify", "known_good", "control"], "ethernet", **windows)
    assert proc.returncode == 2, proc.stdout[-3000:]
    text = said(proc)
    assert "The plan cannot run on gpu-b: a Windows host" in text and "nothing was changed" in text
    assert ("a Windows member would need Ansible's Windows connection in every role, iperf3 and the counter sampler "
            "on Windows, and process management and ledger kinds") in text
    assert "went on" not in proc.stdout


def test_a_quarantine_kept_by_an_earlier_run_is_refused_naming_how_to_end_it(tmp_path):
    (tmp_path / "topology.json").write_text(json.dumps({
        "format": "inferlab.kept_topology/1", "run_id": "r1", "solo": ["gpu-b"], "roles": [],
        "restore": "inferlab run restore -e restore_known_good_dir=runs/r1/known_good"}))
    proc = run_plan(tmp_path, ["verify", "control"], None)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("A quarantine an earlier run kept is in place (%s: inferlab run restore -e "
            "restore_known_good_dir=runs/r1/known_good ends it); end it before another run changes these hosts"
            % (tmp_path / "topology.json")) in said(proc)
    assert "went on" not in proc.stdout


LOOPBACK_SERVICE = {"name": "qwen-b", "url": "http://127.0.0.1:30000/v1", "model": "qwen3-27b"}


def test_a_replica_the_controller_cannot_reach_is_refused_naming_controller_url(tmp_path):
    proc = run_plan(tmp_path, ["verify", "control"], None, inferlab_original_services=[LOOPBACK_SERVICE])
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("The control stage cannot measure gpu-b's qwen-b (http://127.0.0.1:30000/v1) from the controller: its "
            "url is the host's own loopback, and no router (inferlab_router_url) stands in front of the replicas; "
            "nothing was changed. Set controller_url on the service in inferlab_original_services") in said(proc)
    assert "went on" not in proc.stdout


@pytest.mark.parametrize(("service", "extra_vars"), [
    (dict(LOOPBACK_SERVICE, controller_url="http://gpu-b.lan:30000/v1"), None),
    (LOOPBACK_SERVICE, {"inferlab_router_url": "http://router.lan:8100"}),
])
def test_a_replica_reached_by_its_controller_url_or_a_router_goes_on(tmp_path, service, extra_vars):
    proc = run_plan(tmp_path, ["verify", "control"], None, extra_vars, inferlab_original_services=[service])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout


CANDIDATE_WITHOUT_AB = ["verify", "link_test", "known_good", "control", "prober", "fallback", "pause", "tp2_baseline",
                        "tp2_nextn", "candidate_build", "tp2_nextn_candidate"]


def test_the_candidate_served_without_the_network_only_ab_is_refused_unless_a_reason_is_given(tmp_path):
    proc = run_plan(tmp_path, CANDIDATE_WITHOUT_AB, None)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("The plan serves the candidate driver (tp2_nextn_candidate) without the network-only A/B before it; "
            "nothing was changed. The driver's effect on the link alone is proven before model speed is measured "
            "on it. Add link_ab to experiment_stages, or set experiment_link_ab_opt_out") in said(proc)
    assert "went on" not in proc.stdout


def test_a_reason_to_leave_the_ab_out_is_recorded_with_the_plan(tmp_path):
    reason = "the link A/B ran yesterday (run 2026-12-06T10:00Z) on the same hosts"
    proc = run_plan(tmp_path, CANDIDATE_WITHOUT_AB, None, {"experiment_link_ab_opt_out": reason})
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "fragments" / "experiment" / "plan.json").read_text())
    assert plan["link_ab_opt_out"] == reason


def test_the_default_plan_runs_the_network_only_ab_before_the_candidate(tmp_path):
    proc = run_plan(tmp_path, None, None)
    assert proc.returncode == 0, proc.stdout[-3000:]
    plan = json.loads((tmp_path / "fragments" / "experiment" / "plan.json").read_text())
    selected = plan["selected"]
    assert selected.index("link_ab") < selected.index("tp2_nextn_candidate") and plan["link_ab_opt_out"] is None

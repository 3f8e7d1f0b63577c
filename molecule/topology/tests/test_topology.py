"""After the quarantine of lab-b on the lab: both hosts served solo (lab-a as a ring of one), each solo replica
answered real requests straight and through its own gateway role, the public role kept answering with no failed
probe, the restore undid everything and verified every host, and nothing is left."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING, RUN_DIR, assert_guarded_and_disarmed, assert_records_valid, own_processes  # noqa: E402

testinfra_hosts = RING
RUN = RUN_DIR / "topology"
RECORD = json.loads((RUN / "record.json").read_text())
RESTORE = json.loads((RUN_DIR / "topology-restore" / "record.json").read_text())
OBSERVED = json.loads((Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "quarantine.json").read_text())
SOLO_ROLES = ["solo-lab-a", "solo-lab-b"]


def test_nothing_to_quarantine_was_refused_before_any_change():
    nothing = json.loads((RUN_DIR / "topology-nothing" / "record.json").read_text())
    assert nothing["run"]["exit_code"] == 10
    assert "topology" not in nothing["stages"]
    said = " ".join(path.read_text() for path in (RUN_DIR / "topology-nothing" / "artifacts").glob("*/stdout"))
    assert "Nothing to quarantine: every ring host (lab-a, lab-b) has inferlab_topology ring" in " ".join(said.split())


def test_the_plan_served_both_hosts_solo():
    plan = RECORD["stages"]["topology"]["plan"]
    assert (plan["ring"], plan["solo"], plan["quarantined"], plan["ring_of_one"]) == (
        [], ["lab-a", "lab-b"], ["lab-b"], "lab-a")
    assert [r["name"] for r in plan["roles"]] == SOLO_ROLES


def test_each_solo_replica_answered_real_requests_straight():
    solo = RECORD["stages"]["topology_solo"]
    assert set(solo) == {"lab-a", "lab-b"}
    for host, entry in solo.items():
        assert entry["url"].endswith(":30100"), entry["url"]
        assert "--tp-size" in entry["argv"] and entry["argv"][entry["argv"].index("--tp-size") + 1] == "1"
        assert entry["direct"]["ok"] == entry["direct"]["requests"] > 0, host


def test_the_gateway_served_the_solo_roles_beside_the_public_one():
    gateway = RECORD["stages"]["topology_gateway"]["lab-gw"]
    assert gateway["changed"] is True and gateway["config_sha256"] != gateway["original_sha256"]
    assert all(sorted(models) == sorted(["small", "large", *SOLO_ROLES]) for models in gateway["models"].values())
    assert sorted(OBSERVED["models"]) == sorted(["small", "large", *SOLO_ROLES])
    assert OBSERVED["solo_processes"] == 2


def test_every_role_answered_through_the_public_route_from_its_own_backend():
    roles = RECORD["stages"]["topology"]["public"]["roles"]
    assert set(roles) == {"small", *SOLO_ROLES}
    assert all(role["passed"] and role["ok"] == role["requests"] > 0 for role in roles.values()), roles
    for name in SOLO_ROLES:
        assert roles[name]["served_by"] == [roles[name]["expected_backend"]]


def test_the_public_route_lost_no_request():
    prober = RECORD["continuity"]["prober"]
    assert prober["failed"] == 0 and prober["total"] > 0, prober


def test_the_restore_undid_the_quarantine_and_verified_every_host():
    assert RESTORE["run"]["exit_code"] == 0
    restore = RESTORE["restore"]
    assert {"lab-a", "lab-b", "lab-gw"} <= set(restore)
    assert all(entry["verified"] is True for entry in restore.values()), restore
    undone = {host: entry.get("undo", {}).get("undone", []) for host, entry in restore.items()}
    assert len(undone["lab-a"]) == len(undone["lab-b"]) == len(undone["lab-gw"]) == 1, undone


def test_no_open_ledger_entry_is_left():
    ledgers = list(LAB_DIR.glob("**/state/ledger/*.jsonl"))
    assert ledgers, f"no ledger under {LAB_DIR}: nothing was checked"
    for ledger in ledgers:
        last = {}
        for line in ledger.read_text().splitlines():
            entry = json.loads(line)
            last[entry["id"]] = entry
        assert [e["id"] for e in last.values() if e["state"] != "undone"] == [], ledger


def test_no_solo_replica_runs(host):
    assert own_processes(host, "[-]-port 30100") == []


def test_the_originals_serve_again(host):
    # the bracket keeps pgrep from matching the shell that runs it
    assert own_processes(host, "[i]nferlab.lab.server") != []


def test_every_record_matches_the_schema():
    # the quarantine run and its restore (the refused run wrote no fragment)
    assert assert_records_valid() >= 2


def test_the_run_was_guarded_by_dead_mans_switches_then_disarmed():
    """Every host it could change, and the controller, had a switch armed after the checks and before the first
    change, renewed by the controller's heartbeat, and disarmed at the end (playbooks/deadman_arm.yml)."""
    assert_guarded_and_disarmed(["lab-a", "lab-b", "lab-gw", "localhost"])

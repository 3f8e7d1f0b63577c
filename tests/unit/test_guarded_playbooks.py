"""Every playbook that changes hosts is guarded by dead man's switches: it imports playbooks/deadman_arm.yml after
its read-only checks and before its first change, and playbooks/deadman_disarm.yml with the same hosts after its
work, before the play that judges the outcome. The staged experiment arms them itself (its pause stage, through the
deadman role). What the guard does on the lab: molecule serve, fallback and topology
(test_the_run_was_guarded_by_dead_mans_switches_then_disarmed)."""

from pathlib import Path

import pytest
import yaml

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
# each guarded playbook: the plays before the arm that only read (their names), and the hosts it arms
GUARDED = {
    "serve.yml": (["Check the plan and every ring host before anything starts"], "ring:localhost"),
    "leave_one_out.yml": (["Check the plan and every ring host before anything starts"], "ring:localhost"),
    "fallback.yml": (["Check the preconditions of the fallback (nothing changes before they pass)"],
                     "ring:gateway:localhost"),
    "topology.yml": (["Plan: who stays in the ring and who serves solo (nothing changes before this passes)",
                      "Prove the way back first",
                      "Check each solo host, and the ring that stays, before anything changes"],
                     "ring:gateway:localhost"),
    "link_profile.yml": (["Check that link_profile_host names one ring host"],
                         "{{ link_profile_host | default('ring') }}:localhost"),
    "link_ab.yml": (["Check that both conditions can be produced here"], "ring:localhost"),
}


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_the_playbook_arms_after_its_checks_and_disarms_after_its_work(name):
    plays = yaml.safe_load((PLAYBOOKS / name).read_text())
    checks, hosts = GUARDED[name]
    imports = [play.get("ansible.builtin.import_playbook") for play in plays]
    arm, disarm = imports.index("deadman_arm.yml"), imports.index("deadman_disarm.yml")
    assert [play["name"] for play in plays[:arm]] == checks
    assert plays[arm]["vars"] == plays[disarm]["vars"] == {"deadman_play_hosts": hosts}
    assert arm < disarm and imports.count("deadman_arm.yml") == imports.count("deadman_disarm.yml") == 1
    # the work between them keeps its failures for after the disarm: the plays after it only judge
    assert all(play.get("hosts") == "localhost" or "import_playbook" in str(play) for play in plays[disarm + 1:])


def test_every_playbook_that_changes_hosts_is_guarded_or_is_the_experiment_or_a_restore():
    """A new playbook that changes hosts must be added to GUARDED (or say here why it is not)."""
    unguarded = {
        "experiment.yml": "arms every host itself at its pause stage (roles/experiment/tasks/deadman.yml)",
        "restore.yml": "the way back itself: it undoes the switches with everything else",
        "candidate.yml": "the candidate driver's own link watchdog undoes a load that takes the link away",
        "verify.yml": "reads only", "preflight.yml": "reads only",
        "link_test.yml": "not guarded yet: its iperf3 servers and samplers live for a test each, in the ledger",
        "link_pairs.yml": "not guarded yet, as link_test.yml: its iperf3 servers and samplers live for the matrix, "
                          "in the ledger",
        "suspect_ladder.yml": "not guarded yet, as link_test.yml: its iperf3 servers and samplers, in the ledger",
        "day_one.yml": "link_pairs.yml and suspect_ladder.yml, one after the other",
        "isolate_suspect.yml": "day_one.yml, then leave_one_out.yml, serve.yml and topology.yml (each guarded "
                               "itself), then restore.yml",
        "lab_up.yml": "the lab", "lab_down.yml": "the lab",
        "deadman_arm.yml": "the guard", "deadman_disarm.yml": "the guard",
    }
    assert {p.name for p in PLAYBOOKS.glob("*.yml")} == set(GUARDED) | set(unguarded)

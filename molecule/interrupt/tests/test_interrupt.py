"""Every interruption point was restored with nothing left (on the hosts and on the controller), the dead man's
switches restored without a controller, and the lab is healthy afterwards. (A signal point, hup:/int:/term:, is
judged by the driver itself: its `ok` needs `inferlab run`'s exit 11 and its own verified restore.)"""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import RING, assert_records_valid, own_processes  # noqa: E402

testinfra_hosts = RING
RESULTS = json.loads((Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "interrupt.json").read_text())
POINTS = ["pause", "deadman:tp2_baseline+2"]
NOTHING_LEFT = {"open_ledger_entries": [], "ledger_locks": [], "processes": [], "tc_profiles": [], "build_dirs": [],
                "gateway_config": [], "lab_problems": [], "controller_processes": []}


def test_every_point_was_tried():
    assert [r["point"] for r in RESULTS] == POINTS
    assert all(r["killed"] for r in RESULTS), [r.get("reason") for r in RESULTS]


@pytest.mark.parametrize("point", POINTS)
def test_the_point_was_restored_with_nothing_left(point):
    [result] = [r for r in RESULTS if r["point"] == point]
    assert result["restore"]["rc"] == 0, result["restore"]
    assert result["restore"]["verified"] == {"lab-a": True, "lab-b": True, "lab-gw": True, "localhost": True}
    assert result["leftovers"] == NOTHING_LEFT
    assert result["ok"]


@pytest.mark.parametrize("point", POINTS)
def test_the_kill_left_changes_open(point):
    """Every point lies after the prober and fallback stages: the kill leaves recorded changes open (the prober
    process, the gateway's fallback config), so the driver read the real ledgers, not an empty directory."""
    [result] = [r for r in RESULTS if r["point"] == point]
    assert result["open_entries_at_kill"]


@pytest.mark.parametrize("point", POINTS)
def test_the_killed_run_held_every_ledger_lock(point):
    """The run locks every ring and gateway host's ledger and the controller's before its first stage and holds them
    to its restore: at a kill between stages (pause) as in the middle of one, all four are the killed run's."""
    [result] = [r for r in RESULTS if r["point"] == point]
    assert len(result["locks_at_kill"]) == 4, result["locks_at_kill"]
    assert set(result["locks_at_kill"].values()) == {Path(result["restore"]["dir"]).name.removesuffix("-restore")}


def test_the_dead_mans_switches_restored_without_a_controller():
    [result] = [r for r in RESULTS if r["point"].startswith("deadman:")]
    assert result["deadman_s"] is not None
    # restore.yml ran after the switches only to verify: the ring hosts had nothing left to undo
    assert all(undone == [] for undone in result["restore"]["undone"].values()), result["restore"]["undone"]


def test_the_originals_serve_again(host):
    # the bracket keeps pgrep from matching the shell that runs it
    assert own_processes(host, "[i]nferlab.lab.server") != []


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0

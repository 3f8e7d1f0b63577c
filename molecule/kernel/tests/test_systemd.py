"""The process managers on REAL systemd (systemd.yml, in the guest that boots systemd as PID 1): pause and resume of
a unit with a drop-in and an environment, a rank as a transient unit, the dead man's switch armed as a unit and fired
when nobody renewed it, and the restore's leftover scan."""

import hashlib
import json

import pytest
from conftest import EPHEMERAL, guest_testinfra_hosts

SYSTEMD = json.loads((EPHEMERAL / "systemd.json").read_text())
testinfra_hosts = guest_testinfra_hosts()
CANARY = "inferlab-kernel-canary-3e8d51"  # systemd.yml's __kernel_canary


def test_systemd_is_pid_1_of_the_guest(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    assert host.run("systemctl is-system-running").stdout.strip() in ("running", "degraded")


def test_the_pause_in_check_mode_changed_nothing():
    assert SYSTEMD["pause_check"]["changed"] and SYSTEMD["after_check"] == "active"


def test_the_pause_stopped_the_unit_once_and_the_resume_kept_its_environment_and_drop_in():
    assert SYSTEMD["pause"]["changed"] and SYSTEMD["paused_state"] == "inactive"
    assert not SYSTEMD["pause_again"]["changed"]
    assert SYSTEMD["resume"]["changed"]
    # the unit keeps its own definition: its Environment= and its drop-in's, read from the resumed process
    assert SYSTEMD["resumed_env"] == ["ORIGINAL_ROLE=small", "ORIGINAL_SITE=dropin"]


def test_the_ranks_environment_reached_it_through_a_private_file_and_no_result_argv_or_ledger_line():
    # read from the rank's /proc/PID/environ: every value exactly (the secret as its sha256, so it is in no result)
    assert SYSTEMD["rank_env"] == {"HF_TOKEN": hashlib.sha256(CANARY.encode()).hexdigest(), "NCCL_DEBUG": "INFO",
                                   "INFERLAB_QUOTING": 'say "hi" $HOME `x` \\n  '}
    assert CANARY not in json.dumps(SYSTEMD)
    assert not any(arg.startswith("--setenv") for arg in SYSTEMD["rank"]["command"])
    assert "--property=EnvironmentFile=/var/lib/inferlab/env/inferlab-rank0.service.env" in SYSTEMD["rank"]["command"]
    assert SYSTEMD["rank_env_file"] == {"exists": True, "mode": "0600", "pw_name": "root"}
    assert SYSTEMD["rank_ledger_canary_lines"] == "0"
    assert SYSTEMD["rank_env_file_stopped"] is False


def test_the_rank_ran_as_a_transient_unit_and_its_stop_unloaded_it():
    rank = SYSTEMD["rank"]
    assert rank["changed"] and "--unit=inferlab-rank0.service" in json.dumps(rank)
    assert SYSTEMD["rank_status"]["running"] and not SYSTEMD["rank_again"]["changed"]
    assert SYSTEMD["rank_stop"]["changed"]
    # a transient unit started with --collect is unloaded by its stop: systemctl knows it no more
    assert SYSTEMD["rank_stopped_state"] == "inactive"


def test_the_switch_fired_as_a_unit_undid_the_ledger_and_left_its_own_unit_for_last():
    # original, rank, switch: while armed the service is paused, the rank and the switch run
    assert SYSTEMD["armed_state"] == ["inactive", "active", "active"]
    assert SYSTEMD["borrow_pause"]["changed"] and SYSTEMD["borrow_rank"]["changed"]
    log = SYSTEMD["deadman_log"]
    assert "the dead man's switch fired" in log
    assert "stopped unit inferlab-rank0.service" in log and "started unit inferlab-original.service again" in log
    fired = [json.loads(line) for line in log.splitlines() if line.startswith("{")][-1]  # its last firing
    assert fired["fired"] and not fired["failed"] and fired["self"]["marked"]
    # its own entry is never undone by itself: marked last, after every other entry
    assert fired["self"]["id"] not in fired["undo"]["undone"]
    assert SYSTEMD["ledger_after"]["open"] == []
    assert SYSTEMD["fired_state"] == ["active", "inactive", "inactive"]


def test_the_leftover_scan_finds_nothing_after_the_switch_and_a_unit_started_behind_the_ledger():
    assert SYSTEMD["leftovers"] == []
    [planted] = SYSTEMD["leftovers_planted"]
    assert planted["kind"] == "systemd_unit" and planted["what"] == "unit inferlab-rank0.service"
    assert "is still active although entry" in planted["message"]


@pytest.mark.parametrize("unit", ["inferlab-original", "inferlab-rank0", "inferlab-deadman"])
def test_nothing_is_left_running(host, unit):
    assert not host.service(unit).is_running

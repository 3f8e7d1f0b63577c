"""Tests of the change_ledger module through main(), with patched module args."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_proc
from ansible_collections.inferlab.distributed.plugins.modules import change_ledger
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module, set_module_args

HOST = "lab-a"


@pytest.fixture
def ledger_dir(tmp_path):
    return str(tmp_path / "ledger")


def run(ledger_dir, check_mode=False, **args):
    args = dict(ledger_dir=ledger_dir, host=HOST, **args)
    if check_mode:
        args["_ansible_check_mode"] = True
    return run_module(change_ledger.main, args)


def lines_of(ledger_dir):
    path = Path(ledger_dir) / f"{HOST}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_record_and_mark(tmp_path, ledger_dir):
    params = {"path": str(tmp_path / "gateway.yaml"), "existed": False}
    failed, result = run(ledger_dir, action="record", kind="file", params=params, run_id="run1")
    assert not failed, result.get("msg", result)
    assert result["changed"] is True
    assert result["ledger"] == f"{ledger_dir}/{HOST}.jsonl"
    assert result["entry"]["state"] == "pending" and result["entry"]["params"] == params
    entry_id = result["id"]
    assert [(e["id"], e["state"], e["run_id"]) for e in lines_of(ledger_dir)] == [(entry_id, "pending", "run1")]

    failed, result = run(ledger_dir, action="mark", id=entry_id, state="applied", run_id="run1")
    assert not failed and result["changed"] is True and result["previous_state"] == "pending"
    failed, result = run(ledger_dir, action="mark", id=entry_id, state="applied", run_id="run1")
    assert not failed and result["changed"] is False
    assert [e["state"] for e in lines_of(ledger_dir)] == ["pending", "applied"]


def test_record_in_check_mode_writes_nothing(tmp_path, ledger_dir):
    failed, result = run(ledger_dir, check_mode=True, action="record", kind="file",
                         params={"path": str(tmp_path / "x"), "existed": False})
    assert not failed and result["changed"] is True and result["id"]
    assert not os.path.exists(ledger_dir)


def test_mark_in_check_mode_writes_nothing(tmp_path, ledger_dir):
    _failed, recorded = run(ledger_dir, action="record", kind="file",
                            params={"path": str(tmp_path / "x"), "existed": False})
    failed, result = run(ledger_dir, check_mode=True, action="mark", id=recorded["id"], state="applied")
    assert not failed and result["changed"] is True
    assert [e["state"] for e in lines_of(ledger_dir)] == ["pending"]


def test_record_unknown_kind_fails(ledger_dir):
    failed, result = run(ledger_dir, action="record", kind="tc_profil", params={"dev": "thunderbolt0"})
    assert failed
    assert result["msg"] == ("unknown ledger kind 'tc_profil': known kinds are build_dir, container, driver_param, "
                             "file, gateway_config, kernel_module, nic_setting, "
                             "process, sampler, service_pause, sysctl, systemd_unit, tc_profile")
    assert not os.path.exists(ledger_dir)


@pytest.mark.parametrize("kind", ["process", "sampler"])
def test_record_process_by_pid_fills_in_its_start_time(ledger_dir, kind):
    proc = subprocess.Popen(["sleep", "300"])
    try:
        deadline = time.monotonic() + 10
        while _ledger_proc.read_proc_cmdline(proc.pid) != ["sleep", "300"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        failed, result = run(ledger_dir, action="record", kind=kind, params={"pid": str(proc.pid)})
        assert not failed, result.get("msg", result)
        params = result["entry"]["params"]
        assert params["pid"] == proc.pid
        assert params["start_time"] == _ledger_proc.read_proc_stat(proc.pid)["start_time"]
        assert params["cmdline"] == ["sleep", "300"]

        failed, result = run(ledger_dir, action="undo")
        assert not failed and result["undone"] == [lines_of(ledger_dir)[0]["id"]]
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_mark_process_with_its_pid_once_started(ledger_dir, tmp_path):
    pidfile = tmp_path / "s.pid"
    _failed, recorded = run(ledger_dir, action="record", kind="process",
                            params={"pidfile": str(pidfile), "cmdline": "sleep 300"})
    failed, result = run(ledger_dir, action="mark", id=recorded["id"], state="applied",
                         params={"pid": os.getpid()})
    assert not failed, result.get("msg", result)
    assert result["entry"]["params"]["start_time"] == _ledger_proc.read_proc_stat(os.getpid())["start_time"]
    assert result["entry"]["params"]["cmdline"] == "sleep 300"  # the recorded cmdline is kept


def test_record_process_that_is_not_running_fails(ledger_dir):
    dead = subprocess.Popen(["true"])
    dead.wait()
    failed, result = run(ledger_dir, action="record", kind="process", params={"pid": dead.pid})
    assert failed and f"process {dead.pid} is not running" in result["msg"]


def test_lock_is_idempotent_and_conflicts_name_the_holder(ledger_dir):
    lock = dict(action="lock", controller="ctl1", controller_pid=4242)
    failed, result = run(ledger_dir, run_id="run1", **lock)
    assert not failed and result["changed"] is True and result["held_before"] is False
    assert result["lock"]["run_id"] == "run1" and result["took_over"] is None
    failed, result = run(ledger_dir, run_id="run1", **lock)
    # held before: a role inside a run that locked the host for its whole length leaves the lock to the restore
    assert not failed and result["changed"] is False and result["held_before"] is True

    failed, result = run(ledger_dir, run_id="run2", **lock)
    assert failed
    assert result["msg"].startswith("ledger for lab-a is locked by run run1 (controller ctl1, pid 4242, since ")
    assert result["msg"].endswith("run playbooks/restore.yml with ledger_break_stale_lock=true")
    # the holder comes back with the failure: a caller allowed to break a stale lock checks its pid on its controller
    assert {k: v for k, v in result["held_by"].items() if k != "time"} == {
        "run_id": "run1", "controller": "ctl1", "pid": 4242}

    failed, result = run(ledger_dir, action="record", kind="file", params={"path": "/x", "existed": False},
                         run_id="run2")
    assert failed and "locked by run run1" in result["msg"]


def test_lock_in_check_mode(ledger_dir):
    failed, result = run(ledger_dir, check_mode=True, action="lock", run_id="run1", controller="c", controller_pid=1)
    assert not failed and result["changed"] is True
    assert not os.path.exists(os.path.join(ledger_dir, f"{HOST}.lock"))


def test_break_stale_with_the_controllers_answer(ledger_dir):
    run(ledger_dir, action="lock", run_id="old", controller="ctl1", controller_pid=4242)
    failed, result = run(ledger_dir, action="lock", run_id="new", controller="ctl1", controller_pid=5555,
                         break_stale=True, holder_alive=True)
    assert failed and "still alive" in result["msg"] and result["held_by"]["run_id"] == "old"
    failed, result = run(ledger_dir, action="lock", run_id="new", controller="ctl1", controller_pid=5555,
                         break_stale=True, holder_alive=False)
    assert not failed and result["changed"] is True
    assert result["took_over"]["run_id"] == "old" and result["lock"]["run_id"] == "new"


def test_a_malformed_lock_file_is_named_as_the_holder(ledger_dir):
    os.makedirs(ledger_dir, exist_ok=True)
    with open(os.path.join(ledger_dir, f"{HOST}.lock"), "w") as handle:
        handle.write("{")
    failed, result = run(ledger_dir, action="lock", run_id="new", controller="ctl1", controller_pid=5555)
    assert failed and result["held_by"] == result_problem(ledger_dir)
    failed, result = run(ledger_dir, action="lock", run_id="new", controller="ctl1", controller_pid=5555,
                         break_stale=True)
    assert not failed and result["took_over"] == result_problem(ledger_dir)


def result_problem(ledger_dir):
    return {"problem": f"lock file {ledger_dir}/{HOST}.lock is empty or malformed (1 bytes): a run was probably "
                       "killed while taking it"}


def test_unlock_only_by_the_holder(ledger_dir):
    run(ledger_dir, action="lock", run_id="run1", controller="ctl1", controller_pid=4242)
    failed, result = run(ledger_dir, action="unlock", run_id="run2")
    assert failed and "held by run run1" in result["msg"]
    failed, result = run(ledger_dir, action="unlock", run_id="run1")
    assert not failed and result["changed"] is True and result["lock"]["run_id"] == "run1"
    failed, result = run(ledger_dir, action="unlock", run_id="run1")
    assert not failed and result["changed"] is False


def test_undo_status_and_failure(tmp_path, ledger_dir):
    conf = tmp_path / "conf"
    conf.write_text("original")
    backup = tmp_path / "conf.bak"
    backup.write_text("original")
    _failed, first = run(ledger_dir, action="record", kind="file", params={"path": str(conf), "backup": str(backup)})
    conf.write_text("changed")
    _failed, second = run(ledger_dir, action="record", kind="file",
                          params={"path": str(tmp_path / "new"), "existed": False})
    (tmp_path / "new").write_text("x")

    failed, result = run(ledger_dir, action="status")
    assert not failed and result["changed"] is False
    assert result["open"] == [first["id"], second["id"]] and result["lock"] is None

    failed, result = run(ledger_dir, check_mode=True, action="undo")
    assert not failed and result["changed"] is True and result["undone"] == [second["id"], first["id"]]
    assert conf.read_text() == "changed"

    backup.unlink()
    failed, result = run(ledger_dir, action="undo")
    assert failed
    assert result["undone"] == [second["id"]]
    assert result["failures"][0]["id"] == first["id"] and "is missing" in result["failures"][0]["error"]
    assert "1 failed" in result["msg"]

    backup.write_text("original")
    failed, result = run(ledger_dir, action="undo", id=first["id"])
    assert not failed and result["undone"] == [first["id"]] and conf.read_text() == "original"
    failed, result = run(ledger_dir, action="undo")
    assert not failed and result["changed"] is False and result["skipped"] == [first["id"], second["id"]]


def test_leftovers_lists_an_undone_process_that_still_runs_and_changes_nothing(ledger_dir):
    proc = subprocess.Popen(["sleep", "308"])
    try:
        while _ledger_proc.read_proc_cmdline(proc.pid) != ["sleep", "308"]:
            time.sleep(0.01)
        _failed, entry = run(ledger_dir, action="record", kind="process", params={"pid": proc.pid})
        run(ledger_dir, action="mark", id=entry["id"], state="undone")
        before = lines_of(ledger_dir)
        failed, result = run(ledger_dir, check_mode=True, action="leftovers")
        assert not failed and result["changed"] is False and result["msg"] == "1 leftover process(es)"
        assert [(f["id"], f["pid"]) for f in result["leftovers"]] == [(entry["id"], proc.pid)]
        assert lines_of(ledger_dir) == before
    finally:
        proc.kill()
        proc.wait()
    failed, result = run(ledger_dir, action="leftovers")
    assert not failed and result["leftovers"] == []


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        ({"action": "lock", "run_id": "r"}, "controller, controller_pid"),
        ({"action": "unlock"}, "run_id"),
        ({"action": "record", "kind": "file"}, "params"),
        ({"action": "mark", "id": "x"}, "state"),
    ],
)
def test_required_options(ledger_dir, args, missing):
    failed, result = run(ledger_dir, **args)
    assert failed and missing in result["msg"]


def test_docs_match_the_argument_spec_and_the_kinds():
    docs = yaml.safe_load(change_ledger.DOCUMENTATION)
    with set_module_args({"ledger_dir": "/x", "host": "h", "action": "status"}):
        spec = change_ledger.build_module().argument_spec
    assert set(docs["options"]) == set(spec)
    for name, option in docs["options"].items():
        assert option["type"] == spec[name]["type"], name
        assert option.get("default") == spec[name].get("default"), name
        assert option.get("choices") == spec[name].get("choices"), name
    kinds_doc = " ".join(docs["options"]["kind"]["description"])
    for kind in _ledger_core.KINDS:
        assert f"V({kind})" in kinds_doc, f"kind {kind} is not documented"
    yaml.safe_load(change_ledger.EXAMPLES)
    returns = yaml.safe_load(change_ledger.RETURN)
    assert all("returned" in value for value in returns.values())


CANARY = "hf_inferlab_canary_51d0"


def test_no_result_shows_a_paused_services_environment_values(ledger_dir):
    """A paused service's environment is kept in the ledger to start it again (0600); status, record and mark show
    its names, and only the allow-listed values (NCCL_*, GLOO_*, CUDA_VISIBLE_DEVICES, PYTHONPATH)."""
    params = {"manager": "process", "name": "original-a", "pidfile": "/run/a.pid", "argv": ["/usr/bin/server"],
              "environment": {"HF_TOKEN": CANARY, "NCCL_DEBUG": "INFO"}, "working_dir": "/srv", "log_path": "/dev/null"}
    failed, recorded = run(ledger_dir, action="record", kind="service_pause", params=params)
    assert not failed, recorded
    failed, marked = run(ledger_dir, action="mark", id=recorded["id"], state="applied")
    assert not failed, marked
    failed, status = run(ledger_dir, action="status")
    assert not failed, status
    shown = {"HF_TOKEN": "<redacted>", "NCCL_DEBUG": "INFO"}
    assert recorded["entry"]["params"]["environment"] == marked["entry"]["params"]["environment"] == shown
    assert status["entries"][0]["params"]["environment"] == shown
    assert CANARY not in json.dumps([recorded, marked, status])  # the echo of the arguments (invocation) included
    assert CANARY in (Path(ledger_dir) / f"{HOST}.jsonl").read_text()  # kept where the undo needs it


def test_no_result_shows_a_secret_in_a_command_line_by_its_shape(ledger_dir):
    """A secret in a paused service's argv or a process's cmdline, whatever it is named: a secret flag's value (the
    next item, or after '='), a URL's userinfo; the ledger file keeps them for the undo."""
    argv = ["/usr/bin/server", "--api-key", CANARY, f"--hf-token={CANARY}", f"--upstream=https://ops:{CANARY}@a:1/v1",
            "--port", "30000"]
    params = {"manager": "process", "name": "original-a", "pidfile": "/run/a.pid", "argv": argv, "environment": {},
              "working_dir": "/srv", "log_path": "/dev/null"}
    failed, recorded = run(ledger_dir, action="record", kind="service_pause", params=params)
    assert not failed, recorded
    assert recorded["entry"]["params"]["argv"] == [
        "/usr/bin/server", "--api-key", "<redacted>", "--hf-token=<redacted>",
        "--upstream=https://<redacted>@a:1/v1", "--port", "30000"]
    process = {"pid": 1, "cmdline": ["sglang", "--token", CANARY], "process_group": False}
    failed, process_entry = run(ledger_dir, action="record", kind="process", params=process)
    assert not failed, process_entry
    assert process_entry["entry"]["params"]["cmdline"] == ["sglang", "--token", "<redacted>"]
    failed, status = run(ledger_dir, action="status")
    assert not failed, status
    assert CANARY not in json.dumps([recorded, process_entry, status])
    assert CANARY in (Path(ledger_dir) / f"{HOST}.jsonl").read_text()

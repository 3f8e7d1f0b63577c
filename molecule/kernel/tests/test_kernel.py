"""What the candidate driver did on a real Debian 6.1 kernel, and what it left behind."""

import json
from pathlib import Path

import pytest
from conftest import EPHEMERAL, guest_testinfra_hosts

RESULTS = json.loads((EPHEMERAL / "results.json").read_text())
GUEST = json.loads((EPHEMERAL / "guest.json").read_text())
GATES = json.loads((EPHEMERAL / "check_patch.json").read_text())
testinfra_hosts = guest_testinfra_hosts()

TAINT_OOT_MODULE, TAINT_UNSIGNED_MODULE = 1 << 12, 1 << 13


def built_candidate():
    [case] = [c for c in GATES["cases"] if c["abi"] == GUEST["abi"] and not c["synthetic"]]
    return case


def test_the_gates_and_builds_passed_for_both_layouts_and_histories():
    assert GATES["ok"]
    assert {(c["layout"], c["history"]) for c in GATES["cases"]} == {
        ("single", "rx_only"), ("single", "tx_always"), ("split", "rx_only"), ("split", "tx_always")}
    assert all(c["gates"]["checkpatch"].startswith("total: 0 errors, 0 warnings") for c in GATES["cases"])
    negatives = json.dumps(GATES["negatives"])
    assert "trailing whitespace" in negatives and "spelling.txt" in negatives


def test_the_role_built_the_candidate_behind_the_gates_for_the_guest_kernel():
    build = RESULTS["build"]
    assert RESULTS["built"]["changed"]
    assert build["source"]["layout"] == "single" and build["source"]["history"] in ("rx_only", "tx_always")
    assert build["source"]["source_version"] == build["source"]["running_version"] == build["source"]["headers_version"]
    assert build["gates"]["git_diff_check"] == "passed"
    assert all("has no obvious style problems" in p["checkpatch"] for p in build["gates"]["patches"])
    assert build["module"]["vermagic"].split()[0] == GUEST["abi"]
    # the role's build is the same module check_patch.sh built from the same source and patch
    assert build["module"]["srcversion"] == built_candidate()["candidate"]["srcversion"]


def test_the_candidate_loaded_with_tx_e2e_and_the_override_recorded():
    result = RESULTS["candidate"]
    module = result["module"]
    assert result["changed"] and not result["emulated"]
    assert module["parameters"]["tx_e2e"] == "Y"
    assert module["modes"]["tx_e2e"] == 0o444
    assert module["srcversion"] == RESULTS["build"]["module"]["srcversion"]
    assert result["peer_override"] is True  # no peer in the VM: loaded on the recorded override
    taint = result["kernel_taint"]
    assert taint["after"] & TAINT_OOT_MODULE and taint["after"] & TAINT_UNSIGNED_MODULE, taint


def test_a_second_run_builds_and_loads_nothing():
    assert RESULTS["again"]["built"]["changed"] is False
    assert RESULTS["again"]["load"]["changed"] is False


def test_without_the_opt_in_tx_e2e_reads_n():
    assert RESULTS["candidate_n"]["module"]["parameters"]["tx_e2e"] == "N"


@pytest.mark.parametrize("step", ["stock", "stock_again"])
def test_the_stock_reload_removes_tx_e2e(step):
    result = RESULTS[step]
    assert result["changed"] and len(result["undone"]) == 1
    assert "tx_e2e" not in result["module"]["parameters"]
    assert result["module"]["srcversion"] == RESULTS["candidate"]["before"]["srcversion"]


@pytest.mark.parametrize(("case", "gate", "message"), [
    ("gate_trailing_whitespace", "git diff --check", "git diff --check failed"),
    ("gate_checkpatch_error", "checkpatch", "checkpatch failed"),
    ("gate_missing_spelling_txt", "checkpatch", "refusing to run checkpatch: spelling.txt missing"),
    ("precondition_no_opt_in", None, "Expected inferlab_allow_driver_swap true"),
    ("precondition_missing_headers", None, "Install linux-headers-"),
    ("precondition_other_kernel", None, "a module for another kernel does not load"),
])
def test_the_role_refuses_before_any_load(case, gate, message):
    refusal = RESULTS["refusals"][case]
    assert message in refusal["msg"], refusal["msg"]
    assert refusal["gate"] == gate
    assert "tx_e2e" not in refusal["module"]["parameters"]


def test_a_gate_failure_shows_the_gates_output():
    assert "trailing whitespace" in RESULTS["refusals"]["gate_trailing_whitespace"]["output"]
    assert "ERROR" in RESULTS["refusals"]["gate_checkpatch_error"]["output"]


@pytest.mark.parametrize(("case", "message"), [
    ("no_opt_in", "Nothing was changed: tx_e2e=1 was asked for without the operator's opt-in"),
    ("no_peer_e2e", "Nothing was changed: tx_e2e=1 needs a peer that advertises TBNET_E2E"),
    ("under_lib_modules", "never from under"),
    ("stock_passed_off_as_candidate", "parameters/tx_e2e is absent: the loaded module is not the candidate"),
])
def test_refused_loads(case, message):
    refusal = RESULTS["refusals"][case]
    assert message in refusal["msg"], refusal["msg"]
    # read after the refusal: the distribution's driver is still the one loaded
    assert refusal["module"]["loaded"] and "tx_e2e" not in refusal["module"]["parameters"]
    assert refusal["module"]["srcversion"] == RESULTS["stock_again"]["module"]["srcversion"]


def test_the_restore_proves_nothing_persisted_and_no_build_directory_remains():
    restore = RESULTS["restore_driver"]
    assert restore["compared"] is True
    assert restore["differences"] == [], restore["differences"]
    assert restore["persistence"]["differences"] == []
    assert restore["persistence"]["taint"]["after"] is not None
    assert set(restore["private_dirs"]) == {"/var/lib/inferlab/build/tbnet-candidate-load"}
    assert RESULTS["undo_controller"]["failed"] == []
    last = {}
    for line in (EPHEMERAL / "controller-state" / "ledger" / "localhost.jsonl").read_text().splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    # the build and patch directories on the build host, every one undone (a refused rebuild undoes its own)
    assert {Path(e["params"]["path"]).name for e in last.values()} == {"tbnet-candidate-guest", "tbnet-patches-guest"}
    assert {e["state"] for e in last.values()} == {"undone"}
    assert list((EPHEMERAL / "controller-state" / "build").iterdir()) == []


def test_the_guest_runs_the_distribution_driver_and_the_ledger_is_closed(host):
    assert host.file("/sys/module/thunderbolt_net").is_directory
    assert not host.file("/sys/module/thunderbolt_net/parameters/tx_e2e").exists
    assert not host.file("/var/lib/inferlab/build/tbnet-candidate-load").exists
    last = {}
    for line in host.file("/var/lib/inferlab/ledger/guest.jsonl").content_string.splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    # the driver's entries, then the systemd part's (systemd.yml: the rank's environment file is a file entry)
    assert {e["kind"] for e in last.values()} == {"kernel_module", "build_dir", "service_pause", "systemd_unit",
                                                  "file"}
    assert {e["state"] for e in last.values()} == {"undone"}

"""What playbooks/fallback.yml, run through `inferlab run`, proved and left behind on the lab."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, REPO_ROOT, RUN_DIR, assert_guarded_and_disarmed, assert_records_valid  # noqa: E402

DRAINED = RUN_DIR / "fallback-drained"
SINGLE = RUN_DIR / "fallback-single"
GATEWAY = json.loads((LAB_DIR / "lab.json").read_text())["gateway"]
ROUTER_BACKEND = "http://169.254.78.1:8100/v1"
LARGE_BACKEND = GATEWAY["large"]["url"]


def record(run_dir):
    return json.loads((run_dir / "record.json").read_text())


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("run_dir", [DRAINED, SINGLE], ids=["drained", "single"])
def test_the_run_succeeded(run_dir):
    run = record(run_dir)["run"]
    assert (run["status"], run["exit_code"]) == ("successful", 0)


def test_without_the_fallback_the_public_route_failed_with_the_primaries_paused():
    proof = record(DRAINED)["fallback"]["negative_proof"]
    assert proof["reproduced"] and proof["failed"] == proof["requests"] == 3
    assert any("500" in error for error in proof["errors"]), proof["errors"]
    assert proof["primaries"] == ["original-a", "original-b"]
    assert proof["primary_again"]["served_by"] == ROUTER_BACKEND


@pytest.mark.parametrize("run_dir", [DRAINED, SINGLE], ids=["drained", "single"])
def test_with_the_fallback_the_large_backend_served_the_public_route(run_dir):
    prove = record(run_dir)["fallback"]["prove"]
    assert prove["ok"] == prove["requests"] and prove["failed"] == 0
    assert prove["served_by"] == {LARGE_BACKEND: prove["requests"]}
    assert set(prove["attempted_fallbacks"]) == {"1"}
    assert prove["primary_again"]["served_by"] == ROUTER_BACKEND


@pytest.mark.parametrize("run_dir", [DRAINED, SINGLE], ids=["drained", "single"])
def test_removed_the_config_is_byte_identical_and_the_primary_serves(run_dir):
    fallback = record(run_dir)["fallback"]
    add, remove = fallback["add"], fallback["remove"]
    assert add["changed"] and add["original_sha256"] != add["config_sha256"]
    assert set(map(tuple, add["fallbacks"].values())) == {("large",)}
    assert remove["byte_identical"]
    assert remove["config_sha256"] == remove["original_sha256"] == add["original_sha256"]
    assert set(map(tuple, remove["fallbacks"].values())) == {()}
    assert remove["primary_again"]["served_by"] == ROUTER_BACKEND
    # and the file on disk now is that original
    assert sha256(GATEWAY["config"]) == add["original_sha256"]


def test_every_instance_was_drained_behind_nginx():
    steps = record(DRAINED)["fallback"]["add"]["steps"]
    assert [s["instance"] for s in steps] == ["litellm-a", "litellm-b"]
    assert all(s["drained"] and s["warmup_status"] == 200 for s in steps)


def test_the_prober_saw_no_failed_request_over_add_prove_and_remove():
    prober = record(DRAINED)["continuity"]["prober"]
    assert prober["failed"] == 0, prober
    assert prober["total"] >= 20
    # it watched the primary, the fallback target while the primaries were paused, and the primary again
    assert set(prober["by_backend"]) == {ROUTER_BACKEND, LARGE_BACKEND}


def test_the_single_instance_restart_is_an_outage_measured_and_reported():
    prober = record(SINGLE)["continuity"]["single-instance"]
    assert prober["failed"] >= 1, prober
    assert prober["worst_gap_s"] > 1.0
    assert prober["within_budget"] and prober["budget"] == 1000
    report = (SINGLE / "report.md").read_text()
    assert "single-instance" in report


@pytest.mark.parametrize("run_dir", [DRAINED, SINGLE], ids=["drained", "single"])
def test_the_master_key_is_nowhere_in_the_run_directory_or_the_runner_artifacts(run_dir):
    key = (LAB_DIR / "gateway" / "master_key").read_text().strip().encode()
    assert len(key) > 20
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any("artifacts" in p.parts for p in files), "no ansible-runner artifacts to check"
    leaking = [str(p) for p in files if key in p.read_bytes()]
    assert leaking == []


def test_the_master_key_file_is_private():
    assert (LAB_DIR / "gateway" / "master_key").stat().st_mode & 0o777 == 0o600


def test_every_temporary_change_was_undone():
    ledgers = [LAB_DIR / "gateway" / "state" / "ledger" / "lab-gw.jsonl",
               *sorted(LAB_DIR.glob("hosts/*/state/ledger/lab-*.jsonl"))]
    current = {}
    for path in ledgers:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            current[entry["id"]] = entry
    kinds = {e["kind"] for e in current.values()}
    assert {"gateway_config", "service_pause"} <= kinds
    assert {e["state"] for e in current.values()} == {"undone"}


def test_the_upstream_file_is_the_labs_again_and_the_lab_is_healthy():
    ledger = LAB_DIR / "gateway" / "state" / "ledger" / "lab-gw.jsonl"
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    drained = [e for e in entries if e["kind"] == "gateway_config" and e["params"]["front"]]
    assert drained
    params = drained[-1]["params"]
    assert sha256(params["front"]["upstream_file"]) == params["front_original_sha256"]
    status = subprocess.run([sys.executable, "-m", "inferlab.lab.control", "status", "--lab-dir", str(LAB_DIR),
                             "--json"],
                            cwd=REPO_ROOT, env={"PYTHONPATH": str(REPO_ROOT / "src"), "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, check=True)
    state = json.loads(status.stdout)
    assert state["state"] == "up", state["problems"]
    assert state["gateway"]["healthy"]


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0


def test_the_run_was_guarded_by_dead_mans_switches_then_disarmed():
    """Every host it could change, and the controller, had a switch armed after the checks and before the first
    change, renewed by the controller's heartbeat, and disarmed at the end (playbooks/deadman_arm.yml)."""
    assert_guarded_and_disarmed(["lab-a", "lab-b", "lab-gw", "localhost"])

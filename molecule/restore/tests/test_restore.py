"""After restore.yml: the killed run's process and files are undone, the ledger is closed, the restore verified;
the killed fallback run's paused primaries run again and the gateway has its original config, applied."""

import hashlib
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, REPO_ROOT, RING, RUN_DIR, assert_records_valid, lab_host  # noqa: E402

testinfra_hosts = RING


def scratch(host) -> str:
    return f"{lab_host(host)['state_dir']}/scratch"


def test_the_killed_runs_test_job_is_gone(host):
    assert host.run("pgrep -f -x 'sleep 3601'").rc == 1


def test_the_changed_file_has_its_original_content(host):
    assert host.file(f"{scratch(host)}/service.conf").content_string == "original\n"


def test_the_file_written_by_the_killed_run_is_removed(host):
    assert not host.file(f"{scratch(host)}/experiment.flag").exists


def test_every_ledger_entry_is_undone_and_the_lock_released(host):
    name = host.backend.get_hostname()
    ledger = f"{lab_host(host)['state_dir']}/ledger"
    lines = [json.loads(line) for line in host.file(f"{ledger}/{name}.jsonl").content_string.splitlines() if line]
    last = {}
    for line in lines:
        last[line["id"]] = line
    # the candidate load (emulated) with its link watchdog, the killed run's two files and test job, and the killed
    # fallback run's paused primary
    assert sorted(e["kind"] for e in last.values()) == [
        "file", "file", "kernel_module", "process", "process", "service_pause"]
    assert {e["state"] for e in last.values()} == {"undone"}
    assert not host.file(f"{ledger}/{name}.lock").exists


def test_the_restore_was_verified_against_known_good(host):
    name = host.backend.get_hostname()
    fragment = json.loads((RUN_DIR / "fragments" / "restore" / f"{name}.json").read_text())
    assert fragment["verified"] is True
    assert fragment["compared_with"] == "known_good"
    assert fragment["differences"] == []
    assert fragment["known_good"].endswith(f"known_good/{name}.json")


def test_the_stale_driver_helper_was_replaced_by_the_collections(host):
    helper = host.file(f"{lab_host(host)['state_dir']}/bin/inferlab_tbnet_driver.py")
    ours = (REPO_ROOT / "plugins" / "module_utils" / "_tbnet_driver.py").read_bytes()
    assert helper.sha256sum == hashlib.sha256(ours).hexdigest() and helper.mode == 0o644


def test_the_candidate_is_gone_and_nothing_persisted(host):
    name = host.backend.get_hostname()
    driver = json.loads((RUN_DIR / "fragments" / "restore" / f"{name}.json").read_text())["driver"]
    known_good = json.loads((RUN_DIR / "known_good_driver" / f"{name}.json").read_text())
    candidate = json.loads((RUN_DIR / "fragments" / "candidate" / f"{name}.json").read_text())
    assert candidate["driver_layer"] == "emulated" and candidate["module_after"]["parameters"]["tx_e2e"] == "Y"
    assert driver["compared"] is True and driver["differences"] == []
    assert driver["persistence"]["differences"] == []
    assert "tx_e2e" not in driver["module"]["parameters"]
    assert driver["module"]["srcversion"] == known_good["module"]["srcversion"]
    module = Path(lab_host(host)["state_dir"]).parent / "sysfs" / "module" / "thunderbolt_net"  # the fixture root
    assert host.file(str(module / "srcversion")).content_string.strip() == known_good["module"]["srcversion"]
    assert not host.file(str(module / "parameters" / "tx_e2e")).exists


def test_the_killed_runs_prober_on_the_controller_is_stopped_through_its_ledger():
    controller_ledger = LAB_DIR / "controller" / "state" / "ledger" / "localhost.jsonl"
    last = {}
    for line in controller_ledger.read_text().splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    probers = [e for e in last.values() if "inferlab.prober" in json.dumps(e["params"])]
    assert probers and {e["state"] for e in probers} == {"undone"}
    pidfile = LAB_DIR / "controller" / "state" / "run" / "continuity-killed-run.pid"
    assert not pidfile.exists()


def test_the_killed_fallback_run_is_undone_on_the_gateway():
    gateway = json.loads((LAB_DIR / "lab.json").read_text())["gateway"]
    ledger = LAB_DIR / "gateway" / "state" / "ledger" / "lab-gw.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    [entry_id] = {e["id"] for e in lines if e["kind"] == "gateway_config"}
    states = [(e["state"], e.get("run_id")) for e in lines if e["id"] == entry_id]
    # recorded and applied by the killed run; undone by the restore
    assert states[:2] == [("pending", "killed-run"), ("applied", "killed-run")] and states[-1][0] == "undone"
    entry = [e for e in lines if e["id"] == entry_id][-1]
    params = entry["params"]
    assert hashlib.sha256(Path(gateway["config"]).read_bytes()).hexdigest() == params["original_sha256"]
    upstream = Path(params["front"]["upstream_file"])
    assert hashlib.sha256(upstream.read_bytes()).hexdigest() == params["front_original_sha256"]
    assert " down" not in upstream.read_text()
    key = (LAB_DIR / "gateway" / "master_key").read_text().strip()
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # lab addresses only, never a proxy
    for instance in gateway["instances"]:
        request = urllib.request.Request(f"{instance['url']}/fallback/small",
                                         headers={"Authorization": f"Bearer {key}"})
        with pytest.raises(urllib.error.HTTPError) as answer:
            direct.open(request, timeout=5)
        assert answer.value.code == 404  # "No general fallbacks configured for model 'small'"
    body = json.dumps({"model": "small", "messages": [{"role": "user", "content": "after the restore"}],
                       "max_tokens": 4}).encode()
    request = urllib.request.Request(f"{gateway['front']['url']}/v1/chat/completions", data=body,
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    router = json.loads((LAB_DIR / "lab.json").read_text())["router"]
    with direct.open(request, timeout=30) as answer:
        assert answer.headers["x-litellm-model-api-base"] == f"{router['url']}/v1"


def test_the_restore_proved_every_public_role_through_the_gateway():
    fragment = json.loads((RUN_DIR / "fragments" / "restore" / "lab-gw.json").read_text())
    assert fragment["verified"] is True and fragment["differences"] == []
    # one real request per model role of the restored config, through the public route with the clients' key
    assert fragment["public_roles"] == [{"role": "small", "ok": True, "problem": None},
                                        {"role": "large", "ok": True, "problem": None}]


def test_the_paused_primaries_run_again(host):
    name = host.backend.get_hostname()
    ledger = Path(lab_host(host)["state_dir"]) / "ledger" / f"{name}.jsonl"
    last = {}
    for line in host.file(str(ledger)).content_string.splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    pauses = [e for e in last.values() if e["kind"] == "service_pause"]
    assert pauses and {e["state"] for e in pauses} == {"undone"}
    for service in lab_host(host)["services"]:
        probe = f"import urllib.request; urllib.request.urlopen('{service['health_url']}', timeout=5)"
        assert host.run(f'python3 -c "{probe}"').rc == 0


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0

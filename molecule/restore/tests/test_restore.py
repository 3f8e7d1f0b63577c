"""After restore.yml: the killed run's process and files are undone, the ledger is closed, the restore verified."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING, RUN_DIR, lab_host  # noqa: E402

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
    last_state = {}
    for line in lines:
        last_state[line["id"]] = line["state"]
    assert len(last_state) == 3
    assert set(last_state.values()) == {"undone"}
    assert not host.file(f"{ledger}/{name}.lock").exists


def test_the_restore_was_verified_against_known_good(host):
    name = host.backend.get_hostname()
    fragment = json.loads((RUN_DIR / "fragments" / "restore" / f"{name}.json").read_text())
    assert fragment["verified"] is True
    assert fragment["compared_with"] == "known_good"
    assert fragment["differences"] == []
    assert fragment["known_good"].endswith(f"known_good/{name}.json")


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

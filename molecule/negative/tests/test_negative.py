"""After the negative cases: each failure was recorded, nothing was changed, and the lab is whole again."""

import json
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING, RUN_DIR, assert_records_valid, lab_host  # noqa: E402

testinfra_hosts = RING


@pytest.mark.parametrize(
    ("stage", "host_name", "failed_check"),
    [
        ("negative_link_speed", "lab-a", "link speed"),
        ("negative_interface_name", "lab-a", "link interface exists"),
        ("negative_gpu_count", "lab-a", "GPU count"),
        ("negative_stopped_service", "lab-b", "service original-b answers"),
    ],
)
def test_failed_verification_was_recorded(host, stage, host_name, failed_check):
    if host.backend.get_hostname() != host_name:
        pytest.skip(f"{stage} ran on {host_name}")
    fragment = json.loads((RUN_DIR / "fragments" / stage / f"{host_name}.json").read_text())
    assert fragment["ok"] is False
    assert failed_check in [c["name"] for c in fragment["checks"] if not c["ok"]]


def test_refused_inputs_wrote_nothing(host):
    for stage in ("negative_bad_type", "negative_malformed_rx_speed"):
        assert not (RUN_DIR / "fragments" / stage).exists(), f"{stage} must stop before writing anything"
    assert not (RUN_DIR / "known_good").exists(), "negative cases must not overwrite the known-good snapshot"
    assert not (RUN_DIR / "fragments" / "serving").exists(), "a launch refused in preflight must start no rank"


def test_no_lock_and_no_ledger_entry_left(host):
    ledger = Path(lab_host(host)["state_dir"]) / "ledger"
    name = host.backend.get_hostname()
    assert not host.file(f"{ledger}/{name}.lock").exists
    entries = host.file(f"{ledger}/{name}.jsonl")
    assert not entries.exists or entries.content_string.strip() == "", "a refused run must record no change"


def test_original_services_answer_again(host):
    for service in lab_host(host)["services"]:
        probe = f"import urllib.request; urllib.request.urlopen('{service['health_url']}', timeout=5)"
        assert host.run(f'python3 -c "{probe}"').rc == 0
    temporary = Path(lab_host(host)["dir"]).parent.parent / "negative-sysfs-a"
    assert not temporary.exists(), "the malformed copy of the fixture root must be removed"


def test_router_refused_before_any_request_and_answers_again():
    assert not (RUN_DIR / "fragments" / "negative_router_down").exists(), "a router that is not ready gets no request"
    router = json.loads((LAB_DIR / "lab.json").read_text())["router"]
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # lab addresses only, never a proxy
    with direct.open(router["readiness_url"], timeout=5) as answer:
        assert json.loads(answer.read())["healthy_workers"] == 2


def test_the_prober_counted_the_router_outage():
    summary = json.loads((RUN_DIR / "fragments" / "continuity" / "negative-router-down.json").read_text())
    assert summary["ok"] > 0 and summary["failed"] > 0 and not summary["within_budget"]
    assert set(summary["failed_by_kind"]) <= {"connection", "http", "timeout"}
    assert (RUN_DIR / summary["output"]).is_file()


def test_refused_fallback_routes_changed_no_routing():
    assert not (RUN_DIR / "fragments" / "fallback").exists(), "a refused fallback route must record no step"
    ledger = LAB_DIR / "gateway" / "state" / "ledger" / "lab-gw.jsonl"
    assert not ledger.exists() or ledger.read_text().strip() == "", "a refused fallback route must record no change"
    config = yaml.safe_load((LAB_DIR / "gateway" / "litellm.yaml").read_text())
    assert "fallbacks" not in config["litellm_settings"], "the gateway config must be the lab's own"


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0

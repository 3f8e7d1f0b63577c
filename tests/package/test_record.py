"""record.json assembly and schema validation, and the run outcome's exit-code classification."""

import json
from pathlib import Path

import pytest

from inferlab import exit_codes
from inferlab.record import record
from inferlab.report import report
from inferlab.run import runner

RUN = {
    "id": "20261130T100000Z-verify", "playbook": "playbooks/verify.yml", "inventory": "inventory/lab/hosts.yml",
    "started": "2026-11-30T10:00:00Z", "finished": "2026-11-30T10:00:07Z", "status": "successful",
    "ansible_rc": 0, "exit_code": 0, "exit_meaning": "success", "extravars": {}, "stats": {},
}
LAYERS = {"process_manager": "process", "driver_layer": "emulated", "tbnet_sysfs_root": "/lab/a/sysfs",
          "nvml_snapshot": "/lab/a/nvml.json", "state_dir": "/lab/a/state"}


def verify_fragment(host, ok=True):
    return {
        "host": host, "time": "2026-11-30T10:00:05Z", "ok": ok, "kernel_release": "6.1.0-57-amd64",
        "layers": dict(LAYERS),  # a copy: tests mutate it
        "link": {"interface": "thunderbolt0", "address": "169.254.177.1", "peer_address": "169.254.177.2",
                 "operstate": "up", "mtu": 1500, "peer_present": True, "rx_speed_gbps": 20.0, "tx_speed_gbps": 20.0,
                 "rx_lanes": 1, "tx_lanes": 1, "ping_to_peer": {"received": 3}},
        "tbnet_module": {"loaded": True, "parameters": {"e2e": "Y"}},
        "nvml_source": "snapshot", "driver_version": "580.95.05",
        "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-1", "memory_total_bytes": 34190917632,
                  "memory_free_bytes": 33000000000}],
        "storage": {"model_path": "/lab/a/models/lab-model", "model_path_exists": True, "disk_free_gb": 40.0},
        "services": [{"name": "original-a", "url": "http://169.254.77.2:8000/v1", "model": "lab-qwen-small",
                      "ok": ok, "status": 200, "completion_tokens": 12, "text_sample": "Verified."}],
        "checks": [{"name": "link speed", "ok": ok, "expected": ">= 20.0", "found": "20.0", "variable": "v",
                    "message": ""}],
    }


def write_fragment(run_dir: Path, stage: str, host: str, fragment) -> None:
    target = run_dir / "fragments" / stage / f"{host}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(fragment))


def test_record_from_fragments_validates_and_renders(tmp_path):
    for host in ("lab-a", "lab-b"):
        write_fragment(tmp_path, "verify", host, verify_fragment(host))
    write_fragment(tmp_path, "workload", "lab-a", {"batches": []})
    path = record.write(tmp_path, RUN)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1
    assert sorted(data["verification"]) == ["lab-a", "lab-b"]
    assert data["hosts"]["lab-a"] == {"kernel_release": "6.1.0-57-amd64", "layers": LAYERS}
    assert data["stages"] == {"workload": {"lab-a": {"batches": []}}}
    text = report.render(data)
    assert "### lab-a: passed" in text and "| link speed | ok |" in text
    assert report.summary(data) == [
        "lab-a: verification passed (1/1 checks)",
        "lab-b: verification passed (1/1 checks)",
    ]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.pop("link"), "'link' is a required property"),
        (lambda f: f["layers"].update(driver_layer="fake"), "'fake' is not one of ['kernel', 'emulated']"),
        (lambda f: f.update(time="yesterday"), "does not match"),
        (lambda f: f["gpus"][0].update(memory_free_bytes="lots"), "'lots' is not of type 'integer'"),
    ],
)
def test_invalid_fragment_is_refused_with_its_path(tmp_path, mutate, message):
    fragment = verify_fragment("lab-a")
    mutate(fragment)
    write_fragment(tmp_path, "verify", "lab-a", fragment)
    with pytest.raises(record.RecordError) as err:
        record.write(tmp_path, RUN)
    assert message in str(err.value)
    assert "verification/lab-a" in str(err.value)
    assert not (tmp_path / "record.json").exists()


IDENTITY = {"format": "inferlab.host_identity/1", "host_router": {"pci_id": "8086:7ec2"}, "peer": None,
            "kernel_release": "6.1.0-57-amd64", "driver": {"loaded": True}, "firmware": {"bios_version": "lab-1"},
            "missing": ["/lab/a/sysfs/bus/thunderbolt/devices/<xdomain>"]}


def test_a_verified_hosts_identity_is_in_hosts_and_a_malformed_one_is_refused(tmp_path):
    write_fragment(tmp_path, "verify", "lab-a", dict(verify_fragment("lab-a"), identity=IDENTITY))
    data = json.loads(record.write(tmp_path, RUN).read_text())
    assert data["hosts"]["lab-a"]["identity"] == IDENTITY
    write_fragment(tmp_path, "verify", "lab-a", dict(verify_fragment("lab-a"), identity=dict(IDENTITY, format="x")))
    with pytest.raises(record.RecordError, match="'inferlab.host_identity/1' was expected"):
        record.write(tmp_path, RUN)


def ethernet_fragment(host):
    fragment = verify_fragment(host)
    fragment["link"] = {"kind": "ethernet", "interface": "enp1s0f0", "address": "169.254.180.11",
                        "peer_address": "169.254.180.12", "operstate": "up", "mtu": 9000, "speed_mbps": 10000,
                        "duplex": "full", "carrier_changes": 4, "driver": "ixgbe", "driver_version": "6.1.0-28-amd64",
                        "firmware_version": "0x800003df, 1.1767.0", "offloads": {}, "ping_to_peer": {"received": 3}}
    return fragment


def test_an_ethernet_link_is_recorded_by_what_it_is_and_reported(tmp_path):
    write_fragment(tmp_path, "verify", "lab-a", ethernet_fragment("lab-a"))
    data = json.loads(record.write(tmp_path, RUN).read_text())
    assert data["verification"]["lab-a"]["link"]["speed_mbps"] == 10000
    assert ("MTU 9000, Ethernet 10000 Mb/s full duplex, driver ixgbe, firmware 0x800003df, 1.1767.0"
            in report.render(data))
    fragment = ethernet_fragment("lab-a")
    fragment["link"].pop("speed_mbps")  # an Ethernet link says how it trained; a Thunderbolt one has its peer
    write_fragment(tmp_path, "verify", "lab-a", fragment)
    with pytest.raises(record.RecordError, match="'speed_mbps' is a required property"):
        record.write(tmp_path, RUN)
    fragment = verify_fragment("lab-a")
    fragment["link"].pop("peer_present")
    write_fragment(tmp_path, "verify", "lab-a", fragment)
    with pytest.raises(record.RecordError, match="'peer_present' is a required property"):
        record.write(tmp_path, RUN)


def test_malformed_fragment_json_names_the_file(tmp_path):
    target = tmp_path / "fragments" / "verify" / "lab-a.json"
    target.parent.mkdir(parents=True)
    target.write_text("{not json")
    with pytest.raises(record.RecordError, match=r"fragments/verify/lab-a.json is not valid JSON"):
        record.write(tmp_path, RUN)


def outcome(tmp_path, status="failed", rc=2, changed=None):
    return runner.RunOutcome(run_dir=tmp_path, playbook=Path("p.yml"), inventory=Path("i"), status=status, rc=rc,
                             stats={"changed": changed or {}})


def test_classify(tmp_path):
    assert runner.classify(outcome(tmp_path, "successful", 0)) == exit_codes.SUCCESS
    assert runner.classify(outcome(tmp_path)) == exit_codes.PRECONDITION_FAILED
    assert runner.classify(outcome(tmp_path, changed={"lab-a": 2})) == exit_codes.RESTORE_UNVERIFIED
    write_fragment(tmp_path, "restore", "lab-a", {"verified": True})
    assert runner.classify(outcome(tmp_path, changed={"lab-a": 2})) == exit_codes.EXPERIMENT_FAILED_RESTORED
    write_fragment(tmp_path, "restore", "lab-b", {"verified": False})
    assert runner.classify(outcome(tmp_path, changed={"lab-a": 2})) == exit_codes.RESTORE_UNVERIFIED


def test_classify_a_restore_that_changed_nothing_and_found_a_difference(tmp_path):
    """A standalone restore on a lab whose gateway config was tampered with undoes nothing, and is still 12."""
    write_fragment(tmp_path, "restore", "lab-gw", {"verified": False})
    assert runner.classify(outcome(tmp_path)) == exit_codes.RESTORE_UNVERIFIED


def test_new_run_dir_names_and_never_reuses(tmp_path):
    first = runner.new_run_dir(Path("playbooks/verify.yml"), tmp_path)
    assert first.name.endswith("Z-verify") and len(first.name) == len("20261130T100000Z-verify")
    first.mkdir()
    second = runner.new_run_dir(Path("playbooks/verify.yml"), tmp_path)
    assert second != first


def serving_fragment(mode="nextn"):
    batch = {"kind": "concurrent", "cache": "warm", "concurrency": 6, "wall_s": 1.2, "aggregate_output_tok_s": 640.0,
             "records": []}
    return {
        "mode": mode, "layers": {"runtime": "sglang_tp2", "speculation": "nextn"},
        "started_at": "2026-11-30T10:00:00Z", "finished_at": "2026-11-30T10:00:09Z",
        "url": "http://169.254.77.2:30000", "process_manager": "process", "window": f"serve_{mode}",
        "ranks": {"lab-a": {"rank": 0, "argv": ["python3", "-m", "sglang.launch_server"],
                            "environment": {"NCCL_SOCKET_IFNAME": "=thunderbolt0"}, "log": "logs/lab-a/r0.log"}},
        "acceptance": {"passed": True, "problems": [], "traffic": None,
                       "steps": [{"step": "concurrent", "passed": True, "problems": [], "batch": batch}]},
    }


def test_serving_fragments_are_by_mode_and_never_describe_a_host(tmp_path):
    write_fragment(tmp_path, "verify", "lab-a", verify_fragment("lab-a"))
    write_fragment(tmp_path, "serving", "nextn", serving_fragment())
    write_fragment(tmp_path, "negative_hang", "baseline", serving_fragment("baseline"))
    data = json.loads(record.write(tmp_path, RUN).read_text())
    assert data["stages"]["negative_hang"]["baseline"]["mode"] == "baseline"
    assert data["serving"]["nextn"]["layers"] == {"runtime": "sglang_tp2", "speculation": "nextn"}
    assert sorted(data["hosts"]) == ["lab-a"], "a mode is not a host"


def test_a_workload_batch_without_its_labels_is_refused(tmp_path):
    fragment = serving_fragment()
    del fragment["acceptance"]["steps"][0]["batch"]["cache"]
    write_fragment(tmp_path, "serving", "nextn", fragment)
    with pytest.raises(record.RecordError, match="serving/nextn/acceptance/steps/0/batch"):
        record.write(tmp_path, RUN)


def test_report_keeps_per_request_rates_and_batch_aggregates_apart(tmp_path):
    fragment = serving_fragment()
    batch = fragment["acceptance"]["steps"][0]["batch"]
    batch.update(ok=6, requests=6, ttft_s={"median": 0.0071}, decode_tok_s={"median": 430.9},
                 output_tok_s={"median": 420.0}, cached_tokens_total=0, spec_accept_length={"value": 2.41})
    write_fragment(tmp_path, "serving", "nextn", fragment)
    data = json.loads(record.write(tmp_path, RUN).read_text())
    text = report.render(data)
    assert "### nextn: accepted (runtime=sglang_tp2, speculation=nextn)" in text
    assert "| concurrent | concurrent | warm | 6/6 | 7.1 | 430.9 | 420 |" in text
    assert "| concurrent | 6 | 1.2 | 640 | 0 | 2.41 |" in text
    assert report.summary(data) == ["serving nextn: accepted (1/1 ladder steps)"]


def test_continuity_is_recorded_and_reported_with_its_budget(tmp_path):
    summary = {"total": 40, "ok": 37, "failed": 3, "failed_by_kind": {"connection": 3}, "worst_gap_s": 1.62,
               "by_backend": {"lab-a": 19, "lab-b": 18}, "budget": 0, "within_budget": False,
               "output": "continuity-prober.jsonl", "url": "http://169.254.77.1:8100", "model": "lab-qwen-small"}
    write_fragment(tmp_path, "continuity", "prober", summary)
    data = json.loads(record.write(tmp_path, RUN).read_text())
    assert data["continuity"]["prober"]["failed"] == 3
    text = report.render(data)
    assert ("| prober | http://169.254.77.1:8100 | lab-qwen-small | 40 | 3 | 0 (**OVER**) | 1.62 | lab-a 19, lab-b 18 |"
            in text)
    assert report.summary(data) == ["continuity prober: 3 of 40 public-route requests failed (budget 0: OVER)"]

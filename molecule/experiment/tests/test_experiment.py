"""After the staged experiment on the lab: every stage in the journal, one layer changed per measured stage, the
restore verified in the same run, no failed public-route request, and nothing left on the hosts."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING, RUN_DIR, assert_records_valid, files_holding, lab_canary, lab_host, own_processes  # noqa: E402

from inferlab.analysis import matrix  # noqa: E402

testinfra_hosts = RING
RUN = RUN_DIR / "experiment"
RECORD = json.loads((RUN / "record.json").read_text())
STAGES = ["verify", "link_test", "known_good", "control", "prober", "fallback", "pause", "tp2_baseline", "tp2_nextn",
          "candidate_build", "tp2_nextn_candidate", "restore", "prober_stop"]


def test_every_stage_ran_in_order_and_passed():
    journal = RECORD["journal"]
    assert sorted(journal, key=lambda s: journal[s]["index"]) == STAGES
    assert {stage: entry["status"] for stage, entry in journal.items()} == dict.fromkeys(STAGES, "ok")
    assert all(entry["finished"] >= entry["started"] for entry in journal.values())


def test_each_measured_stage_changed_one_layer_against_its_control():
    journal = RECORD["journal"]
    assert [(s, journal[s]["control"], journal[s]["layer"]) for s in STAGES if journal[s]["measured"]] == [
        ("control", None, None), ("tp2_baseline", "control", "runtime"), ("tp2_nextn", "tp2_baseline", "speculation"),
        ("tp2_nextn_candidate", "tp2_nextn", "driver")]
    serving = RECORD["serving"]
    assert serving["baseline"]["layers"] == {"runtime": "sglang_tp2", "speculation": "none", "driver": "stock"}
    assert serving["nextn"]["layers"] == {"runtime": "sglang_tp2", "speculation": "nextn", "driver": "stock"}
    assert serving["nextn_candidate"]["layers"] == {"runtime": "sglang_tp2", "speculation": "nextn",
                                                    "driver": "candidate"}
    assert all(mode["acceptance"]["passed"] for mode in serving.values())


def test_every_served_mode_counted_its_collectives_and_a_cold_and_a_warm_prefix():
    """From the COLL lines here (the Inspector's in molecule serve), one cold/warm pair a mode (converge.yml)."""
    for mode, result in RECORD["serving"].items():
        collectives = result["collectives"]
        for host, found in collectives["hosts"].items():
            assert found["source"] == "coll" and found["untimed"] == 0, (mode, host, found)
            assert found["collectives"]["AllReduce"]["count"] > 100, (mode, host)
        overhead = collectives["wire_overhead"]
        assert overhead["problem"] is None and all(h["ratio"] > 0 for h in overhead["hosts"].values()), mode
        prefix = result["prefix_trials"]
        assert prefix["passed"] and [t["label"] for t in prefix["trials"]] == ["cold", "warm"], (mode, prefix)


def test_the_control_measured_each_replica_directly_and_the_public_route():
    # a site without a router (the scenario's inventory/norouter.yml)
    control = RECORD["stages"]["control"]
    assert set(control) == {"direct-original-a", "direct-original-b", "public"}
    for route in control.values():
        assert [b["kind"] for b in route["batches"]] == ["single_stream", "concurrent"]
        assert all(b["failed"] == 0 and b["ok"] == b["requests"] for b in route["batches"])


def test_the_sweep_measured_both_topologies_at_every_level_and_round():
    """Three levels, five rounds a side (converge.yml): TP2 in its baseline mode's window, the replicas through the
    public route (this site has no router); the report has the table, a reading per level (observed, not a
    verdict) and the plot."""
    tp2, replicas = RECORD["serving"]["baseline"]["sweep"], RECORD["stages"]["sweep"]["replicas"]
    assert replicas["route"] == "public" and replicas["not_run"] is None
    # the same mix on both sides: the control's lengths (32 output tokens here) and the seeds
    assert [(s["prompt_tokens"], s["output_tokens"], s["seed"]) for s in (tp2, replicas)] == [
        (replicas["prompt_tokens"], 32, 3000)] * 2
    # both sides' requests arrived at the same rate (converge.yml: 20 a second, Poisson)
    assert [(s["request_rate"], s["burstiness"]) for s in (tp2, replicas)] == [(20.0, 1.0)] * 2
    for side in (tp2, replicas):
        assert [(p["trial"], p["level"]) for p in side["points"]] == [(r, c) for r in range(1, 6) for c in (1, 2, 4)]
        assert all(p["batch"]["failed"] == 0 and p["batch"]["ok"] == p["level"] for p in side["points"])
        assert all(p["batch"]["aggregate_output_tok_s"] > 0 and p["started"] for p in side["points"])
    assert "sweep" not in RECORD["serving"]["nextn"] or RECORD["serving"]["nextn"]["sweep"] is None
    report = (RUN / "report.md").read_text()
    section = report.split("## Concurrency sweep: TP2 against the routed replicas", 1)[1].split("\n## ", 1)[0]
    readings = [line for line in section.splitlines() if line.startswith(("| 1 | ", "| 2 | ", "| 4 | "))
                and line.rstrip().endswith(("| observed: TP2 higher |", "| observed: replicas higher |",
                                            "| no clear difference |", "| no reading |"))]
    assert len(readings) == 3, section
    assert "observed, not a verdict" in section and "faster" not in section
    assert section.count("the requests of a batch arrived at 20 a second (gamma gaps of shape 1, a Poisson") == 2
    assert "replicas (through the public route's gateway)" in section and "- Crossover: " in section
    link = section.split("The link under TP2's sweep (observed)", 1)[1]
    rows = [line for line in link.splitlines() if line[:2] == "| " and line[2:3].isdigit()]
    assert [row.split(" | ")[0] for row in rows if "—" not in row] == ["| 1", "| 2", "| 4"], link  # a figure a level
    assert (RUN / "plots" / "sweep_concurrency.png").stat().st_size > 10_000


def test_the_run_says_it_started_fresh():
    fresh = RECORD["stages"]["fresh_start"]
    assert set(fresh) == {"lab-a", "lab-b"}
    assert all(entry["verified"] is True and entry["open_entries"] == [] for entry in fresh.values()), fresh
    assert {entry["from"] for entry in fresh.values()} <= {"lab_up", "restore"}


def test_the_matrix_groups_the_run_by_what_the_lab_hosts_run_on():
    """Each ring host's identity, read at verification from the lab's fixture root; `inferlab matrix` over the
    scenario's runs puts the experiment in a row of its own with those values, and the runs refused before any
    verification apart."""
    for name in ("lab-a", "lab-b"):
        identity = RECORD["hosts"][name]["identity"]
        assert identity["missing"] == [], identity["missing"]
        assert (identity["host_router"]["pci_id"], identity["peer"]["id"], identity["firmware"]["product_name"]) == (
            "8086:7ec2", "1d6b:0004", "inferlab lab host")
    refused = [RUN_DIR / "experiment-two-layers", RUN_DIR / "experiment-ab-on-kernel"]
    table = matrix.build([RUN, *refused])
    [row] = table.rows
    assert row.runs == [RECORD["run"]["id"]] and row.identity["NVM"] == "36.0"
    assert row.stages["tp2_nextn_candidate"] == "passed" and row.candidate.runs == 1
    assert len(table.apart) == len(refused), table.apart


def test_the_candidate_was_emulated_and_said_so():
    for candidate in RECORD["candidate"].values():
        assert candidate["driver_layer"] == "emulated" and candidate["build"]["emulated"] is True
        assert candidate["module_after"]["parameters"]["tx_e2e"] == "Y"


def test_the_restore_verified_in_the_same_run():
    assert set(RECORD["restore"]) == {"lab-a", "lab-b", "lab-gw", "localhost"}
    for host, restore in RECORD["restore"].items():
        assert restore["verified"] is True and restore["differences"] == []
        assert restore["compared_with"] == ("inventory_expectations" if host == "localhost" else "known_good")
        if host in RING:
            assert restore["driver"]["compared"] is True
    assert "restore_router" not in RECORD["stages"]  # no router to prove


def test_the_slow_lab_loaded_after_every_start_and_the_restore_waited_for_each_service():
    """inventory/norouter.yml: each original replica loads for 8 s after a start (the lab's, the fallback's resume,
    the restore's); the restore asked each until it served, within the default ready_timeout_s, and recorded it."""
    lab = json.loads((LAB_DIR / "lab.json").read_text())
    for entry in lab["hosts"]:
        [original] = entry["services"]
        log = Path(original["log"]).read_text()
        assert log.count("Loading the model weights (--lab-ready-after 8.0 s)") >= 3, entry["name"]
        [service] = RECORD["restore"][entry["name"]]["services"]
        assert service["name"] == original["name"] and service["ok"] is True
        assert service["wait"]["ready_timeout_s"] == 900 and service["wait"]["attempts"] >= 1


def test_the_long_prompts_first_token_deadline_held_their_prefill():
    """A first-token margin of 5 s, a prefill of 2,500 tokens a second: the long-context step's first token came
    after more than the margin and within the deadline its prompt's length gave it (a floor of 1,000 tokens/s)."""
    for mode, result in RECORD["serving"].items():
        [long_context] = [s["batch"] for s in result["acceptance"]["steps"] if s["step"] == "long_context"]
        deadline = long_context["first_token_deadline"]
        assert deadline["margin_s"] == 5 and deadline["prefill_floor_tokens_per_s"] == 1000, mode
        assert long_context["ttft_s"]["max"] > deadline["margin_s"], (mode, long_context["ttft_s"])
        assert long_context["ttft_s"]["max"] < deadline["longest_s"], (mode, long_context["ttft_s"], deadline)


def test_the_plans_reason_to_leave_the_network_only_ab_out_is_recorded_and_reported():
    assert RECORD["stages"]["experiment"]["plan"]["link_ab_opt_out"] == "molecule link runs the network-only A/B"
    report = " ".join((RUN / "report.md").read_text().split())
    assert ("The candidate driver's serving (nextn_candidate) ran without the network-only A/B before it: the plan "
            "left link_ab out because molecule link runs the network-only A/B.") in report


def test_no_public_route_request_failed():
    continuity = RECORD["continuity"]
    assert continuity, "no prober summary"
    for summary in continuity.values():
        assert summary["failed"] == 0 and summary["total"] > 0


def test_the_exit_code_and_the_report(host):
    assert RECORD["run"]["exit_code"] == 0
    assert "## Stage journal" in (RUN / "report.md").read_text()


def test_nothing_is_left_on_the_host(host):
    state = lab_host(host)["state_dir"]
    ledger = f"{state}/ledger/{host.backend.get_hostname()}.jsonl"
    last = {}
    for line in host.file(ledger).content_string.splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    assert {e["state"] for e in last.values()} == {"undone"}
    assert {"kernel_module", "service_pause", "process"} <= {e["kind"] for e in last.values()}
    # the run held this host's lock from before its first stage to its restore, which released it
    assert not host.file(f"{state}/ledger/{host.backend.get_hostname()}.lock").exists
    assert not host.file(f"{state}/run/deadman.renew").exists
    # the bracket keeps pgrep from matching the shell that runs it (its command line holds the pattern)
    assert host.run(f"pgrep -af '[i]nferlab_ledger.py deadman --ledger-dir {state}/ledger'").stdout.strip() == ""
    assert not host.file(f"{state}/build").exists or host.file(f"{state}/build").listdir() == []


@pytest.mark.parametrize("ledger", ["controller", "gateway"])
def test_the_controller_and_gateway_ledgers_are_closed(ledger):
    # the run changed something on both (the prober, the gateway config): an empty or missing ledger is a failure
    paths = list((LAB_DIR / ledger / "state" / "ledger").glob("*.jsonl"))
    assert paths, f"no ledger under {LAB_DIR / ledger}"
    for path in paths:
        last = {}
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            last[entry["id"]] = entry
        assert last and {e["state"] for e in last.values()} == {"undone"}, path
    assert not list((LAB_DIR / ledger / "state" / "ledger").glob("*.lock"))  # the run's lock, released


def test_the_heartbeat_renewed_the_switches_and_was_stopped_before_the_disarm(host):
    """The controller's heartbeat (recorded in its ledger, undone) renewed every armed switch while the playbook
    lived: the switch on this host renewed through SSH, and no renew process is left here."""
    state = LAB_DIR / "controller" / "state"
    entries = [json.loads(line) for path in (state / "ledger").glob("*.jsonl")
               for line in path.read_text().splitlines()]
    heartbeat = [e for e in entries
                 if e["kind"] == "process" and " heartbeat " in " ".join(e["params"].get("cmdline") or [])]
    assert heartbeat and heartbeat[-1]["state"] == "undone"
    log = (state / "logs" / "heartbeat.log").read_text()
    assert "its renew process exited" not in log  # every host's renew connection held for the whole run
    # its status file: why it stopped, and every host's renewals confirmed by the host itself, none failed
    status = json.loads((state / "run" / "heartbeat.json").read_text())
    assert status["reason"] == "stopped by SIGTERM (the undo of its process entry)", status
    assert status["hosts"] and all(h["renewals"] > 0 and h["last_error"] is None for h in status["hosts"].values())
    assert own_processes(host, "[i]nferlab_ledger.py renew") == []


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0


def test_the_ranks_secret_is_nowhere_in_what_the_run_wrote():
    # the lab gives every rank a canary secret (inferlab_sglang_secret_environment): no record, fragment, log or
    # ansible-runner job event of the whole run may hold it
    assert files_holding(lab_canary(), RUN_DIR / "experiment") == []

"""What playbooks/serve.yml left behind on the lab: accepted modes, labelled workloads, stopped ranks."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import (  # noqa: E402
    LAB_DIR,
    RING,
    RING_NAMES,
    RUN_DIR,
    assert_guarded_and_disarmed,
    assert_records_valid,
    files_holding,
    host_ledger,
    lab_canary,
    own_processes,
)

testinfra_hosts = RING

MODES = ["baseline", "nextn"]


def serving(mode):
    return json.loads((RUN_DIR / "fragments" / "serving" / f"{mode}.json").read_text())


@pytest.mark.parametrize("mode", MODES)
def test_mode_passed_the_whole_ladder(mode):
    result = serving(mode)
    acceptance = result["acceptance"]
    assert acceptance["passed"], acceptance["problems"]
    assert [s["step"] for s in acceptance["steps"]] == [
        "first_response", "repeated", "concurrent", "repeated_prefix", "long_context"]
    for step in acceptance["steps"]:
        batch = step["batch"]
        assert batch["failed"] == 0
        assert all(r["output_tokens"] > 0 for r in batch["records"])


@pytest.mark.parametrize("mode", MODES)
def test_every_batch_is_labelled_with_its_kind_and_cache(mode):
    steps = {s["step"]: s["batch"] for s in serving(mode)["acceptance"]["steps"]}
    assert steps["first_response"]["cache"] == "cold"
    assert {b["kind"] for b in steps.values()} == {"single_stream", "concurrent", "repeated_prefix", "long_context"}
    concurrent = steps["concurrent"]
    assert concurrent["concurrency"] == 6
    # aggregate and per-request rates are separate figures; six streams together beat one
    assert concurrent["aggregate_output_tok_s"] > steps["repeated"]["aggregate_output_tok_s"]


@pytest.mark.parametrize("mode", MODES)
def test_repeated_prefix_was_served_from_the_cache(mode):
    steps = {s["step"]: s["batch"] for s in serving(mode)["acceptance"]["steps"]}
    records = steps["repeated_prefix"]["records"]
    assert records[0]["cached_tokens"] < records[1]["cached_tokens"]
    assert records[1]["cached_tokens"] >= 8192 * 0.9


def test_nextn_accept_length_between_1_and_4():
    for step in serving("nextn")["acceptance"]["steps"]:
        accept = step["batch"]["spec_accept_length"]
        value = accept["value"] if isinstance(accept, dict) else accept
        assert 1 <= value <= 4, step["step"]
    assert serving("nextn")["layers"] == {"runtime": "sglang_tp2", "speculation": "nextn"}
    assert serving("baseline")["layers"] == {"runtime": "sglang_tp2", "speculation": "none"}


@pytest.mark.parametrize("mode", MODES)
def test_the_measured_trials_ran_three_times_with_their_spread(mode):
    trials = serving(mode)["trials"]
    assert trials["passed"] and trials["count"] == 3, trials["problems"]  # inferlab_trials: 3 in the lab inventory
    for trial in trials["trials"]:
        assert trial["batches"]["single_stream"]["concurrency"] == 1
        assert trial["batches"]["concurrent"]["concurrency"] == 6
        assert all(b["failed"] == 0 for b in trial["batches"].values())
    for name, figure in trials["figures"].items():
        assert figure["n"] == 3 and len(figure["values"]) == 3, name
        assert figure["min"] <= figure["median"] <= figure["max"], name


@pytest.mark.parametrize("mode", MODES)
def test_the_data_crossed_the_direct_link(mode):
    traffic = serving(mode)["acceptance"]["traffic"]
    assert traffic["ok"] and traffic["ratio"] >= 10, traffic["message"]


@pytest.mark.parametrize("mode", MODES)
def test_rank_logs_with_nccl_output_are_in_the_run_directory(mode):
    ranks = serving(mode)["ranks"]
    assert sorted(r["rank"] for r in ranks.values()) == [0, 1]
    for host, rank in ranks.items():
        log = RUN_DIR / rank["log"]
        assert log.is_file(), log
        assert "NCCL INFO NET/Socket : Using [0]thunderbolt0" in log.read_text(), host
        assert rank["environment"]["NCCL_SOCKET_IFNAME"] == "=thunderbolt0"


@pytest.mark.parametrize("mode", MODES)
def test_cold_and_warm_prefix_trials_alternate_each_proven_by_the_server(mode):
    """inferlab_prefix_trials: 4 in the lab inventory: cold (flushed first, 0 cached tokens) then warm (cached)."""
    prefix = serving(mode)["prefix_trials"]
    assert prefix["passed"] and prefix["pairs"] == 4, prefix["problems"]
    assert [(t["pair"], t["label"]) for t in prefix["trials"]] == [
        (pair, label) for pair in (1, 2, 3, 4) for label in ("cold", "warm")]
    for trial in prefix["trials"]:
        assert trial["proven"] and trial["prompt_tokens"] >= 32768 * 0.6, trial  # 60 % of the lab model's context
        assert (trial["cached_tokens"] == 0) == (trial["label"] == "cold"), trial
        assert trial["cache_flushed"] == (trial["label"] == "cold"), trial
    for label in ("cold", "warm"):
        assert prefix["figures"][label]["ttft_ms"]["n"] == 4


@pytest.mark.parametrize("mode", MODES)
def test_the_collectives_were_counted_in_the_window_and_the_link_carried_them(mode):
    """Each rank recorded every all-reduce it really sent (inferlab_nccl_collectives and the NCCL Inspector plugin in
    the lab inventory), timed: both hosts count the same all-reduces in the ladder's window, the link carried at
    least their bytes (each rank of a 2-rank ring sends about the all-reduced size), and the wire overhead uses the
    window's own link bytes. Molecule experiment counts the COLL lines instead."""
    result = serving(mode)
    collectives = result["collectives"]
    counts = {}
    for host in RING_NAMES:
        found = collectives["hosts"][host]
        assert found["source"] == "inspector" and found["untimed"] == 0 and found["problem_count"] == 0, found
        allreduce = found["collectives"]["AllReduce"]
        assert 0 < allreduce["time_us_median"] <= allreduce["time_us_p99"] and allreduce["busbw_gbs_median"] > 0
        (rank,) = allreduce["per_rank"].values()
        assert 0 < rank["time_share"] < 1 and rank["sn_last"] - rank["sn_first"] + 1 == rank["count"], rank
        counts[host] = allreduce["count"]
        window = json.loads((RUN_DIR / "fragments" / f"window_{result['window']}" / f"{host}.json").read_text())
        sent = window["interfaces"]["thunderbolt0"]["tx_bytes"]
        assert 0.8 <= allreduce["bytes"] / sent <= 1.0, (host, allreduce["bytes"], sent)
        overhead = collectives["wire_overhead"]["hosts"][host]
        assert overhead["observed_bytes_sent"] == sent and overhead["ratio"] > 0
    assert min(counts.values()) > 100 and max(counts.values()) - min(counts.values()) <= 2, counts
    theory = collectives["wire_overhead"]["theory"]
    assert theory["inputs"]["hidden_size"] == 896 and theory["inputs"]["tp_size"] == 2
    assert (theory["inputs"]["verify_width"] == 4) == (mode == "nextn")


def test_no_rank_is_left_running(host):
    # the bracket keeps pgrep from matching the shell that runs it
    assert own_processes(host, "[i]nferlab.lab.server.*--node-rank") == []


def test_every_rank_in_the_ledger_is_undone(host):
    entries = host_ledger(host.backend.get_hostname())
    ranks = [e for e in entries.values() if "sglang-" in json.dumps(e["params"])]
    assert ranks, "no rank was recorded in the ledger"
    assert {e["state"] for e in ranks} == {"undone"}


@pytest.mark.parametrize("stage, words", [
    ("negative_hang", "hang"),
    ("negative_rank_killed", "rank 1 on lab-b"),
])
def test_the_failed_ladders_were_recorded_with_their_reason(stage, words):
    result = json.loads((RUN_DIR / "fragments" / stage / "baseline.json").read_text())
    acceptance = result["acceptance"]
    assert not acceptance["passed"]
    assert any(words in problem for problem in acceptance["problems"]), acceptance["problems"]


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0


def test_the_gpu_is_free_again_once_the_ranks_stopped(host):
    """The ranks held the card while they ran (each lab server claims its memory); stopped, they gave it back, and
    the originals are still paused (cleanup resumes them): NVML lists no process."""
    name = host.backend.get_hostname()
    [card] = json.loads(host.file(f"{LAB_DIR}/hosts/{name[-1]}/gpu/nvml.json").content_string)["gpus"]
    assert card["compute_processes"] == []


def test_the_ranks_secret_is_nowhere_in_the_run_directory():
    # the lab gives every rank a canary secret (inferlab_sglang_secret_environment): no record, fragment or rank log
    # may hold it
    assert files_holding(lab_canary(), RUN_DIR) == []


def test_the_run_was_guarded_by_dead_mans_switches_then_disarmed():
    """Every host it could change, and the controller, had a switch armed after the checks and before the first
    change, renewed by the controller's heartbeat, and disarmed at the end (playbooks/deadman_arm.yml)."""
    assert_guarded_and_disarmed(["lab-a", "lab-b", "localhost"])

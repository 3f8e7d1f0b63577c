"""What playbooks/serve.yml with the real engine (llama.cpp RPC) left behind on the lab: both modes accepted by the
ladder with the server's own counters beside the client's figures, a member killed and a member hung mid-ladder
caught, and nothing of the engine running."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import RING, RUN_DIR, assert_records_valid, host_ledger, own_processes  # noqa: E402

testinfra_hosts = RING

MODES = ["baseline", "draft"]


def serving(mode, stage="serving"):
    return json.loads((RUN_DIR / "fragments" / stage / f"{mode}.json").read_text())


@pytest.mark.parametrize("mode", MODES)
def test_mode_passed_the_whole_ladder_with_real_tokens(mode):
    result = serving(mode)
    acceptance = result["acceptance"]
    assert acceptance["passed"], acceptance["problems"]
    assert [s["step"] for s in acceptance["steps"]] == ["first_response", "repeated", "concurrent",
                                                        "repeated_prefix", "long_context"]
    for step in acceptance["steps"]:
        batch = step["batch"]
        assert batch["failed"] == 0 and batch["output_tokens_total"] == 32 * batch["ok"], step["step"]
        # prompts sized by the server's own tokenizer, never over what was asked; the repeated prefix's 16-token
        # suffix included (one token a byte: a word or two after the prefix)
        assert 0 < batch["content_tokens"] <= batch["requested_prompt_tokens"], step["step"]
    assert result["layers"] == {"runtime": "llamacpp_rpc2",
                                "speculation": "draft" if mode == "draft" else "none"}


@pytest.mark.parametrize("mode", MODES)
def test_the_first_step_is_cold_and_the_repeated_prefix_warm_by_the_servers_count(mode):
    steps = {s["step"]: s["batch"] for s in serving(mode)["acceptance"]["steps"]}
    assert steps["first_response"]["cache"] == "cold"
    assert steps["first_response"]["records"][0]["cached_tokens"] == 0
    assert steps["repeated_prefix"]["records"][1]["cached_tokens"] >= 0.9 * steps["repeated_prefix"]["prefix_tokens"]


@pytest.mark.parametrize("mode", MODES)
def test_the_engine_counted_the_window_itself(mode):
    engine = serving(mode)["engine"]
    window = engine["window"]
    assert window["problems"] == [] and engine["slot_context_tokens"] == 4096
    assert window["counters"]["tokens_predicted_total"] > 0 and window["decode_tokens_per_s"] > 0
    speculative = window["speculative"]
    if mode == "draft":
        assert speculative["drafts"] > 0 and 0 < speculative["acceptance_rate"] < 1
        assert 1 < speculative["mean_acceptance_length"] <= 5
    else:
        assert not speculative["drafts"] and speculative["acceptance_rate"] is None


@pytest.mark.parametrize("mode", MODES)
def test_each_request_carries_the_servers_timings_beside_the_clients(mode):
    for trial in serving(mode)["trials"]["trials"]:
        for batch in trial["batches"].values():
            server = batch["server"]
            assert server["n"] == batch["ok"] and server["predicted_tokens"] == 32 * batch["ok"]
            assert server["client_over_server"]["n"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_the_client_agrees_with_the_servers_own_timing(mode):
    agreement = serving(mode)["engine"]["agreement"]
    assert agreement["passed"], agreement["problems"]
    # every single-stream request of the ladder, the trials and the prefix pair: 1 + 3 + 2 + 1 + 2 x 3 + 2
    assert agreement["requests"] == 15
    # the server's span lies inside the client's
    assert agreement["latency_ratio"]["min"] >= 1.0 and agreement["tolerance"] == 0.25


@pytest.mark.parametrize("mode", MODES)
def test_the_link_bytes_per_token_come_from_the_same_window(mode):
    engine = serving(mode)["engine"]
    link = engine["link_bytes_per_token"]
    assert link["problem"] is None and set(link["tx_bytes"]) == {"lab-a", "lab-b"}
    assert link["generated_tokens"] == engine["window"]["counters"]["tokens_predicted_total"]
    # the head sends the activations of every token to the member, which sends back less
    assert link["tx_bytes"]["lab-a"] > link["tx_bytes"]["lab-b"] > 0
    assert link["per_generated_token"] > link["per_processed_token"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_the_rpc_traffic_crossed_the_direct_link(mode):
    traffic = serving(mode)["acceptance"]["traffic"]
    assert traffic["ok"], traffic["message"]


def test_the_killed_member_failed_its_mode_with_its_reason():
    acceptance = serving("baseline", "negative_member_killed")["acceptance"]
    assert not acceptance["passed"]
    assert any("rank 1 on lab-b" in problem for problem in acceptance["problems"]), acceptance["problems"]


def test_the_hung_member_failed_its_mode_as_a_hang_or_a_timeout():
    acceptance = serving("baseline", "negative_member_hung")["acceptance"]
    assert not acceptance["passed"]
    failed = [r for s in acceptance["steps"] for r in (s["batch"] or {}).get("records", []) if not r["ok"]]
    assert failed and {r["error"]["kind"] for r in failed} <= {"hang", "timeout"}, failed


def test_nothing_of_the_engine_is_left_running(host):
    # the brackets keep pgrep from matching the shell that runs it; own_processes keeps the lines of this lab's
    # directory and link addresses: the cluster scenario's engine (lab imolc) runs beside this one in make test
    assert own_processes(host, "[l]lama-server|[g]gml-rpc-server") == []


def test_every_engine_process_in_the_ledger_is_undone(host):
    entries = host_ledger(host.backend.get_hostname())
    engine = [e for e in entries.values() if "llama-server" in json.dumps(e["params"])
              or "ggml-rpc-server" in json.dumps(e["params"])]
    assert engine, "no engine process was recorded in the ledger"
    assert {e["state"] for e in engine} == {"undone"}


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0

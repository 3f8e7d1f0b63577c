# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serving acceptance rules: ladder verdicts, rank health, cross-rank consistency and link traffic."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import serving
from ansible_collections.inferlab.distributed.plugins.filter.serving import FilterModule
from ansible_collections.inferlab.distributed.plugins.module_utils import _acceptance as acc

FILTERS = FilterModule().filters()


def request(ok=True, output_tokens=64, cached_tokens=0, error=None, error_kind=None):
    """A record as llm_workload writes it (only the fields acceptance reads)."""
    return {"ok": ok, "output_tokens": output_tokens, "cached_tokens": cached_tokens,
            "error": {"kind": error_kind, "message": error, "body": None} if error else None}


def batch(requests, accept=None):
    return {"requests": len(requests), "failed": sum(1 for r in requests if not r["ok"]), "records": requests,
            "spec_accept_length": accept}


# --- model manifest and consistency -----------------------------------------------------------------------------

def test_model_manifest_relative_paths_sizes_and_checksums():
    files = [{"path": "/m/config.json", "size": 10, "checksum": "ab"},
             {"path": "/m/weights/model.safetensors", "size": 10**9}]
    assert acc.model_manifest(files, "/m/") == {
        "config.json": {"size": 10, "sha256": "ab"},
        "weights/model.safetensors": {"size": 10**9, "sha256": None},
    }


@pytest.mark.parametrize("files, message", [
    ({"path": "/m/x"}, "list of files"),
    (["/m/x"], "each file must be a dict"),
    ([{"path": "/other/x", "size": 1}], "is not under the model directory /m"),
])
def test_model_manifest_refuses_malformed_input(files, message):
    with pytest.raises(acc.AcceptanceError, match=message):
        acc.model_manifest(files, "/m")


VERSIONS = {"sglang": "0.5.23", "torch": "2.9.1", "cuda": "12.8", "nccl": "2.27.3"}
MODEL = {"config.json": {"size": 10, "sha256": "ab"}, "w.safetensors": {"size": 100, "sha256": None}}


def identity(**changes):
    versions = {**VERSIONS, **changes.pop("versions", {})}
    return {"versions": versions, "model": changes.pop("model", MODEL)}


def test_identical_ranks_have_no_mismatch():
    assert acc.rank_mismatches({"a": identity(), "b": identity()}) == []


def test_mismatches_name_the_host_and_the_item():
    model_b = {"config.json": {"size": 10, "sha256": "cd"}, "extra.bin": {"size": 1, "sha256": None}}
    problems = acc.rank_mismatches({"a": identity(), "b": identity(versions={"nccl": "2.26.2"}, model=model_b)})
    assert problems == [
        "b has nccl 2.26.2 where a has 2.27.3",
        "b has model file config.json with sha256 cd where a has ab",
        "b has model file extra.bin that a lacks",
        "b lacks model file w.safetensors (present on a)",
    ]


def test_weight_size_difference_is_reported():
    model_b = {**MODEL, "w.safetensors": {"size": 99, "sha256": None}}
    assert acc.rank_mismatches({"a": identity(), "b": identity(model=model_b)}) == [
        "b has model file w.safetensors of 99 bytes where a has 100"]


def test_minimum_sglang_version_on_every_rank():
    ids = {"a": identity(versions={"sglang": "0.5.24"}), "b": identity(versions={"sglang": "0.5.24"})}
    assert acc.rank_mismatches(ids, "0.5.23") == []
    old = {"a": identity(), "b": identity()}
    assert acc.rank_mismatches(old, "0.5.23.post1") == []  # a post-release suffix is not compared
    assert acc.rank_mismatches(old, "0.5.24") == [
        "a runs SGLang 0.5.23, older than the required 0.5.24",
        "b runs SGLang 0.5.23, older than the required 0.5.24"]
    unreadable = {"a": identity(versions={"sglang": "unknown"})}
    assert acc.rank_mismatches(unreadable, "0.5.23") == ["a runs SGLang unknown, older than the required 0.5.23"]


def test_the_ranks_older_than_a_release_read_as_the_minimum_version_is():
    ids = {"a": identity(versions={"sglang": "0.5.23-lab"}), "b": identity(versions={"sglang": "0.5.20"}),
           "c": identity(versions={"sglang": "main-fc5a979"}), "d": {"versions": {}, "model": MODEL}}
    assert acc.sglang_older_than(ids, "0.5.21") == [
        "b runs SGLang 0.5.20", "c runs SGLang main-fc5a979", "d runs SGLang of no version"]
    assert FilterModule().filters()["sglang_older_than"](ids, "0.5.19") == [
        "c runs SGLang main-fc5a979", "d runs SGLang of no version"]


@pytest.mark.parametrize("text, expected", [("0.5.23", (0, 5, 23)), ("v0.5.23-lab", (0, 5, 23)),
                                            ("0.5.3.post1", (0, 5, 3))])
def test_version_tuple(text, expected):
    assert acc.version_tuple(text) == expected


def test_version_tuple_refuses_text_without_a_version():
    with pytest.raises(acc.AcceptanceError, match="cannot read a version"):
        acc.version_tuple("dev")


# --- rank health ---------------------------------------------------------------------------------------------------

LOG = """[2026-11-30 10:00:00] server_args=...
lab-a:1234:1234 [0] NCCL INFO NET/Socket : Using [0]thunderbolt0:169.254.177.1<0>
Traceback (most recent call last):
  File "scheduler.py", line 1, in run
RuntimeError: NCCL error: remote process exited or there was a network error
lab-a:1234:1300 [0] NCCL WARN Net : Connection closed by remote peer
"""
PATTERNS = ["Traceback \\(most recent call last\\)", "NCCL WARN", "NCCL error", "RuntimeError"]


def test_log_failure_lines_quote_the_failing_lines_only():
    assert acc.log_failure_lines(LOG, PATTERNS) == [
        "Traceback (most recent call last): ... RuntimeError: NCCL error: remote process exited or there was a "
        "network error",
        "RuntimeError: NCCL error: remote process exited or there was a network error",
        "lab-a:1234:1300 [0] NCCL WARN Net : Connection closed by remote peer",
    ]
    assert len(acc.log_failure_lines(LOG, PATTERNS, limit=1)) == 1
    assert acc.log_failure_lines("Traceback (most recent call last):\n  File x\n", PATTERNS[:1]) == [
        "Traceback (most recent call last): ... (the traceback is cut off)"]
    assert acc.log_failure_lines("all fine\nNCCL INFO Connected all rings\n", PATTERNS) == []


def test_log_failure_lines_refuse_a_bad_pattern():
    with pytest.raises(acc.AcceptanceError, match="not a valid regular expression"):
        acc.log_failure_lines(LOG, ["(unclosed"])
    with pytest.raises(acc.AcceptanceError, match="list of regular expressions"):
        acc.log_failure_lines(LOG, "Traceback")


def test_rank_problems_name_the_rank_and_host():
    healths = [
        {"host": "lab-a", "rank": 0, "running": True, "pid": 10, "failure_lines": []},
        {"host": "lab-b", "rank": 1, "running": "False", "pid": 11, "failure_lines": ["NCCL WARN x", "y", "z", "w"]},
    ]
    assert acc.rank_problems(healths) == ["rank 1 on lab-b (pid 11) is not running",
                                          "rank 1 on lab-b logged: NCCL WARN x | y | z"]


# --- ladder steps ----------------------------------------------------------------------------------------------

def test_a_good_step_passes():
    step = acc.ladder_step_verdict({"step": "repeated", "batch": batch([request()] * 3), "ranks": []})
    assert step["passed"] and step["problems"] == []


def test_failed_requests_are_quoted():
    step = acc.ladder_step_verdict({"step": "first_response", "batch": batch(
        [request(ok=False, output_tokens=0, error="no token within 5.0 s", error_kind="hang")]), "ranks": []})
    assert not step["passed"]
    assert step["problems"] == ["1 of 1 requests failed, first: hang: no token within 5.0 s"]


def test_a_response_without_tokens_fails():
    step = acc.ladder_step_verdict({"step": "first_response", "batch": batch([request(output_tokens=0)])})
    assert step["problems"] == ["request 0 returned no tokens"]


def test_repeated_prefix_must_hit_the_cache():
    cold = acc.ladder_step_verdict({"step": "repeated_prefix", "batch": batch([request(), request()])})
    assert cold["problems"] == ["the repeated prefix was not served from the cache (cached tokens 0 after the "
                                "first request)"]
    warm = acc.ladder_step_verdict({"step": "repeated_prefix",
                                    "batch": batch([request(), request(cached_tokens=8192)])})
    assert warm["passed"]


@pytest.mark.parametrize("accept, problem", [
    (2.6, None), (1.0, None), (4.0, None), ({"value": 2.5, "source": "meta_info"}, None),
    (4.5, "accept length 4.5 outside [1, 4]"), (0.5, "accept length 0.5 outside [1, 4]"),
    (None, "speculation is on but no accept length was reported"),
])
def test_accept_length_bounds_with_speculation(accept, problem):
    step = acc.ladder_step_verdict({"step": "concurrent", "batch": batch([request()], accept=accept)}, 4)
    assert step["problems"] == ([problem] if problem else [])


def test_rank_problems_fail_a_step_whose_requests_passed():
    step = acc.ladder_step_verdict({"step": "concurrent", "batch": batch([request()]),
                                    "ranks": ["rank 1 on lab-b (pid 11) is not running"]})
    assert step["problems"] == ["rank 1 on lab-b (pid 11) is not running"]


def test_a_batch_that_did_not_complete():
    step = acc.ladder_step_verdict({"step": "long_context", "batch": None, "error": "connection refused"})
    assert step["problems"] == ["the batch did not complete: connection refused"]
    refused = acc.ladder_step_verdict({"step": "first_response", "batch": batch([]),
                                       "error": "flush_cache refused (HTTP 400): requests are running"})
    assert refused["problems"] == ["the batch did not complete: flush_cache refused (HTTP 400): requests are running",
                                   "no request records in the batch"]
    assert acc.ladder_step_verdict({"step": "repeated"})["problems"] == ["the batch returned no result"]


def test_unknown_step_is_refused():
    with pytest.raises(acc.AcceptanceError, match="unknown ladder step 'warmup'"):
        acc.ladder_step_verdict({"step": "warmup", "batch": batch([request()])})


# --- link traffic and the summary --------------------------------------------------------------------------------

def window(link_a, mgmt_a, link_b, mgmt_b):
    def host(link, mgmt):
        return {"interfaces": {"thunderbolt0": {"rx_bytes": link[0], "tx_bytes": link[1]},
                               "mgmt0": {"rx_bytes": mgmt[0], "tx_bytes": mgmt[1]}}}
    return {"window": "serve_baseline", "hosts": {"lab-a": host(link_a, mgmt_a), "lab-b": host(link_b, mgmt_b)}}


def test_link_traffic_dominates():
    result = acc.link_traffic(window((50, 50), (5, 5), (50, 50), (0, 0)), "thunderbolt0", "mgmt0", 10)
    assert (result["link_bytes"], result["mgmt_bytes"], result["ratio"], result["ok"]) == (200, 10, 20.0, True)


def test_traffic_over_the_wrong_interface_fails():
    result = acc.link_traffic(window((1, 1), (500, 500), (1, 1), (0, 0)), "thunderbolt0", "mgmt0", 10)
    assert not result["ok"]
    assert result["message"] == "4 bytes on thunderbolt0 and 1000 on mgmt0 (ratio 0.0, at least 10.0 needed)"


def test_link_traffic_without_deltas_fails_clearly():
    assert acc.link_traffic({}, "thunderbolt0", "mgmt0", 10)["message"] == "no counter window deltas for every host"
    w = window((1, 1), (1, 1), (1, 1), (1, 1))
    del w["hosts"]["lab-b"]["interfaces"]["mgmt0"]
    message = acc.link_traffic(w, "thunderbolt0", "mgmt0", 10)["message"]
    assert message == "host lab-b has no counters for interface mgmt0"


def test_summary_needs_every_step_and_the_traffic():
    steps = [acc.ladder_step_verdict({"step": name, "batch": batch([request(), request(cached_tokens=5)])})
             for name in acc.LADDER_STEPS]
    good = acc.link_traffic(window((500, 500), (5, 5), (500, 500), (5, 5)), "thunderbolt0", "mgmt0", 10)
    assert acc.acceptance_summary(steps, good)["passed"]
    partial = acc.acceptance_summary(steps[:2], good)
    assert partial["problems"] == ["steps not reached: concurrent, repeated_prefix, long_context"]
    no_window = acc.acceptance_summary(steps, None)
    assert no_window["problems"] == ["no counter window"] and no_window["traffic"] is None


# --- measured trials ----------------------------------------------------------------------------------------------

def trial_batch(kind, output_tok_s=None, aggregate=None, requests=None, accept=None):
    """A trial batch as llm_workload reports it: per-request statistics and the batch aggregate."""
    out = batch(requests or [request()], accept)
    out.update(kind=kind, aggregate_output_tok_s=aggregate,
               output_tok_s={"median": output_tok_s} if output_tok_s is not None else None,
               decode_tok_s={"median": None if output_tok_s is None else output_tok_s * 1.25},
               ttft_s={"median": 0.04})
    return out


def trial_results(rates, aggregates):
    """The trials task's registered results: per trial a single-stream then a concurrent batch."""
    results = []
    for trial, (rate, aggregate) in enumerate(zip(rates, aggregates, strict=True), start=1):
        results.append({"item": [trial, "single_stream"], "batch": trial_batch("single_stream", rate)})
        results.append({"item": [trial, "concurrent"], "batch": trial_batch("concurrent", aggregate=aggregate)})
    return results


def test_trials_give_one_value_per_trial_and_their_spread():
    summary = acc.trials_summary(trial_results([40.0, 44.0, 42.0, 41.0], [200.0, 210.0, 190.0, 205.0]), [])
    assert summary["passed"] and summary["count"] == 4 and summary["problems"] == []
    single = summary["figures"]["single_stream_output_tok_s"]
    assert single["values"] == [40.0, 44.0, 42.0, 41.0]
    assert (single["median"], single["min"], single["max"], single["n"]) == (41.5, 40.0, 44.0, 4)
    assert summary["figures"]["aggregate_output_tok_s"]["median"] == 202.5
    assert summary["figures"]["single_stream_decode_tok_s"]["values"][0] == 50.0
    assert summary["figures"]["single_stream_ttft_ms"]["values"] == [40.0] * 4
    assert [t["trial"] for t in summary["trials"]] == [1, 2, 3, 4]
    assert set(summary["trials"][0]["batches"]) == {"single_stream", "concurrent"}
    assert "TTFT included" in single["definition"]


def test_a_failed_trial_batch_fails_the_trials_and_leaves_a_gap():
    results = trial_results([40.0, 41.0, 42.0], [200.0, 201.0, 202.0])
    results[3] = {"item": [2, "concurrent"], "failed": True, "msg": "connection refused"}
    results[4]["batch"]["records"] = [request(ok=False, error="HTTP 500", error_kind="http")]
    results[4]["batch"]["failed"] = 1
    summary = acc.trials_summary(results, ["lab-b: rank 1 is not running"])
    assert not summary["passed"]
    assert summary["problems"] == [
        "trial 2 concurrent: the batch did not complete: connection refused",
        "trial 3 single_stream: 1 of 1 requests failed, first: http: HTTP 500",
        "lab-b: rank 1 is not running",
    ]
    assert summary["figures"]["aggregate_output_tok_s"]["values"] == [200.0, None, 202.0]
    assert summary["figures"]["aggregate_output_tok_s"]["n"] == 2
    assert summary["trials"][1]["problems"] == ["concurrent: the batch did not complete: connection refused"]


def test_trials_check_the_accept_length_with_speculation():
    results = [{"item": [1, "single_stream"], "batch": trial_batch("single_stream", 40.0, accept=6.0)}]
    assert acc.trials_summary(results, [], 4)["problems"] == ["trial 1 single_stream: accept length 6.0 outside [1, 4]"]


@pytest.mark.parametrize("results, message", [
    ({"item": [1, "single_stream"]}, "the list of results of the trials task"),
    (["x"], "each trial result must be a dict"),
    ([{"item": [1, "long_context"], "batch": {}}],
     "kind one of single_stream, concurrent, got \\[1, 'long_context'\\]"),
    ([{"batch": {}}], "item must be \\[trial, kind\\]"),
])
def test_trials_summary_refuses_malformed_input(results, message):
    with pytest.raises(acc.AcceptanceError, match=message):
        acc.trials_summary(results)


def test_failed_trials_fail_the_acceptance():
    steps = [acc.ladder_step_verdict({"step": name, "batch": batch([request(), request(cached_tokens=5)])})
             for name in acc.LADDER_STEPS]
    good = acc.link_traffic(window((500, 500), (5, 5), (500, 500), (5, 5)), "thunderbolt0", "mgmt0", 10)
    trials = acc.trials_summary([{"item": [1, "concurrent"], "failed": True, "msg": "timeout"}])
    summary = acc.acceptance_summary(steps, good, trials)
    assert not summary["passed"]
    assert summary["problems"] == ["trial 1 concurrent: the batch did not complete: timeout"]
    assert acc.acceptance_summary(steps, good, acc.trials_summary(trial_results([1.0], [2.0])))["passed"]


def test_public_environment_hides_other_values():
    env = {"NCCL_SOCKET_IFNAME": "=thunderbolt0", "GLOO_SOCKET_IFNAME": "thunderbolt0", "HF_TOKEN": "hf_secret"}
    assert acc.public_environment(env) == {"NCCL_SOCKET_IFNAME": "=thunderbolt0",
                                           "GLOO_SOCKET_IFNAME": "thunderbolt0", "HF_TOKEN": "<redacted>"}


def test_filters_wrap_errors():
    assert set(FILTERS) == {"model_manifest", "rank_mismatches", "log_failure_lines", "rank_problems",
                            "ladder_step_verdict", "link_traffic", "trials_summary", "acceptance_summary",
                            "public_environment", "prefix_trials_summary", "sweep_points", "client_server_agreement",
                            "link_bytes_per_token", "sglang_older_than"}
    with pytest.raises(AnsibleFilterError, match="ladder_step_verdict: unknown ladder step"):
        FILTERS["ladder_step_verdict"]({"step": "nope"})


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_has_its_sidecar_documentation(name):
    """Several filters share serving.py, so each is documented in plugins/filter/<name>.yml, named after it."""
    sidecar = Path(serving.__file__).with_name(f"{name}.yml")
    doc = yaml.safe_load(sidecar.read_text())
    assert doc["DOCUMENTATION"]["name"] == name
    assert doc["EXAMPLES"].strip() and doc["RETURN"]["_value"]["description"]
    assert not hasattr(serving, "DOCUMENTATION")  # it would shadow every sidecar in ansible-doc

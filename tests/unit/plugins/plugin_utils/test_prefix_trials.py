# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_prefix_trials: cold and warm labels proven per trial from the server's cached tokens, and the figures by label."""

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._acceptance import AcceptanceError
from ansible_collections.inferlab.distributed.plugins.plugin_utils._prefix_trials import prefix_trials_summary


def result(pair, label, cached, ttft_s, prompt=8200, decode=60.0, ok=True, flushed=None):
    record = {"ok": ok, "output_tokens": 128 if ok else 0, "prompt_tokens": prompt, "cached_tokens": cached,
              "ttft_s": ttft_s, "decode_tok_s": decode, "error": None if ok else "HTTP 500"}
    batch = {"kind": "long_context", "requests": 1, "failed": 0 if ok else 1, "records": [record],
             "cache_flushed": label == "cold" if flushed is None else flushed}
    return {"item": [pair, label], "batch": batch}


def test_pairs_alternate_and_each_label_is_proven():
    results = [result(1, "cold", 0, 0.080), result(1, "warm", 8199, 0.004),
               result(2, "cold", 0, 0.100, decode=50.0), result(2, "warm", 8199, 0.005)]
    summary = prefix_trials_summary(results)
    assert summary["passed"] and summary["problems"] == [] and summary["pairs"] == 2
    assert [(t["pair"], t["label"], t["proven"]) for t in summary["trials"]] == [
        (1, "cold", True), (1, "warm", True), (2, "cold", True), (2, "warm", True)]
    cold, warm = summary["figures"]["cold"], summary["figures"]["warm"]
    assert cold["ttft_ms"]["values"] == pytest.approx([80.0, 100.0]) and cold["ttft_ms"]["median"] == pytest.approx(90)
    assert warm["prefill_tok_s"]["values"] == pytest.approx([8200 / 0.004, 8200 / 0.005])
    assert cold["decode_tok_s"]["min"] == 50.0 and cold["decode_tok_s"]["n"] == 2
    assert set(cold) == {"ttft_ms", "prefill_tok_s", "decode_tok_s"}


@pytest.mark.parametrize("bad, problem", [
    (result(1, "cold", 4096, 0.05), "pair 1 cold: cached_tokens 4096 after the flush (expected 0): not a cold prefill"),
    (result(1, "warm", 0, 0.05), "pair 1 warm: cached_tokens 0 on the repeat (expected more than 0): the prefix "
                                 "was not reused"),
    (result(1, "warm", None, 0.05), "pair 1 warm: the server reported no cached tokens, so the warm label cannot be "
                                    "proven"),
    (result(1, "cold", 0, None, ok=False), "pair 1 cold: 1 of 1 requests failed, first: error: HTTP 500"),
])
def test_an_unproven_or_failed_trial_is_a_problem_and_left_out_of_its_label(bad, problem):
    label = bad["item"][1]
    good = result(1, "warm" if label == "cold" else "cold", 8199 if label == "cold" else 0, 0.01)
    summary = prefix_trials_summary([bad, good], ranks=["rank 1 on lab-b (pid 7) is not running"])
    assert not summary["passed"]
    assert summary["problems"][0].startswith(problem)
    assert summary["problems"][-1] == "rank 1 on lab-b (pid 7) is not running"
    trial = summary["trials"][0]
    assert not trial["proven"] and trial["figures"] == {"ttft_ms": None, "prefill_tok_s": None, "decode_tok_s": None}
    assert summary["figures"][label]["ttft_ms"]["n"] == 0


def test_a_module_failure_is_named():
    summary = prefix_trials_summary([{"item": [1, "cold"], "failed": True, "msg": "connection refused"}])
    assert summary["problems"] == ["pair 1 cold: the request did not complete: connection refused"]
    assert summary["trials"][0]["cached_tokens"] is None


@pytest.mark.parametrize("results, message", [
    ("nope", "prefix_trials_summary needs the list of results of the prefix trials task"),
    ([{"item": [1, "tepid"]}], "prefix trial result 0: item must be [pair, label] with label one of cold, warm, "
                               "got [1, 'tepid']"),
    (["x"], "prefix trial result 0 must be a dict"),
])
def test_malformed_results_are_errors(results, message):
    with pytest.raises(AcceptanceError) as error:
        prefix_trials_summary(results)
    assert str(error.value) == message

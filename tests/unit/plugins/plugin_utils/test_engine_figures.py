# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_engine_figures: the client against the server's own timings (judged on the whole request, single-stream only),
and the link's bytes per token the engine counted."""

import json
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.filter.serving import FilterModule
from ansible_collections.inferlab.distributed.plugins.module_utils._acceptance import AcceptanceError
from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import (
    metrics_delta,
    parse_metrics,
    response_timings,
)
from ansible_collections.inferlab.distributed.plugins.plugin_utils._engine_figures import (
    client_server_agreement,
    link_bytes_per_token,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "llamacpp"
# A real llama-server completion's timings: 1,991 prompt tokens in 2,989.437 ms, 32 tokens in 364.12 ms.
TIMINGS = response_timings(json.loads((FIXTURES / "completion_1.json").read_text()))
SERVER_S = (2989.437 + 364.12) / 1000.0


def record(latency_s, ttft_s=3.0, timings=TIMINGS, ok=True, output_tokens=32):
    decode = (output_tokens - 1) / (latency_s - ttft_s) if ok else None
    return {"ok": ok, "latency_s": latency_s, "ttft_s": ttft_s, "decode_tok_s": decode,
            "output_tokens": output_tokens, "server_timings": timings}


def batch(records, concurrency=1):
    return {"concurrency": concurrency, "records": records}


def test_agreement_judges_the_median_latency_ratio_and_records_the_split():
    result = client_server_agreement([batch([record(SERVER_S * 1.02), record(SERVER_S * 1.04),
                                             record(SERVER_S * 1.10)]), None], 0.25)
    assert result["passed"] and result["problems"] == [] and result["requests"] == 3
    assert result["latency_ratio"]["median"] == pytest.approx(1.04)
    assert result["latency_ratio"]["min"] == pytest.approx(1.02)
    assert result["latency_ratio"]["max"] == pytest.approx(1.10)
    assert result["server_latency_s"] == pytest.approx(SERVER_S)
    assert result["decode"]["server_tok_s"] == pytest.approx(31 / 0.36412)
    assert result["prompt"] == {"client_ttft_s": 3.0, "server_prompt_s": pytest.approx(2.989437)}
    assert set(result["definitions"]) == {"latency_ratio", "decode", "prompt"}


def test_a_starved_client_that_reads_its_first_chunk_late_still_agrees_on_the_whole():
    # the first chunk read 0.3 s late and the rest in a burst: the decode split moves, the whole does not
    result = client_server_agreement([batch([record(SERVER_S * 1.03, ttft_s=3.3)] * 3)], 0.25)
    assert result["passed"]
    assert result["decode"]["client_tok_s"] / result["decode"]["server_tok_s"] > 1.5


def test_disagreement_fails_with_both_numbers():
    result = client_server_agreement([batch([record(SERVER_S * 1.5)] * 2)], 0.25)
    assert not result["passed"]
    assert result["problems"] == [
        "the client and the server disagree beyond the tolerance of 25 %: over 2 single-stream requests the client "
        f"measured a median latency of {SERVER_S * 1.5:.3f} s, the server {SERVER_S:.3f} s of prompt and generation "
        "(median ratio 1.500, at most 1.250 allowed)"]


def test_a_client_faster_than_the_server_is_a_disagreement_too():
    assert not client_server_agreement([batch([record(SERVER_S * 0.5)])], 0.25)["passed"]


def test_concurrent_failed_and_untimed_requests_are_left_out():
    result = client_server_agreement([
        batch([record(SERVER_S * 3)] * 4, concurrency=4),  # waited for a slot: the server did not time the wait
        batch([record(SERVER_S * 1.01), record(SERVER_S * 9, ok=False), record(SERVER_S * 9, timings=None),
               record(SERVER_S * 9, timings=dict(TIMINGS, predicted_ms=None))]),
    ], 0.25)
    assert result["requests"] == 1 and result["passed"]


def test_nothing_timed_is_a_problem_not_a_pass():
    result = client_server_agreement([batch([record(1.0, timings=None)])], 0.25)
    assert not result["passed"] and result["requests"] == 0
    assert "no single-stream request carried the server's timings" in result["problems"][0]
    assert result["latency_ratio"]["median"] is None


@pytest.mark.parametrize("tolerance", [0, -0.1, "0.25", None, True])
def test_a_tolerance_that_is_not_a_positive_number_is_refused(tolerance):
    with pytest.raises(AcceptanceError, match="the tolerance must be a number above 0"):
        client_server_agreement([], tolerance)


def engine_window():
    before = parse_metrics((FIXTURES / "metrics_baseline.txt").read_text())
    after = parse_metrics((FIXTURES / "metrics_baseline.txt").read_text())
    after["values"]["tokens_predicted_total"] += 200
    after["values"]["prompt_tokens_total"] += 800
    return metrics_delta(before, after)


def window(**tx):
    return {"window": "serving_baseline", "hosts": dict(
        (host, {"interfaces": {"thunderbolt0": {"rx_bytes": 1, "tx_bytes": value}, "mgmt0": {"tx_bytes": 5}}})
        for host, value in tx.items())}


def test_link_bytes_per_token_sums_what_each_host_sent():
    result = link_bytes_per_token(window(**{"lab-a": 300000, "lab-b": 100000}), "thunderbolt0", engine_window())
    assert result["problem"] is None and result["bytes"] == 400000
    assert result["tx_bytes"] == {"lab-a": 300000, "lab-b": 100000}
    assert (result["generated_tokens"], result["processed_tokens"]) == (200, 1000)
    assert result["per_generated_token"] == 2000.0 and result["per_processed_token"] == 400.0


@pytest.mark.parametrize("deltas, engine, problem", [
    (window(**{"lab-a": 1}), {"problems": ["the window's /metrics were not both read"]}, "no token counters"),
    ({"hosts": {"lab-a": {"interfaces": {"mgmt0": {"tx_bytes": 1}}}}}, None, "host lab-a has no tx_bytes for "
                                                                             "thunderbolt0"),
    ({"hosts": {}}, None, "the window has no host"),
    (None, None, "the window has no host"),
])
def test_link_bytes_per_token_names_what_is_missing(deltas, engine, problem):
    result = link_bytes_per_token(deltas, "thunderbolt0", engine)
    assert problem in result["problem"] and result["per_generated_token"] is None


def test_the_filters_are_registered():
    filters = FilterModule().filters()
    assert filters["client_server_agreement"]([], 0.5)["passed"] is False
    assert filters["link_bytes_per_token"](None, "thunderbolt0", None)["problem"]

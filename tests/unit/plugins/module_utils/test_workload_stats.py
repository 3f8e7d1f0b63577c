# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The figures of the workload client (_workload_stats): metric definitions on the reference experiment's figures,
percentiles against numpy, the batch summary and goodput, and the client's decode rate against the server's."""

import random

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import TIMINGS_FIELDS
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stats import (
    DEFINITIONS,
    STAT_FIELDS,
    client_over_server,
    percentile,
    request_rates,
    server_summary,
    stats,
    summarize,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stream import new_record


def record(index, output_tokens, ttft_s, latency_s, itl_s=(), ok=True, cached=None):
    rec = new_record(index, 128, [])
    rates = request_rates(output_tokens, ttft_s, latency_s)
    rec.update(ok=ok, output_tokens=output_tokens, prompt_tokens=140, cached_tokens=cached, ttft_s=ttft_s,
               latency_s=latency_s, output_tok_s=rates[0], decode_tok_s=rates[1], tpot_s=rates[2], itl_s=list(itl_s))
    return rec


# --- the reference experiment's figures -----------------------------------------------------------------------------

def test_single_stream_reference_figures():
    """512 tokens, TTFT 0.159 s, 10.73 s in all: 48.4 tok/s only when TTFT is excluded.

    The reference divided all 512 tokens by the time after the first token: 512 / 10.571 = 48.43. This client's
    decode_tok_s divides the 511 tokens that came in that time (the first is TTFT's): 48.34. Both are shown; with
    TTFT included the rate is 47.72, which the reference did not report.
    """
    output_tok_s, decode_tok_s, tpot_s = request_rates(512, 0.159, 10.73)
    assert round(512 / (10.73 - 0.159), 2) == 48.43  # the reference's numerator
    assert round(decode_tok_s, 2) == 48.34  # this client's: (512 - 1) / (10.73 - 0.159)
    assert decode_tok_s == pytest.approx(511 / 10.571)
    assert round(output_tok_s, 2) == 47.72  # 512 / 10.73, TTFT included
    assert tpot_s == pytest.approx(10.571 / 511)
    assert round(tpot_s * 1000, 3) == 20.687  # ms, bench_serving's TPOT
    assert decode_tok_s * tpot_s == pytest.approx(1.0)


def test_concurrent_reference_figures():
    """6 requests, 1,536 tokens in 8.89 s: 172.8 aggregate tok/s (the reference's 172.9 implies a wall of about
    8.884 s before rounding), far above any one request's rate."""
    records = [record(i, 256, 0.2 + 0.01 * i, 8.0 + 0.1 * i) for i in range(6)]
    summary = summarize(records, 8.89)
    assert summary["output_tokens_total"] == 1536
    assert round(summary["aggregate_output_tok_s"], 1) == 172.8
    assert round(1536 / 172.9, 3) == 8.884
    assert summary["ok"] == 6 and summary["failed"] == 0
    assert summary["output_tok_s"]["max"] == pytest.approx(256 / 8.0)
    assert summary["output_tok_s"]["max"] < summary["aggregate_output_tok_s"] / 5


# --- percentiles ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),  # position 2.97: 3 + 0.97 * (4 - 3)
        ([10.0, 20.0], 99, 19.9),
        ([5.0], 99, 5.0),
        ([3.0, 1.0, 2.0], 0, 1.0),
        ([3.0, 1.0, 2.0], 100, 3.0),
        ([0.1, 0.2, 0.4, 0.8, 1.6], 99, 1.568),  # position 3.96: 0.8 + 0.96 * 0.8
        ([0.1, 0.2, 0.4, 0.8, 1.6], 25, 0.2),
    ],
)
def test_percentile_hand_computed(values, q, expected):
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_matches_numpy_linear():
    numpy = pytest.importorskip("numpy")
    rng = random.Random(7)
    for size in (1, 2, 3, 10, 99, 100, 101, 1000):
        values = [rng.uniform(0.001, 2.0) for _index in range(size)]
        for q in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
            assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)), rel=1e-12)
        assert stats(values)["median"] == pytest.approx(float(numpy.median(values)), rel=1e-12)
        assert stats(values)["mean"] == pytest.approx(float(numpy.mean(values)), rel=1e-12)


def test_stats():
    assert stats([4.0, 1.0, 2.0, 3.0]) == {
        "n": 4, "mean": 2.5, "median": 2.5, "p90": pytest.approx(3.7), "p95": pytest.approx(3.85),
        "p99": pytest.approx(3.97), "std": pytest.approx(1.118034, abs=1e-6), "min": 1.0, "max": 4.0}
    assert stats([]) == {"n": 0, "mean": None, "median": None, "p90": None, "p95": None, "p99": None,
                         "std": None, "min": None, "max": None}
    assert percentile([], 50) is None


def test_std_and_percentiles_match_numpy():
    numpy = pytest.importorskip("numpy")
    rng = random.Random(3)
    values = [rng.uniform(0.01, 3.0) for _index in range(37)]
    figures = stats(values)
    assert figures["std"] == pytest.approx(float(numpy.std(values)), rel=1e-12)  # numpy's default: the population's
    for q in (90, 95):
        assert figures[f"p{q}"] == pytest.approx(float(numpy.percentile(values, q)), rel=1e-12)


# --- rates and summaries ----------------------------------------------------------------------------------------

def test_rates_without_a_defined_value():
    assert request_rates(1, 0.1, 0.1) == (10.0, None, None)  # one token: no decode phase
    assert request_rates(5, 0.2, 0.2) == (25.0, None, None)  # all tokens in the first chunk
    assert request_rates(0, 0.2, 0.0) == (None, None, None)


def test_summary_ignores_failed_requests_and_pools_itl():
    records = [record(0, 4, 0.1, 0.4, itl_s=[0.1, 0.1, 0.1], cached=16), record(1, 3, 0.2, 0.4, itl_s=[0.1, 0.1]),
               new_record(2, 128, [])]
    records[2]["error"] = {"kind": "hang", "message": "no token within 1 s", "body": None}
    summary = summarize(records, 0.5)
    assert (summary["ok"], summary["failed"]) == (2, 1)
    assert summary["output_tokens_total"] == 7
    assert summary["aggregate_output_tok_s"] == pytest.approx(14.0)
    assert summary["itl_s"]["n"] == 5 and summary["itl_s"]["mean"] == pytest.approx(0.1)
    assert summary["ttft_s"] == {"n": 2, "mean": pytest.approx(0.15), "median": pytest.approx(0.15),
                                 "p90": pytest.approx(0.19), "p95": pytest.approx(0.195),
                                 "p99": pytest.approx(0.199), "std": pytest.approx(0.05), "min": 0.1, "max": 0.2}
    assert summary["tpot_s"]["max"] == pytest.approx(0.1)
    assert summary["cached_tokens_total"] == 16
    # requests and every token over the wall time, failed requests left out
    assert summary["request_throughput_req_s"] == pytest.approx(4.0)
    assert summary["total_token_throughput_tok_s"] == pytest.approx(
        (summary["prompt_tokens_total"] + 7) / 0.5)
    assert summary["goodput"] is None  # no target stated
    assert summary["itl_per_token_s"]["n"] == 0  # the chat stream does not count each chunk's tokens


def test_goodput_counts_the_requests_within_every_target_over_all_sent():
    records = [record(0, 4, 0.1, 0.4), record(1, 3, 0.3, 0.5), record(2, 4, 0.1, 1.0), new_record(3, 128, [])]
    records[3]["error"] = {"kind": "hang", "message": "no token within 1 s", "body": None}
    # TPOT: 0.1, 0.1, 0.3; TTFT: 0.1, 0.3, 0.1
    both = summarize(records, 2.0, goodput_ttft_s=0.2, goodput_tpot_s=0.15)["goodput"]
    assert both == {"ttft_s": 0.2, "tpot_s": 0.15, "requests": 1, "share": 0.25, "req_s": 0.5}
    assert summarize(records, 2.0, goodput_ttft_s=0.2)["goodput"]["requests"] == 2
    assert summarize(records, 2.0, goodput_tpot_s=0.15)["goodput"]["requests"] == 2


def test_summary_of_nothing_ok_has_no_rates():
    failed = new_record(0, 128, [])
    summary = summarize([failed], 1.0)
    assert summary["aggregate_output_tok_s"] is None
    assert summary["cached_tokens_total"] is None
    assert summary["ttft_s"]["n"] == 0 and summary["ttft_s"]["mean"] is None


def test_every_figure_has_a_definition():
    figures = set(STAT_FIELDS) | {"output_tokens", "prompt_tokens", "cached_tokens", "chunks",
                                  "wall_s", "aggregate_output_tok_s", "spec_accept_length",
                                  "request_throughput_req_s", "total_token_throughput_tok_s", "goodput"}
    assert figures <= set(DEFINITIONS)
    assert "(output_tokens - 1) / (latency_s - ttft_s)" in DEFINITIONS["decode_tok_s"]


# --- the client against the server ----------------------------------------------------------------------------------

def timed(decode_tok_s, predicted_n, predicted_ms, ok=True):
    rec = new_record(0, 128, [])
    timings = dict.fromkeys(TIMINGS_FIELDS)  # as response_timings gives them: every field, None where absent
    timings.update(predicted_n=predicted_n, predicted_ms=predicted_ms)
    rec.update(ok=ok, decode_tok_s=decode_tok_s, server_timings=timings)
    return rec


def test_client_over_server_compares_one_definition():
    """64 tokens, the 63 after the first in 0.5 s by the client's clock and predicted_ms 500 by the server's: the
    raw ratio would be 63/64 = 0.984 by the definitions alone; in one definition they agree."""
    assert client_over_server(timed(126.0, 64, 500.0)) == pytest.approx(1.0)
    assert client_over_server(timed(113.4, 64, 500.0)) == pytest.approx(0.9)


@pytest.mark.parametrize("record", [timed(None, 64, 500.0), timed(126.0, 1, 5.0), timed(126.0, 64, 0.0),
                                    timed(126.0, None, 500.0), timed(126.0, 64, 500.0, ok=False)])
def test_client_over_server_has_no_value_without_both_rates(record):
    assert client_over_server(record) is None


def test_the_batch_keeps_the_ratio_of_every_timed_request():
    records = [timed(126.0, 64, 500.0), timed(113.4, 64, 500.0), new_record(2, 128, [])]
    records[2]["ok"] = True  # a request from a server that sends no timings
    summary = server_summary(records)
    assert summary["n"] == 2
    assert summary["client_over_server"]["median"] == pytest.approx(0.95)

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure parts of the workload client: metric definitions on the reference experiment's figures, percentiles
against numpy, prompts, option checks, URL handling and the reading of stream chunks. The HTTP paths are tested
through the module against a scripted server (tests/unit/plugins/modules/test_llm_workload.py)."""

import random
import threading
import time

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _llm_workload as workload
from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import TIMINGS_FIELDS
from ansible_collections.inferlab.distributed.plugins.module_utils._sse import SSEError, SSEEvent


def record(index, output_tokens, ttft_s, latency_s, itl_s=(), ok=True, cached=None):
    rec = workload.new_record(index, 128, [])
    rates = workload.request_rates(output_tokens, ttft_s, latency_s)
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
    output_tok_s, decode_tok_s, tpot_s = workload.request_rates(512, 0.159, 10.73)
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
    summary = workload.summarize(records, 8.89)
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
    assert workload.percentile(values, q) == pytest.approx(expected)


def test_percentile_matches_numpy_linear():
    numpy = pytest.importorskip("numpy")
    rng = random.Random(7)
    for size in (1, 2, 3, 10, 99, 100, 101, 1000):
        values = [rng.uniform(0.001, 2.0) for _index in range(size)]
        for q in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
            assert workload.percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)), rel=1e-12)
        assert workload.stats(values)["median"] == pytest.approx(float(numpy.median(values)), rel=1e-12)
        assert workload.stats(values)["mean"] == pytest.approx(float(numpy.mean(values)), rel=1e-12)


def test_stats():
    assert workload.stats([4.0, 1.0, 2.0, 3.0]) == {
        "n": 4, "mean": 2.5, "median": 2.5, "p90": pytest.approx(3.7), "p95": pytest.approx(3.85),
        "p99": pytest.approx(3.97), "std": pytest.approx(1.118034, abs=1e-6), "min": 1.0, "max": 4.0}
    assert workload.stats([]) == {"n": 0, "mean": None, "median": None, "p90": None, "p95": None, "p99": None,
                                  "std": None, "min": None, "max": None}
    assert workload.percentile([], 50) is None


def test_std_and_percentiles_match_numpy():
    numpy = pytest.importorskip("numpy")
    rng = random.Random(3)
    values = [rng.uniform(0.01, 3.0) for _index in range(37)]
    figures = workload.stats(values)
    assert figures["std"] == pytest.approx(float(numpy.std(values)), rel=1e-12)  # numpy's default: the population's
    for q in (90, 95):
        assert figures[f"p{q}"] == pytest.approx(float(numpy.percentile(values, q)), rel=1e-12)


# --- rates and summaries ----------------------------------------------------------------------------------------

def test_rates_without_a_defined_value():
    assert workload.request_rates(1, 0.1, 0.1) == (10.0, None, None)  # one token: no decode phase
    assert workload.request_rates(5, 0.2, 0.2) == (25.0, None, None)  # all tokens in the first chunk
    assert workload.request_rates(0, 0.2, 0.0) == (None, None, None)


def test_summary_ignores_failed_requests_and_pools_itl():
    records = [record(0, 4, 0.1, 0.4, itl_s=[0.1, 0.1, 0.1], cached=16), record(1, 3, 0.2, 0.4, itl_s=[0.1, 0.1]),
               workload.new_record(2, 128, [])]
    records[2]["error"] = {"kind": "hang", "message": "no token within 1 s", "body": None}
    summary = workload.summarize(records, 0.5)
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
    records = [record(0, 4, 0.1, 0.4), record(1, 3, 0.3, 0.5), record(2, 4, 0.1, 1.0), workload.new_record(3, 128, [])]
    records[3]["error"] = {"kind": "hang", "message": "no token within 1 s", "body": None}
    # TPOT: 0.1, 0.1, 0.3; TTFT: 0.1, 0.3, 0.1
    both = workload.summarize(records, 2.0, goodput_ttft_s=0.2, goodput_tpot_s=0.15)["goodput"]
    assert both == {"ttft_s": 0.2, "tpot_s": 0.15, "requests": 1, "share": 0.25, "req_s": 0.5}
    assert workload.summarize(records, 2.0, goodput_ttft_s=0.2)["goodput"]["requests"] == 2
    assert workload.summarize(records, 2.0, goodput_tpot_s=0.15)["goodput"]["requests"] == 2


def test_summary_of_nothing_ok_has_no_rates():
    failed = workload.new_record(0, 128, [])
    summary = workload.summarize([failed], 1.0)
    assert summary["aggregate_output_tok_s"] is None
    assert summary["cached_tokens_total"] is None
    assert summary["ttft_s"]["n"] == 0 and summary["ttft_s"]["mean"] is None


def test_every_figure_has_a_definition():
    figures = set(workload.STAT_FIELDS) | {"output_tokens", "prompt_tokens", "cached_tokens", "chunks",
                                           "wall_s", "aggregate_output_tok_s", "spec_accept_length",
                                           "request_throughput_req_s", "total_token_throughput_tok_s", "goodput"}
    assert figures <= set(workload.DEFINITIONS)
    assert "(output_tokens - 1) / (latency_s - ttft_s)" in workload.DEFINITIONS["decode_tok_s"]


def test_failure_summary():
    records = []
    for index, kind in enumerate(["hang", None, "http", "http", "timeout", "malformed"]):
        rec = workload.new_record(index, 8, [])
        if kind:
            rec["error"] = {"kind": kind, "message": f"{kind} happened", "body": "x" * 400 if kind == "http" else None}
        else:
            rec["ok"] = True
        records.append(rec)
    line = workload.failure_summary({"records": records})
    assert line.startswith("#0 hang: hang happened; #2 http: http happened (body: xxx")
    assert "#3 http" in line and line.endswith("; and 2 more")
    assert "x" * 300 + "... (cut at 300 characters))" in line


# --- prompts ----------------------------------------------------------------------------------------------------

def test_prompts_are_deterministic_and_one_word_per_token():
    first = workload.build_prompts("concurrent", 3, prompt_tokens=50, seed=4)
    assert first == workload.build_prompts("concurrent", 3, prompt_tokens=50, seed=4)
    assert first != workload.build_prompts("concurrent", 3, prompt_tokens=50, seed=5)
    for text, requested in first:
        assert requested == 50
        words = text.split(" ")
        assert len(words) == 50 and all(w.isalpha() and w.islower() and w in workload.WORDS for w in words)
    assert len({text for text, _n in first}) == 3
    assert len({tuple(text.split(" ")[:8]) for text, _n in first}) == 3  # no shared opening


def test_default_prompt_length():
    [(text, requested)] = workload.build_prompts("single_stream", 1)
    assert requested == workload.DEFAULT_PROMPT_TOKENS == len(text.split(" "))


def test_repeated_prefix_shares_the_prefix_only():
    prompts = workload.build_prompts("repeated_prefix", 4, prefix_tokens=300, seed=1)
    words = [text.split(" ") for text, _n in prompts]
    assert all(n == 316 for _text, n in prompts) and all(len(w) == 316 for w in words)
    assert all(w[:300] == words[0][:300] for w in words)
    assert len({" ".join(w[300:]) for w in words}) == 4
    longer = workload.build_prompts("repeated_prefix", 2, prompt_tokens=400, prefix_tokens=300, seed=1)
    assert longer[0][1] == 400 and longer[0][0].split(" ")[:300] == words[0][:300]


def test_long_context_extends_the_repeated_prefix():
    """The long prompt starts with the same words as a repeated_prefix batch of the same seed, as the reference's
    near-200K request reused the cached 120K prefix."""
    [(long_text, requested)] = workload.build_prompts("long_context", 1, prompt_tokens=2000, seed=3)
    [(prefixed, _n)] = workload.build_prompts("repeated_prefix", 1, prefix_tokens=1200, seed=3)
    assert requested == 2000 and len(long_text.split(" ")) == 2000
    assert long_text.split(" ")[:1200] == prefixed.split(" ")[:1200]
    assert long_text.split(" ")[1200:1216] != prefixed.split(" ")[1200:1216]


# --- options, URL, bodies ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "burst", "model": "m"}, "kind must be one of single_stream, concurrent, repeated_prefix, "
                                          "long_context, got 'burst'"),
        ({"kind": "single_stream", "api": "grpc", "model": "m"}, "api must be one of openai_chat, sglang_generate"),
        ({"kind": "single_stream"}, "model is required with api=openai_chat"),
        ({"kind": "single_stream", "model": "m", "requests": 0, "concurrency": 0},
         "requests must be at least 1, got 0; concurrency must be at least 1, got 0"),
        ({"kind": "single_stream", "model": "m", "output_tokens": 0}, "output_tokens must be at least 1, got 0"),
        ({"kind": "single_stream", "model": "m", "first_token_timeout_s": 0},
         "first_token_timeout_s must be a finite number more than 0, got 0"),
        ({"kind": "single_stream", "model": "m", "total_timeout_s": float("inf")},
         "total_timeout_s must be a finite number more than 0, got inf"),
        ({"kind": "single_stream", "model": "m", "first_token_timeout_s": float("nan")},
         "first_token_timeout_s must be a finite number more than 0, got nan"),
        ({"kind": "concurrent", "model": "m", "requests": 10**6, "concurrency": 10**6},
         "requests must be at most 100000, got 1000000; concurrency must be at most 1024, got 1000000"),
        ({"kind": "concurrent", "model": "m", "requests": 2, "concurrency": 4},
         "concurrency (4) must not exceed requests (2)"),
        ({"kind": "single_stream", "model": "m", "requests": 4, "concurrency": 2},
         "kind=single_stream sends one request at a time: concurrency must be 1, got 2"),
        ({"kind": "long_context", "model": "m"}, "kind=long_context needs prompt_tokens"),
        ({"kind": "long_context", "model": "m", "prompt_tokens": 10, "requests": 2},
         "kind=long_context sends one request: requests must be 1, got 2"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 3}, "kind=repeated_prefix needs prefix_tokens"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 1, "prefix_tokens": 8},
         "kind=repeated_prefix needs requests >= 2"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 3, "prefix_tokens": 8, "prompt_tokens": 8},
         "prompt_tokens is the whole prompt and must exceed prefix_tokens (8), got 8"),
        ({"kind": "concurrent", "model": "m", "prefix_tokens": 8},
         "prefix_tokens applies to kind=repeated_prefix only, got it with kind=concurrent"),
        ({"kind": "single_stream", "model": "m", "extra_body": {"stream": False}},
         "extra_body must not turn stream off (got stream=False)"),
        ({"kind": "single_stream", "model": "m", "extra_body": ["stream"]}, "extra_body must be a dict, got list"),
    ],
)
def test_check_options_refuses(options, message):
    with pytest.raises(workload.WorkloadError) as caught:
        workload.check_options(**options)
    assert message in str(caught.value)


def test_goodput_targets_must_be_positive_seconds():
    with pytest.raises(workload.WorkloadError, match=r"goodput_ttft_s must be a finite number of seconds more than 0, "
                                                     r"got 0; goodput_tpot_s .* got inf"):
        workload.check_options("single_stream", model="m", goodput_ttft_s=0, goodput_tpot_s=float("inf"))


def test_check_options_accepts():
    workload.check_options("single_stream", model="m")
    workload.check_options("concurrent", api="sglang_generate", requests=6, concurrency=6)
    workload.check_options("repeated_prefix", model="m", requests=4, concurrency=3, prefix_tokens=100)
    workload.check_options("long_context", model="m", prompt_tokens=200000, extra_body={"stream": True})


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "prefix"),
    [
        ("http://169.254.77.2:30000", "http", "169.254.77.2", 30000, ""),
        ("http://169.254.77.2:30000/", "http", "169.254.77.2", 30000, ""),
        ("http://127.0.0.1:4000/v1", "http", "127.0.0.1", 4000, ""),
        ("http://127.0.0.1:4000/v1/", "http", "127.0.0.1", 4000, ""),
        ("https://gw.example/sglang", "https", "gw.example", 443, "/sglang"),
        ("http://[::1]:8080/api/v1", "http", "::1", 8080, "/api"),
    ],
)
def test_target(url, scheme, host, port, prefix):
    target = workload.Target(url)
    assert (target.scheme, target.host, target.port, target.prefix) == (scheme, host, port, prefix)


@pytest.mark.parametrize("url", ["169.254.77.2:30000", "ftp://h/", "http://", "http://h:99999", "http://h:1/?a=1",
                                 "http://h:x"])
def test_target_refuses(url):
    with pytest.raises(workload.WorkloadError, match="url"):
        workload.Target(url)


def test_request_bodies():
    chat = workload.request_body("openai_chat", "qwen", "hello there", 16, {"ignore_eos": True})
    assert chat == {"model": "qwen", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 16,
                    "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    generate = workload.request_body("sglang_generate", None, "hello", 8,
                                     {"sampling_params": {"temperature": 0.7}, "return_logprob": False})
    assert generate == {"text": "hello", "stream": True, "return_logprob": False,
                        "sampling_params": {"max_new_tokens": 8, "temperature": 0.7, "ignore_eos": True}}


# --- reading stream chunks --------------------------------------------------------------------------------------

def chat_event(value, time_s, kind="data"):
    return SSEEvent(kind, "message", "{}", value, time_s)


def test_chat_chunks_take_tokens_from_usage_not_chunks():
    stream = workload._Stream("openai_chat")
    for time_s, delta in ((1.0, {"role": "assistant", "content": ""}), (1.5, {"content": "A"}),
                          (1.75, {"reasoning_content": "hm"}), (2.5, {"content": "B C"})):
        stream.take(chat_event({"choices": [{"delta": delta}]}, time_s))
    stream.take(chat_event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}}, 2.6))
    stream.take(SSEEvent("done", "message", "[DONE]", None, 2.7))
    assert (stream.first, stream.chunks, stream.itl, stream.done_at) == (1.5, 3, [0.25, 0.75], 2.7)
    assert stream.counts() == (9, 7, None, None, None)


def test_generate_chunks_use_meta_info():
    stream = workload._Stream("sglang_generate")
    for time_s, text, completion in ((1.0, "", 0), (1.2, "a", 1), (1.3, "a b c", 3), (1.35, "a b c", 3),
                                     (1.5, "a b c d", 4)):
        meta = {"prompt_tokens": 5, "completion_tokens": completion, "cached_tokens": 2, "spec_verify_ct": 2}
        stream.take(chat_event({"text": text, "meta_info": meta}, time_s))
    assert stream.chunks == 3 and stream.first == 1.2
    assert stream.itl == pytest.approx([0.1, 0.2])
    # per token: the 0.1 s gap brought 2 tokens, the 0.2 s gap 1 (bench_serving's /generate path)
    assert stream.itl_per_token == pytest.approx([0.05, 0.05, 0.2])
    assert stream.counts() == (5, 4, 2, 2.0, 2)


@pytest.mark.parametrize(
    ("api", "value", "message"),
    [
        ("openai_chat", ["not", "an", "object"], "a stream chunk must be a JSON object"),
        ("openai_chat", {"choices": "text"}, "a stream chunk has an unexpected shape (AttributeError"),
        ("openai_chat", {"choices": [{"delta": ["x"]}]}, "unexpected shape (AttributeError"),
        ("sglang_generate", {"text": "a"}, "unexpected shape (KeyError: 'meta_info')"),
        ("sglang_generate", {"text": "a", "meta_info": {"completion_tokens": "3"}}, "unexpected shape (TypeError"),
    ],
)
def test_malformed_chunks(api, value, message):
    with pytest.raises(SSEError) as caught:
        workload._Stream(api).take(chat_event(value, 1.0))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        ({"prompt_tokens": 3, "completion_tokens": -1}, "usage.completion_tokens must be a token count"),
        ({"prompt_tokens": 3, "completion_tokens": 2.5}, "usage.completion_tokens must be a token count"),
        ({"prompt_tokens": True, "completion_tokens": 2}, "usage.prompt_tokens must be a token count"),
        ({"prompt_tokens": 3, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": "all"}},
         "usage.prompt_tokens_details.cached_tokens must be a token count"),
    ],
)
def test_bad_counts(usage, message):
    stream = workload._Stream("openai_chat")
    stream.take(chat_event({"choices": [], "usage": usage}, 1.0))
    with pytest.raises(SSEError, match=message.replace(".", r"\.")):
        stream.counts()


def test_missing_usage_and_error_events():
    stream = workload._Stream("openai_chat")
    with pytest.raises(workload._Failure) as caught:
        stream.counts()
    assert caught.value.kind == "no_usage"
    with pytest.raises(workload._Failure) as caught:
        stream.take(SSEEvent("error", "message", '{"error": {"message": "boom"}}', {"error": {}}, 1.0))
    assert (caught.value.kind, caught.value.body) == ("server_error", '{"error": {"message": "boom"}}')
    with pytest.raises(workload._Failure) as caught:
        workload._Stream("sglang_generate").counts()
    assert caught.value.kind == "no_usage"


# --- the client against the server ----------------------------------------------------------------------------------

def timed(decode_tok_s, predicted_n, predicted_ms, ok=True):
    rec = workload.new_record(0, 128, [])
    timings = dict.fromkeys(TIMINGS_FIELDS)  # as response_timings gives them: every field, None where absent
    timings.update(predicted_n=predicted_n, predicted_ms=predicted_ms)
    rec.update(ok=ok, decode_tok_s=decode_tok_s, server_timings=timings)
    return rec


def test_client_over_server_compares_one_definition():
    """64 tokens, the 63 after the first in 0.5 s by the client's clock and predicted_ms 500 by the server's: the
    raw ratio would be 63/64 = 0.984 by the definitions alone; in one definition they agree."""
    assert workload.client_over_server(timed(126.0, 64, 500.0)) == pytest.approx(1.0)
    assert workload.client_over_server(timed(113.4, 64, 500.0)) == pytest.approx(0.9)


@pytest.mark.parametrize("record", [timed(None, 64, 500.0), timed(126.0, 1, 5.0), timed(126.0, 64, 0.0),
                                    timed(126.0, None, 500.0), timed(126.0, 64, 500.0, ok=False)])
def test_client_over_server_has_no_value_without_both_rates(record):
    assert workload.client_over_server(record) is None


def test_the_batch_keeps_the_ratio_of_every_timed_request():
    records = [timed(126.0, 64, 500.0), timed(113.4, 64, 500.0), workload.new_record(2, 128, [])]
    records[2]["ok"] = True  # a request from a server that sends no timings
    summary = workload.server_summary(records)
    assert summary["n"] == 2
    assert summary["client_over_server"]["median"] == pytest.approx(0.95)


# --- arrivals by rate -------------------------------------------------------------------------------------------

def test_arrivals_are_seeded_gamma_gaps_of_the_stated_mean():
    offsets = workload.arrival_offsets(4000, 8.0, 1.0, seed=3)
    assert offsets == workload.arrival_offsets(4000, 8.0, 1.0, seed=3) and offsets[0] == 0.0
    gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 8.0, rel=0.05)
    # Poisson: the gaps' spread equals their mean; burstiness 4 makes them four times as even (variance / 4)
    variance = sum((g - 0.125) ** 2 for g in gaps) / len(gaps)
    assert variance == pytest.approx(0.125 ** 2, rel=0.15)
    even_offsets = workload.arrival_offsets(4000, 8.0, 4.0, seed=3)
    even = [b - a for a, b in zip(even_offsets, even_offsets[1:], strict=False)]
    assert sum((g - 0.125) ** 2 for g in even) / len(even) == pytest.approx(0.125 ** 2 / 4, rel=0.15)


def test_requests_start_on_schedule_with_at_most_concurrency_in_flight():
    """A fake clock that moves only when the dispatcher sleeps: due every 0.25 s with 2 slots, it sleeps 0.25 s
    before each later request, and never has more than 2 running, whatever the threads' timing."""
    now, sleeps = [0.0], []
    running, most, started = [0], [0], []
    lock = threading.Lock()
    finish = {index: threading.Event() for index in range(4)}

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    def run_one(index):
        with lock:
            started.append(index)
            running[0] += 1
            most[0] = max(most[0], running[0])
        finish[index].wait(10)
        with lock:
            running[0] -= 1

    def release_each_once_started():
        for index in range(4):
            while True:  # wait for the condition: this request is running
                with lock:
                    if index in started:
                        break
                time.sleep(0.001)
            finish[index].set()

    releaser = threading.Thread(target=release_each_once_started)
    releaser.start()
    workload._at_rate(run_one, [0, 1, 2, 3], [0.0, 0.25, 0.5, 0.75], 2, clock=lambda: now[0], sleep=sleep)
    releaser.join()
    assert sleeps == pytest.approx([0.25, 0.25, 0.25])
    assert most[0] <= 2 and sorted(started) == [0, 1, 2, 3]


def test_a_rate_is_for_concurrent_batches_and_must_be_positive():
    with pytest.raises(workload.WorkloadError) as caught:
        workload.check_options("single_stream", model="m", request_rate=2.0)
    assert "request_rate paces kind=concurrent only, got it with kind=single_stream" in str(caught.value)
    with pytest.raises(workload.WorkloadError) as caught:
        workload.check_options("concurrent", model="m", requests=4, concurrency=2, request_rate=0.0,
                               burstiness=float("nan"))
    assert "request_rate must be a finite number more than 0, got 0.0" in str(caught.value)
    assert "burstiness must be a finite number more than 0, got nan" in str(caught.value)

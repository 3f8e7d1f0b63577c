# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The figures of a workload batch (``_llm_workload``): one request's rates, and the batch's statistics over its OK
requests (bench_serving's: percentiles as numpy's default linear interpolation), goodput against stated targets, and
the server's own timings (llama-server) beside the client's. ``DEFINITIONS`` says what each figure is, in one line.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

STAT_FIELDS = ("ttft_s", "tpot_s", "itl_s", "itl_per_token_s", "latency_s", "output_tok_s", "decode_tok_s")
POOLED_FIELDS = ("itl_s", "itl_per_token_s")  # lists per request, pooled over the OK requests

DEFINITIONS = {
    "ttft_s": "time from sending the request (connect included) to the first streamed chunk carrying generated text",
    "latency_s": "time from sending the request to the end of its stream (data: [DONE])",
    "output_tokens": "the server's usage.completion_tokens / meta_info.completion_tokens, not a count of chunks",
    "prompt_tokens": "the server's usage.prompt_tokens / meta_info.prompt_tokens (chat template included)",
    "cached_tokens": "the server's usage.prompt_tokens_details.cached_tokens / meta_info.cached_tokens; null when "
                     "the server did not report it (SGLang's OpenAI API: only with --enable-cache-report and > 0)",
    "chunks": "streamed chunks that carried generated text",
    "output_tok_s": "output_tokens / latency_s, per request (TTFT included)",
    "decode_tok_s": "(output_tokens - 1) / (latency_s - ttft_s), per request (TTFT and its token excluded; 1 / tpot_s)",
    "tpot_s": "(latency_s - ttft_s) / (output_tokens - 1), per request with output_tokens > 1 (bench_serving TPOT)",
    "itl_s": "gaps between consecutive chunks carrying generated text, after the first; OK requests pooled (per "
             "chunk: with speculative decoding a chunk carries several tokens)",
    "itl_per_token_s": "each such gap divided by the tokens its chunk carried, once per token (bench_serving's "
                       "/generate path, genai-perf's and guidellm's per-token figure); OK requests pooled; only where "
                       "the stream counts each chunk's tokens (/generate's meta_info.completion_tokens): the chat "
                       "stream counts them only in total, so n is 0 there",
    "arrival": "with a request_rate: each request's due time after the first, the gaps gamma-distributed with mean "
               "1 / request_rate and shape burstiness (1: Poisson), at most concurrency in flight",
    "request_throughput_req_s": "OK requests / wall_s",
    "total_token_throughput_tok_s": "(prompt_tokens + output_tokens over OK requests) / wall_s (bench_serving's "
                                    "total token throughput; cached prompt tokens included)",
    "goodput": "requests that finished OK within every stated target (ttft_s: TTFT at most it; tpot_s: TPOT at most "
               "it, a one-token request meeting it), their share of all requests sent (failed ones included) and "
               "their number / wall_s; null when no target was stated",
    "spec_accept_length": "meta_info.completion_tokens / meta_info.spec_verify_ct per request, mean over requests; "
                          "else /get_server_info internal_states[0].avg_spec_accept_length after the batch",
    "wall_s": "from the first request sent to the last byte received, over every request of the batch",
    "aggregate_output_tok_s": "sum of output_tokens over OK requests / wall_s",
    "mean/median/p90/p95/p99/std/min/max": ("over OK requests; percentiles as numpy.percentile's default linear "
                                            "interpolation, std the population's (numpy's default)"),
    "server_timings": "llama-server's own timings of a request (the stream's last chunk): prompt_n tokens processed "
                      "in prompt_ms, predicted_n tokens generated in predicted_ms, draft_n drafted, draft_n_accepted "
                      "accepted; null from servers that send none",
    "server.decode_tok_s": "predicted_n / predicted_ms per request (all generated tokens over the server's generation "
                           "time), the server's definition: compare it with decode_tok_s knowing they differ",
    "server.prompt_tok_s": "sum of prompt_n / sum of prompt_ms over OK requests (uncached prompt tokens only)",
    "server.acceptance_rate": "sum of draft_n_accepted / sum of draft_n over OK requests",
    "server.client_over_server": "per request, decode_tok_s / ((predicted_n - 1) / predicted_ms): the client's decode "
                                 "rate against the server's in the client's definition (1.0: they agree)",
}


def percentile(values, q):
    """``numpy.percentile(values, q)`` with numpy's default method (``linear``); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100.0
    low = int(math.floor(position))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def stats(values):
    """``{n, mean, median, p90, p95, p99, std, min, max}`` of ``values`` (bench_serving's figures; std as numpy's
    default, the population's); all None but n for none."""
    values = list(values)
    if not values:
        return {"n": 0, "mean": None, "median": None, "p90": None, "p95": None, "p99": None, "std": None,
                "min": None, "max": None}
    mean = sum(values) / len(values)
    return {"n": len(values), "mean": mean, "median": percentile(values, 50), "p90": percentile(values, 90),
            "p95": percentile(values, 95), "p99": percentile(values, 99),
            "std": math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)), "min": min(values),
            "max": max(values)}


def request_rates(output_tokens, ttft_s, latency_s):
    """``(output_tok_s, decode_tok_s, tpot_s)`` of one request; a rate without a defined value is None."""
    output_tok_s = output_tokens / latency_s if latency_s > 0 else None
    decode_tok_s = tpot_s = None
    if output_tokens > 1 and latency_s > ttft_s:
        decode_tok_s = (output_tokens - 1) / (latency_s - ttft_s)
        tpot_s = (latency_s - ttft_s) / (output_tokens - 1)
    return output_tok_s, decode_tok_s, tpot_s


def client_over_server(record):
    """The client's decode rate over the server's, in the client's definition (the first token left out: the
    server's predicted_n - 1 tokens over its predicted_ms), for one OK request with timings; None without a rate."""
    timings = record["server_timings"]
    if not record["ok"] or not timings or record["decode_tok_s"] is None:
        return None
    if not timings["predicted_n"] or timings["predicted_n"] < 2 or not timings["predicted_ms"]:
        return None
    return record["decode_tok_s"] / ((timings["predicted_n"] - 1) / timings["predicted_ms"] * 1000.0)


def server_summary(records):
    """The server's own figures over OK requests that carry ``server_timings`` (llama-server), or None when none
    does: request count, token sums, ``decode_tok_s`` statistics, ``prompt_tok_s``, the draft acceptance, and the
    client's decode rate against the server's in one definition (``client_over_server``)."""
    timed = [r["server_timings"] for r in records if r["ok"] and r["server_timings"]]
    if not timed:
        return None

    def total(field):
        values = [t[field] for t in timed if t[field] is not None]
        return sum(values) if values else None

    prompt_n, prompt_ms = total("prompt_n"), total("prompt_ms")
    drafted, accepted = total("draft_n"), total("draft_n_accepted")
    return {
        "n": len(timed),
        "prompt_tokens": prompt_n,
        "cached_tokens": total("cache_n"),
        "predicted_tokens": total("predicted_n"),
        "prompt_tok_s": prompt_n / prompt_ms * 1000.0 if prompt_n and prompt_ms else None,
        "decode_tok_s": stats([t["predicted_n"] / t["predicted_ms"] * 1000.0 for t in timed
                               if t["predicted_n"] and t["predicted_ms"]]),
        "draft_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted and accepted is not None else None,
        "client_over_server": stats([ratio for ratio in map(client_over_server, records) if ratio is not None]),
    }


def goodput(records, wall_s, ttft_s=None, tpot_s=None):
    """The requests that met every stated target (see DEFINITIONS); None when no target was stated."""
    if ttft_s is None and tpot_s is None:
        return None
    met = [r for r in records if r["ok"]
           and (ttft_s is None or r["ttft_s"] is not None and r["ttft_s"] <= ttft_s)
           and (tpot_s is None or r["tpot_s"] is None or r["tpot_s"] <= tpot_s)]
    return {"ttft_s": ttft_s, "tpot_s": tpot_s, "requests": len(met),
            "share": len(met) / len(records) if records else None,
            "req_s": len(met) / wall_s if wall_s else None}


def summarize(records, wall_s, goodput_ttft_s=None, goodput_tpot_s=None):
    """The batch figures of ``records`` (see the module docstring); every statistic over OK requests only."""
    good = [r for r in records if r["ok"]]
    output_total = sum(r["output_tokens"] for r in good)
    prompt_total = sum(r["prompt_tokens"] for r in good)
    cached = [r["cached_tokens"] for r in good if r["cached_tokens"] is not None]
    summary = {
        "ok": len(good),
        "failed": len(records) - len(good),
        "wall_s": wall_s,
        "output_tokens_total": output_total,
        "prompt_tokens_total": prompt_total,
        "cached_tokens_total": sum(cached) if cached else None,
        "aggregate_output_tok_s": output_total / wall_s if good and wall_s else None,
        "request_throughput_req_s": len(good) / wall_s if good and wall_s else None,
        "total_token_throughput_tok_s": (prompt_total + output_total) / wall_s if good and wall_s else None,
        "goodput": goodput(records, wall_s, goodput_ttft_s, goodput_tpot_s),
    }
    for name in STAT_FIELDS:
        if name in POOLED_FIELDS:
            values = [gap for r in good for gap in r.get(name) or []]
        else:
            values = [r[name] for r in good if r[name] is not None]
        summary[name] = stats(values)
    summary["server"] = server_summary(records)
    return summary

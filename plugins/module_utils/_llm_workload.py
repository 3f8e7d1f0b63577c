# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Real streamed requests against an SGLang server (or anything that speaks its API), measured like bench_serving.

One call of ``run_batch`` sends one batch and returns one dict: every request's record and the batch's figures.
Standard library only (``http.client``, ``threading``, ``time.perf_counter``), Python 3.8+ syntax: it runs under the
controller's Python, which may be any a module runs on.

This module checks the options, schedules the requests and runs the batch; its parts are ``_workload_prompts`` (the
prompt text), ``_workload_stream`` (one streamed request and its record) and ``_workload_stats`` (the figures and
their ``DEFINITIONS``).

Prompts. Words drawn from ``WORDS`` with a generator seeded from ``seed``, separated by spaces, one word per
requested token: the lab server counts a word as one token, and each word is one token for common BPE tokenizers
too, but chat templates and real tokenizers add or split tokens, so a record keeps the server's
``prompt_tokens`` beside ``requested_prompt_tokens``. Per kind:
- ``single_stream`` (one request after another) and ``concurrent``: a prompt of its own per request, so requests do
  not share a cached prefix with each other;
- ``repeated_prefix``: one shared prefix of ``prefix_tokens`` words plus a unique suffix per request. Request 0 runs
  alone first and fills the prefix cache; requests 1..N-1 then run at ``concurrency`` and hit it;
- ``long_context``: one request whose prompt is the shared prefix stream itself, ``prompt_tokens`` long, so after a
  ``repeated_prefix`` batch with the same seed it reuses that batch's cached prefix (as the reference experiment's
  near-200K request reused its 120K prefix); flush the cache first for a cold prefill.
In a ``concurrent`` batch (and the second wave of ``repeated_prefix``) the threads start behind a barrier.

Measurements, per request (``definitions`` in the batch says the same in one line each):
- ``ttft_s``: from sending the request (connection set-up included) to the first streamed chunk carrying generated
  text; ``latency_s``: to the end of the stream (``data: [DONE]``);
- ``output_tokens`` and ``prompt_tokens`` are the server's (``usage`` of the chat stream's last chunk, requested with
  ``stream_options.include_usage``; ``meta_info`` of ``/generate``), never counted from chunks: with speculative
  decoding one chunk carries several tokens. ``chunks`` counts the chunks that carried text;
- ``output_tok_s`` = output_tokens / latency_s (TTFT included);
- ``decode_tok_s`` = (output_tokens - 1) / (latency_s - ttft_s): the first token is what TTFT waited for, the other
  output_tokens - 1 came in latency_s - ttft_s. It is 1 / ``tpot_s``, and ``tpot_s`` = (latency_s - ttft_s) /
  (output_tokens - 1) is SGLang bench_serving's TPOT. The reference experiment's "48.4 tok/s" divided all 512 tokens
  by (10.73 - 0.159) s; this definition gives 511 / 10.571 s = 48.3 tok/s for the same request;
- ``itl_s``: the gaps between consecutive chunks that carried text, after the first (bench_serving's chat
  definition; its ``/generate`` client also divides a gap by the tokens in the chunk, which this does not);
- ``spec_accept_length``: completion_tokens / spec_verify_ct from ``/generate``'s ``meta_info`` (speculative
  decoding only). When no request has it, the batch reads ``internal_states[0].avg_spec_accept_length`` from
  ``/get_server_info`` after the batch.
Failures are recorded as failures, never as zeros: a hang (no token within ``first_token_timeout_s``, even though
the status and headers came), a timeout (``total_timeout_s``), a non-200 status (with the body, cut to 2 KB), a
malformed stream, a refused or reset connection; their rates are null and they count in ``failed``.

Per batch: ``wall_s`` from the first request sent to the last byte received; ``aggregate_output_tok_s`` = the sum of
the OK requests' output tokens / ``wall_s``, a different figure from any request's rate; and for ttft_s, tpot_s,
itl_s, latency_s, output_tok_s and decode_tok_s over the OK requests: ``n``, ``mean``, ``median``, ``p99``, ``min``,
``max``, with percentiles as numpy's default (linear interpolation), as bench_serving reports them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import math
import random
import threading
import time

from ansible_collections.inferlab.distributed.plugins.module_utils._prompt_fit import ServerTokenizer, TokenizerError
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_prompts import (
    build_fitted_prompts,
    build_prompts,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stats import DEFINITIONS, summarize
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stream import (
    Target,
    WorkloadError,
    cut,
    new_record,
    request_body,
    stream_request,
    utc_now,
)

KINDS = ("single_stream", "concurrent", "repeated_prefix", "long_context")
PROMPT_SIZINGS = ("words", "tokenizer")
APIS = ("openai_chat", "sglang_generate")
# Each request in flight is a thread of this process: more than this is a typo, not a workload.
MAX_CONCURRENCY = 1024
MAX_REQUESTS = 100000
DEFAULT_CAPTURE_HEADERS = ["x-inferlab-host", "x-litellm-model-api-base", "x-litellm-model-group",
                           "x-litellm-attempted-fallbacks"]


def check_options(kind, api="openai_chat", model=None, requests=1, concurrency=1, prompt_tokens=None,
                  prefix_tokens=None, output_tokens=64, first_token_timeout_s=30.0, total_timeout_s=300.0,
                  extra_body=None, prompt_sizing="words", context_tokens=None, flush_method="flush_cache",
                  prefill_floor_tokens_per_s=None, goodput_ttft_s=None, goodput_tpot_s=None, request_rate=None,
                  burstiness=1.0):
    """Raise WorkloadError, saying what was expected and what was found, for options that cannot make a batch."""
    problems = []
    for name, value in (("request_rate", request_rate), ("burstiness", burstiness)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            problems.append("%s must be a finite number more than 0, got %r" % (name, value))
    if request_rate is not None and kind != "concurrent":
        problems.append("request_rate paces kind=concurrent only, got it with kind=%s" % kind)
    for name, target in (("goodput_ttft_s", goodput_ttft_s), ("goodput_tpot_s", goodput_tpot_s)):
        if target is not None and not (target > 0 and math.isfinite(target)):
            problems.append("%s must be a finite number of seconds more than 0, got %r" % (name, target))
    if prefill_floor_tokens_per_s is not None and not (prefill_floor_tokens_per_s > 0
                                                       and math.isfinite(prefill_floor_tokens_per_s)):
        problems.append("prefill_floor_tokens_per_s must be a finite number more than 0, got %r"
                        % prefill_floor_tokens_per_s)
    if flush_method not in FLUSH_METHODS:
        problems.append("flush_method must be one of %s, got %r" % (", ".join(FLUSH_METHODS), flush_method))
    if prompt_sizing not in PROMPT_SIZINGS:
        problems.append("prompt_sizing must be one of %s, got %r" % (", ".join(PROMPT_SIZINGS), prompt_sizing))
    if context_tokens is not None and context_tokens < 1:
        problems.append("context_tokens must be at least 1, got %d" % context_tokens)
    if kind not in KINDS:
        problems.append("kind must be one of %s, got %r" % (", ".join(KINDS), kind))
    if api not in APIS:
        problems.append("api must be one of %s, got %r" % (", ".join(APIS), api))
    if api == "openai_chat" and not model:
        problems.append("model is required with api=openai_chat (the served model name, or the gateway's role)")
    for name, value, least in (("requests", requests, 1), ("concurrency", concurrency, 1),
                               ("output_tokens", output_tokens, 1), ("prompt_tokens", prompt_tokens, 1),
                               ("prefix_tokens", prefix_tokens, 1)):
        if value is not None and value < least:
            problems.append("%s must be at least %d, got %d" % (name, least, value))
    for name, value, most in (("requests", requests, MAX_REQUESTS), ("concurrency", concurrency, MAX_CONCURRENCY)):
        if value is not None and value > most:
            problems.append("%s must be at most %d, got %d" % (name, most, value))
    for name, value in (("first_token_timeout_s", first_token_timeout_s), ("total_timeout_s", total_timeout_s)):
        if not (value > 0 and math.isfinite(value)):
            problems.append("%s must be a finite number more than 0, got %r" % (name, value))
    if concurrency > requests:
        problems.append("concurrency (%d) must not exceed requests (%d)" % (concurrency, requests))
    if kind == "single_stream" and concurrency != 1:
        problems.append("kind=single_stream sends one request at a time: concurrency must be 1, got %d "
                        "(use kind=concurrent)" % concurrency)
    if kind == "long_context":
        if prompt_tokens is None:
            problems.append("kind=long_context needs prompt_tokens (the length of its one prompt)")
        if requests != 1:
            problems.append("kind=long_context sends one request: requests must be 1, got %d (run the batch again, "
                            "with flush_cache for a cold prefill each time)" % requests)
    if kind == "repeated_prefix":
        if prefix_tokens is None:
            problems.append("kind=repeated_prefix needs prefix_tokens (the length of the shared prefix)")
        elif prompt_tokens is not None and prompt_tokens <= prefix_tokens:
            problems.append("with kind=repeated_prefix, prompt_tokens is the whole prompt and must exceed "
                            "prefix_tokens (%d), got %d" % (prefix_tokens, prompt_tokens))
        if requests < 2:
            problems.append("kind=repeated_prefix needs requests >= 2 (request 0 fills the cache, the others hit it), "
                            "got %d" % requests)
    elif prefix_tokens is not None:
        problems.append("prefix_tokens applies to kind=repeated_prefix only, got it with kind=%s" % kind)
    if extra_body is not None:
        if not isinstance(extra_body, dict):
            problems.append("extra_body must be a dict, got %s" % type(extra_body).__name__)
        elif extra_body.get("stream", True) is not True:
            problems.append("extra_body must not turn stream off (got stream=%r): the measurements need the stream"
                            % extra_body["stream"])
    if problems:
        raise WorkloadError("; ".join(problems))


def _scrub_key(error, api_key):
    """Remove the key from a failed request's message and body: a server may echo what it was sent (an
    authentication error quoting the bearer token), and the records go into results and the run directory."""
    if not error:
        return
    for field in ("message", "body"):
        if isinstance(error.get(field), str) and api_key in error[field]:
            error[field] = error[field].replace(api_key, "<redacted>")


def first_token_deadline_s(margin_s, prompt_tokens, in_flight=1, prefill_floor_tokens_per_s=None):
    """Seconds a request may wait for its first token: ``margin_s``, plus, with a prefill rate floor, the prefill of
    its prompt and of the prompts in flight with it (a server prefills a wave's prompts before any of their first
    tokens) at that floor. A real model prefills about 1,000 uncached tokens a second: a flat deadline sized for a
    short prompt calls a near-context-length prompt's prefill a hang."""
    if not prefill_floor_tokens_per_s:
        return float(margin_s)
    return round(float(margin_s) + float(prompt_tokens or 0) * in_flight / float(prefill_floor_tokens_per_s), 3)


def _prompt_length(record):
    """The prompt's tokens as sized: the server's count where it was asked, else the requested length."""
    return record["content_tokens"] if record["content_tokens"] is not None else record["requested_prompt_tokens"]


def _in_waves(run_one, indices, concurrency):
    """Run ``run_one(index)`` for every index on ``concurrency`` threads that start together behind a barrier."""
    workers = min(concurrency, len(indices))
    if workers <= 1:
        for index in indices:
            run_one(index)
        return
    barrier = threading.Barrier(workers)
    queue = list(reversed(indices))
    lock = threading.Lock()
    crashed = []

    def worker():
        try:
            barrier.wait()
            while True:
                with lock:
                    if not queue:
                        return
                    index = queue.pop()
                run_one(index)
        except BaseException as exc:  # a bug, not a server failure (stream_request records those): re-raised below
            crashed.append(exc)

    threads = [threading.Thread(target=worker, name="llm-workload-%d" % n) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if crashed:
        raise crashed[0]


def arrival_offsets(requests, request_rate, burstiness=1.0, seed=0):
    """Each request's start, seconds after the first, as bench_serving draws them: the gaps between arrivals are
    gamma-distributed with shape ``burstiness`` and mean 1 / ``request_rate`` (burstiness 1: a Poisson process;
    below 1 burstier, above more even). Seeded, so a batch's schedule repeats."""
    rng = random.Random("arrivals-%s" % seed)
    offsets, now = [], 0.0
    for _index in range(requests):
        offsets.append(now)
        now += rng.gammavariate(burstiness, 1.0 / (request_rate * burstiness))
    return offsets


def _at_rate(run_one, indices, offsets, concurrency, clock=time.monotonic, sleep=time.sleep):
    """Start ``run_one(index)`` for each index at its offset (``offsets``, seconds after the first), at most
    ``concurrency`` in flight: a request due while every slot is busy starts when one frees, as bench_serving's
    ``--max-concurrency`` holds it."""
    slots = threading.BoundedSemaphore(concurrency)
    crashed = []

    def one(index):
        try:
            run_one(index)
        except BaseException as exc:  # a bug, not a server failure (stream_request records those): re-raised below
            crashed.append(exc)
        finally:
            slots.release()

    threads = []
    began = clock()
    for index, offset in zip(indices, offsets):  # noqa: B905 - Python 3.8 hosts: no strict=
        wait = began + offset - clock()
        if wait > 0:
            sleep(wait)
        slots.acquire()
        thread = threading.Thread(target=one, args=(index,), name="llm-workload-%d" % index)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    if crashed:
        raise crashed[0]


FLUSH_METHODS = ("flush_cache", "slots")


def flush_cache(target, headers, timeout, method="flush_cache"):
    """Empty the server's prefix cache: ``(True, detail)`` when it did, ``(False, reason)`` when it refused or could
    not be asked. ``flush_cache``: SGLang's ``POST /flush_cache`` (it answers 400 while requests are running).
    ``slots``: llama-server's ``GET /slots``, then ``POST /slots/ID?action=erase`` for every slot."""
    if method == "slots":
        return _erase_slots(target, headers, timeout)
    try:
        status, body = target.call("POST", "/flush_cache", timeout, headers=headers)
    except (OSError, http.client.HTTPException) as exc:
        return False, "POST %s/flush_cache failed: %s: %s" % (target.prefix, type(exc).__name__, exc)
    if status != 200:
        return False, "POST %s/flush_cache answered HTTP %d: %s" % (target.prefix, status, cut(body.strip(), 500))
    return True, body.strip()


def _erase_slots(target, headers, timeout):
    try:
        status, body = target.call("GET", "/slots", timeout, headers=headers)
        if status != 200:
            return False, "GET %s/slots answered HTTP %d: %s" % (target.prefix, status, cut(body.strip(), 500))
        try:
            ids = [int(slot["id"]) for slot in json.loads(body)]
        except (ValueError, KeyError, TypeError):
            return False, "GET %s/slots answered no list of slots: %s" % (target.prefix, cut(body.strip(), 300))
        for slot in ids:
            status, body = target.call("POST", "/slots/%d?action=erase" % slot, timeout, headers=headers)
            if status != 200:
                return False, "POST %s/slots/%d?action=erase answered HTTP %d: %s" % (
                    target.prefix, slot, status, cut(body.strip(), 500))
    except (OSError, http.client.HTTPException) as exc:
        return False, "erasing %s/slots failed: %s: %s" % (target.prefix, type(exc).__name__, exc)
    return True, "erased slots %s" % ids


def server_spec_accept_length(target, headers, timeout):
    """``{value, source, note}`` from ``/get_server_info`` ``internal_states[0].avg_spec_accept_length``."""
    result = {"value": None, "source": None, "note": None}
    try:
        status, body = target.call("GET", "/get_server_info", timeout, headers=headers)
    except (OSError, http.client.HTTPException) as exc:
        result["note"] = "GET /get_server_info failed: %s: %s" % (type(exc).__name__, exc)
        return result
    if status != 200:
        result["note"] = "GET /get_server_info answered HTTP %d (not an SGLang server, e.g. a gateway?)" % status
        return result
    try:  # RecursionError: arrays or objects nested deeper than Python's recursion limit
        value = json.loads(body)["internal_states"][0].get("avg_spec_accept_length")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
        result["note"] = "GET /get_server_info has no internal_states[0]: %s" % cut(body, 200)
        return result
    if value is None:
        result["note"] = "the server reports no avg_spec_accept_length (no speculative decoding)"
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        result["note"] = "avg_spec_accept_length is not a number: %r" % (value,)
    else:
        result.update(value=float(value), source="server_info")
    return result


def run_batch(url, kind, api="openai_chat", model=None, api_key=None, requests=1, concurrency=1, prompt_tokens=None,
              prefix_tokens=None, output_tokens=64, flush=False, first_token_timeout_s=30.0, total_timeout_s=300.0,
              seed=0, capture_headers=None, extra_body=None, prompt_sizing="words", context_tokens=None,
              flush_method="flush_cache", prefill_floor_tokens_per_s=None, goodput_ttft_s=None, goodput_tpot_s=None,
              request_rate=None, burstiness=1.0):
    """Send one batch and return its dict: options, ``cache`` label, figures, ``definitions``, raw ``records``.

    ``request_rate`` (kind ``concurrent``): the requests arrive at that rate a second, the gaps drawn as
    ``arrival_offsets`` draws them with ``burstiness``, at most ``concurrency`` in flight (``arrival`` in the batch);
    unset, every request is sent at once, ``concurrency`` at a time.

    ``goodput_ttft_s`` / ``goodput_tpot_s``: the targets the batch's ``goodput`` counts requests against.

    With ``prefill_floor_tokens_per_s`` each request's first-token deadline is ``first_token_timeout_s`` plus its
    prefill at that rate (``first_token_deadline_s``), recorded in each record and in ``first_token_deadline``.

    Raises WorkloadError for options or a URL that cannot make a batch (nothing sent). A refused flush, a tokenizer
    that cannot be asked (``prompt_sizing="tokenizer"``) or a prompt that cannot fit ``context_tokens`` returns the
    batch with ``error`` set and no request sent; request failures are in the records and in ``failed``.
    """
    check_options(kind, api=api, model=model, requests=requests, concurrency=concurrency,
                  prompt_tokens=prompt_tokens, prefix_tokens=prefix_tokens, output_tokens=output_tokens,
                  first_token_timeout_s=first_token_timeout_s, total_timeout_s=total_timeout_s,
                  extra_body=extra_body, prompt_sizing=prompt_sizing, context_tokens=context_tokens,
                  flush_method=flush_method, prefill_floor_tokens_per_s=prefill_floor_tokens_per_s,
                  goodput_ttft_s=goodput_ttft_s, goodput_tpot_s=goodput_tpot_s, request_rate=request_rate,
                  burstiness=burstiness)
    target = Target(url)
    capture_headers = [name.lower() for name in (DEFAULT_CAPTURE_HEADERS if capture_headers is None
                                                 else capture_headers)]
    auth = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    headers = dict(auth, **{"Content-Type": "application/json", "Accept": "text/event-stream",
                            "User-Agent": "inferlab-llm-workload"})
    batch = {
        "kind": kind, "api": api, "url": url, "model": model, "requests": requests, "concurrency": concurrency,
        "requested_prompt_tokens": None, "content_tokens": None, "prompt_sizing": prompt_sizing,
        "tokenize_calls": 0, "context_tokens": context_tokens, "prefix_tokens": prefix_tokens,
        "requested_output_tokens": output_tokens, "seed": seed, "cache": "warm", "cache_flushed": False,
        "flush_detail": None, "error": None, "started": utc_now(),
    }

    def refused(reason):
        batch["error"] = reason
        batch.update(summarize([], 0.0), spec_accept_length={"value": None, "source": None, "note": None},
                     definitions=DEFINITIONS, records=[])
        return batch

    if prompt_sizing == "tokenizer":
        tokenizer = ServerTokenizer(target.call, dict(auth, **{"Content-Type": "application/json"}),
                                    min(first_token_timeout_s, total_timeout_s))
        try:
            prompts = build_fitted_prompts(kind, requests, tokenizer.count, prompt_tokens=prompt_tokens,
                                           prefix_tokens=prefix_tokens, seed=seed)
        except TokenizerError as exc:
            batch["tokenize_calls"] = tokenizer.calls
            return refused("prompt_sizing=tokenizer could not size the prompts, so the batch was not sent: %s" % exc)
        batch["tokenize_calls"] = tokenizer.calls
    else:
        prompts = [(text, requested, None) for text, requested in build_prompts(
            kind, requests, prompt_tokens=prompt_tokens, prefix_tokens=prefix_tokens, seed=seed)]
    batch.update(requested_prompt_tokens=prompts[0][1], content_tokens=prompts[0][2])
    if context_tokens is not None:
        longest = max(tokens if tokens is not None else requested for _text, requested, tokens in prompts)
        if longest + output_tokens > context_tokens:
            return refused("a prompt of %d tokens (%s) and %d output tokens cannot fit the context of %d tokens "
                           "(context_tokens), so the batch was not sent"
                           % (longest, "the server's count" if prompt_sizing == "tokenizer" else "requested",
                              output_tokens, context_tokens))
    payloads = [json.dumps(request_body(api, model, text, output_tokens, extra_body)).encode("utf-8")
                for text, _requested, _tokens in prompts]
    if flush:
        flushed, detail = flush_cache(target, auth, min(first_token_timeout_s, total_timeout_s), flush_method)
        batch["flush_detail"] = detail
        if not flushed:
            return refused("flush_cache was asked for and refused, so the batch was not sent: %s" % detail)
        batch.update(cache="cold", cache_flushed=True)

    records = [new_record(index, prompts[index][1], capture_headers, prompts[index][2]) for index in range(requests)]
    in_flight = 1 if kind == "single_stream" else min(concurrency, requests)
    for record in records:
        record["first_token_deadline_s"] = first_token_deadline_s(
            first_token_timeout_s, _prompt_length(record), in_flight, prefill_floor_tokens_per_s)
    batch["first_token_deadline"] = {
        "margin_s": first_token_timeout_s, "prefill_floor_tokens_per_s": prefill_floor_tokens_per_s,
        "prompts_in_flight": in_flight, "longest_s": max(r["first_token_deadline_s"] for r in records)}
    origin = time.perf_counter()

    why = ("first_token_timeout_s" if not prefill_floor_tokens_per_s else
           "first_token_timeout_s %g s + the prefill of %d prompt(s) in flight at %g tokens/s"
           % (first_token_timeout_s, in_flight, prefill_floor_tokens_per_s))

    def run_one(index):
        stream_request(target, api, payloads[index], headers, records[index],
                       records[index]["first_token_deadline_s"], total_timeout_s, origin, first_token_why=why)

    if kind == "repeated_prefix":
        run_one(0)
        _in_waves(run_one, list(range(1, requests)), concurrency)
    elif request_rate is not None:
        offsets = arrival_offsets(requests, request_rate, burstiness, seed)
        batch["arrival"] = {"request_rate": request_rate, "burstiness": burstiness, "offsets_s": offsets}
        _at_rate(run_one, list(range(requests)), offsets, concurrency)
    else:
        _in_waves(run_one, list(range(requests)), concurrency)

    if api_key:
        for record in records:
            _scrub_key(record.get("error"), api_key)
    wall_s = max(r["end_offset_s"] for r in records) - min(r["start"]["offset_s"] for r in records)
    batch.update(summarize(records, wall_s, goodput_ttft_s, goodput_tpot_s))
    accepts = [r["spec_accept_length"] for r in records if r["ok"] and r["spec_accept_length"] is not None]
    if accepts:
        batch["spec_accept_length"] = {"value": sum(accepts) / len(accepts), "source": "meta_info", "note": None}
    else:
        batch["spec_accept_length"] = server_spec_accept_length(target, auth,
                                                                min(first_token_timeout_s, total_timeout_s))
    batch["definitions"] = DEFINITIONS
    batch["records"] = records
    return batch


def failure_summary(batch, shown=3):
    """One line naming the first failed requests: ``#INDEX KIND: MESSAGE (body: ...)``."""
    failed = [r for r in batch["records"] if not r["ok"]]
    parts = []
    for record in failed[:shown]:
        error = record["error"]
        part = "#%d %s: %s" % (record["index"], error["kind"], error["message"])
        if error.get("body"):
            part += " (body: %s)" % cut(error["body"], 300)
        parts.append(part)
    if len(failed) > shown:
        parts.append("and %d more" % (len(failed) - shown))
    return "; ".join(parts)

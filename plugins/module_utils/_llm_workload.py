# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Real streamed requests against an SGLang server (or anything that speaks its API), measured like bench_serving.

One call of ``run_batch`` sends one batch and returns one dict: every request's record and the batch's figures.
Standard library only (``http.client``, ``threading``, ``time.perf_counter``), Python 3.8+ syntax: it runs under the
controller's Python, which may be any a module runs on.

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

import datetime
import http.client
import json
import math
import random
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import response_timings
from ansible_collections.inferlab.distributed.plugins.module_utils._prompt_fit import (
    ServerTokenizer,
    TokenizerError,
    fit_words,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._sse import SSEError, SSEParser

KINDS = ("single_stream", "concurrent", "repeated_prefix", "long_context")
PROMPT_SIZINGS = ("words", "tokenizer")
APIS = ("openai_chat", "sglang_generate")
# Each request in flight is a thread of this process: more than this is a typo, not a workload.
MAX_CONCURRENCY = 1024
MAX_REQUESTS = 100000
PATHS = {"openai_chat": "/v1/chat/completions", "sglang_generate": "/generate"}
DEFAULT_CAPTURE_HEADERS = ["x-inferlab-host", "x-litellm-model-api-base", "x-litellm-model-group",
                           "x-litellm-attempted-fallbacks"]
DEFAULT_PROMPT_TOKENS = 128
SUFFIX_TOKENS = 16
ERROR_BODY_LIMIT = 2048
READ_SIZE = 65536
STAT_FIELDS = ("ttft_s", "tpot_s", "itl_s", "itl_per_token_s", "latency_s", "output_tok_s", "decode_tok_s")
POOLED_FIELDS = ("itl_s", "itl_per_token_s")  # lists per request, pooled over the OK requests

# Common English words, each one token for the lab server and for common BPE tokenizers (with its leading space).
WORDS = tuple("""
time year people way day man thing woman life child world school state family student group country problem hand
part place case week company system program question work government number night point home water room mother
area money story fact month lot right study book eye job word business issue side kind head house service friend
father power hour game line end member law car city community name president team minute idea kid body information
back parent face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education foot boy age policy music market sense nation plan college
interest death experience effect class control care field development role effort rate heart drug show leader light
voice wife police mind price report decision son view relationship town road arm difference value building action
model season society tax director position player record paper space ground form event official matter center couple
site project activity star table need court oil situation cost industry figure street image phone data picture
""".split())

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


class WorkloadError(ValueError):
    """The batch cannot be sent as asked (bad options or URL); nothing was sent."""


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


def _words(stream, count):
    return random.Random(stream).choices(WORDS, k=count)


def _sized_prompts(kind, requests, sized, prompt_tokens=None, prefix_tokens=None, seed=0):
    """``[(text, requested_tokens, content_tokens)]`` per request index, each text made by ``sized(stream, target,
    before)``: the words of ``stream`` that make ``before`` + text ``target`` tokens long, and their count (None when
    not counted). One word stream per role, so a long_context prompt starts with the repeated_prefix batch's prefix."""
    if kind == "repeated_prefix":
        total = prefix_tokens + SUFFIX_TOKENS if prompt_tokens is None else prompt_tokens
        prefix, _tokens = sized("inferlab:%d:prefix" % seed, prefix_tokens, "")
        prompts = []
        for index in range(requests):
            suffix, tokens = sized("inferlab:%d:suffix:%d" % (seed, index), total, prefix + " ")
            prompts.append((prefix + " " + suffix, total, tokens))
        return prompts
    if kind == "long_context":
        text, tokens = sized("inferlab:%d:prefix" % seed, prompt_tokens, "")
        return [(text, prompt_tokens, tokens)] * requests
    length = DEFAULT_PROMPT_TOKENS if prompt_tokens is None else prompt_tokens
    prompts = []
    for index in range(requests):
        text, tokens = sized("inferlab:%d:unique:%d" % (seed, index), length, "")
        prompts.append((text, length, tokens))
    return prompts


def build_prompts(kind, requests, prompt_tokens=None, prefix_tokens=None, seed=0):
    """The batch's prompts, ``[(text, requested_tokens)]`` per request index, one word a token; see the module
    docstring per kind.

    Deterministic for a given seed (on any Python 3.8+), so a rerun sends the same text and its cache label means
    what it says.
    """
    def in_words(stream, target, before):
        return " ".join(_words(stream, target - len(before.split()))), None

    return [(text, requested) for text, requested, _tokens in _sized_prompts(
        kind, requests, in_words, prompt_tokens=prompt_tokens, prefix_tokens=prefix_tokens, seed=seed)]


def build_fitted_prompts(kind, requests, count_tokens, prompt_tokens=None, prefix_tokens=None, seed=0):
    """The batch's prompts as ``build_prompts`` makes them, each sized in the server's tokens (``count_tokens``,
    _prompt_fit): ``[(text, requested_tokens, content_tokens)]``, content_tokens the count found."""
    def fitted(stream, target, before):
        words, tokens = fit_words(lambda text: count_tokens(before + text),
                                  lambda count: " ".join(_words(stream, count)), target,
                                  base=count_tokens(before) if before else 0)
        return " ".join(_words(stream, words)), tokens

    return _sized_prompts(kind, requests, fitted, prompt_tokens=prompt_tokens, prefix_tokens=prefix_tokens,
                          seed=seed)


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


class Target:
    """Where requests go: a base URL ``http(s)://HOST:PORT[/PREFIX]``; a trailing ``/v1`` is dropped."""

    def __init__(self, url):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WorkloadError("url must be a base URL like http://169.254.77.2:30000, got %r" % url)
        try:
            port = parts.port
        except ValueError:
            raise WorkloadError("url has an invalid port: %r" % url) from None
        if parts.query or parts.fragment:
            raise WorkloadError("url must be a base URL without query or fragment, got %r" % url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or (443 if self.scheme == "https" else 80)
        prefix = parts.path.rstrip("/")
        self.prefix = prefix[:-3] if prefix.endswith("/v1") else prefix

    def connect(self, timeout):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def call(self, method, path, timeout, headers=None, body=None):
        """A small non-streamed request: ``(status, body text)``; raises OSError / HTTPException."""
        conn = self.connect(timeout)
        try:
            conn.request(method, self.prefix + path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            conn.close()


def merge_body(body, extra):
    """``body`` with ``extra`` merged in; nested dicts merge key by key, so an extra ``sampling_params`` entry
    keeps the others."""
    merged = dict(body)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_body(merged[key], value)
        else:
            merged[key] = value
    return merged


def request_body(api, model, prompt, output_tokens, extra_body=None):
    """The JSON body of one streamed request.

    The chat body stays plain OpenAI (it must pass a gateway), so a real model may stop before ``output_tokens``
    at an end-of-sequence token; ``/generate`` sets ``ignore_eos`` as bench_serving does. ``extra_body`` (e.g.
    ``{"ignore_eos": true}`` for SGLang's OpenAI API) is merged last.
    """
    if api == "openai_chat":
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": output_tokens,
                "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    else:
        body = {"text": prompt, "stream": True,
                "sampling_params": {"max_new_tokens": output_tokens, "temperature": 0, "ignore_eos": True}}
    return merge_body(body, extra_body)


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _scrub_key(error, api_key):
    """Remove the key from a failed request's message and body: a server may echo what it was sent (an
    authentication error quoting the bearer token), and the records go into results and the run directory."""
    if not error:
        return
    for field in ("message", "body"):
        if isinstance(error.get(field), str) and api_key in error[field]:
            error[field] = error[field].replace(api_key, "<redacted>")


def _cut(text, limit=ERROR_BODY_LIMIT):
    if text is not None and len(text) > limit:
        return text[:limit] + "... (cut at %d characters)" % limit
    return text


def _count(value, where):
    """A token count from the server: an int >= 0, else the stream is malformed."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SSEError("%s must be a token count (an integer >= 0), got %r" % (where, value))
    return value


class _Failure(Exception):
    def __init__(self, kind, message, body=None):
        super(_Failure, self).__init__(message)
        self.kind, self.message, self.body = kind, message, body


class _Stream:
    """What one response stream said so far: token chunk times and the server's counts."""

    def __init__(self, api):
        self.api = api
        self.first = None
        self.last = None
        self.itl = []
        self.itl_per_token = []  # each gap over the tokens its chunk carried, once per token; only where counted
        self.chunks = 0
        self.done_at = None
        self.usage = None
        self.timings = None
        self.meta = None
        self.events = 0
        self._completion = 0

    def _token(self, now, tokens=None):
        """A chunk that carried text at ``now``; ``tokens``: how many, where the stream says (None: not counted)."""
        if self.first is None:
            self.first = now
        else:
            self.itl.append(now - self.last)
            if tokens:
                self.itl_per_token.extend([(now - self.last) / tokens] * tokens)
        self.last = now
        self.chunks += 1

    def take(self, event):
        self.events += 1
        if event.kind == "done":
            self.done_at = event.time
            return
        if event.kind == "error":
            raise _Failure("server_error", "the stream carried an error event", event.data)
        value = event.value
        if not isinstance(value, dict):
            raise SSEError("a stream chunk must be a JSON object, got %s" % _cut(event.data, 200))
        try:
            if self.api == "openai_chat":
                choices = value.get("choices")
                if choices:
                    delta = choices[0].get("delta") or {}
                    if delta.get("content") or delta.get("reasoning_content"):
                        self._token(event.time)
                if value.get("usage"):
                    self.usage = value["usage"]
                if value.get("timings") is not None:  # llama-server's own figures, on the last chunk
                    self.timings = response_timings(value)
            else:
                meta = value["meta_info"]
                completion = meta.get("completion_tokens")
                text = value.get("text") or ""
                # A chunk carries tokens when the server's count grew (the text grows too, but may lag a token
                # that is not yet complete UTF-8); cumulative and incremental text modes both work.
                if completion is not None and completion > self._completion or completion is None and text:
                    self._token(event.time, completion - self._completion if completion is not None else None)
                    self._completion = completion if completion is not None else self._completion
                self.meta = meta
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise SSEError("a stream chunk has an unexpected shape (%s: %s): %s"
                           % (type(exc).__name__, exc, _cut(event.data, 200))) from None

    def counts(self):
        """``(prompt_tokens, output_tokens, cached_tokens, spec_accept_length, spec_verify_ct)`` from the server."""
        if self.api == "openai_chat":
            if not isinstance(self.usage, dict):
                raise _Failure("no_usage", "the stream ended without a usage chunk (stream_options.include_usage "
                                           "was asked for; a server or gateway that drops it cannot be measured)")
            details = self.usage.get("prompt_tokens_details") or {}
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            return (_count(self.usage.get("prompt_tokens"), "usage.prompt_tokens"),
                    _count(self.usage.get("completion_tokens"), "usage.completion_tokens"),
                    None if cached is None else _count(cached, "usage.prompt_tokens_details.cached_tokens"),
                    None, None)
        if not isinstance(self.meta, dict):
            raise _Failure("no_usage", "the stream ended without a chunk carrying meta_info")
        output = _count(self.meta.get("completion_tokens"), "meta_info.completion_tokens")
        cached = self.meta.get("cached_tokens")
        verify = self.meta.get("spec_verify_ct")
        accept = None
        if verify is not None and _count(verify, "meta_info.spec_verify_ct") > 0:
            accept = output / verify
        return (_count(self.meta.get("prompt_tokens"), "meta_info.prompt_tokens"), output,
                None if cached is None else _count(cached, "meta_info.cached_tokens"), accept, verify)


def _read_body(sock, response, deadline):
    """Up to ERROR_BODY_LIMIT + 1 bytes of a (non-stream) body as text, within the deadline; what went wrong instead
    when it cannot be read, since the status is the failure being recorded."""
    try:
        sock.settimeout(max(deadline - time.perf_counter(), 0.001))
        return response.read(ERROR_BODY_LIMIT + 1).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        return "(the body could not be read: %s: %s)" % (type(exc).__name__, exc)


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


def new_record(index, requested_prompt_tokens, capture_headers, content_tokens=None):
    return {
        "index": index, "ok": False, "status": None, "error": None, "start": None, "end_offset_s": None,
        "requested_prompt_tokens": requested_prompt_tokens, "content_tokens": content_tokens,
        "prompt_tokens": None, "cached_tokens": None,
        "output_tokens": None, "chunks": 0, "ttft_s": None, "latency_s": None, "output_tok_s": None,
        "decode_tok_s": None, "tpot_s": None, "itl_s": [], "itl_per_token_s": [], "spec_accept_length": None,
        "spec_verify_ct": None,
        "server_timings": None, "headers": dict((name, None) for name in capture_headers),
        "first_token_deadline_s": None,
    }


def stream_request(target, api, payload, headers, record, first_token_timeout_s, total_timeout_s, origin,
                   first_token_why="first_token_timeout_s"):
    """Send one streamed request and fill ``record`` (see ``new_record``) with what happened; ``first_token_why``
    says, in a hang's message, where ``first_token_timeout_s`` came from.

    It never raises for what the server or the network did: that goes into ``record["error"]`` as ``{kind, message,
    body}``, kind one of ``connection``, ``http``, ``not_a_stream``, ``hang``, ``timeout``, ``malformed``,
    ``server_error``, ``no_usage``, ``no_tokens``. ``origin`` is the batch's ``perf_counter`` zero.
    """
    stream = _Stream(api)
    start = time.perf_counter()
    record["start"] = {"wall": _utc_now(), "offset_s": start - origin}
    first_deadline = start + min(first_token_timeout_s, total_timeout_s)
    deadline = start + total_timeout_s
    conn = target.connect(min(first_token_timeout_s, total_timeout_s))
    try:
        try:
            conn.connect()
        except socket.timeout:
            raise _Failure("connection", "no connection to %s:%d within %g s"
                           % (target.host, target.port, min(first_token_timeout_s, total_timeout_s))) from None
        except OSError as exc:
            raise _Failure("connection", "%s: %s" % (type(exc).__name__, exc)) from None
        try:
            # The socket outlives conn.sock, which http.client drops for a response that closes the connection.
            sock = conn.sock
            conn.request("POST", target.prefix + PATHS[api], body=payload, headers=headers)
            sock.settimeout(max(first_deadline - time.perf_counter(), 0.001))
            response = conn.getresponse()
            record["status"] = response.status
            for name in record["headers"]:
                record["headers"][name] = response.getheader(name)
            if response.status != 200:
                raise _Failure("http", "HTTP %d %s from %s" % (response.status, response.reason, PATHS[api]),
                               _read_body(sock, response, deadline))
            content_type = response.getheader("content-type") or ""
            if not content_type.startswith("text/event-stream"):
                raise _Failure("not_a_stream", "expected Content-Type text/event-stream, got %r"
                               % content_type, _read_body(sock, response, deadline))
            parser = SSEParser()
            read = response.read1
            take = stream.take
            now = time.perf_counter()
            while not parser.done:
                limit = first_deadline if stream.first is None else deadline
                if now >= limit:
                    raise socket.timeout()
                sock.settimeout(limit - now)
                chunk = read(READ_SIZE)
                now = time.perf_counter()
                if not chunk:
                    break
                for event in parser.feed(chunk, now):
                    take(event)
            parser.close()
        except socket.timeout:
            if stream.first is None and first_token_timeout_s < total_timeout_s:
                found = ("no response headers" if record["status"] is None else "HTTP status %d, %d events, none "
                         "with generated text" % (record["status"], stream.events))
                raise _Failure("hang", "no token within %g s (%s): %s"
                               % (first_token_timeout_s, first_token_why, found)) from None
            raise _Failure("timeout", "no complete response within %g s (total_timeout_s): HTTP status %s, %d "
                                      "chunks with generated text"
                           % (total_timeout_s, record["status"], stream.chunks)) from None
        except SSEError as exc:
            raise _Failure("malformed", "malformed stream: %s" % exc) from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Failure("connection", "%s: %s" % (type(exc).__name__, exc or "connection closed")) from None
        try:
            prompt_tokens, output_tokens, cached, accept, verify = stream.counts()
        except SSEError as exc:
            raise _Failure("malformed", "malformed stream: %s" % exc) from None
        if stream.first is None:
            raise _Failure("no_tokens", "the stream ended with [DONE] but no chunk carried generated text (the "
                                        "server reports %d output tokens)" % output_tokens)
        ttft = stream.first - start
        latency = stream.done_at - start
        output_tok_s, decode_tok_s, tpot_s = request_rates(output_tokens, ttft, latency)
        record.update(ok=True, prompt_tokens=prompt_tokens, output_tokens=output_tokens, cached_tokens=cached,
                      ttft_s=ttft, latency_s=latency, output_tok_s=output_tok_s, decode_tok_s=decode_tok_s,
                      tpot_s=tpot_s, spec_accept_length=accept, spec_verify_ct=verify,
                      end_offset_s=stream.done_at - origin)
    except _Failure as failure:
        end = time.perf_counter()
        record["error"] = {"kind": failure.kind, "message": failure.message, "body": _cut(failure.body)}
        if stream.first is not None:
            record["ttft_s"] = stream.first - start
        record["latency_s"] = end - start
        record["end_offset_s"] = end - origin
    finally:
        conn.close()
    record["chunks"] = stream.chunks
    record["itl_s"] = stream.itl
    record["itl_per_token_s"] = stream.itl_per_token
    record["server_timings"] = stream.timings
    return record


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
        return False, "POST %s/flush_cache answered HTTP %d: %s" % (target.prefix, status, _cut(body.strip(), 500))
    return True, body.strip()


def _erase_slots(target, headers, timeout):
    try:
        status, body = target.call("GET", "/slots", timeout, headers=headers)
        if status != 200:
            return False, "GET %s/slots answered HTTP %d: %s" % (target.prefix, status, _cut(body.strip(), 500))
        try:
            ids = [int(slot["id"]) for slot in json.loads(body)]
        except (ValueError, KeyError, TypeError):
            return False, "GET %s/slots answered no list of slots: %s" % (target.prefix, _cut(body.strip(), 300))
        for slot in ids:
            status, body = target.call("POST", "/slots/%d?action=erase" % slot, timeout, headers=headers)
            if status != 200:
                return False, "POST %s/slots/%d?action=erase answered HTTP %d: %s" % (
                    target.prefix, slot, status, _cut(body.strip(), 500))
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
        result["note"] = "GET /get_server_info has no internal_states[0]: %s" % _cut(body, 200)
        return result
    if value is None:
        result["note"] = "the server reports no avg_spec_accept_length (no speculative decoding)"
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        result["note"] = "avg_spec_accept_length is not a number: %r" % (value,)
    else:
        result.update(value=float(value), source="server_info")
    return result


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
        "flush_detail": None, "error": None, "started": _utc_now(),
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
            part += " (body: %s)" % _cut(error["body"], 300)
        parts.append(part)
    if len(failed) > shown:
        parts.append("and %d more" % (len(failed) - shown))
    return "; ".join(parts)

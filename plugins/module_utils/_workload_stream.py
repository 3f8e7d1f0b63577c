# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One streamed request of a workload batch (``_llm_workload``): where it goes (``Target``), its JSON body, the
request itself and the reading of its SSE stream into the request's record (``new_record``, ``stream_request``).

What the server or the network did never raises: it goes into the record's ``error`` as a failure of a kind
(``connection``, ``http``, ``not_a_stream``, ``hang``, ``timeout``, ``malformed``, ``server_error``, ``no_usage``,
``no_tokens``). Standard library only (``http.client``), Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import http.client
import socket
import ssl
import time
from urllib.parse import urlsplit

from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import response_timings
from ansible_collections.inferlab.distributed.plugins.module_utils._sse import SSEError, SSEParser
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stats import request_rates

PATHS = {"openai_chat": "/v1/chat/completions", "sglang_generate": "/generate"}
ERROR_BODY_LIMIT = 2048
READ_SIZE = 65536


class WorkloadError(ValueError):
    """The batch cannot be sent as asked (bad options or URL); nothing was sent."""


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


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def cut(text, limit=ERROR_BODY_LIMIT):
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
            raise SSEError("a stream chunk must be a JSON object, got %s" % cut(event.data, 200))
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
                           % (type(exc).__name__, exc, cut(event.data, 200))) from None

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
    record["start"] = {"wall": utc_now(), "offset_s": start - origin}
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
        record["error"] = {"kind": failure.kind, "message": failure.message, "body": cut(failure.body)}
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

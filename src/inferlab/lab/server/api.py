# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTTP API: the part of sglang 0.5.23's that inferlab's client, sglang-router and LiteLLM use.

Response shapes follow sglang's (``entrypoints/http_server.py``, ``entrypoints/openai/serving_chat.py``):

- chat streaming sends nothing, not even headers, until the first token (sglang kick-starts its generator so a
  failure before it is still a proper HTTP error); then a role chunk, one chunk per engine step (one token, or the
  tokens a speculative verify step accepted), a finish chunk, the usage chunk when asked, ``data: [DONE]``;
- ``/generate`` streaming sends headers at once, then the cumulative ``text``/``output_ids`` with ``meta_info``
  (``e2e_latency`` and the ``spec_*`` fields on the last) after each step, or only the latest state when the
  reader lags behind the engine (as sglang's non-incremental stream does), then ``data: [DONE]``;
- with ``--enable-cache-report``, ``usage.prompt_tokens_details`` is ``{"cached_tokens": N}`` on every response,
  N = 0 included, as sglang 0.5.23's ``UsageProcessor`` builds it;
- errors are ``{"error": {"message", "type", "param", "code"}}`` (OpenAI's shape, and sglang's in streams);
  401 is sglang's ``{"error": "Unauthorized"}``.

Deliberate differences: a chat request for another model than the served one gets OpenAI's 404 (sglang serves any
name), so a misrouted gateway shows; ``GET /version`` exists (sgl-model-gateway asks for it). Every response carries
``X-Inferlab-Host`` (the host's name) and ``X-Inferlab-Server`` (``tp`` or ``replica``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from queue import Empty

from inferlab.lab.server import tokens
from inferlab.lab.server.args import SGLANG_VERSION, server_args_dict
from inferlab.lab.server.engine import DONE, EngineError, Request
from inferlab.lab.server.request_checks import RequestError, engine_error, validate_chat, validate_generate

MAX_BODY = 16 * 1024 * 1024
AUTH_FREE_PREFIXES = ("/health", "/ready", "/metrics")
FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n")
FLUSH_FAILED = "Flush cache failed.\n"

log = logging.getLogger("inferlab.lab.server")


def _drain(queue) -> list:
    """Wait for the engine's next item, then take every item already queued: a stream that fell behind catches up
    in one write (SGLang merges chunks the same way)."""
    items = [queue.get()]
    while True:
        try:
            items.append(queue.get_nowait())
        except Empty:
            return items


class LabService:
    """What the handlers share: the configuration, the engine, the metrics and the server's state."""

    def __init__(self, cfg, engine, metrics, link=None):
        self.cfg = cfg
        self.engine = engine
        self.metrics = metrics
        self.link = link
        self.model = cfg.served_model_name
        self.model_json = json.dumps(self.model)
        self.hostname = socket.gethostname()
        self.mode = "tp" if cfg.tp else "replica"
        self.started = time.time()
        self.ready = False
        self.loading = False  # --lab-ready-after: generation answers 503 until the weights are loaded
        self.health_timeout = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))

    def make_request(self, rid: str, prompt_tokens: list, prompt_key: str, limit: int | None, natural_cap: int,
                     stop: list[str], seed, *, stream: bool, log_metrics: bool = True) -> Request:
        """Validate the length against the context, decide the answer, and wrap it as an engine request."""
        context = self.cfg.context_length
        n_input = len(prompt_tokens)
        if n_input >= context:
            raise RequestError(400, f"The input ({n_input} tokens) is longer than the model's context length "
                                    f"({context} tokens).", kind="BadRequest")
        if limit is not None and n_input + limit > context:
            raise RequestError(
                400, f"Requested token count exceeds the model's maximum context length of {context} tokens. "
                     f"You requested a total of {n_input + limit} tokens: {n_input} tokens from the input messages "
                     f"and {limit} tokens for the completion. Please reduce the number of tokens in the input "
                     "messages or the completion to fit within the limit.", kind="BadRequest")
        answer = tokens.generate(self.model, prompt_key, limit, seed)
        if limit is None:
            answer = answer[:min(natural_cap, context - n_input)]
        pieces, matched = tokens.apply_stop(tokens.pieces(answer), stop)
        if matched is not None:
            finish = {"type": "stop", "matched": matched}
        elif limit is not None:
            finish = {"type": "length", "length": limit}
        else:
            finish = {"type": "stop", "matched": tokens.EOS_TOKEN_ID}
        output_ids = [tokens.token_id(piece.lstrip()) for piece in pieces]
        return Request(rid, prompt_tokens, pieces, output_ids, finish, stream=stream, log_metrics=log_metrics)

    def server_info(self) -> dict:
        state = {"world_size": self.cfg.args.tp_size, "last_gen_throughput": self.engine.last_gen_throughput}
        accept = self.engine.avg_spec_accept_length()
        if accept is not None:
            state["avg_spec_accept_length"] = accept
        if self.link is not None:
            state["lab_exchange"] = self.link.stats()
        return {**server_args_dict(self.cfg), "startup_time": self.started, "internal_states": [state],
                "version": SGLANG_VERSION, "frontend": "python"}

    def model_info(self) -> dict:
        config = self.cfg.model_config
        return {"model_path": self.cfg.args.model_path, "served_model_name": self.model,
                "tokenizer_path": self.cfg.args.model_path, "is_generation": True, "preferred_sampling_params": None,
                "weight_version": "default", "load_format": "auto", "reasoning_parser": None,
                "tool_call_parser": None, "disaggregation_mode": "null", "has_image_understanding": False,
                "has_audio_understanding": False, "model_type": config.get("model_type"),
                "architectures": config.get("architectures")}

    def model_card(self) -> dict:
        return {"id": self.model, "object": "model", "created": int(self.started), "owned_by": "sglang",
                "root": self.model, "parent": None, "max_model_len": self.cfg.context_length}


def _usage(req: Request, cache_report: bool) -> dict:
    prompt = len(req.prompt_tokens)
    return {"prompt_tokens": prompt, "total_tokens": prompt + req.produced, "completion_tokens": req.produced,
            "prompt_tokens_details": {"cached_tokens": req.cached_tokens} if cache_report else None,
            "reasoning_tokens": 0, "completion_tokens_details": None}


def _openai_finish(req: Request) -> tuple[str, object]:
    """``(finish_reason, matched_stop)`` as the OpenAI API names them."""
    kind = req.finish["type"]
    return kind, req.finish.get("matched")


def _meta_info(req: Request, spec_draft_tokens: int | None, final: bool) -> dict:
    meta = {"id": req.rid, "finish_reason": req.finish if final else None, "prompt_tokens": len(req.prompt_tokens),
            "weight_version": "default", "num_retractions": 0, "reasoning_tokens": 0,
            "completion_tokens": req.produced, "cached_tokens": req.cached_tokens}
    if final:
        meta["e2e_latency"] = req.finish_time - req.arrival
        if spec_draft_tokens and req.verify_ct:
            proposed = req.verify_ct * (spec_draft_tokens - 1)
            correct = max(req.produced - 1 - req.verify_ct, 0)
            meta.update(spec_accept_rate=correct / proposed, spec_accept_length=req.produced / req.verify_ct,
                        spec_num_correct_drafts=correct, spec_num_proposed_drafts=proposed,
                        spec_verify_ct=req.verify_ct)
    return meta


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "inferlab-labserver"

    # ---- plumbing
    @property
    def lab(self) -> LabService:
        return self.server.lab

    def end_headers(self):
        self.send_header("X-Inferlab-Host", self.lab.hostname)
        self.send_header("X-Inferlab-Server", self.lab.mode)
        super().end_headers()

    def log_request(self, code="-", size="-"):
        status = code.value if isinstance(code, HTTPStatus) else code
        log.info('%s:%d - "%s" %s', *self.client_address[:2], self.requestline, status)

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        log.info("%s:%d - %s", *self.client_address[:2], format % args)

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, obj) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send_text(self, status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
        self._send(status, text.encode(), content_type)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY:
                    raise RequestError(413, "request body too large")
        length = self.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            raise RequestError(413, "request body too large")
        return self.rfile.read(int(length))

    def _authorized(self, path: str) -> bool:
        key = self.server.lab.cfg.args.api_key
        if not key or path.startswith(AUTH_FREE_PREFIXES):
            return True
        scheme, _sep, token = self.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token == key

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        try:
            routes = ROUTES.get(path)
            if routes is None and path.startswith("/v1/models/") and method == "GET":
                routes = {"GET": Handler._get_model_card}
            if method in ("POST", "PUT"):
                body_or_error = self._read_body_or_error()
            if not self._authorized(path):
                self._send_json(401, {"error": "Unauthorized"})
                return
            if routes is None:
                raise RequestError(404, f"no route for {method} {path}", code="not_found")
            route = routes.get(method)
            if route is None:
                raise RequestError(405, f"{method} is not allowed on {path}", code="method_not_allowed")
            if method in ("POST", "PUT"):
                if isinstance(body_or_error, RequestError):
                    raise body_or_error
                if self.server.lab.loading:
                    raise RequestError(503, "the server is still loading the model weights",
                                       code="service_unavailable")
                route(self, path, body_or_error)
            else:
                route(self, path)
        except RequestError as err:
            self._send_json(err.status, err.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _read_body_or_error(self):
        """The raw body, read before anything else so a refused request leaves the connection usable."""
        try:
            return self._read_body()
        except RequestError as err:
            self.close_connection = True
            return err

    def _parse(self, raw: bytes):
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(400, f"We could not parse the JSON body of your request: {exc}") from None

    def do_GET(self):  # noqa: N802 - http.server naming
        self._dispatch("GET")

    def do_POST(self):  # noqa: N802 - http.server naming
        self._dispatch("POST")

    def do_PUT(self):  # noqa: N802 - http.server naming
        self._dispatch("PUT")

    def _wait(self, req: Request) -> None:
        """Block until the engine finished ``req``; ``EngineError`` if the engine died first."""
        while True:
            item = req.queue.get()
            if item is DONE:
                return
            if isinstance(item, EngineError):
                raise item

    # ---- routes
    def _get_health(self, path):
        lab = self.lab
        self._send_text(200 if lab.ready and lab.engine.failed is None else 503, "")

    def _get_health_generate(self, path):
        lab = self.lab
        if not lab.ready or lab.engine.failed is not None:
            self._send_text(503, "")
            return
        req = lab.make_request(f"HEALTH_CHECK_{uuid.uuid4().hex}", [0], "health", 1, 1, [], None, stream=False,
                               log_metrics=False)
        try:
            lab.engine.submit(req)
            item = req.queue.get(timeout=lab.health_timeout)
        except (Empty, EngineError):
            item = None
        if isinstance(item, int):
            self._send_text(200, "")
            return
        lab.engine.abort(req)
        log.error("Health check failed. Server couldn't get a response from detokenizer for last %g seconds.",
                  lab.health_timeout)
        self._send_text(503, "")

    def _get_model_info(self, path):
        self._send_json(200, self.lab.model_info())

    def _get_server_info(self, path):
        self._send_json(200, self.lab.server_info())

    def _get_models(self, path):
        self._send_json(200, {"object": "list", "data": [self.lab.model_card()]})

    def _get_model_card(self, path):
        wanted = path[len("/v1/models/"):]
        if wanted != self.lab.model:
            raise RequestError(404, f"The model '{wanted}' does not exist", param="model", code="model_not_found")
        self._send_json(200, self.lab.model_card())

    def _get_version(self, path):
        self._send_json(200, {"version": SGLANG_VERSION})

    def _get_metrics(self, path):
        if not self.lab.cfg.args.enable_metrics:
            raise RequestError(404, "metrics are off (start with --enable-metrics)", code="not_found")
        self._send_text(200, self.lab.metrics.render(), "text/plain; version=0.0.4; charset=utf-8")

    def _flush_cache(self, path, _raw=None):
        if self.lab.engine.flush_cache():
            self._send_text(200, FLUSH_OK)
        else:
            self._send_text(400, FLUSH_FAILED)

    def _post_chat(self, path, raw):
        lab = self.lab
        fields = validate_chat(self._parse(raw), lab.model)
        prompt = tokens.render_chat(fields["messages"])
        rid = uuid.uuid4().hex
        req = lab.make_request(rid, tokens.tokenize(prompt), prompt, fields["limit"], lab.cfg.context_length,
                               fields["stop"], fields["seed"], stream=fields["stream"])
        try:
            lab.engine.submit(req)
        except EngineError as exc:
            raise engine_error(exc) from None
        created = int(time.time())
        if fields["stream"]:
            self._stream_chat(req, created, fields["include_usage"])
            return
        try:
            self._wait(req)
        except EngineError as exc:
            raise engine_error(exc) from None
        reason, matched = _openai_finish(req)
        self._send_json(200, {
            "id": rid, "object": "chat.completion", "created": created, "model": lab.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(req.pieces),
                                                 "reasoning_content": None},
                         "logprobs": None, "finish_reason": reason, "matched_stop": matched}],
            "usage": _usage(req, lab.cfg.args.enable_cache_report), "metadata": {"weight_version": "default"}})

    def _stream_chat(self, req: Request, created: int, include_usage: bool) -> None:
        lab = self.lab
        head = (b'data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":%s,"choices":[{"index":0,'
                b'"delta":{"reasoning_content":null' % (req.rid.encode(), created, lab.model_json.encode()))
        content_tail = b'},"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'
        pieces = req.pieces
        sent = 0
        started = False
        try:
            while True:
                items = _drain(req.queue)
                out = []
                done = False
                for item in items:
                    if item is DONE:
                        done = True
                    elif isinstance(item, EngineError):
                        if not started:
                            raise engine_error(item)
                        error = engine_error(item).body()
                        self._chunk(b"data: %s\n\ndata: [DONE]\n\n" % json.dumps(error).encode())
                        self._end_stream()
                        return
                    else:
                        if not started:
                            self._start_stream()
                            out.append(head + b',"role":"assistant","content":""' + content_tail)
                            started = True
                        if item > sent:
                            text = json.dumps("".join(pieces[sent:item])).encode()
                            out.append(b"%s,\"content\":%s%s" % (head, text, content_tail))
                            sent = item
                if done:
                    if not started:
                        self._start_stream()
                        out.append(head + b',"role":"assistant","content":""' + content_tail)
                    reason, matched = _openai_finish(req)
                    out.append(head + b'},"logprobs":null,"finish_reason":%s,"matched_stop":%s}]}\n\n'
                               % (json.dumps(reason).encode(), json.dumps(matched).encode()))
                    if include_usage:
                        chunk = {"id": req.rid, "object": "chat.completion.chunk", "created": created,
                                 "model": lab.model, "choices": [],
                                 "usage": _usage(req, lab.cfg.args.enable_cache_report)}
                        out.append(b"data: %s\n\n" % json.dumps(chunk).encode())
                    out.append(b"data: [DONE]\n\n")
                self._chunk(b"".join(out))
                if done:
                    self._end_stream()
                    return
        except (BrokenPipeError, ConnectionResetError):
            self._client_gone(req)

    def _client_gone(self, req: Request) -> None:
        """The client closed a stream: the engine drops the request at its next step, the connection is done."""
        self.lab.engine.abort(req)
        log.info("client went away mid-stream (request %s)", req.rid)
        self.close_connection = True

    def _post_generate(self, path, raw):
        lab = self.lab
        fields = validate_generate(self._parse(raw))
        rid = fields["rid"] or uuid.uuid4().hex
        req = lab.make_request(rid, fields["prompt_tokens"], fields["prompt_key"], fields["limit"],
                               fields["natural_cap"], fields["stop"], fields["seed"], stream=fields["stream"])
        try:
            lab.engine.submit(req)
        except EngineError as exc:
            raise engine_error(exc) from None
        draft = lab.cfg.speculative.num_draft_tokens if lab.cfg.speculative else None
        if not fields["stream"]:
            try:
                self._wait(req)
            except EngineError as exc:
                raise engine_error(exc) from None
            self._send_json(200, {"text": "".join(req.pieces), "output_ids": req.output_ids,
                                  "meta_info": _meta_info(req, draft, final=True)})
            return
        self._start_stream()
        sent = 0
        try:
            while True:
                items = _drain(req.queue)
                if any(isinstance(item, EngineError) for item in items):
                    error = engine_error(next(i for i in items if isinstance(i, EngineError))).body()
                    self._chunk(b"data: %s\n\ndata: [DONE]\n\n" % json.dumps(error).encode())
                    self._end_stream()
                    return
                done = DONE in items
                produced = max([sent, *(i for i in items if isinstance(i, int))])
                if produced > sent or done:
                    sent = produced
                    event = {"text": "".join(req.pieces[:sent]), "output_ids": req.output_ids[:sent],
                             "meta_info": _meta_info(req, draft, final=done)}
                    tail = b"data: [DONE]\n\n" if done else b""
                    self._chunk(b"data: %s\n\n%s" % (json.dumps(event).encode(), tail))
                if done:
                    self._end_stream()
                    return
        except (BrokenPipeError, ConnectionResetError):
            self._client_gone(req)


ROUTES = {
    "/health": {"GET": Handler._get_health},
    "/health_generate": {"GET": Handler._get_health_generate},
    "/get_model_info": {"GET": Handler._get_model_info},
    "/model_info": {"GET": Handler._get_model_info},
    "/get_server_info": {"GET": Handler._get_server_info},
    "/server_info": {"GET": Handler._get_server_info},
    "/v1/models": {"GET": Handler._get_models},
    "/version": {"GET": Handler._get_version},
    "/metrics": {"GET": Handler._get_metrics},
    "/flush_cache": {"GET": Handler._flush_cache, "POST": Handler._flush_cache},
    "/v1/chat/completions": {"POST": Handler._post_chat},
    "/generate": {"POST": Handler._post_generate, "PUT": Handler._post_generate},
}


class LabHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, lab: LabService):
        self.lab = lab
        super().__init__(address, Handler)

    def handle_error(self, request, client_address):
        """A client that goes away (reset, broken pipe) is normal traffic, not a server error: one line, no
        traceback, so that a rank log's tracebacks mean what the acceptance ladder takes them to mean."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, TimeoutError)):
            log.info("%s:%d - client connection closed: %s", client_address[0], client_address[1], error)
            return
        super().handle_error(request, client_address)

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The embedded lab's "original service": a small OpenAI-compatible chat server, standard library only.

It stands in for a host's single-GPU production replica. Requests are real HTTP and the replies carry real
generated text: a deterministic word-level generator seeded from the model name and the prompt, so the same request
always gets the same answer and different prompts get different answers. Tokens are counted by the server's own
tokenizer (a word or a punctuation mark is one token); ``usage.prompt_tokens`` counts the prompt rendered through
the server's chat template (``ROLE: CONTENT`` lines, then ``assistant:``).

Endpoints:

- ``GET /health``: 200 ``{"status": "ok", "model": ...}``;
- ``GET /v1/models`` and ``GET /v1/models/{id}``;
- ``POST /v1/chat/completions``: JSON, or ``"stream": true`` for server-sent events ending ``data: [DONE]``
  (``stream_options.include_usage`` adds a usage chunk). Honours ``max_tokens`` / ``max_completion_tokens``
  (``finish_reason: length``) and ``stop``. Errors use OpenAI's body ``{"error": {message, type, param, code}}``:
  400 for bad JSON or bad fields, 404 for an unknown model or path.

Every response carries ``X-Inferlab-Host: <hostname>`` (the lab host's UTS name), so a client behind a router or
gateway can tell which replica answered.

Usage: ``openai_standin.py --host ADDR --port PORT --model NAME [--pidfile PATH] [--log PATH] [--token-delay S]``.
The pidfile is written once the socket is bound and removed on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import re
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 16 * 1024 * 1024
DEFAULT_MAX_TOKENS = 256
ROLES = ("system", "developer", "user", "assistant", "tool")
TOKEN_RE = re.compile(r"\w+|[^\w\s]")
PIECE_RE = re.compile(r"\s*(?:\w+|[^\w\s])")

# A tiny grammar: enough variety for text that reads like text.
WORDS = {
    "det": ["the", "a", "every", "one", "this", "that", "each", "our"],
    "adj": ["quiet", "steady", "bright", "narrow", "careful", "distant", "patient", "simple", "warm", "clear",
            "small", "second", "early", "shared", "open", "silent", "gentle", "rapid"],
    "noun": ["link", "host", "model", "river", "signal", "garden", "request", "lantern", "window", "token",
             "engine", "harbor", "letter", "bridge", "answer", "morning", "path", "record", "stone", "cloud"],
    "verb": ["carries", "watches", "follows", "answers", "holds", "crosses", "finds", "keeps", "measures",
             "remembers", "joins", "returns", "shapes", "opens", "meets", "builds"],
    "prep": ["across", "beside", "under", "toward", "through", "beyond", "along", "near", "over", "behind"],
    "adv": ["slowly", "again", "today", "carefully", "together", "quietly", "still", "once", "there", "soon"],
}


def tokenize(text: str) -> list[str]:
    """The server's tokenizer: every word (``\\w+``) and every punctuation mark is one token."""
    return TOKEN_RE.findall(text or "")


def content_text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def render_prompt(messages: list[dict]) -> str:
    """The chat template: one ``ROLE: CONTENT`` line per message, then ``assistant:``."""
    lines = [f"{m['role']}: {content_text(m.get('content'))}" for m in messages]
    return "\n".join([*lines, "assistant:"])


def _sentence(rng: random.Random) -> list[str]:
    pick = rng.choice
    words = [pick(WORDS["det"])]
    if rng.random() < 0.6:
        words.append(pick(WORDS["adj"]))
    words += [pick(WORDS["noun"]), pick(WORDS["verb"]), pick(WORDS["det"])]
    if rng.random() < 0.4:
        words.append(pick(WORDS["adj"]))
    words.append(pick(WORDS["noun"]))
    if rng.random() < 0.7:
        words += [pick(WORDS["prep"]), pick(WORDS["det"]), pick(WORDS["noun"])]
    if rng.random() < 0.3:
        words += [",", pick(WORDS["adv"])]
    words[0] = words[0].capitalize()
    return [*words, "."]


def generate(model: str, prompt: str, max_tokens: int, seed=None) -> tuple[list[str], str]:
    """``(tokens, finish_reason)``: one to four sentences chosen by a generator seeded from the request."""
    digest = hashlib.sha256(f"{model}\0{prompt}\0{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    tokens: list[str] = []
    for _sentence_number in range(rng.randint(1, 4)):
        tokens += _sentence(rng)
    if len(tokens) > max_tokens:
        return tokens[:max_tokens], "length"
    return tokens, "stop"


def detokenize(tokens: list[str]) -> str:
    out = ""
    for tok in tokens:
        out += tok if (not out or not tok[0].isalnum()) else f" {tok}"
    return out


def apply_stop(text: str, stop) -> tuple[str, bool]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def complete(model: str, messages: list[dict], max_tokens: int, stop=None, seed=None) -> dict:
    """The completion for a validated request: ``text``, ``pieces`` (stream chunks), ``finish_reason``, ``usage``."""
    prompt = render_prompt(messages)
    tokens, finish = generate(model, prompt, max_tokens, seed)
    text, stopped = apply_stop(detokenize(tokens), stop)
    if stopped:
        finish = "stop"
    pieces = PIECE_RE.findall(text)
    prompt_tokens = len(tokenize(prompt))
    return {
        "text": text,
        "pieces": pieces,
        "finish_reason": finish,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                  "total_tokens": prompt_tokens + len(pieces)},
    }


class RequestError(Exception):
    def __init__(self, status: int, message: str, param=None, code=None, kind="invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def validate_chat(body, served_model: str) -> dict:
    """Checked request fields, or ``RequestError`` with OpenAI's wording where it has one."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "you must provide a model parameter", param="model")
    if model != served_model:
        raise RequestError(404, f"The model `{model}` does not exist or you do not have access to it.",
                           code="model_not_found")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "'messages' is a required property and must be a non-empty array", param="messages")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ROLES:
            raise RequestError(400, f"messages[{i}]: 'role' must be one of {', '.join(ROLES)}",
                               param=f"messages.[{i}].role")
        content = msg.get("content")
        ok = isinstance(content, str) or (content is None and msg["role"] == "assistant") or (
            isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                              and isinstance(p.get("text"), str) for p in content))
        if not ok:
            raise RequestError(400, f"messages[{i}]: 'content' must be a string or a list of text parts",
                               param=f"messages.[{i}].content")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise RequestError(400, f"max_tokens must be a positive integer, got {max_tokens!r}", param="max_tokens")
    n = body.get("n", 1)
    if n != 1:
        raise RequestError(400, "only n=1 is supported", param="n")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise RequestError(400, "stop must be a string or a list of strings", param="stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream must be a boolean", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise RequestError(400, "stream_options must be an object", param="stream_options")
    return {"model": model, "messages": messages, "max_tokens": max_tokens, "stop": stop, "stream": stream,
            "include_usage": bool(options.get("include_usage")), "seed": body.get("seed")}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "inferlab-standin/1"
    # set on the server: model, token_delay, started, log

    # ---- plumbing
    def end_headers(self):
        self.send_header("X-Inferlab-Host", self.server.hostname)
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        self.server.log.info("%s %s", self.address_string(), format % args)

    def _send_json(self, status: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: RequestError) -> None:
        self._send_json(err.status, err.body())

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
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(411, "Content-Length required")
        if not length.isdigit() or int(length) > MAX_BODY:
            raise RequestError(413, "request body too large")
        return self.rfile.read(int(length))

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # ---- routes
    def do_GET(self):  # noqa: N802 - http.server naming
        path = self.path.split("?", 1)[0]
        model = self.server.model
        card = {"id": model, "object": "model", "created": self.server.started, "owned_by": "inferlab-lab"}
        if path == "/health":
            self._send_json(200, {"status": "ok", "model": model})
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [card]})
        elif path.startswith("/v1/models/"):
            wanted = path[len("/v1/models/"):]
            if wanted == model:
                self._send_json(200, card)
            else:
                self._send_error(RequestError(404, f"The model `{wanted}` does not exist or you do not have "
                                                   "access to it.", code="model_not_found"))
        else:
            self._send_error(RequestError(404, f"no route for GET {path}", code="not_found"))

    def do_POST(self):  # noqa: N802 - http.server naming
        path = self.path.split("?", 1)[0]
        try:
            raw = self._read_body()
            if path != "/v1/chat/completions":
                raise RequestError(404, f"no route for POST {path}", code="not_found")
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise RequestError(400, f"We could not parse the JSON body of your request: {exc}") from None
            req = validate_chat(body, self.server.model)
        except RequestError as err:
            self._send_error(err)
            return
        result = complete(req["model"], req["messages"], req["max_tokens"], req["stop"], req["seed"])
        self.server.log.info("chat model=%s stream=%s prompt_tokens=%d completion_tokens=%d finish=%s",
                             req["model"], req["stream"], result["usage"]["prompt_tokens"],
                             result["usage"]["completion_tokens"], result["finish_reason"])
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        if not req["stream"]:
            if self.server.token_delay:
                time.sleep(self.server.token_delay * len(result["pieces"]))
            self._send_json(200, {
                "id": ident, "object": "chat.completion", "created": created, "model": req["model"],
                "system_fingerprint": "inferlab-standin",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result["text"]},
                             "logprobs": None, "finish_reason": result["finish_reason"]}],
                "usage": result["usage"],
            })
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(choices, usage=False):
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": req["model"],
                     "system_fingerprint": "inferlab-standin", "choices": choices}
            if req["include_usage"]:
                chunk["usage"] = result["usage"] if usage else None
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())

        try:
            event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                    "finish_reason": None}])
            for piece in result["pieces"]:
                if self.server.token_delay:
                    time.sleep(self.server.token_delay)
                event([{"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}])
            event([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": result["finish_reason"]}])
            if req["include_usage"]:
                event([], usage=True)
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.server.log.info("client went away mid-stream")
            self.close_connection = True


def write_pidfile(path: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    os.replace(tmp, path)


def remove_pidfile(path: str) -> None:
    try:
        with open(path) as fh:
            if fh.read().strip() == str(os.getpid()):
                os.unlink(path)
    except OSError:
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", required=True, help="address to listen on")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True, help="the one model name this server answers for")
    parser.add_argument("--pidfile", help="written once listening, removed on exit")
    parser.add_argument("--log", help="log file (default: stderr)")
    parser.add_argument("--token-delay", type=float, default=0.0, help="seconds per generated token")
    args = parser.parse_args(argv)

    log = logging.getLogger("openai_standin")
    handler = logging.FileHandler(args.log) if args.log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.model = args.model
    server.token_delay = max(0.0, args.token_delay)
    server.started = int(time.time())
    server.hostname = socket.gethostname()
    server.log = log
    if args.pidfile:
        write_pidfile(args.pidfile)

    def stop(signum, _frame):
        log.info("signal %d: shutting down", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("serving model %s on http://%s:%d (pid %d)", args.model, args.host, server.server_address[1],
             os.getpid())
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if args.pidfile:
            remove_pidfile(args.pidfile)
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a request to the lab server may hold: the chat and ``/generate`` bodies checked and read into the engine's
fields, and the error a bad request (or an engine refusal) answers with, in OpenAI's shape."""

from __future__ import annotations

from inferlab.lab.server import tokens
from inferlab.lab.server.engine import EngineError

GENERATE_DEFAULT_MAX_NEW_TOKENS = 128


class RequestError(Exception):
    def __init__(self, status: int, message: str, param=None, code=None, kind="invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.kind = status, message, param, kind
        self.code = status if code is None else code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def engine_error(exc: EngineError) -> RequestError:
    return RequestError(500, f"Internal server error: {exc}", kind="InternalServerError")


def _stop_list(stop, param: str) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise RequestError(400, f"{param} must be a string or a list of strings", param=param)


def _count(value, param: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RequestError(400, f"{param} must be an integer >= {minimum}, got {value!r}", param=param)
    return value


def validate_chat(body, served_model: str) -> dict:
    """Checked chat fields, or ``RequestError`` with OpenAI's wording where it has one."""
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
        raise RequestError(400, "Messages cannot be empty.", param="messages")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in tokens.ROLES:
            raise RequestError(400, f"messages[{i}]: 'role' must be one of {', '.join(tokens.ROLES)}",
                               param=f"messages.[{i}].role")
        content = msg.get("content")
        ok = isinstance(content, str) or (content is None and msg["role"] == "assistant") or (
            isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                              and isinstance(p.get("text"), str) for p in content))
        if not ok:
            raise RequestError(400, f"messages[{i}]: 'content' must be a string or a list of text parts",
                               param=f"messages.[{i}].content")
    limit_key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    limit = _count(body.get(limit_key), limit_key, 1)
    if body.get("n", 1) != 1:
        raise RequestError(400, "only n=1 is supported", param="n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream must be a boolean", param="stream")
    options = body.get("stream_options")
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise RequestError(400, "stream_options must be an object", param="stream_options")
    return {"model": model, "messages": messages, "limit": limit, "stop": _stop_list(body.get("stop"), "stop"),
            "stream": stream, "include_usage": bool(options.get("include_usage")), "seed": body.get("seed")}


def validate_generate(body) -> dict:
    """Checked ``/generate`` fields (one prompt: the lab server does not batch)."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    text, input_ids = body.get("text"), body.get("input_ids")
    if (text is None) == (input_ids is None):
        raise RequestError(400, "Either text or input_ids should be provided (exactly one of them).")
    if text is not None and not isinstance(text, str):
        raise RequestError(400, "text must be a string (the lab server does not batch)", param="text")
    if input_ids is not None and not (isinstance(input_ids, list) and input_ids and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in input_ids)):
        raise RequestError(400, "input_ids must be a non-empty list of token ids (the lab server does not batch)",
                           param="input_ids")
    params = body.get("sampling_params")
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise RequestError(400, "sampling_params must be an object", param="sampling_params")
    limit = _count(params.get("max_new_tokens"), "max_new_tokens", 0)
    ignore_eos = params.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise RequestError(400, "ignore_eos must be a boolean", param="ignore_eos")
    if limit is None and ignore_eos:
        limit = GENERATE_DEFAULT_MAX_NEW_TOKENS
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream must be a boolean", param="stream")
    rid = body.get("rid")
    if rid is not None and not isinstance(rid, str):
        raise RequestError(400, "rid must be a string", param="rid")
    if text is not None:
        prompt_tokens, prompt_key = tokens.tokenize(text), text
    else:
        prompt_tokens, prompt_key = input_ids, "ids:" + ",".join(map(str, input_ids))
    return {"prompt_tokens": prompt_tokens, "prompt_key": prompt_key, "limit": limit,
            "natural_cap": GENERATE_DEFAULT_MAX_NEW_TOKENS, "stop": _stop_list(params.get("stop"), "stop"),
            "stream": stream, "rid": rid, "seed": params.get("sampling_seed")}

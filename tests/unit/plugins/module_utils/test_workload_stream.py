# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One request of the workload client (_workload_stream): URL handling, request bodies and the reading of stream
chunks. The HTTP paths are tested through the module against a scripted server
(tests/unit/plugins/modules/test_llm_workload.py)."""

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._sse import SSEError, SSEEvent
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stream import (
    Target,
    WorkloadError,
    _Failure,
    _Stream,
    request_body,
)


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
    target = Target(url)
    assert (target.scheme, target.host, target.port, target.prefix) == (scheme, host, port, prefix)


@pytest.mark.parametrize("url", ["169.254.77.2:30000", "ftp://h/", "http://", "http://h:99999", "http://h:1/?a=1",
                                 "http://h:x"])
def test_target_refuses(url):
    with pytest.raises(WorkloadError, match="url"):
        Target(url)


def test_request_bodies():
    chat = request_body("openai_chat", "qwen", "hello there", 16, {"ignore_eos": True})
    assert chat == {"model": "qwen", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 16,
                    "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    generate = request_body("sglang_generate", None, "hello", 8,
                            {"sampling_params": {"temperature": 0.7}, "return_logprob": False})
    assert generate == {"text": "hello", "stream": True, "return_logprob": False,
                        "sampling_params": {"max_new_tokens": 8, "temperature": 0.7, "ignore_eos": True}}


# --- reading stream chunks --------------------------------------------------------------------------------------

def chat_event(value, time_s, kind="data"):
    return SSEEvent(kind, "message", "{}", value, time_s)


def test_chat_chunks_take_tokens_from_usage_not_chunks():
    stream = _Stream("openai_chat")
    for time_s, delta in ((1.0, {"role": "assistant", "content": ""}), (1.5, {"content": "A"}),
                          (1.75, {"reasoning_content": "hm"}), (2.5, {"content": "B C"})):
        stream.take(chat_event({"choices": [{"delta": delta}]}, time_s))
    stream.take(chat_event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}}, 2.6))
    stream.take(SSEEvent("done", "message", "[DONE]", None, 2.7))
    assert (stream.first, stream.chunks, stream.itl, stream.done_at) == (1.5, 3, [0.25, 0.75], 2.7)
    assert stream.counts() == (9, 7, None, None, None)


def test_generate_chunks_use_meta_info():
    stream = _Stream("sglang_generate")
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
        _Stream(api).take(chat_event(value, 1.0))
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
    stream = _Stream("openai_chat")
    stream.take(chat_event({"choices": [], "usage": usage}, 1.0))
    with pytest.raises(SSEError, match=message.replace(".", r"\.")):
        stream.counts()


def test_missing_usage_and_error_events():
    stream = _Stream("openai_chat")
    with pytest.raises(_Failure) as caught:
        stream.counts()
    assert caught.value.kind == "no_usage"
    with pytest.raises(_Failure) as caught:
        stream.take(SSEEvent("error", "message", '{"error": {"message": "boom"}}', {"error": {}}, 1.0))
    assert (caught.value.kind, caught.value.body) == ("server_error", '{"error": {"message": "boom"}}')
    with pytest.raises(_Failure) as caught:
        _Stream("sglang_generate").counts()
    assert caught.value.kind == "no_usage"

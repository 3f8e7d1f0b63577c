# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab server's HTTP API, against real replica servers on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import struct
import threading
import time

import pytest
from labservers import MODEL, parse_sse

from inferlab.lab.server import tokens


def chat(content, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


def raw_post(port, path, body) -> socket.socket:
    """Send a request and return the socket without reading anything."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (path.encode(), len(data), data))
    return sock


def test_info_endpoints_and_errors(start_server, model_dir):
    server = start_server()
    status, headers, body = server.request("GET", "/health")
    assert (status, body) == (200, b"")
    assert headers["x-inferlab-host"] == socket.gethostname()
    assert headers["x-inferlab-server"] == "replica"
    assert server.request("GET", "/health_generate")[0] == 200
    info = server.json("GET", "/get_model_info")
    assert info == server.json("GET", "/model_info")
    assert info["model_path"] == info["tokenizer_path"] == str(model_dir) and info["is_generation"] is True
    assert info["architectures"] == ["Qwen2ForCausalLM"] and info["served_model_name"] == MODEL
    server_info = server.json("GET", "/get_server_info")
    assert server_info.keys() == server.json("GET", "/server_info").keys()
    assert server_info["tp_size"] == 1 and server_info["served_model_name"] == MODEL
    assert server_info["context_length"] == 32768
    assert server_info["version"] == "0.5.23-lab" and server_info["kv_cache_dtype"] == "auto"
    state = server_info["internal_states"][0]
    assert "last_gen_throughput" in state
    assert "avg_spec_accept_length" not in state and "lab_exchange" not in state
    models = server.json("GET", "/v1/models")
    assert [(m["id"], m["max_model_len"], m["owned_by"]) for m in models["data"]] == [(MODEL, 32768, "sglang")]
    assert server.json("GET", f"/v1/models/{MODEL}")["id"] == MODEL
    assert server.request("GET", "/v1/models/other")[0] == 404
    assert server.json("GET", "/version") == {"version": "0.5.23-lab"}
    assert server.request("GET", "/nope")[0] == 404
    assert server.request("GET", "/generate")[0] == 405
    assert server.request("GET", "/metrics")[0] == 404          # no --enable-metrics
    status, _headers, body = server.request("POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and "could not parse" in json.loads(body)["error"]["message"]
    status, _headers, body = server.request("POST", "/v1/chat/completions", chat("x", model="gpt-4"))
    assert status == 404 and json.loads(body)["error"]["code"] == "model_not_found"
    status, _headers, body = server.request("POST", "/generate", {"text": "a", "sampling_params": {"stop": 5}})
    assert status == 400 and json.loads(body)["error"]["param"] == "stop"
    status, _headers, body = server.request("POST", "/v1/chat/completions", chat("x", max_tokens=0))
    assert status == 400 and json.loads(body)["error"]["param"] == "max_tokens"


def test_chat_json_and_stream(start_server):
    server = start_server("--lab-step-time", "0.001")
    prompt_tokens = len(tokens.tokenize("user: Say hello from the lab\nassistant:"))
    reply = server.json("POST", "/v1/chat/completions", chat("Say hello from the lab", max_tokens=20))
    choice = reply["choices"][0]
    text = choice["message"]["content"]
    assert (reply["object"], reply["model"], choice["finish_reason"]) == ("chat.completion", MODEL, "length")
    assert len(tokens.tokenize(text)) == 20
    assert reply["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 20,
                              "total_tokens": prompt_tokens + 20, "prompt_tokens_details": None,
                              "reasoning_tokens": 0, "completion_tokens_details": None}
    again = server.json("POST", "/v1/chat/completions", chat("Say hello from the lab", max_tokens=20))
    assert again["choices"][0]["message"]["content"] == text
    other = server.json("POST", "/v1/chat/completions", chat("Something else", max_tokens=20))
    assert other["choices"][0]["message"]["content"] != text

    status, headers, raw = server.request("POST", "/v1/chat/completions", chat(
        "Say hello from the lab", max_tokens=20, stream=True, stream_options={"include_usage": True}))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = parse_sse(raw)
    assert events[-1] == "[DONE]"
    role, *content, finish, usage, _done = events
    assert role["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert len(content) == 20
    assert "".join(e["choices"][0]["delta"]["content"] for e in content) == text
    assert {e["id"] for e in events[:-1]} == {role["id"]}
    assert (finish["choices"][0]["finish_reason"], finish["choices"][0]["matched_stop"]) == ("length", None)
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 20

    natural = server.json("POST", "/v1/chat/completions", chat("no limit"))["choices"][0]
    assert natural["finish_reason"] == "stop" and natural["matched_stop"] == tokens.EOS_TOKEN_ID
    word = text.split()[3]
    stopped = server.json("POST", "/v1/chat/completions", chat("Say hello from the lab", max_tokens=20, stop=[word]))
    assert stopped["choices"][0]["message"]["content"] == text[:text.index(word)].rstrip()
    assert (stopped["choices"][0]["finish_reason"], stopped["choices"][0]["matched_stop"]) == ("stop", word)
    assert stopped["usage"]["completion_tokens"] == len(tokens.tokenize(text[:text.index(word)]))


def test_generate_meta_info_and_stream(start_server):
    server = start_server("--lab-step-time", "0.001")
    out = server.json("POST", "/generate", {"text": "The lab", "sampling_params": {"max_new_tokens": 16}})
    meta = out["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 16}
    assert (meta["prompt_tokens"], meta["completion_tokens"], meta["cached_tokens"]) == (2, 16, 0)
    assert 0 < meta["e2e_latency"] < 5 and "spec_verify_ct" not in meta
    assert len(out["output_ids"]) == 16 and len(tokens.tokenize(out["text"])) == 16
    by_ids = server.json("POST", "/generate", {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4},
                                               "rid": "my-rid"})
    assert (by_ids["meta_info"]["id"], by_ids["meta_info"]["prompt_tokens"]) == ("my-rid", 3)

    status, _headers, raw = server.request("POST", "/generate", {"text": "The lab", "stream": True,
                                                                 "sampling_params": {"max_new_tokens": 16}})
    events = parse_sse(raw)
    assert status == 200 and events[-1] == "[DONE]"
    chunks = events[:-1]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == sorted(set(counts)) and counts[-1] == 16     # one per step, fewer if the reader lags
    assert all(len(tokens.tokenize(c["text"])) == n for c, n in zip(chunks, counts, strict=True))
    assert all(out["text"].startswith(c["text"]) for c in chunks) and chunks[-1]["text"] == out["text"]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 16}
    assert "e2e_latency" in chunks[-1]["meta_info"]              # only on the last chunk, however many arrive
    assert all("e2e_latency" not in c["meta_info"] for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["cached_tokens"] == 1          # the same prompt again: all but its last token


def test_prefix_cache_and_flush(start_server):
    server = start_server("--enable-cache-report", "--lab-step-time", "0.002")
    system = {"role": "system", "content": " ".join(f"word{i}" for i in range(60))}
    first = server.json("POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 4, "messages": [
        system, {"role": "user", "content": "first question"}]})
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    second = server.json("POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 4, "messages": [
        system, {"role": "user", "content": "second question"}]})
    shared = len(tokens.tokenize(f"system: {system['content']}\nuser:"))
    assert second["usage"]["prompt_tokens_details"] == {"cached_tokens": shared}

    running = raw_post(server.port, "/generate", {"text": "long", "sampling_params": {"max_new_tokens": 5000},
                                                  "stream": True})
    running.recv(1024)   # headers: it is running
    status, _headers, body = server.request("POST", "/flush_cache")
    assert (status, body) == (400, b"Flush cache failed.\n")
    running.close()      # the engine drops it at its next step
    deadline = time.monotonic() + 5
    while server.request("GET", "/flush_cache")[0] != 200:
        assert time.monotonic() < deadline, "flush_cache still refused after the request went away"
        time.sleep(0.05)
    third = server.json("POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 4, "messages": [
        system, {"role": "user", "content": "second question"}]})
    assert third["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


def test_context_length_is_enforced(start_server):
    server = start_server("--context-length", "64")
    status, _headers, body = server.request("POST", "/v1/chat/completions", chat(" ".join(["w"] * 70)))
    assert status == 400
    assert "is longer than the model's context length (64 tokens)" in json.loads(body)["error"]["message"]
    status, _headers, body = server.request("POST", "/v1/chat/completions", chat("hello", max_tokens=60))
    assert status == 400
    assert json.loads(body)["error"]["message"].startswith(
        "Requested token count exceeds the model's maximum context length of 64 tokens. You requested a total of "
        "65 tokens: 5 tokens from the input messages and 60 tokens for the completion.")
    status, _headers, body = server.request("POST", "/generate", {"text": "a b", "sampling_params": {
        "max_new_tokens": 63}})
    assert status == 400 and "exceeds the model's maximum context length" in json.loads(body)["error"]["message"]
    assert server.request("POST", "/generate", {"text": "a b", "sampling_params": {"max_new_tokens": 62}})[0] == 200


def test_api_key(start_server):
    server = start_server("--api-key", "sesame", "--enable-metrics")
    status, _headers, body = server.request("GET", "/v1/models")
    assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})
    assert server.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert server.request("POST", "/generate", {"text": "a"}, headers={"Authorization": "sesame"})[0] == 401
    assert server.request("GET", "/v1/models", headers={"Authorization": "Bearer sesame"})[0] == 200
    assert server.request("POST", "/v1/chat/completions", chat("hi", max_tokens=2),
                          headers={"Authorization": "Bearer sesame"})[0] == 200
    assert server.request("GET", "/health")[0] == 200
    assert server.request("GET", "/health_generate")[0] == 200
    assert server.request("GET", "/metrics")[0] == 200
    assert server.json("GET", "/get_server_info", headers={"Authorization": "Bearer sesame"})["api_key"] == \
        "<redacted>"


def test_metrics_count_exactly_what_clients_got(start_server):
    server = start_server("--enable-metrics", "--lab-step-time", "0")
    generated = server.metric("sglang:generation_tokens_total")
    requests = server.metric("sglang:num_requests_total")
    prompts = server.metric("sglang:prompt_tokens_total")
    completion = prompt = 0
    for i, limit in enumerate([1, 7, 64, 300]):
        reply = server.json("POST", "/v1/chat/completions", chat(f"question {i}", max_tokens=limit))
        completion += reply["usage"]["completion_tokens"]
        prompt += reply["usage"]["prompt_tokens"]
    _status, _headers, raw = server.request("POST", "/v1/chat/completions", chat(
        "streamed", max_tokens=123, stream=True, stream_options={"include_usage": True}))
    usage = parse_sse(raw)[-2]["usage"]
    completion, prompt = completion + usage["completion_tokens"], prompt + usage["prompt_tokens"]
    out = server.json("POST", "/generate", {"text": "stop early", "sampling_params": {"max_new_tokens": 50,
                                                                                      "stop": "."}})
    completion += out["meta_info"]["completion_tokens"]
    prompt += out["meta_info"]["prompt_tokens"]
    assert server.request("GET", "/health_generate")[0] == 200       # not counted, like SGLang's health checks
    assert server.metric("sglang:generation_tokens_total") - generated == completion == 1 + 7 + 64 + 300 + 123 + (
        out["meta_info"]["completion_tokens"])
    assert server.metric("sglang:generation_tokens_total", is_streaming="true") == 123
    assert server.metric("sglang:num_requests_total") - requests == 6
    assert server.metric("sglang:prompt_tokens_total") - prompts == prompt
    assert server.metric("sglang:e2e_request_latency_seconds_count") == 6
    assert server.metric("sglang:time_to_first_token_seconds_count", is_streaming="true") == 1


def test_continuous_batching_serves_concurrent_requests_together(start_server):
    server = start_server("--lab-step-time", "0.01")

    def run(n):
        results = []

        def one(i):
            results.append(server.json("POST", "/generate", {"text": f"req {i}", "sampling_params": {
                "max_new_tokens": 20}})["meta_info"]["completion_tokens"])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(results) / (time.perf_counter() - start)

    single, six = run(1), run(6)
    assert single < 110              # 20 tokens, 19 decode steps of 10 ms
    assert six > 3 * single, (single, six)


def test_max_running_requests_queues_the_rest(start_server):
    server = start_server("--lab-step-time", "0.01", "--max-running-requests", "2")
    finished = []

    def one(i):
        server.json("POST", "/generate", {"text": f"req {i}", "sampling_params": {"max_new_tokens": 20}})
        finished.append(time.perf_counter())

    start = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # two run together, the other two wait for them: the last finishes after about two requests' time
    assert max(finished) - start > 2 * 19 * 0.01
    assert server.json("GET", "/get_server_info")["max_running_requests"] == 2


def test_speculative_accept_length(start_server):
    server = start_server("--lab-step-time", "0", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    info = server.json("GET", "/get_server_info")
    assert (info["speculative_algorithm"], info["speculative_num_draft_tokens"]) == ("EAGLE", 4)
    assert "avg_spec_accept_length" not in info["internal_states"][0]
    completion = verifies = 0
    for i in range(3):
        meta = server.json("POST", "/generate", {"text": f"spec {i}", "sampling_params": {
            "max_new_tokens": 200}})["meta_info"]
        assert meta["completion_tokens"] == 200
        assert 1 <= meta["spec_accept_length"] <= 4
        assert meta["spec_accept_length"] == pytest.approx(200 / meta["spec_verify_ct"])
        assert meta["spec_num_proposed_drafts"] == 3 * meta["spec_verify_ct"]
        completion += meta["completion_tokens"] - 1      # the first token comes from the prefill, not a verify
        verifies += meta["spec_verify_ct"]
    avg = server.json("GET", "/get_server_info")["internal_states"][0]["avg_spec_accept_length"]
    assert avg == pytest.approx(completion / verifies)
    assert 2.1 < avg < 2.9                                # uniform on 1..4: mean 2.5


def test_hang_mode(start_server):
    server = start_server("--lab-fault", "hang", env={"SGLANG_HEALTH_CHECK_TIMEOUT": "0.3"})
    assert server.request("GET", "/health")[0] == 200
    started = time.monotonic()
    assert server.request("GET", "/health_generate")[0] == 503      # after SGLang's health-check timeout
    assert time.monotonic() - started >= 0.3
    socks = [raw_post(server.port, path, body) for path, body in [
        ("/v1/chat/completions", chat("hi", max_tokens=5, stream=True)),
        ("/v1/chat/completions", chat("hi", max_tokens=5)),
        ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 5}, "stream": True})]]
    time.sleep(1.0)
    assert server.request("GET", "/health")[0] == 200
    chat_stream, chat_json, generate_stream = socks
    for sock in (chat_stream, chat_json):          # not even headers: sglang sends them with the first token
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.recv(1024)
    generate_stream.settimeout(0.2)                # headers at once, then no event
    assert b"data:" not in generate_stream.recv(4096)
    with pytest.raises(TimeoutError):
        generate_stream.recv(4096)
    for sock in socks:
        sock.close()


def test_keep_alive_connection_serves_several_requests(start_server):
    server = start_server("--lab-step-time", "0")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        for body in (chat("one", max_tokens=3), chat("two", max_tokens=3, stream=True), chat("three", max_tokens=3)):
            conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 200
            response.read()
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_sigterm_is_a_clean_exit(start_server):
    server = start_server("--lab-step-time", "0.004")
    result = {}
    thread = threading.Thread(target=lambda: result.update(reply=server.request("POST", "/generate", {
        "text": "long", "sampling_params": {"max_new_tokens": 5000}})))
    thread.start()
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit() == 0
    thread.join(timeout=5)
    status, _headers, body = result["reply"]
    assert status == 500 and "the server is shutting down" in json.loads(body)["error"]["message"]
    assert not server.pidfile.exists()


def test_a_client_reset_is_logged_without_a_traceback(start_server):
    server = start_server()

    def reset_after_a_whole_reply():
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            # the whole response first: a reset while the server still writes its body is a client gone mid-reply,
            # which the handler closes quietly (under load the headers can arrive alone)
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += sock.recv(1024)
            head, _sep, body = reply.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            while len(body) < length:
                body += sock.recv(1024)
            # SO_LINGER 0: close() sends a reset while the server waits for the next request on the connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    # Under load the server's thread can still be finishing the reply when the reset comes (closed quietly, no
    # line): reset again until one reset finds it waiting for the next request, which it logs on its own time.
    for _attempt in range(10):
        reset_after_a_whole_reply()
        deadline = time.monotonic() + 2
        while "client connection closed" not in server.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        if "client connection closed" in server.log_text():
            break
    assert server.json("GET", "/get_model_info")["is_generation"] is True
    log = server.log_text()
    assert "client connection closed" in log
    assert "Traceback" not in log


def test_a_server_that_loads_after_its_start(start_server):
    """--lab-ready-after: the pidfile names the process at once, the port answers 503 while it loads, a signal ends
    the load cleanly; once loaded it serves."""
    loading = start_server("--lab-ready-after", "600")
    assert "Loading the model weights (--lab-ready-after 600.0 s)" in loading.log_text()
    assert loading.request("GET", "/health")[0] == 503
    assert loading.request("POST", "/v1/chat/completions", chat("hi", max_tokens=3))[0] == 503
    loading.proc.send_signal(signal.SIGTERM)
    assert loading.wait_exit() == 0
    assert not loading.pidfile.exists()

    loaded = start_server("--lab-ready-after", "0.5", "--lab-step-time", "0")
    deadline = time.monotonic() + 15
    while loaded.request("GET", "/health")[0] != 200:
        assert time.monotonic() < deadline, loaded.log_text()
        time.sleep(0.05)
    assert loaded.request("POST", "/v1/chat/completions", chat("hi", max_tokens=3))[0] == 200

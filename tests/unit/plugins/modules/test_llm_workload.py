# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The llm_workload module through main(), over real HTTP to a small server on 127.0.0.1 that each test scripts:
which paths answer, with what status, headers and SSE events, and how fast."""

import json
import os
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils._llm_workload import first_token_deadline_s
from ansible_collections.inferlab.distributed.plugins.modules import llm_workload
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    run_module,
    set_module_args,
)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = {"method": self.command, "path": self.path, "headers": dict(self.headers),
                "body": json.loads(body) if body else None, "time": time.perf_counter()}
        with self.server.lock:
            self.server.seen.append(seen)
        action = self.server.routes.get((self.command, self.path))
        if action is None:
            send(self, 404, b'{"detail": "Not Found"}')
            return
        action(self, seen)

    do_GET = do_POST = handle_any


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes = {}
        self.seen = []
        self.lock = threading.Lock()
        self.release = threading.Event()  # set at teardown: stalled handlers give up

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def requests_to(self, path):
        return [s for s in self.seen if s["path"] == path]


@pytest.fixture
def server():
    srv = ScriptedServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def send(handler, status, body, content_type="application/json", headers=None):
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def reply(status, body, content_type="application/json"):
    body = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lambda handler, seen: send(handler, status, body, content_type)


def start_stream(handler, headers=None):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
    handler.send_header("Transfer-Encoding", "chunked")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()


def chunk(handler, data):
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def stream(events, gap=0.0, headers=None, end=True):
    """An SSE response, one HTTP chunk per event; ``events`` are dicts (sent as ``data: JSON``) or raw bytes."""
    def action(handler, seen):
        start_stream(handler, headers)
        for event in events:
            if gap:
                time.sleep(gap)
            chunk(handler, event if isinstance(event, bytes) else b"data: %s\n\n" % json.dumps(event).encode())
        if end:
            handler.wfile.write(b"0\r\n\r\n")
        else:
            handler.close_connection = True  # cut: no last chunk, and the socket closes
    return action


DONE = b"data: [DONE]\n\n"


def delta(content, role=None):
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": dict(
        {"content": content}, **({"role": role} if role else {})), "finish_reason": None}], "usage": None}


def usage(prompt, completion, cached=None):
    value = {"prompt_tokens": prompt, "completion_tokens": completion}
    if cached is not None:
        value["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"object": "chat.completion.chunk", "choices": [], "usage": value}


def chat_events(words, prompt=40, completion=None, cached=None):
    return ([delta("", role="assistant")] + [delta(w) for w in words]
            + [usage(prompt, len(words) if completion is None else completion, cached), DONE])


def generate_event(text, completion, prompt=30, cached=0, verify=None):
    meta = {"id": "r1", "finish_reason": None, "prompt_tokens": prompt, "completion_tokens": completion,
            "cached_tokens": cached, "e2e_latency": 0.1}
    if verify is not None:
        meta["spec_verify_ct"] = verify
    return {"text": text, "output_ids": list(range(completion)), "meta_info": meta}


def run(server, **args):
    args.setdefault("url", server.url)
    return run_module(llm_workload.main, args)


CHAT = {"model": "qwen-27b", "kind": "single_stream"}
SERVER_INFO_404 = "GET /get_server_info answered HTTP 404 (not an SGLang server, e.g. a gateway?)"


# --- streams that succeed -------------------------------------------------------------------------------------------

def test_streaming_chat_with_usage(server):
    """Tokens come from usage (7), not from the 3 chunks that carried text; the body and headers are OpenAI's."""
    server.routes[("POST", "/v1/chat/completions")] = stream(
        chat_events(["The", " quiet", " link"], prompt=133, completion=7, cached=96), gap=0.02,
        headers={"X-Inferlab-Host": "lab-a", "x-litellm-model-group": "large"})
    failed, result = run(server, api_key="s3cret", output_tokens=7, prompt_tokens=128,
                         capture_headers=["X-Inferlab-Host", "x-litellm-model-group", "x-litellm-attempted-fallbacks"],
                         **CHAT)
    assert not failed, result.get("msg", result)
    assert result["changed"] is False and result["cache_flushed"] is False
    batch = result["batch"]
    assert (batch["kind"], batch["cache"], batch["ok"], batch["failed"], batch["error"]) == (
        "single_stream", "warm", 1, 0, None)
    [rec] = batch["records"]
    assert rec["ok"] is True and rec["status"] == 200 and rec["error"] is None
    assert (rec["output_tokens"], rec["chunks"], rec["prompt_tokens"], rec["requested_prompt_tokens"],
            rec["cached_tokens"]) == (7, 3, 133, 128, 96)
    assert rec["headers"] == {"x-inferlab-host": "lab-a", "x-litellm-model-group": "large",
                              "x-litellm-attempted-fallbacks": None}
    # The server sleeps 20 ms before each event: the first text comes 2 gaps in, the last text 4 gaps in. Lower
    # bounds: the server's gaps, on what the client cannot see early (the first text, the last text). One gap
    # alone has none: a client that reads late gets two chunks at once (seen under load). Upper bounds generous
    # (a busy 2-CPU machine delays threads and sockets).
    assert 0.035 < rec["ttft_s"] < 5
    assert len(rec["itl_s"]) == 2 and all(0 <= gap < 5 for gap in rec["itl_s"])
    assert rec["ttft_s"] + sum(rec["itl_s"]) > 0.075
    assert rec["latency_s"] > rec["ttft_s"] + sum(rec["itl_s"])
    assert rec["output_tok_s"] == pytest.approx(7 / rec["latency_s"])
    assert rec["decode_tok_s"] == pytest.approx(6 / (rec["latency_s"] - rec["ttft_s"]))
    assert rec["tpot_s"] == pytest.approx((rec["latency_s"] - rec["ttft_s"]) / 6)
    assert rec["start"]["wall"].endswith("Z") and 0 <= rec["start"]["offset_s"] < 1
    assert batch["wall_s"] == pytest.approx(rec["end_offset_s"] - rec["start"]["offset_s"])
    assert batch["aggregate_output_tok_s"] == pytest.approx(7 / batch["wall_s"])
    assert batch["spec_accept_length"] == {"value": None, "source": None, "note": SERVER_INFO_404}
    assert batch["definitions"]["decode_tok_s"].startswith("(output_tokens - 1) / (latency_s - ttft_s)")

    [sent] = server.requests_to("/v1/chat/completions")
    assert sent["headers"]["Authorization"] == "Bearer s3cret"
    body = sent["body"]
    assert (body["model"], body["max_tokens"], body["stream"], body["stream_options"]) == (
        "qwen-27b", 7, True, {"include_usage": True})
    assert len(body["messages"][0]["content"].split(" ")) == 128
    assert "s3cret" not in json.dumps(result)


def test_generate_with_meta_info_and_speculation(server):
    """/generate: cumulative text, several tokens per chunk, accept length = completion_tokens / spec_verify_ct."""
    server.routes[("POST", "/generate")] = stream([
        generate_event(" The", 1, verify=1), generate_event(" The quiet link", 3, verify=2),
        generate_event(" The quiet link carries every", 5, verify=2, cached=24), DONE])
    failed, result = run(server, api="sglang_generate", kind="concurrent", requests=2, concurrency=2,
                         output_tokens=5, extra_body={"sampling_params": {"temperature": 0.5}, "rid_note": "x"})
    assert not failed, result.get("msg", result)
    batch = result["batch"]
    for rec in batch["records"]:
        assert (rec["ok"], rec["output_tokens"], rec["chunks"], rec["prompt_tokens"], rec["cached_tokens"]) == (
            True, 5, 3, 30, 24)
        assert (rec["spec_accept_length"], rec["spec_verify_ct"]) == (2.5, 2)
        assert len(rec["itl_s"]) == 2
    assert batch["spec_accept_length"] == {"value": 2.5, "source": "meta_info", "note": None}
    assert batch["cached_tokens_total"] == 48 and batch["output_tokens_total"] == 10
    assert server.requests_to("/get_server_info") == []
    bodies = [s["body"] for s in server.requests_to("/generate")]
    assert all(b["sampling_params"] == {"max_new_tokens": 5, "temperature": 0.5, "ignore_eos": True}
               and b["stream"] is True and b["rid_note"] == "x" and "model" not in b for b in bodies)
    assert bodies[0]["text"] != bodies[1]["text"]


def test_spec_accept_length_from_server_info(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a", "b"]))
    server.routes[("GET", "/get_server_info")] = reply(200, {"tp_size": 2, "internal_states": [
        {"avg_spec_accept_length": 2.71, "last_gen_throughput": 48.0}]})
    failed, result = run(server, **CHAT)
    assert not failed, result.get("msg", result)
    assert result["batch"]["spec_accept_length"] == {"value": 2.71, "source": "server_info", "note": None}


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        ({"internal_states": [{"last_gen_throughput": 1.0}]},
         "the server reports no avg_spec_accept_length (no speculative decoding)"),
        ({"internal_states": []}, "GET /get_server_info has no internal_states[0]"),
        ({"internal_states": [{"avg_spec_accept_length": "high"}]}, "avg_spec_accept_length is not a number: 'high'"),
        (b"[" * 100000, "GET /get_server_info has no internal_states[0]: [[["),
    ],
)
def test_spec_accept_length_unavailable(server, answer, note):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a", "b"]))
    server.routes[("GET", "/get_server_info")] = reply(200, answer)
    failed, result = run(server, **CHAT)
    assert not failed
    assert result["batch"]["spec_accept_length"]["value"] is None
    assert result["batch"]["spec_accept_length"]["note"].startswith(note)


def test_concurrent_requests_start_together(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["x"] * 5), gap=0.05)
    failed, result = run(server, model="m", kind="concurrent", requests=6, concurrency=6, output_tokens=5)
    assert not failed, result.get("msg", result)
    batch = result["batch"]
    arrivals = [s["time"] for s in server.requests_to("/v1/chat/completions")]
    # a ratio, not a wall bound (a busy machine delays threads): all arrived within half the quickest answer's time
    assert len(arrivals) == 6 and max(arrivals) - min(arrivals) < 0.5 * batch["latency_s"]["min"]
    assert batch["ok"] == 6 and batch["output_tokens_total"] == 30
    assert batch["aggregate_output_tok_s"] == pytest.approx(30 / batch["wall_s"])
    # every request took most of the wall time: they ran side by side, not one after another
    assert batch["latency_s"]["min"] > 0.5 * batch["wall_s"]
    assert batch["itl_s"]["n"] == 6 * 4 and batch["ttft_s"]["n"] == 6
    assert len({s["body"]["messages"][0]["content"] for s in server.requests_to("/v1/chat/completions")}) == 6


def test_more_requests_than_concurrency(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["x", "y"]), gap=0.03)
    failed, result = run(server, model="m", kind="concurrent", requests=5, concurrency=2, output_tokens=2)
    assert not failed, result.get("msg", result)
    assert [r["index"] for r in result["batch"]["records"]] == [0, 1, 2, 3, 4]
    assert result["batch"]["ok"] == 5
    starts = sorted(r["start"]["offset_s"] for r in result["batch"]["records"])
    assert starts[2] - starts[0] > 0.1  # the third request waited for a free worker


def test_repeated_prefix_primes_the_cache_first(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["x", "y"], cached=20), gap=0.1)
    failed, result = run(server, model="m", kind="repeated_prefix", requests=4, concurrency=3, prefix_tokens=20)
    assert not failed, result.get("msg", result)
    seen = server.requests_to("/v1/chat/completions")
    prompts = [s["body"]["messages"][0]["content"].split(" ") for s in seen]
    assert all(len(p) == 36 and p[:20] == prompts[0][:20] for p in prompts)
    first = result["batch"]["records"][0]
    # request 0 finished before the others began: by the client's one clock (the server's arrival times against the
    # client's latency mixed two clocks, and failed when the loaded client read request 0's stream late), and the
    # server saw request 0 first
    others = result["batch"]["records"][1:]
    assert min(r["start"]["offset_s"] for r in others) >= first["end_offset_s"]
    assert min(s["time"] for s in seen[1:]) > seen[0]["time"]
    # the others ran side by side: each began before the first of them to finish had finished
    assert max(r["start"]["offset_s"] for r in others) < min(r["end_offset_s"] for r in others)
    assert result["batch"]["cached_tokens_total"] == 80


def test_flush_cache_labels_the_batch_cold(server):
    server.routes[("POST", "/flush_cache")] = reply(200, b"Cache flushed.\n", "text/plain")
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a"]))
    failed, result = run(server, flush_cache=True, api_key="k", **CHAT)
    assert not failed, result.get("msg", result)
    assert result["cache_flushed"] is True
    assert (result["batch"]["cache"], result["batch"]["flush_detail"]) == ("cold", "Cache flushed.")
    flush = server.requests_to("/flush_cache")
    assert len(flush) == 1 and flush[0]["headers"]["Authorization"] == "Bearer k"
    assert flush[0]["time"] < server.requests_to("/v1/chat/completions")[0]["time"]


def test_url_with_v1_suffix(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a"]))
    failed, result = run(server, url=server.url + "/v1", **CHAT)
    assert not failed, result.get("msg", result)


def test_record_path(server, tmp_path):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a", "b"]))
    path = tmp_path / "batch.json"
    failed, result = run(server, record_path=str(path), **CHAT)
    assert not failed
    assert json.loads(path.read_text()) == result["batch"]


# --- failures -------------------------------------------------------------------------------------------------------

def stall(events):
    """Status 200 and ``events``, then nothing until the test ends: a server that accepted and hangs."""
    def action(handler, seen):
        start_stream(handler)
        for event in events:
            chunk(handler, event if isinstance(event, bytes) else b"data: %s\n\n" % json.dumps(event).encode())
        handler.server.release.wait(30)
    return action


def test_hang_is_detected_within_first_token_timeout(server, tmp_path):
    """Headers, a role chunk and keep-alives come, but no token: error kind hang after first_token_timeout_s."""
    server.routes[("POST", "/v1/chat/completions")] = stall([delta("", role="assistant"), b": keep-alive\n\n"])
    path = tmp_path / "hang.json"
    began = time.monotonic()
    failed, result = run(server, first_token_timeout_s=0.5, record_path=str(path), **CHAT)
    took = time.monotonic() - began
    assert failed
    assert 0.5 <= took < 15  # the server stalls for 30 s
    rec = result["batch"]["records"][0]
    assert rec["status"] == 200 and rec["ok"] is False
    assert rec["error"]["kind"] == "hang"
    assert rec["error"]["message"].startswith("no token within 0.5 s (first_token_timeout_s): HTTP status 200, "
                                              "1 events, none with generated text")
    assert rec["ttft_s"] is None and rec["output_tokens"] is None and rec["output_tok_s"] is None
    assert 0.5 <= rec["latency_s"] < 15
    assert result["msg"].startswith("1 of 1 requests failed (expected all 1 to finish with their token counts): "
                                    "#0 hang: no token within 0.5 s")
    assert result["batch"]["aggregate_output_tok_s"] is None and result["batch"]["failed"] == 1
    assert json.loads(path.read_text())["records"][0]["error"]["kind"] == "hang"


def test_hang_before_headers(server):
    server.routes[("POST", "/v1/chat/completions")] = lambda handler, seen: handler.server.release.wait(30)
    failed, result = run(server, first_token_timeout_s=0.3, **CHAT)
    assert failed
    rec = result["batch"]["records"][0]
    assert (rec["error"]["kind"], rec["status"]) == ("hang", None)
    assert rec["error"]["message"] == "no token within 0.3 s (first_token_timeout_s): no response headers"


def test_first_token_deadline_grows_with_the_prompts_prefill(server):
    """With a prefill rate floor a long prompt gets its prefill on top of the margin, for every prompt in flight;
    each record and the batch say which deadline was used, and a hang names where it came from."""
    server.routes[("POST", "/v1/chat/completions")] = lambda handler, seen: handler.server.release.wait(30)
    failed, result = run(server, model="qwen-27b", kind="concurrent", requests=2, concurrency=2, prompt_tokens=200,
                         first_token_timeout_s=0.3, prefill_floor_tokens_per_s=1000)
    assert failed
    batch = result["batch"]
    assert batch["first_token_deadline"] == {"margin_s": 0.3, "prefill_floor_tokens_per_s": 1000.0,
                                             "prompts_in_flight": 2, "longest_s": 0.7}
    for rec in batch["records"]:
        assert rec["first_token_deadline_s"] == 0.7
        assert 0.7 <= rec["latency_s"] < 15
        assert rec["error"]["message"] == ("no token within 0.7 s (first_token_timeout_s 0.3 s + the prefill of 2 "
                                           "prompt(s) in flight at 1000 tokens/s): no response headers")


def test_first_token_deadline_without_a_floor_is_the_flat_timeout():
    assert first_token_deadline_s(60, 80000) == 60.0
    assert first_token_deadline_s(60, 80000, 1, 1000) == 140.0
    assert first_token_deadline_s(60, None, 4, 1000) == 60.0


def test_a_prefill_floor_that_is_no_rate_is_refused(server):
    failed, result = run(server, prefill_floor_tokens_per_s=0, **CHAT)
    assert failed
    assert "prefill_floor_tokens_per_s must be a finite number more than 0, got 0.0" in result["msg"]
    assert server.seen == []


def test_total_timeout_while_tokens_still_flow(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["t"] * 40), gap=0.05)
    failed, result = run(server, first_token_timeout_s=5, total_timeout_s=0.6, **CHAT)
    assert failed
    rec = result["batch"]["records"][0]
    assert rec["error"]["kind"] == "timeout"
    assert rec["error"]["message"].startswith("no complete response within 0.6 s (total_timeout_s): HTTP status 200")
    assert rec["ttft_s"] is not None and rec["chunks"] > 3 and rec["output_tokens"] is None


def test_http_500_with_body(server):
    body = {"error": {"message": "No fallback was attempted", "type": "None", "code": "500"}, "pad": "p" * 3000}
    server.routes[("POST", "/v1/chat/completions")] = reply(500, body)
    failed, result = run(server, **CHAT)
    assert failed
    rec = result["batch"]["records"][0]
    assert (rec["status"], rec["error"]["kind"]) == (500, "http")
    assert rec["error"]["message"] == "HTTP 500 Internal Server Error from /v1/chat/completions"
    assert rec["error"]["body"].startswith('{"error": {"message": "No fallback was attempted"')
    assert rec["error"]["body"].endswith("... (cut at 2048 characters)")
    assert len(rec["error"]["body"]) == 2048 + len("... (cut at 2048 characters)")
    assert "#0 http: HTTP 500 Internal Server Error from /v1/chat/completions (body: {" in result["msg"]


@pytest.mark.parametrize(
    ("events", "kind", "message"),
    [
        ([delta("a"), b"data: Traceback (most recent call last):\n\n"], "malformed",
         "malformed stream: event 2: data is not JSON"),
        ([delta("a"), delta("b")], "malformed", "malformed stream: the stream ended without data: [DONE] after 2"),
        ([delta("a"), b"data: \xff\n\n"], "malformed", "malformed stream: event data is not UTF-8"),
        ([delta("a"), b"<html>502</html>\n"], "malformed", "malformed stream: line is not an SSE field"),
        ([delta("a"), b"data: " + b"[" * 100000 + b"\n\n"], "malformed",
         "malformed stream: event 2: data is not JSON (nested too deeply)"),
        ([delta("a"), {"error": {"message": "context length exceeded", "code": 400}}, DONE], "server_error",
         "the stream carried an error event"),
        ([delta("a"), delta("b"), DONE], "no_usage", "the stream ended without a usage chunk"),
        ([delta("", role="assistant"), usage(10, 0), DONE], "no_tokens",
         "the stream ended with [DONE] but no chunk carried generated text (the server reports 0 output tokens)"),
        ([delta("a"), usage(10, "1"), DONE], "malformed", "usage.completion_tokens must be a token count"),
    ],
    ids=["not_json", "no_done", "not_utf8", "html", "deep_nesting", "error_event", "no_usage", "no_tokens",
         "bad_count"],
)
def test_bad_streams(server, events, kind, message):
    server.routes[("POST", "/v1/chat/completions")] = stream(events)
    failed, result = run(server, **CHAT)
    assert failed
    rec = result["batch"]["records"][0]
    assert rec["error"]["kind"] == kind, rec["error"]
    assert rec["error"]["message"].startswith(message) or message in rec["error"]["message"], rec["error"]
    assert rec["output_tok_s"] is None and rec["ok"] is False


def test_error_event_body_is_kept(server):
    server.routes[("POST", "/generate")] = stream([generate_event("a", 1), {"error": {"message": "scheduler died"}},
                                                   DONE])
    failed, result = run(server, api="sglang_generate", kind="single_stream")
    assert failed
    assert result["batch"]["records"][0]["error"]["body"] == '{"error": {"message": "scheduler died"}}'


def test_stream_cut_by_the_server(server):
    server.routes[("POST", "/v1/chat/completions")] = stream([delta("a")], end=False)
    failed, result = run(server, first_token_timeout_s=2, total_timeout_s=3, **CHAT)
    assert failed
    error = result["batch"]["records"][0]["error"]
    assert error["kind"] == "connection"
    assert error["message"].startswith("IncompleteRead")


def test_200_json_is_not_a_stream(server):
    server.routes[("POST", "/v1/chat/completions")] = reply(200, {"choices": [{"message": {"content": "hi"}}]})
    failed, result = run(server, **CHAT)
    assert failed
    error = result["batch"]["records"][0]["error"]
    assert error["kind"] == "not_a_stream"
    assert error["message"] == "expected Content-Type text/event-stream, got 'application/json'"
    assert error["body"] == '{"choices": [{"message": {"content": "hi"}}]}'


def closed_port_url():
    """A URL on 127.0.0.1 where nothing listens (a port bound and released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_connection_refused():
    failed, result = run_module(llm_workload.main, dict(CHAT, url=closed_port_url(), requests=2))
    assert failed
    assert [r["error"]["kind"] for r in result["batch"]["records"]] == ["connection", "connection"]
    assert "ConnectionRefusedError" in result["batch"]["records"][0]["error"]["message"]
    assert result["msg"].startswith("2 of 2 requests failed")


def test_fail_on_error_false_reports_and_succeeds(server):
    calls = []

    def flaky(handler, seen):
        calls.append(1)
        if len(calls) == 2:
            send(handler, 503, b'{"detail": "overloaded"}')
        else:
            stream(chat_events(["a", "b"]))(handler, seen)

    server.routes[("POST", "/v1/chat/completions")] = flaky
    failed, result = run(server, fail_on_error=False, requests=3, **CHAT)
    assert not failed
    batch = result["batch"]
    assert (batch["ok"], batch["failed"]) == (2, 1)
    assert [r["ok"] for r in batch["records"]] == [True, False, True]
    assert batch["output_tokens_total"] == 4 and batch["ttft_s"]["n"] == 2


def test_flush_refused_fails_the_batch_with_the_reason(server):
    server.routes[("POST", "/flush_cache")] = reply(
        400, b"Cache not flushed. Please check if there are pending requests. #queue-req: 0, #running-req: 1\n",
        "text/plain")
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a"]))
    failed, result = run(server, flush_cache=True, **CHAT)
    assert failed
    assert result["msg"] == ("flush_cache was asked for and refused, so the batch was not sent: POST /flush_cache "
                             "answered HTTP 400: Cache not flushed. Please check if there are pending requests. "
                             "#queue-req: 0, #running-req: 1")
    assert result["cache_flushed"] is False
    assert result["batch"]["records"] == [] and result["batch"]["ok"] == 0
    assert server.requests_to("/v1/chat/completions") == []


def test_flush_unreachable():
    failed, result = run_module(llm_workload.main, dict(CHAT, url=closed_port_url(), flush_cache=True))
    assert failed
    assert result["msg"].startswith("flush_cache was asked for and refused, so the batch was not sent: "
                                    "POST /flush_cache failed: ConnectionRefusedError")


# --- options and documentation --------------------------------------------------------------------------------------

def test_check_mode_sends_nothing(server):
    failed, result = run(server, _ansible_check_mode=True, flush_cache=True, **CHAT)
    assert not failed
    assert result["skipped"] is True and result["changed"] is False
    assert result["msg"] == "check mode - no request sent and no cache flushed"
    assert server.seen == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"kind": "single_stream"}, "api is openai_chat but all of the following are missing: model"),
        ({"kind": "long_context", "model": "m"}, "kind is long_context but all of the following are missing: "
                                                 "prompt_tokens"),
        ({"kind": "repeated_prefix", "model": "m", "requests": 2},
         "kind is repeated_prefix but all of the following are missing: prefix_tokens"),
        ({"kind": "burst", "model": "m"}, "value of kind must be one of: single_stream, concurrent, repeated_prefix, "
                                          "long_context, got: burst"),
        ({"kind": "concurrent", "model": "m", "requests": 2, "concurrency": 3},
         "concurrency (3) must not exceed requests (2)"),
        ({"kind": "single_stream", "model": "m", "url": "localhost:30000"},
         "url must be a base URL like http://169.254.77.2:30000, got 'localhost:30000'"),
    ],
)
def test_bad_options(args, message):
    args = dict(args)
    args.setdefault("url", "http://127.0.0.1:9")
    failed, result = run_module(llm_workload.main, args)
    assert failed
    assert message in result["msg"]
    assert "batch" not in result


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(llm_workload.DOCUMENTATION)["options"]
    with set_module_args({"url": "http://127.0.0.1:9", "kind": "single_stream", "model": "m"}):
        module = llm_workload.build_module()
    spec = module.argument_spec

    def shape(opts):
        return {name: (o["type"], o.get("default"), o.get("required", False), tuple(o.get("choices", ())),
                       o.get("elements"), o.get("no_log", False))
                for name, o in opts.items()}

    documented = shape(options)
    documented["api_key"] = documented["api_key"][:5] + (True,)  # no_log lives in the spec only
    assert documented == shape(spec)


def test_documentation_parses_and_every_return_says_when():
    yaml.safe_load(llm_workload.EXAMPLES)
    returns = yaml.safe_load(llm_workload.RETURN)
    assert set(returns) == {"msg", "cache_flushed", "batch"}
    assert all("returned" in r for r in returns.values())
    assert all("returned" in r for r in returns["batch"]["contains"].values())


# --- the key from a file --------------------------------------------------------------------------------------------

def test_api_key_file_sends_its_first_line_and_never_returns_it(server, tmp_path):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a", "b"], prompt=4, completion=2))
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\nsecond line ignored\n")
    failed, result = run(server, api_key_file=str(key_file), output_tokens=2, **CHAT)
    assert not failed, result.get("msg", result)
    [sent] = server.requests_to("/v1/chat/completions")
    assert sent["headers"]["Authorization"] == "Bearer sk-from-file"
    assert "sk-from-file" not in json.dumps(result)


@pytest.mark.parametrize(("content", "message"), [
    (None, "could not read api_key_file .*/key: No such file or directory"),
    ("\n", "api_key_file .*/key is empty: expected the key on its first line"),
])
def test_api_key_file_missing_or_empty_fails_before_any_request(server, tmp_path, content, message):
    key_file = tmp_path / "key"
    if content is not None:
        key_file.write_text(content)
    failed, result = run(server, api_key_file=str(key_file), **CHAT)
    assert failed and re.search(message, result["msg"]), result
    assert server.seen == []


def test_api_key_and_api_key_file_are_exclusive(server, tmp_path):
    failed, result = run(server, api_key="k", api_key_file=str(tmp_path / "key"), **CHAT)
    assert failed and "mutually exclusive: api_key|api_key_file" in result["msg"]


def test_a_key_the_server_echoes_in_an_error_is_removed_from_the_records(server, tmp_path):
    key = "sk-inferlab-canary-0c7e"
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    server.routes[("POST", "/v1/chat/completions")] = reply(
        401, {"error": {"message": f"Authentication Error, invalid key {key}"}})
    failed, result = run(server, api_key_file=str(key_file), **CHAT)
    assert failed
    error = result["batch"]["records"][0]["error"]
    assert "invalid key <redacted>" in error["body"] and key not in json.dumps(result)


# --- llama-server's own timings -------------------------------------------------------------------------------------

def test_a_real_llama_server_stream_gives_its_timings_beside_the_clients_figures(server):
    """The capture of a real llama-server stream with a draft model (tests/unit/fixtures/llamacpp/README.md), replayed
    event by event: the client's figures come from usage as always, and the server's timings (the last chunk's) are
    kept per request and summed per batch."""
    captured = (FIXTURES / "llamacpp" / "chat_stream_draft.sse").read_bytes()
    events = [part + b"\n\n" for part in captured.split(b"\n\n") if part.strip()]
    server.routes[("POST", "/v1/chat/completions")] = stream(events, gap=0.002)
    failed, result = run(server, **CHAT, requests=2, output_tokens=24)
    assert not failed, result.get("msg", result)
    batch = result["batch"]
    first = batch["records"][0]
    assert first["output_tokens"] == 24 and first["prompt_tokens"] == 80
    assert first["server_timings"]["predicted_n"] == 24
    assert (first["server_timings"]["draft_n"], first["server_timings"]["draft_n_accepted"]) == (46, 10)
    assert batch["server"]["n"] == 2
    assert batch["server"]["predicted_tokens"] == 48
    assert batch["server"]["acceptance_rate"] == pytest.approx(10 / 46)
    assert batch["server"]["decode_tok_s"]["median"] == pytest.approx(24 / 353.525 * 1000)
    assert batch["server"]["prompt_tok_s"] == pytest.approx(80 / 106.318 * 1000)
    # the replay's pace is the fake server's, not llama-server's: each request has its ratio, whose value says
    # nothing here (tests/bench/bench_engine.py measures it against the real server)
    assert batch["server"]["client_over_server"]["n"] == 2


def test_a_server_without_timings_gives_no_server_figures(server):
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a", "b"]))
    failed, result = run(server, **CHAT, output_tokens=2)
    assert not failed, result.get("msg", result)
    assert result["batch"]["records"][0]["server_timings"] is None
    assert result["batch"]["server"] is None


# --- prompts sized by the server's tokenizer, the context, and llama-server's slots ---------------------------------

def byte_tokens(text):
    """How the lab's byte-vocabulary llama-server counts (tests/unit/fixtures/llamacpp/tokenize.json: "one two three"
    is 20 tokens): a leading U+2581, then every byte, each space spelt as the three bytes of U+2581."""
    return len(("\u2581" + text.replace(" ", "\u2581")).encode("utf-8"))


def tokenize_route(handler, seen):
    send(handler, 200, json.dumps({"tokens": [0] * byte_tokens(seen["body"]["content"])}).encode())


def test_the_byte_counter_agrees_with_the_real_capture():
    assert byte_tokens("one two three") == len(json.loads((FIXTURES / "llamacpp" / "tokenize.json").read_text())[
        "tokens"])


def test_prompts_sized_by_the_tokenizer_fit_the_request_in_the_servers_tokens(server):
    server.routes[("POST", "/tokenize")] = tokenize_route
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a"]))
    args = {**CHAT, "kind": "concurrent", "requests": 2, "concurrency": 2, "prompt_tokens": 500,
            "prompt_sizing": "tokenizer"}
    failed, result = run(server, **args)
    assert not failed, result.get("msg", result)
    batch = result["batch"]
    sent = [s["body"]["messages"][0]["content"] for s in server.requests_to("/v1/chat/completions")]
    for record in batch["records"]:
        assert record["requested_prompt_tokens"] == 500
        # the most words that fit: one word more would not
        assert 500 - 12 < record["content_tokens"] <= 500
    assert sorted(byte_tokens(text) for text in sent) == sorted(r["content_tokens"] for r in batch["records"])
    assert batch["prompt_sizing"] == "tokenizer" and 2 <= batch["tokenize_calls"] <= 2 * 12
    # in words, the same request would be several times longer than asked
    assert byte_tokens(sent[0]) * 5 < byte_tokens(" ".join(["word"] * 500))


def test_a_long_context_prompt_sized_by_the_tokenizer_starts_with_the_repeated_prefix(server):
    server.routes[("POST", "/tokenize")] = tokenize_route
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a"]))
    for kind, extra in (("repeated_prefix", {"requests": 2, "prefix_tokens": 300, "prompt_tokens": 400}),
                        ("long_context", {"prompt_tokens": 900})):
        args = {**CHAT, "kind": kind, "prompt_sizing": "tokenizer", **extra}
        failed, result = run(server, **args)
        assert not failed, result.get("msg", result)
    prompts = [s["body"]["messages"][0]["content"] for s in server.requests_to("/v1/chat/completions")]
    prefix = os.path.commonprefix(prompts[:2])
    assert 250 < byte_tokens(prefix) <= 400
    assert prompts[2].startswith(prefix.rsplit(" ", 1)[0])
    assert byte_tokens(prompts[2]) <= 900


def test_a_batch_that_cannot_fit_the_context_is_refused_before_any_request(server):
    server.routes[("POST", "/tokenize")] = tokenize_route
    failed, result = run(server, **CHAT, prompt_tokens=4000, output_tokens=200, context_tokens=4096,
                         prompt_sizing="tokenizer", fail_on_error=False)
    batch = result["batch"]
    assert batch["error"].startswith(f"a prompt of {batch['content_tokens']} tokens (the server's count) and 200 "
                                     "output tokens cannot fit the context of 4096 tokens (context_tokens)")
    assert server.requests_to("/v1/chat/completions") == []


def test_a_server_without_a_tokenizer_fails_the_batch_before_any_request(server):
    failed, result = run(server, **CHAT, prompt_sizing="tokenizer", fail_on_error=False)
    assert result["batch"]["error"] == ('prompt_sizing=tokenizer could not size the prompts, so the batch was not '
                                        'sent: POST /tokenize answered HTTP 404: {"detail": "Not Found"}')
    assert server.requests_to("/v1/chat/completions") == []


def test_llama_servers_slots_are_erased_for_a_cold_batch(server):
    server.routes[("GET", "/slots")] = reply(200, b'[{"id": 0, "n_ctx": 8192}, {"id": 1, "n_ctx": 8192}]')
    for slot in (0, 1):
        server.routes[("POST", f"/slots/{slot}?action=erase")] = reply(200, b'{"id_slot": %d, "n_erased": 3}' % slot)
    server.routes[("POST", "/v1/chat/completions")] = stream(chat_events(["a"]))
    failed, result = run(server, **CHAT, flush_cache=True, flush_method="slots")
    assert not failed, result.get("msg", result)
    assert (result["batch"]["cache"], result["batch"]["flush_detail"]) == ("cold", "erased slots [0, 1]")
    erased = [s["path"] for s in server.seen if s["path"].startswith("/slots/")]
    assert erased == ["/slots/0?action=erase", "/slots/1?action=erase"]


def test_a_slot_that_cannot_be_erased_refuses_the_batch(server):
    server.routes[("GET", "/slots")] = reply(200, b'[{"id": 0}]')
    failed, result = run(server, **CHAT, flush_cache=True, flush_method="slots", fail_on_error=False)
    assert result["batch"]["error"].startswith("flush_cache was asked for and refused, so the batch was not sent: "
                                               "POST /slots/0?action=erase answered HTTP 404")
    assert server.requests_to("/v1/chat/completions") == []

"""The lab's original service (roles/lab/files/openai_standin.py): its generator, and real HTTP against it."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

STANDIN = Path(__file__).resolve().parents[2] / "roles" / "lab" / "files" / "openai_standin.py"
MODEL = "lab-qwen-small"


def load_standin():
    spec = importlib.util.spec_from_file_location("openai_standin", STANDIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


standin = load_standin()


def chat(prompt: str, **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": prompt}], **extra}


# --------------------------------------------------------------------------------------------------------------------
# the generator and validation, in process


def test_tokenizer():
    assert standin.tokenize("Hello, lab-a!") == ["Hello", ",", "lab", "-", "a", "!"]
    assert standin.tokenize("") == []


def test_generation_is_deterministic_and_prompt_dependent():
    msgs = [{"role": "user", "content": "hello"}]
    first = standin.complete(MODEL, msgs, 256)
    assert first == standin.complete(MODEL, msgs, 256)
    other = standin.complete(MODEL, [{"role": "user", "content": "something else"}], 256)
    assert other["text"] != first["text"]
    assert first["finish_reason"] == "stop"
    assert first["text"][0].isupper() and first["text"].endswith(".")
    # usage counts the server's own tokens; the stream pieces are exactly those tokens
    assert first["usage"]["completion_tokens"] == len(standin.tokenize(first["text"])) == len(first["pieces"])
    assert "".join(first["pieces"]) == first["text"]
    assert first["usage"]["prompt_tokens"] == len(standin.tokenize("user: hello\nassistant:"))
    assert first["usage"]["total_tokens"] == first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]


def test_max_tokens_and_stop():
    msgs = [{"role": "user", "content": "hello"}]
    short = standin.complete(MODEL, msgs, 3)
    assert short["usage"]["completion_tokens"] == 3
    assert short["finish_reason"] == "length"
    full = standin.complete(MODEL, msgs, 256)["text"]
    word = full.split()[2]
    stopped = standin.complete(MODEL, msgs, 256, stop=[word])
    assert stopped["finish_reason"] == "stop"
    assert stopped["text"] == full[: full.index(word)]


@pytest.mark.parametrize("body, status, param", [
    ([], 400, None),
    ({"messages": [{"role": "user", "content": "x"}]}, 400, "model"),
    ({"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}, 404, None),
    ({"model": MODEL}, 400, "messages"),
    ({"model": MODEL, "messages": []}, 400, "messages"),
    ({"model": MODEL, "messages": [{"content": "x"}]}, 400, "messages.[0].role"),
    ({"model": MODEL, "messages": [{"role": "user", "content": 5}]}, 400, "messages.[0].content"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 400, "max_tokens"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": True}, 400, "max_tokens"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "n": 2}, 400, "n"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stop": 3}, 400, "stop"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, 400, "stream"),
])
def test_validation(body, status, param):
    with pytest.raises(standin.RequestError) as exc:
        standin.validate_chat(body, MODEL)
    assert exc.value.status == status
    assert exc.value.param == param
    error = exc.value.body()["error"]
    assert set(error) == {"message", "type", "param", "code"}


def test_validation_accepts_text_parts_and_assistant_without_content():
    req = standin.validate_chat({"model": MODEL, "max_completion_tokens": 5, "messages": [
        {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "hi"}]}, MODEL)
    assert req["max_tokens"] == 5
    assert standin.render_prompt(req["messages"]) == "system: be brief\nassistant: \nuser: hi\nassistant:"


# --------------------------------------------------------------------------------------------------------------------
# a real server on 127.0.0.1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, port, pidfile, log, proc):
        self.port, self.pidfile, self.log, self.proc = port, pidfile, log, proc

    def request(self, method, path, body=None, raw=None, conn=None):
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            if own:
                conn.close()


@pytest.fixture
def server(tmp_path):
    port = free_port()
    pidfile, log = tmp_path / "standin.pid", tmp_path / "standin.log"
    proc = subprocess.Popen([sys.executable, str(STANDIN), "--host", "127.0.0.1", "--port", str(port),
                             "--model", MODEL, "--pidfile", str(pidfile), "--log", str(log)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:  # listening, and the pidfile (written just after bind) is there
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    if pidfile.is_file() and pidfile.read_text().strip():
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"stand-in did not start: {proc.stderr.read().decode()}")
            time.sleep(0.05)
        yield Server(port, pidfile, log, proc)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        proc.stderr.close()


def test_health_and_models(server):
    status, headers, body = server.request("GET", "/health")
    assert status == 200
    assert json.loads(body) == {"status": "ok", "model": MODEL}
    status, _headers, body = server.request("GET", "/v1/models")
    assert status == 200
    models = json.loads(body)
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [MODEL]
    assert server.request("GET", f"/v1/models/{MODEL}")[0] == 200
    status, _headers, body = server.request("GET", "/v1/models/other")
    assert status == 404
    assert json.loads(body)["error"]["code"] == "model_not_found"
    assert server.request("GET", "/nope")[0] == 404


def test_chat_completion(server):
    status, headers, body = server.request("POST", "/v1/chat/completions", chat("Say hello from the lab"))
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Inferlab-Host"] == socket.gethostname()
    reply = json.loads(body)
    assert reply["object"] == "chat.completion"
    assert reply["model"] == MODEL
    assert reply["id"].startswith("chatcmpl-")
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant"
    text = choice["message"]["content"]
    assert len(text.split()) >= 3
    assert choice["finish_reason"] == "stop"
    usage = reply["usage"]
    assert usage["completion_tokens"] == len(standin.tokenize(text))
    assert usage["prompt_tokens"] == len(standin.tokenize("user: Say hello from the lab\nassistant:"))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # same request, same answer; another prompt, another answer
    again = json.loads(server.request("POST", "/v1/chat/completions", chat("Say hello from the lab"))[2])
    assert again["choices"][0]["message"]["content"] == text
    other = json.loads(server.request("POST", "/v1/chat/completions", chat("Something else entirely"))[2])
    assert other["choices"][0]["message"]["content"] != text


def test_max_tokens_is_honoured(server):
    reply = json.loads(server.request("POST", "/v1/chat/completions", chat("hello", max_tokens=4))[2])
    assert reply["usage"]["completion_tokens"] == 4
    assert len(standin.tokenize(reply["choices"][0]["message"]["content"])) == 4
    assert reply["choices"][0]["finish_reason"] == "length"


def parse_sse(body: bytes) -> list:
    events = []
    for block in body.decode().split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            data = block[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_streaming_matches_the_plain_answer(server):
    plain = json.loads(server.request("POST", "/v1/chat/completions", chat("stream me"))[2])
    status, headers, body = server.request(
        "POST", "/v1/chat/completions", chat("stream me", stream=True, stream_options={"include_usage": True}))
    assert status == 200
    assert headers["Content-Type"] == "text/event-stream"
    assert headers["Transfer-Encoding"] == "chunked"
    events = parse_sse(body)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == plain["choices"][0]["message"]["content"]
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finals] == ["stop"]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == plain["usage"]


def test_streaming_without_usage_and_with_max_tokens(server):
    events = parse_sse(server.request("POST", "/v1/chat/completions", chat("x", stream=True, max_tokens=2))[2])
    assert events[-1] == "[DONE]"
    contents = [e["choices"][0]["delta"]["content"] for e in events[1:-2]]
    assert len(contents) == 2
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in e for e in events[:-1])


def test_errors_are_openai_shaped(server):
    status, _headers, body = server.request("POST", "/v1/chat/completions", raw=b"{not json")
    assert status == 400
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert "JSON" in error["message"]
    status, _headers, body = server.request("POST", "/v1/chat/completions", {"model": MODEL})
    assert status == 400
    assert json.loads(body)["error"]["param"] == "messages"
    status, _headers, body = server.request("POST", "/v1/chat/completions", {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "x"}]})
    assert status == 404
    assert json.loads(body)["error"]["code"] == "model_not_found"
    assert server.request("POST", "/v1/completions", {"model": MODEL, "prompt": "x"})[0] == 404


def test_keep_alive(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for _attempt in range(3):
            status, _headers, _body = server.request("POST", "/v1/chat/completions", chat("again"), conn=conn)
            assert status == 200
        assert server.request("GET", "/health", conn=conn)[0] == 200
    finally:
        conn.close()


def test_pidfile_log_and_clean_stop(server):
    assert int(server.pidfile.read_text()) == server.proc.pid
    server.request("POST", "/v1/chat/completions", chat("log me"))
    os.kill(int(server.pidfile.read_text()), signal.SIGTERM)
    assert server.proc.wait(timeout=5) == 0
    assert not server.pidfile.exists()
    log = server.log.read_text()
    assert f"serving model {MODEL} on http://127.0.0.1:{server.port}" in log
    assert "chat model=lab-qwen-small stream=False" in log
    assert "stopped" in log

"""Benchmark the llm_workload client against the lab server, for docs/PERFORMANCE.md.

Not a test: it prints figures (median, min, max of N runs) and the machine they were taken on. It starts
``python -m inferlab.lab.server`` (``--lab-step-time 0``: no decode delay, so the client is the bottleneck) on
127.0.0.1, pins itself (the client) to one core and the server to the others, and measures:
1. the client ceiling: one ``concurrent`` batch of ``--streams`` streams of ``--tokens`` tokens through the module's
   own code (``run_batch`` of ``_llm_workload``), its ``aggregate_output_tok_s`` (aim: at least 20,000 tok/s on one
   core), the client's CPU time per token (what one core could sustain if the server were infinitely fast), and
   whether the batch's output tokens equal the server's ``sglang:generation_tokens_total`` delta;
2. the TTFT overhead: ``--ttft-requests`` single requests through ``run_batch`` interleaved with as many through a
   raw-socket reference client (a hand-written HTTP request, time to the first ``data:`` line carrying text), and the
   difference of their median TTFTs (aim: at most 1 ms).

    .venv/bin/python tests/bench/bench_workload.py [--runs 5] [--streams 8] [--tokens 512] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.inferlab.distributed.plugins.module_utils._llm_workload import run_batch  # noqa: E402
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_prompts import build_prompts  # noqa: E402
from ansible_collections.inferlab.distributed.plugins.module_utils._workload_stream import request_body  # noqa: E402

MODEL = "bench-model"
MODEL_CONFIG = {"hidden_size": 896, "num_hidden_layers": 24, "max_position_embeddings": 32768}
CEILING_AIM = 20000.0
TTFT_AIM_MS = 1.0
# loopback only, never through a proxy from the environment
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def machine() -> str:
    cpus = os.cpu_count()
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {cpus} CPUs, {mem_gib:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(model_dir: Path, port: int, log: Path, cores: set[int]) -> subprocess.Popen:
    (model_dir / "config.json").write_text(json.dumps(MODEL_CONFIG))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    argv = [sys.executable, "-m", "inferlab.lab.server", "--model-path", str(model_dir), "--served-model-name", MODEL,
            "--lab-step-time", "0", "--enable-metrics", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        server = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    os.sched_setaffinity(server.pid, cores)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the lab server exited with {server.returncode}; its log:\n{log.read_text()}")
        try:
            with DIRECT.open(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise RuntimeError(f"the lab server did not answer /health within 60 s; its log:\n{log.read_text()}")


def generation_tokens_total(url: str) -> float:
    """Sum of every ``sglang:generation_tokens_total`` series on ``/metrics``."""
    with DIRECT.open(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith("sglang:generation_tokens_total{") or line.startswith("sglang:generation_tokens_total "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    if not found:
        raise RuntimeError("/metrics has no sglang:generation_tokens_total")
    return total


def client_ceiling(url: str, streams: int, tokens: int, seed: int) -> dict:
    before = generation_tokens_total(url)
    cpu_before = time.process_time()
    batch = run_batch(url, "concurrent", model=MODEL, requests=streams, concurrency=streams, prompt_tokens=32,
                      output_tokens=tokens, seed=seed, first_token_timeout_s=30, total_timeout_s=120)
    client_cpu_s = time.process_time() - cpu_before
    delta = generation_tokens_total(url) - before
    if batch["failed"]:
        raise RuntimeError(f"{batch['failed']} requests of the ceiling batch failed: {batch['records']}")
    return {"aggregate_output_tok_s": batch["aggregate_output_tok_s"], "wall_s": batch["wall_s"],
            "output_tokens_total": batch["output_tokens_total"], "server_generation_tokens_delta": delta,
            "counts_match": batch["output_tokens_total"] == delta,
            "chunks": sum(r["chunks"] for r in batch["records"]), "client_cpu_s": client_cpu_s,
            "tok_per_client_cpu_s": batch["output_tokens_total"] / client_cpu_s}


def raw_ttft(port: int, body: bytes) -> float:
    """TTFT of a plain-socket client: connect, send a hand-written request, read until a ``data:`` line whose
    chunk carries text. The reference the module's TTFT is compared with."""
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Accept: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(request)
        pending = b""
        while True:
            data = conn.recv(65536)
            if not data:
                raise RuntimeError("the server closed the stream before a token")
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line.startswith(b"data: {"):
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    if (choices[0].get("delta") or {}).get("content"):
                        return time.perf_counter() - start


def ttft_overhead(url: str, port: int, requests: int, seed: int) -> dict:
    module_s, raw_s = [], []
    for index in range(requests):
        batch = run_batch(url, "single_stream", model=MODEL, prompt_tokens=128, output_tokens=4,
                          seed=seed * 100000 + 2 * index)
        if batch["failed"]:
            raise RuntimeError(f"a TTFT request failed: {batch['records'][0]['error']}")
        module_s.append(batch["records"][0]["ttft_s"])
        [(prompt, _n)] = build_prompts("single_stream", 1, prompt_tokens=128, seed=seed * 100000 + 2 * index + 1)
        body = json.dumps(request_body("openai_chat", MODEL, prompt, 4)).encode()
        raw_s.append(raw_ttft(port, body))
    module_ms, raw_ms = statistics.median(module_s) * 1000, statistics.median(raw_s) * 1000
    return {"module_median_ms": module_ms, "raw_median_ms": raw_ms, "overhead_ms": module_ms - raw_ms}


def spread(values: list[float], digits: int) -> dict:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits), "runs": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--ttft-requests", type=int, default=30)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    cores = sorted(os.sched_getaffinity(0))
    client_core = {cores[0]}
    server_cores = set(cores[1:]) or client_core
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-workload-") as tmp:
        port = free_port()
        server = start_server(Path(tmp), port, Path(tmp) / "server.log", server_cores)
        os.sched_setaffinity(0, client_core)
        url = f"http://127.0.0.1:{port}"
        try:
            run_batch(url, "concurrent", model=MODEL, requests=2, concurrency=2, output_tokens=16)  # warm-up
            ceilings = [client_ceiling(url, args.streams, args.tokens, seed=run) for run in range(args.runs)]
            overheads = [ttft_overhead(url, port, args.ttft_requests, seed=run + 1) for run in range(args.runs)]
        finally:
            server.terminate()
            server.wait(timeout=10)

    results = {
        f"client ceiling, aggregate tok/s ({args.streams} streams x {args.tokens} tokens, client on 1 core)":
            spread([c["aggregate_output_tok_s"] for c in ceilings], 0),
        "client CPU cost: output tokens per client CPU second (batch + server info read)":
            spread([c["tok_per_client_cpu_s"] for c in ceilings], 0),
        "TTFT through the module, median of requests (ms)": spread([o["module_median_ms"] for o in overheads], 3),
        "TTFT through a raw socket, median of requests (ms)": spread([o["raw_median_ms"] for o in overheads], 3),
        "TTFT overhead of the module (ms)": spread([o["overhead_ms"] for o in overheads], 3),
    }
    counts_match = all(c["counts_match"] for c in ceilings)
    figures = {"machine": machine(), "client_core": sorted(client_core), "server_cores": sorted(server_cores),
               "results": results, "output_tokens_equal_server_delta": counts_match,
               "ceiling_runs": ceilings, "ttft_runs": overheads,
               "aims": {"ceiling_tok_s": CEILING_AIM, "ttft_overhead_ms": TTFT_AIM_MS}}
    print(f"machine: {figures['machine']}; client on core {sorted(client_core)}, server on {sorted(server_cores)}")
    print("| what | median | min | max | runs |")
    print("| --- | --- | --- | --- | --- |")
    for name, result in results.items():
        print(f"| {name} | {result['median']} | {result['min']} | {result['max']} | {result['runs']} |")
    print(f"output tokens of every ceiling batch == server's sglang:generation_tokens_total delta: {counts_match}")
    ceiling = results[next(iter(results))]["median"]
    overhead = results["TTFT overhead of the module (ms)"]["median"]
    print(f"aim: ceiling >= {CEILING_AIM:.0f} tok/s: {'met' if ceiling >= CEILING_AIM else 'NOT met'} ({ceiling}); "
          f"TTFT overhead <= {TTFT_AIM_MS} ms: {'met' if overhead <= TTFT_AIM_MS else 'NOT met'} ({overhead})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if counts_match else 1


if __name__ == "__main__":
    sys.exit(main())

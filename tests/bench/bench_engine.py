"""Benchmark the lab's real engine (llama.cpp over RPC) through the project's workload client, for
docs/PERFORMANCE.md.

Not a test: it prints figures (median, min, max of N runs) and the machine they were taken on. It starts the build of
`make engine` (.cache/engine.json) on 127.0.0.1: a `ggml-rpc-server` holding every layer and a `llama-server` in
front of it (one thread each), serving the lab's model (`inferlab.lab.gguf_model`, the default shape), once without
and once with the draft model. Per mode and run: one single-stream batch of `--requests` requests through the
module's own code (`run_batch` of `_llm_workload`: prompts sized by the server's tokenizer, `ignore_eos`), and the
server's `/metrics` before and after it. Reported per mode:
1. the client's decode rate (the median over requests of (output_tokens - 1) / (latency_s - ttft_s)) against the
   server's own (the median of predicted_n / predicted_ms from each response's timings), and their ratio: the first
   measurement of the project's own measurement error (the definitions differ: the client excludes the first token
   and includes the stream's delivery, the server counts every token over its generation time), and the same ratio
   with the server's rate in the client's definition ((predicted_n - 1) / predicted_ms);
2. the server's decode rate from its /metrics counters over the batch (tokens_predicted_total /
   tokens_predicted_seconds_total deltas), which must agree with the timings' sum;
3. with the draft: the acceptance rate and mean acceptance length from the server's counters.

    .venv/bin/python tests/bench/bench_engine.py [--runs 5] [--requests 5] [--output-tokens 64] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".collections"))
sys.path.insert(0, str(REPO / "tests" / "engine"))

from local_servers import Servers, http  # noqa: E402 (tests/engine: the engine tests' servers)

from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import (  # noqa: E402
    metrics_delta,
    parse_metrics,
)
from ansible_collections.inferlab.distributed.plugins.module_utils._llm_workload import run_batch  # noqa: E402
from inferlab.lab.gguf_model import Shape, ensure_models  # noqa: E402


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def run_mode(bin_dir, models, work, draft, args):
    servers = Servers(Path(bin_dir), work)
    runs = []
    try:
        # the server as it was benched: the model's context, llama.cpp's own prompt caches
        server = servers.llama_server(models / "model.gguf", [servers.rpc_server()],
                                      draft=models / "draft.gguf" if draft else None,
                                      context_length=None, slot_save_path=None, cache_ram_mib=None)
        servers.wait_ready(server)
        url = server.url
        for index in range(args.runs):
            before = parse_metrics(http(url + "/metrics"))
            batch = run_batch(url, "single_stream", model="lab", requests=args.requests,
                              prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=index,
                              prompt_sizing="tokenizer", extra_body={"ignore_eos": True}, total_timeout_s=120)
            engine = metrics_delta(before, parse_metrics(http(url + "/metrics")))
            if batch["failed"]:
                raise SystemExit(f"run {index}: {batch['failed']} requests failed: {batch['records']}")
            client = batch["decode_tok_s"]["median"]
            server_rate = batch["server"]["decode_tok_s"]["median"]
            runs.append({
                "client_decode_tok_s": client,
                "server_decode_tok_s": server_rate,
                "client_over_server": client / server_rate,
                # the server's rate in the client's definition (the first token left out: predicted_n - 1 tokens
                # over predicted_ms), so that the ratio compares like with like
                "client_over_server_aligned": client / server_rate * args.output_tokens / (args.output_tokens - 1),
                "metrics_decode_tok_s": engine["decode_tokens_per_s"],
                "metrics_tokens": engine["counters"]["tokens_predicted_total"],
                "timings_tokens": batch["server"]["predicted_tokens"],
                "prompt_content_tokens": batch["content_tokens"],
                "prompt_tokens": batch["records"][0]["prompt_tokens"],
                "ttft_s": batch["ttft_s"]["median"],
                "acceptance_rate": engine["speculative"]["acceptance_rate"],
                "mean_acceptance_length": engine["speculative"]["mean_acceptance_length"],
            })
    finally:
        servers.stop()
    summary = {name: spread([run[name] for run in runs]) for name in runs[0]}
    return {"runs": runs, "summary": summary}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    info = json.loads((REPO / ".cache" / "engine.json").read_text())
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        work = Path(tmp)
        models = work / "models"
        manifest = ensure_models(models, Shape())
        result = {
            "machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
            "engine": {"version": info["version"], "cmake_options": info["cmake_options"]},
            "model": manifest["shape"],
            "settings": vars(args) | {"json": str(args.json) if args.json else None},
            "modes": {mode: run_mode(info["bin_dir"], models, work, mode == "draft", args)
                      for mode in ("baseline", "draft")},
        }
    for mode, figures in result["modes"].items():
        print(mode)
        for name, value in figures["summary"].items():
            if value:
                print(f"  {name:24s} median {value['median']:10.3f}  min {value['min']:10.3f}"
                      f"  max {value['max']:10.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

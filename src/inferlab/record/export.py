"""`inferlab export RUN --format bench_serving|vllm`: a run's workload batches as the serving benchmarks users already
know write their results, one JSON object a line, so that a dashboard that reads those files reads inferlab runs.

Each batch of a served mode (its acceptance ladder's steps, its measured trials' batches and its concurrency sweep's
points) becomes one line, as one invocation of the benchmark writes one: SGLang's `python -m sglang.bench_serving
--output-file` (`bench_serving`) or vLLM's `vllm bench serve --save-result` (`vllm`). The figures are computed again
from the batch's own per-request records, in milliseconds, with the benchmarks' definitions: e2e latency, TTFT, TPOT
= (latency - TTFT) / (output tokens - 1), ITL (bench_serving's /generate path and vLLM divide a chunk's gap by the
tokens it carried: `itl_per_token_s` where the stream counted them, else every gap between text chunks, which is the
chat path's own definition), percentiles as numpy's default, std the population's; throughputs over the batch's
wall time; `concurrency` as bench_serving's, the sum of the requests' latencies over the duration. The requests went
out at once, as `--request-rate inf` with `--max-concurrency` the batch's concurrency. Keys the benchmarks do not
have are prefixed `inferlab_` (the run, mode, step, kind and cache label), so that a line says where it came from.
"""

from __future__ import annotations

import json
import statistics

FORMATS = ("bench_serving", "vllm")
# bench_serving's backend names for the protocol a batch spoke
BACKENDS = {"openai_chat": "sglang-oai-chat", "sglang_generate": "sglang"}
PERCENTILES = {"bench_serving": (99,), "vllm": (99,)}
ITL_PERCENTILES = {"bench_serving": (95, 99), "vllm": (99,)}


class ExportError(Exception):
    """A record that has nothing to export, or an unknown format."""


def batches(record: dict) -> list[tuple[str, str, dict]]:
    """(mode, step, batch) of every workload batch of every served mode: the ladder's steps, the measured trials'
    batches and the sweep's points, in that order."""
    found = []
    for mode, result in (record.get("serving") or {}).items():
        if not isinstance(result, dict):
            continue
        for step in (result.get("acceptance") or {}).get("steps") or []:
            if isinstance(step, dict) and isinstance(step.get("batch"), dict):
                found.append((mode, str(step.get("step", "?")), step["batch"]))
        for trial in (result.get("trials") or {}).get("trials") or []:
            for name, batch in (trial.get("batches") or {}).items() if isinstance(trial, dict) else ():
                if isinstance(batch, dict):
                    found.append((mode, f"trial {trial.get('trial')} {name}", batch))
        for point in (result.get("sweep") or {}).get("points") or []:
            if isinstance(point, dict) and isinstance(point.get("batch"), dict):
                found.append((mode, f"sweep round {point.get('trial')} concurrency {point.get('level')}",
                              point["batch"]))
    return found


def _ms(values: list[float]) -> list[float]:
    return [1000 * v for v in values]


def _percentile(values: list[float], q: int) -> float | None:
    """numpy.percentile's default (linear) of `values`: statistics.quantiles' inclusive method is the same."""
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _figures(name: str, values: list[float], percentiles: tuple[int, ...]) -> dict:
    """mean_, median_, std_ and p<N>_ of `values` (ms) for `name`; None each when there are none."""
    figures = {
        f"mean_{name}_ms": statistics.fmean(values) if values else None,
        f"median_{name}_ms": statistics.median(values) if values else None,
        f"std_{name}_ms": statistics.pstdev(values) if values else None,
    }
    figures.update({f"p{q}_{name}_ms": _percentile(values, q) for q in percentiles})
    return figures


def _itl(ok: list[dict]) -> list[float]:
    """Each request's per-token gaps where its stream counted them, else its gaps between text chunks."""
    return [gap for r in ok for gap in (r.get("itl_per_token_s") or r.get("itl_s") or [])]


def line(record: dict, mode: str, step: str, batch: dict, fmt: str) -> dict:
    """One batch as one result line of `fmt`."""
    records = [r for r in batch.get("records") or [] if isinstance(r, dict)]
    ok = [r for r in records if r.get("ok")]
    wall = batch.get("wall_s") or 0.0
    prompt = sum(r.get("prompt_tokens") or 0 for r in ok)
    output = sum(r.get("output_tokens") or 0 for r in ok)
    latencies = [r["latency_s"] for r in ok if r.get("latency_s") is not None]

    def per_wall(value):
        return value / wall if wall else None

    result = {
        "duration": wall,
        "completed": len(ok),
        "total_input_tokens": prompt,
        "total_output_tokens": output,
        "request_throughput": per_wall(len(ok)),
        "input_throughput": per_wall(prompt),
        "output_throughput": per_wall(output),
    }
    result.update(_figures("ttft", _ms([r["ttft_s"] for r in ok if r.get("ttft_s") is not None]),
                           PERCENTILES[fmt]))
    result.update(_figures("tpot", _ms([r["tpot_s"] for r in ok if r.get("tpot_s") is not None]),
                           PERCENTILES[fmt]))
    result.update(_figures("itl", _ms(_itl(ok)), ITL_PERCENTILES[fmt]))
    accept = (batch.get("spec_accept_length") or {}).get("value")
    if fmt == "bench_serving":
        result.update(_figures("e2e_latency", _ms(latencies), PERCENTILES[fmt]))
        result.update({
            "backend": BACKENDS.get(batch.get("api"), batch.get("api")),
            "dataset_name": f"inferlab-{batch.get('kind')}",
            "request_rate": float("inf"),
            "max_concurrency": batch.get("concurrency"),
            "total_throughput": per_wall(prompt + output),
            "concurrency": per_wall(sum(latencies)),
            "accept_length": accept,
        })
    else:
        result.update(_figures("e2el", _ms(latencies), PERCENTILES[fmt]))
        goodput = batch.get("goodput") or {}
        result.update({
            "backend": "openai-chat" if batch.get("api") == "openai_chat" else batch.get("api"),
            "model_id": batch.get("model"),
            "request_rate": float("inf"),
            "max_concurrency": batch.get("concurrency"),
            "total_token_throughput": per_wall(prompt + output),
            "request_goodput": goodput.get("req_s"),
            "input_lens": [r.get("prompt_tokens") for r in records],
            "output_lens": [r.get("output_tokens") for r in records],
            "ttfts": [r.get("ttft_s") for r in records],
            "itls": [r.get("itl_per_token_s") or r.get("itl_s") or [] for r in records],
            "errors": [(r.get("error") or {}).get("message", "") if not r.get("ok") else "" for r in records],
        })
    result.update({"inferlab_run": record.get("run", {}).get("id"), "inferlab_mode": mode, "inferlab_step": step,
                   "inferlab_kind": batch.get("kind"), "inferlab_cache": batch.get("cache"),
                   "inferlab_failed": len(records) - len(ok)})
    return result


def export(record: dict, fmt: str) -> list[dict]:
    """Every batch of `record` as a line of `fmt` (FORMATS)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    found = batches(record)
    if not found:
        raise ExportError(f"{record.get('run', {}).get('id', 'the run')} has no workload batch to export (no served "
                          "mode with an acceptance ladder, measured trials or a sweep)")
    return [line(record, mode, step, batch, fmt) for mode, step, batch in found]


def render(lines: list[dict]) -> str:
    """One JSON object a line, as the benchmarks append them (json.dumps: an infinite rate as Infinity)."""
    return "".join(json.dumps(item) + "\n" for item in lines)

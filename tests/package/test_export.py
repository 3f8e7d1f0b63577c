"""inferlab.record.export and `inferlab export`: a run's workload batches as SGLang's bench_serving and vLLM's bench
serve write their result lines: the field names those tools use, the figures recomputed from the per-request records
with their definitions, and the batch's origin."""

import json

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab import cli, exit_codes
from inferlab.record import export

SERVE_TRIALS = FIXTURE_ROOT / "report" / "serve_trials.json"
# The keys of a bench_serving --output-file line (python -m sglang.bench_serving) that inferlab can fill, and of a
# vllm bench serve --save-result file: what a dashboard reading those files looks up.
BENCH_SERVING_KEYS = {
    "backend", "dataset_name", "request_rate", "max_concurrency", "duration", "completed", "total_input_tokens",
    "total_output_tokens", "request_throughput", "input_throughput", "output_throughput", "total_throughput",
    "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms", "p99_e2e_latency_ms", "mean_ttft_ms",
    "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p95_itl_ms", "p99_itl_ms", "concurrency", "accept_length",
}
VLLM_KEYS = {
    "duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls", "errors",
    "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms",
    "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms",
    "std_e2el_ms", "p99_e2el_ms",
}


def request(ok=True, prompt=100, output=5, ttft=0.1, latency=0.5, itl=(0.1, 0.1, 0.1, 0.1), per_token=()):
    return {"ok": ok, "prompt_tokens": prompt, "output_tokens": output, "ttft_s": ttft, "latency_s": latency,
            "tpot_s": (latency - ttft) / (output - 1) if ok else None, "itl_s": list(itl),
            "itl_per_token_s": list(per_token), "error": None if ok else {"message": "no token within 1 s"}}


def record_with(batch: dict) -> dict:
    steps = [{"step": "concurrent", "batch": batch}]
    return {"run": {"id": "r1"}, "serving": {"nextn": {"acceptance": {"steps": steps}}}}


def batch_of(records, api="openai_chat", wall=2.0):
    return {"kind": "concurrent", "cache": "warm", "api": api, "model": "m", "concurrency": len(records),
            "wall_s": wall, "records": records, "spec_accept_length": {"value": 2.5},
            "goodput": {"req_s": 0.5}}


def test_a_batch_is_one_bench_serving_line_with_its_figures_recomputed():
    records = [request(), request(ttft=0.3, latency=0.7), request(ok=False, latency=1.0)]
    [line] = export.export(record_with(batch_of(records)), "bench_serving")
    assert BENCH_SERVING_KEYS <= set(line)
    assert (line["completed"], line["total_input_tokens"], line["total_output_tokens"]) == (2, 200, 10)
    assert line["request_throughput"] == 1.0 and line["output_throughput"] == 5.0 and line["total_throughput"] == 105
    assert line["mean_ttft_ms"] == pytest.approx(200) and line["std_ttft_ms"] == pytest.approx(100)
    assert line["p99_ttft_ms"] == pytest.approx(298)  # numpy's linear percentile of 100 and 300
    assert line["mean_tpot_ms"] == pytest.approx(100) and line["mean_itl_ms"] == pytest.approx(100)
    assert line["concurrency"] == pytest.approx(0.6)  # (0.5 + 0.7) / 2.0: the OK requests' latencies over the time
    assert (line["backend"], line["request_rate"], line["max_concurrency"]) == ("sglang-oai-chat", float("inf"), 3)
    assert line["accept_length"] == 2.5
    assert (line["inferlab_run"], line["inferlab_mode"], line["inferlab_step"], line["inferlab_failed"]) == (
        "r1", "nextn", "concurrent", 1)


def test_the_itl_is_per_token_where_the_stream_counted_each_chunks_tokens():
    # /generate: a 0.2 s gap that brought 2 tokens is two 0.1 s per-token gaps, as bench_serving's /generate path
    records = [request(itl=(0.2, 0.1), per_token=(0.1, 0.1, 0.1))]
    [line] = export.export(record_with(batch_of(records, api="sglang_generate")), "bench_serving")
    assert line["backend"] == "sglang" and line["mean_itl_ms"] == pytest.approx(100) and line["std_itl_ms"] == 0


def test_the_vllm_format_has_its_own_names_and_the_per_request_lists():
    records = [request(), request(ok=False, latency=1.0)]
    [line] = export.export(record_with(batch_of(records)), "vllm")
    assert VLLM_KEYS <= set(line)
    assert line["total_token_throughput"] == pytest.approx(52.5) and line["request_goodput"] == 0.5
    assert line["errors"] == ["", "no token within 1 s"] and line["input_lens"] == [100, 100]


def test_every_batch_of_a_recorded_run_is_a_line(tmp_path, capsys):
    assert cli.main(["export", str(SERVE_TRIALS)]) == exit_codes.SUCCESS
    lines = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    data = json.loads(SERVE_TRIALS.read_text())
    assert len(lines) == len(export.batches(data)) > 5
    assert all(BENCH_SERVING_KEYS <= set(line) for line in lines)
    assert {line["inferlab_mode"] for line in lines} == set(data["serving"])
    target = tmp_path / "out.jsonl"
    assert cli.main(["export", str(SERVE_TRIALS), "--format", "vllm", "-o", str(target)]) == exit_codes.SUCCESS
    assert len(target.read_text().splitlines()) == len(lines)


def test_a_run_without_batches_or_an_unknown_format_is_refused(tmp_path, capsys):
    empty = tmp_path / "record.json"
    empty.write_text(json.dumps({"run": {"id": "r0"}, "serving": {}}))
    with pytest.raises(export.ExportError, match="r0 has no workload batch to export"):
        export.export(json.loads(empty.read_text()), "bench_serving")
    with pytest.raises(export.ExportError, match="unknown format 'genai'"):
        export.export(record_with(batch_of([request()])), "genai")

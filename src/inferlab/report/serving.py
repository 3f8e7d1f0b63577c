"""report.md's serving sections: each served mode, the throughput summary and the measured trials."""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt


def _stat(batch: dict, metric: str, key: str = "median", scale: float = 1.0) -> str:
    value = (batch.get(metric) or {}).get(key)
    return fmt.value(None if value is None else value * scale)


def serving(mode: str, result: dict) -> list[str]:
    """One served mode: the ladder, with per-request rates, batch aggregates and cache figures in separate columns
    whose names carry their definitions."""
    acceptance = result["acceptance"]
    layers = ", ".join(f"{k}={v}" for k, v in sorted(result["layers"].items()))
    traffic = acceptance.get("traffic") or {}
    lines = [
        f"### {mode}: {'accepted' if acceptance['passed'] else 'NOT accepted'} ({layers})",
        "",
        f"- served at {result['url']} by {len(result['ranks'])} ranks ({result['process_manager']}); "
        f"counter window `{fmt.value(result.get('window'))}`",
        f"- direct-link traffic during the ladder: {fmt.value(traffic.get('message'))}",
    ]
    lines += [f"- problem: {problem}" for problem in acceptance["problems"]]
    lines += [
        "",
        "Per request (median over the step's requests):",
        "",
        "| step | kind | cache | ok/requests | TTFT ms | decode tok/s (excl. TTFT) | output tok/s (incl. TTFT) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    batches = [(step["step"], step.get("batch")) for step in acceptance["steps"]]
    for name, batch in batches:
        if not batch:
            lines.append(f"| {name} | — | — | did not run | — | — | — |")
            continue
        lines.append(
            f"| {name} | {batch['kind']} | {batch['cache']} | {fmt.value(batch.get('ok'))}/"
            f"{fmt.value(batch.get('requests'))} | {_stat(batch, 'ttft_s', scale=1000)} "
            f"| {_stat(batch, 'decode_tok_s')} | {_stat(batch, 'output_tok_s')} |"
        )
    lines += [
        "",
        "Per batch:",
        "",
        "| step | concurrency | wall s | aggregate output tok/s (all tokens / wall) "
        "| cached tokens (sum) | accept length |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, batch in batches:
        if batch:
            accept = (batch.get("spec_accept_length") or {}).get("value")
            lines.append(
                f"| {name} | {batch['concurrency']} | {fmt.value(batch.get('wall_s'))} "
                f"| {fmt.value(batch.get('aggregate_output_tok_s'))} "
                f"| {fmt.value(batch.get('cached_tokens_total'))} | {fmt.value(accept)} |"
            )
    cached_long = [b for n, b in batches if n == "long_context" and b and (b.get("cached_tokens_total") or 0) > 0]
    if cached_long:
        lines += [
            "",
            f"Note: the long-context request reused {cached_long[0]['cached_tokens_total']} cached "
            "tokens, so its TTFT is not a cold-prefill result.",
        ]
    lines.append("")
    return lines


# (title, definition, metric, which batches: "single" (concurrency 1) or "concurrent", scale)
PER_REQUEST_KINDS = (
    (
        "Single-stream output tok/s",
        "per request: output tokens / request latency, TTFT included; batches at concurrency 1.",
        "output_tok_s",
        "single",
        1,
    ),
    (
        "Decode tok/s",
        "per request: (output tokens - 1) / (latency - TTFT), the first token and TTFT excluded; batches at "
        "concurrency 1.",
        "decode_tok_s",
        "single",
        1,
    ),
    (
        "Per-request output tok/s under concurrency",
        "per request, TTFT included, while the batch's requests ran together: what one request saw, not a "
        "single-stream figure and not the aggregate.",
        "output_tok_s",
        "concurrent",
        1,
    ),
    (
        "TTFT ms",
        "per request: from sending the request (connect included) to the first streamed token.",
        "ttft_s",
        "all",
        1000,
    ),
    (
        "ITL ms per chunk",
        "every gap between streamed chunks that carried text, the batch's OK requests pooled (bench_serving's chat "
        "path); with speculative decoding a chunk carries several tokens, so this is not a per-token figure.",
        "itl_s",
        "all",
        1000,
    ),
    (
        "ITL ms per token",
        "each gap between text chunks divided by the tokens its chunk carried, once per token (bench_serving's "
        "/generate path, genai-perf, guidellm); only where the stream counts each chunk's tokens (/generate), so "
        "no row for a chat stream.",
        "itl_per_token_s",
        "all",
        1000,
    ),
)


def _cached_tokens(batch: dict) -> str:
    value = batch.get("cached_tokens_total")
    return "not reported" if value is None else fmt.count(value)


def throughput_summary(batches: list[record_view.Batch]) -> list[str]:
    lines = [
        "## Throughput summary",
        "",
        "One table per kind of figure; kinds are never mixed. `cache`: cold = the server's prefix cache was flushed "
        "before the batch; warm = it was not, and the cached prompt tokens the server reported are shown. "
        "min, median and max are over the step's OK requests (n).",
        "",
        "Modes: "
        + "; ".join(
            f"`{mode}`: {fmt.cell(layers)}" for mode, layers in dict.fromkeys((b.mode, b.layers) for b in batches)
        )
        + ".",
        "",
    ]
    for title, definition, metric, which, scale in PER_REQUEST_KINDS:
        chosen = [b for b in batches if which == "all" or (b.batch.get("concurrency") == 1) == (which == "single")]
        rows = []
        for b in chosen:
            stats = record_view.stat(b.batch, metric)
            if stats is None or (metric == "itl_per_token_s" and not stats.get("n")):
                continue
            row = [fmt.cell(b.mode), fmt.cell(b.step), fmt.cache(b.batch), _cached_tokens(b.batch)]
            if which != "single":
                row.append(fmt.count(b.batch.get("concurrency")))
            row += [fmt.value(stats.get("n"))] + [
                fmt.value(None if record_view.number(stats.get(k)) is None else stats[k] * scale)
                for k in ("min", "median", "p90", "p99", "max")
            ]
            rows.append(row)
        if not rows:
            continue
        header = ["mode", "step", "cache", "cached prompt tokens"]
        header += [] if which == "single" else ["concurrency"]
        header += ["n", "min", "median", "p90", "p99", "max"]
        lines += [f"### {title}", "", f"Definition: {definition}", "", *fmt.table(header, rows), ""]
    aggregate = [b for b in batches if (b.batch.get("concurrency") or 1) > 1]
    if aggregate:
        rows = [
            [
                fmt.cell(b.mode),
                fmt.cell(b.step),
                fmt.cache(b.batch),
                _cached_tokens(b.batch),
                fmt.count(b.batch.get("concurrency")),
                f"{fmt.value(b.batch.get('ok'))}/{fmt.value(b.batch.get('requests'))}",
                fmt.count(b.batch.get("output_tokens_total")),
                fmt.value(b.batch.get("wall_s")),
                fmt.value(b.batch.get("aggregate_output_tok_s")),
                fmt.value(b.batch.get("request_throughput_req_s")),
                fmt.value(b.batch.get("total_token_throughput_tok_s")),
                _goodput(b.batch.get("goodput")),
            ]
            for b in aggregate
        ]
        header = [
            "mode",
            "step",
            "cache",
            "cached prompt tokens",
            "concurrency",
            "ok/requests",
            "output tokens",
            "wall s",
            "aggregate tok/s",
            "req/s",
            "total tok/s",
            "goodput",
        ]
        lines += [
            "### Aggregate output tok/s",
            "",
            "Definition: per batch: the output tokens of all OK requests / the batch's wall time (first request sent "
            "to last byte received), at concurrency > 1. It is not any one request's rate. Beside it, over the same "
            "time: OK requests a second, prompt and output tokens a second (bench_serving's total throughput), and "
            "the goodput, the requests within the stated TTFT / TPOT targets and their share (— when none was "
            "stated; records from before these figures show — too).",
            "",
            *fmt.table(header, rows),
            "",
        ]
    return lines


def _goodput(goodput: dict | None) -> str:
    """`requests (share) within TTFT <= x s, TPOT <= y s`, or — without targets."""
    if not isinstance(goodput, dict) or goodput.get("share") is None:
        return "—"
    targets = ", ".join(f"{name.upper()} <= {fmt.value(goodput.get(key))} s"
                        for key, name in (("ttft_s", "ttft"), ("tpot_s", "tpot")) if goodput.get(key) is not None)
    return f"{fmt.count(goodput.get('requests'))} ({100 * goodput['share']:.0f} %) within {targets}"


def measured_trials(trials: dict[str, record_view.ModeTrials]) -> list[str]:
    """One table per figure, a row per served mode: the value of every trial and their min, median and max."""
    lines = [
        "## Measured trials",
        "",
        "After its ladder passed, each mode ran its measured trials in the same deployment and counter window: "
        "each trial a single-stream batch, then a concurrent batch, with the prompts of that trial's seed (the "
        "same in every run). A trial gives one value of each figure, so min, median and max here are the spread "
        "across trials, not across the requests of one batch.",
        "",
    ]
    for key, definition in record_view.TRIAL_FIGURES:
        rows = []
        for mode, result in trials.items():
            figure = result.figures.get(key) or {}
            values = figure.get("values") or []
            if not any(record_view.number(v) is not None for v in values):
                continue
            rows.append(
                [fmt.cell(mode), fmt.cell(result.layers), fmt.value(figure.get("n")),
                 ", ".join(fmt.value(v) for v in values)]
                + [fmt.value(figure.get(k)) for k in ("min", "median", "max")]
            )
        if rows:
            header = ["mode", "layers", "trials", "per trial", "min", "median", "max"]
            lines += [f"### {definition}", "", *fmt.table(header, rows), ""]
    failed = [(mode, p) for mode, result in trials.items() for p in result.problems]
    lines += [f"- trial problem, {mode}: {fmt.cell(problem)}" for mode, problem in failed]
    if failed:
        lines.append("")
    return lines

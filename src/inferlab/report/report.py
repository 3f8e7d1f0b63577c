"""Render report.md from a validated record.

Sections, each only when the record has its data: what this run shows and what it does not show (generated from the
record: report_findings), the stage journal, a throughput summary with one table per kind of figure, verification,
the candidate driver, link tests, counter deltas per window and host, the serving ladders with their cold/warm prefix
trials (report_prefix), the engine's own figures (report_engine) and NCCL collectives (report_collectives), the link
A/B, the fallback route, continuity, the restore, the re-verifications, and the plots (drawn or left out, and why).
report_text prints the values.

Wording: observed, theory, supported. A figure is observed; a cause is a theory until a one-layer change that
reproduces from a fresh start supports it. tests/package/test_report_sections.py scans every rendered fixture for words
that claim more.
"""

from __future__ import annotations

import json
from pathlib import Path

from inferlab.analysis import reverify
from inferlab.plots import plots
from inferlab.record import view as record_view
from inferlab.report import collectives as report_collectives
from inferlab.report import engine as report_engine
from inferlab.report import engine_loopback as report_engine_loopback
from inferlab.report import findings as report_findings
from inferlab.report import ladder as report_ladder
from inferlab.report import leave_one_out as report_leave_one_out
from inferlab.report import pairs as report_pairs
from inferlab.report import prefix as report_prefix
from inferlab.report import quarantine as report_quarantine
from inferlab.report import sweep as report_sweep
from inferlab.report import text as fmt
from inferlab.system.private_files import write_private

# The receiver-error counters as a column header names them: crc, missed, length, over.
RX_ERROR_SHORT = ", ".join(n.removeprefix("rx_").removesuffix("_errors") for n in record_view.RX_ERROR_COUNTERS)


def _gpu_holders(state: dict | None) -> str:
    """What holds each GPU of a verification state: its processes as NVML listed them, with their memory (a state
    recorded before processes were kept shows its free memory only)."""
    cards = []
    for gpu in (state or {}).get("gpus") or []:
        text = f"{gpu['index']}: {gpu['name']}, {gpu['memory_free_bytes'] // 2**20} MiB free"
        if "compute_processes" in gpu:
            held = ", ".join(f"{p['name']} (pid {p['pid']}, {(p.get('used_memory_bytes') or 0) // 2**20} MiB)"
                             for p in gpu["compute_processes"])
            text += f", held by {held or 'no process'}"
        cards.append(text)
    return "; ".join(cards) or "none"


def _link_training(link: dict) -> str:
    """How the link trained: an Ethernet NIC's negotiated speed, duplex and driver, or a Thunderbolt peer's speed
    per lane and lanes."""
    if link.get("kind") == "ethernet":
        return (f"Ethernet {fmt.value(link.get('speed_mbps'))} Mb/s {fmt.value(link.get('duplex'))} duplex, "
                f"driver {fmt.value(link.get('driver'))}, firmware {fmt.value(link.get('firmware_version'))}")
    return (f"{fmt.value(link.get('rx_speed_gbps'))}/{fmt.value(link.get('tx_speed_gbps'))} Gb/s per lane (rx/tx), "
            f"lanes {fmt.value(link.get('rx_lanes'))}/{fmt.value(link.get('tx_lanes'))}")


def _verification(host: str, state: dict) -> list[str]:
    link = state.get("link", {})
    lines = [
        f"### {host}: {'passed' if state.get('ok') else 'FAILED'}",
        "",
        f"- kernel {fmt.value(state.get('kernel_release'))}; layers: "
        + ", ".join(f"{k}={fmt.value(v)}" for k, v in sorted(state.get("layers", {}).items())),
        f"- link {link.get('interface')} {link.get('address')} -> {link.get('peer_address')}: "
        f"{fmt.value(link.get('operstate'))}, MTU {fmt.value(link.get('mtu'))}, {_link_training(link)}",
        f"- GPUs ({fmt.value(state.get('nvml_source'))}): {_gpu_holders(state)}",
        "",
        "| check | ok | expected | found | variable |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in state.get("checks", []):
        lines.append(
            f"| {check['name']} | {'ok' if check['ok'] else '**FAIL**'} | {fmt.value(check['expected'])} "
            f"| {fmt.value(check['found'])} | `{check['variable']}` |"
        )
    lines.append("")
    return lines


def _stat(batch: dict, metric: str, key: str = "median", scale: float = 1.0) -> str:
    value = (batch.get(metric) or {}).get(key)
    return fmt.value(None if value is None else value * scale)


def _serving(mode: str, result: dict) -> list[str]:
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


def _link_tests(host: str, result: dict) -> list[str]:
    pair, tests = result["pair"], result["tests"]
    a, b = pair["a"], pair["b"]
    lines = [
        f"### {a} <-> {b} over {pair['interface']} (transport: {result['transport_label']})",
        "",
        *[f"- {name.replace('_', ' ')}: {text}" for name, text in result["verdicts"].items() if text],
        "",
    ]
    if result["transport_label"] == "emulated":
        lines += [
            "Transport damage here is emulated by lab tc profiles: it shows as qdisc drops and TCP retransmissions. "
            "A veth never counts receiver CRC or overrun errors, so those columns stay 0 in the lab.",
            "",
        ]
    lines += [
        f"| test | {a} -> {b} Gb/s | {b} -> {a} Gb/s | host TCP retransmitted segments (% of sent) {a} / {b} "
        f"| rx errors ({RX_ERROR_SHORT}) {a} / {b} |",
        "| --- | --- | --- | --- | --- |",
    ]

    def counters(test: dict) -> tuple[str, str]:
        per_host = test.get("host_counters") or {}
        retrans = " / ".join(
            f"{fmt.value((per_host.get(h) or {}).get('RetransSegs'))} "
            f"({fmt.value((per_host.get(h) or {}).get('retrans_pct'))}%)"
            for h in (a, b)
        )
        errors = " / ".join(
            ", ".join(
                fmt.value((per_host.get(h) or {}).get(k))
                for k in record_view.RX_ERROR_COUNTERS
            )
            for h in (a, b)
        )
        return retrans, errors

    rows = []
    if "asymmetry" in tests:
        rows.append(
            (
                "asymmetry (bidir)" if tests["asymmetry"].get("mode", "bidir") == "bidir"
                else "asymmetry (each direction alone)",
                tests["asymmetry"]["a_to_b_bps"],
                tests["asymmetry"]["b_to_a_bps"],
                tests["asymmetry"],
            )
        )
    sweep = tests.get("flow_sweep")
    if sweep:
        for flows in sorted(sweep["a_to_b"], key=int):
            rows.append((f"flow sweep, {flows} flow(s)", sweep["a_to_b"][flows], sweep["b_to_a"].get(flows), sweep))
    if "window" in tests:
        rows.append(
            (
                f"window ({tests['window']['window_bytes']} B, one flow)",
                tests["window"]["a_to_b_bps"],
                None,
                tests["window"],
            )
        )
    load = (tests.get("loaded_probes") or {}).get("load")
    if load:
        rows.append(("load under the probes (bidir)", load["a_to_b_bps"], load["b_to_a_bps"], tests["loaded_probes"]))
    for name, forward, reverse, test in rows:
        retrans, errors = counters(test)
        lines.append(f"| {name} | {fmt.gbps(forward)} | {fmt.gbps(reverse)} | {retrans} | {errors} |")
    lines += _soak_lines(tests.get("soak"), a, b)
    probes = [(t, d) for t in ("probes", "loaded_probes") for d in ("a_to_b", "b_to_a") if (tests.get(t) or {}).get(d)]
    if probes:
        lines += [
            "",
            "| probes | direction | loss % | mean ms | p50 ms | p99 ms |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for test, direction in probes:
            probe = tests[test][direction]
            label = f"{a} -> {b}" if direction == "a_to_b" else f"{b} -> {a}"
            lines.append(
                f"| {'loaded' if test == 'loaded_probes' else 'unloaded'} | {label} | {probe['loss_pct']} "
                f"| {fmt.value(probe['mean_ms'])} | {fmt.value(probe['p50_ms'])} | {fmt.value(probe['p99_ms'])} |"
            )
    lines.append("")
    return lines


def _soak_lines(soak: dict | None, a: str, b: str) -> list[str]:
    """The soak: its failed probes and each host's link events, with their times (the plot shows the rates)."""
    if not soak:
        return []
    lines = ["", f"Soak, {fmt.count(len(soak['probes']))} probe(s) of {fmt.value(soak.get('probe_s'))} s every "
             f"{fmt.value(soak.get('interval_s'))} s; failed probes: {fmt.count(soak['failed_probes'])}.", ""]
    events = [(host, event) for host in (a, b) for event in (soak.get("events") or {}).get(host) or []]
    failed = [p for p in soak["probes"] if not p["ok"]]
    rows = [[fmt.cell(event.get("at")), host, fmt.cell(link_event_texts([dict(event, at=None)])[0])]
            for host, event in events]
    rows += [[fmt.utc_seconds(probe.get("started_at")), f"{a} -> {b}",
              f"probe {probe['index']} failed: {fmt.cell(probe.get('error'))}"] for probe in failed]
    return lines + (fmt.table(["when (UTC)", "host", "what"], rows) if rows else [])


def _condition_applied(ab: dict) -> str:
    """How each condition was produced: a driver state on every ring host, or a tc profile on one host."""
    applied = []
    for condition in ab.get("conditions") or []:
        if condition.get("hook") == "driver":
            applied.append(f"{condition['name']}: the {condition.get('driver')} driver on every ring host")
        else:
            applied.append(f"{condition['name']}: link profile {condition.get('profile')} on {ab.get('shaped_host')}")
    return "".join(f"; {text}" for text in applied)


def _link_ab(host: str, ab: dict) -> list[str]:
    conditions = [row["condition"] for row in ab["table"]]
    lines = [
        f"### {' vs '.join(conditions)} ({ab['repetitions']} interleaved repetitions, transport: "
        f"{ab['transport_label']}{_condition_applied(ab)})",
        "",
        "Each cell: median (min to max, n runs). Metrics named a_to_b / b_to_a run from the first ring host to the "
        "second and back; _a / _b are each host's own counter-window deltas.",
        "",
        "| metric | " + " | ".join(conditions) + " |",
        "| --- |" + " --- |" * len(conditions),
    ]
    names = list(dict.fromkeys(name for row in ab["table"] for name in row["metrics"]))
    for name in names:
        cells = []
        for row in ab["table"]:
            stats = row["metrics"].get(name) or {}
            cells.append(
                "—"
                if not stats.get("n")
                else f"{fmt.value(stats['median'])} ({fmt.value(stats['min'])} to {fmt.value(stats['max'])}, "
                f"{stats['n']})"
            )
        if any(cell != "—" for cell in cells):
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _served_by(counts: dict) -> str:
    return ", ".join(f"{backend} {count}" for backend, count in sorted(counts.items())) or "none"


def _primary_again(step: dict) -> str:
    return f"{step['primary_again']['served_by']} (try {step['primary_again']['attempts']})"


def _fallback(fallback: dict) -> list[str]:
    """The fallback route: what was added, what each proof observed, and whether the config came back."""
    lines = [
        "## Fallback route",
        "",
        "Real requests through the exact public route (the gateway URL, the public role, the clients' key); "
        "`x-litellm-model-api-base` names the backend that served each one.",
        "",
        "| step | requests | ok | failed | served by | primary serves again |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    negative = fallback.get("negative_proof")
    if negative:
        verdict = "reproduced" if negative["reproduced"] else "**not reproduced**"
        ok = negative["requests"] - negative["failed"]
        lines.append(
            f"| without the fallback, primaries paused (expected to fail: {verdict}) | {negative['requests']} "
            f"| {ok} | {negative['failed']} | — | {_primary_again(negative)} |"
        )
    prove = fallback.get("prove")
    if prove:
        lines.append(
            f"| with the fallback, primaries paused | {prove['requests']} | {prove['ok']} | {prove['failed']} "
            f"| {_served_by(prove['served_by'])} | {_primary_again(prove)} |"
        )
    lines.append("")
    add, remove = fallback.get("add"), fallback.get("remove")
    if add:
        steps = add.get("steps", [])
        applied = ", ".join(
            f"{s['instance']} {'drained' if s['drained'] else 'not drained'} {fmt.value(s['seconds'])} s" for s in steps
        )
        lines.append(
            f"- added `fallbacks: [{{{add['public_model']}: [{add['target_model']}]}}]` to `{add['config']}` "
            f"on {add['gateway_host']} (original sha256 `{add['original_sha256'][:16]}…`), applied through "
            f"{add['front']}: {applied or 'already added'}"
        )
    if remove:
        verdict = "byte-identical" if remove["byte_identical"] else "**NOT the original**"
        lines.append(
            f"- removed: the config is {verdict} (sha256 `{remove['config_sha256'][:16]}…`), "
            f"primary serving again: {_primary_again(remove)}"
        )
    if negative and negative["errors"]:
        lines.append(f"- the failure without the fallback: {negative['errors'][0]}")
    lines.append("")
    return lines


# --- helpers for the sections below -------------------------------------------------------------------------------


def _bytes(value) -> str:
    number = record_view.number(value)
    if number is None:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(number) >= size:
            return f"{number / size:.3g} {unit}"
    return f"{number:.0f} B"


def _duration(start, end) -> str:
    first, last = record_view.epoch(start), record_view.epoch(end)
    if first is None or last is None or last < first:
        return "—"
    seconds = last - first
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


# --- stage journal ------------------------------------------------------------------------------------------------


def _changes(entry: dict) -> str:
    """A journal entry's `changes`: the stage table's text (or a list of them)."""
    changes = entry.get("changes")
    if isinstance(changes, list):
        return "; ".join(fmt.cell(c) for c in changes) or "—"
    return fmt.cell(changes or None)


def _journal(entries: list[dict]) -> list[str]:
    lines = [
        "## Stage journal",
        "",
        "The staged experiment's stages in run order (UTC). A measured stage names its control and the one declared "
        "layer it changes against it.",
        "",
    ]
    rows = []
    for entry in entries:
        status = entry.get("status")
        measured = entry.get("measured")
        rows.append(
            [
                fmt.cell(entry.get("index")),
                fmt.cell(entry["stage"]),
                f"**{status}**" if status in ("failed", "running") else fmt.cell(status),
                (fmt.cell(entry.get("control")) if entry.get("control") else "— (the control)") if measured else "—",
                fmt.layer_change(entry),
                fmt.cell(entry.get("started")),
                _duration(entry.get("started"), entry.get("finished")),
                _changes(entry),
                fmt.cell(entry.get("note") or None),
            ]
        )
    header = ["#", "stage", "status", "measured against", "layer change", "started", "took", "changes", "note"]
    lines += fmt.table(header, rows)
    return [*lines, ""]


# --- throughput summary -------------------------------------------------------------------------------------------

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


def _throughput_summary(batches: list[record_view.Batch]) -> list[str]:
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


def _measured_trials(trials: dict[str, record_view.ModeTrials]) -> list[str]:
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


# --- candidate driver ---------------------------------------------------------------------------------------------


def _link_back(back: dict | None) -> str:
    """How the direct link came back after a reload: seconds, carrier, what was re-established."""
    if not back:
        return "not watched"
    text = f"{fmt.value(back.get('seconds'))} s"
    if back.get("carrier_s") is not None:
        text += f" (carrier at {fmt.value(back.get('carrier_s'))} s)"
    if back.get("actions"):
        text += "; " + fmt.cell("; ".join(back["actions"]))
    return text


def _services_back(services: list | None) -> str:
    """Each original service after the undo: serving or not, after how long and how many requests."""
    if not services:
        return "-"
    parts = []
    for service in services:
        wait = service.get("wait") or {}
        said = "serves" if service.get("ok") else "**does not serve**"
        if wait.get("ready_timeout_s"):
            said += f" after {fmt.value(wait.get('waited_s'))} s ({wait.get('attempts')} requests, " \
                    f"of {fmt.value(wait['ready_timeout_s'])} s)"
        parts.append(f"{service.get('name')} {said}")
    return fmt.cell("; ".join(parts))


def _module_facts(module: dict) -> str:
    if not isinstance(module, dict) or not module:
        return "—"
    if module.get("loaded") is False:
        return "not loaded"
    parameters = module.get("parameters") or {}
    params = ", ".join(f"{k}={v}" for k, v in sorted(parameters.items())) or "no parameters"
    taint = module.get("taint")
    return f"`{fmt.value(module.get('srcversion'))}` ({params}; module taint {fmt.cell(taint or 'none')})"


def _build_lines(entry: dict) -> list[str]:
    build = entry.get("build") or {}
    module = build.get("module") or {}
    if build.get("emulated") or entry.get("driver_layer") == "emulated":
        return [
            f"- emulated driver layer: {fmt.value(build.get('note'))}",
            f"- stand-in srcversion `{fmt.value(module.get('srcversion'))}`",
        ]
    source = build.get("source") or {}
    gates = build.get("gates") or {}
    lines = [
        f"- built on {fmt.value(entry.get('build_host'))} for {fmt.value(build.get('target_kernel_release'))} from the "
        f"{fmt.value(source.get('source_kind'))} `{fmt.value(source.get('path'))}`: source version "
        f"{fmt.value(source.get('source_version'))}, headers {fmt.value(source.get('headers_version'))}, running "
        f"{fmt.value(source.get('running_version'))}",
        f"- layout `{fmt.value(source.get('layout'))}`, TX E2E history `{fmt.value(source.get('history'))}`, driver "
        f"`{fmt.value(source.get('driver'))}`",
    ]
    for patch in source.get("patches") or []:
        lines.append(f"- patch `{Path(str(patch.get('path'))).name}` sha256 `{fmt.value(patch.get('sha256'))}`")
    for gate in gates.get("patches") or []:
        lines.append(
            f"- gates for `{Path(str(gate.get('patch'))).name}`: git apply --check "
            f"{fmt.value(gate.get('git_apply_check'))}; checkpatch --strict: `{fmt.value(gate.get('checkpatch'))}`"
        )
    if gates:
        lines.append(f"- git diff --check {fmt.value(gates.get('git_diff_check'))}")
    lines.append(
        f"- module `{Path(str(module.get('module_path'))).name}`: sha256 `{fmt.value(module.get('sha256'))}`, "
        "srcversion "
        f"`{fmt.value(module.get('srcversion'))}`, vermagic `{fmt.value(module.get('vermagic'))}`, signed "
        f"{fmt.value(module.get('signed'))}, compiler warnings {fmt.value(module.get('compiler_warnings'))}"
    )
    return lines


def _candidate(candidates: dict) -> list[str]:
    entries = [(host, entry) for host, entry in sorted(candidates.items()) if isinstance(entry, dict)]
    lines = [
        "## Candidate driver",
        "",
        "A reload removes the direct link's interface with its addresses, on both hosts. \"Link back\" is the time "
        "from the load until the link carried a ping again (the interface back, its address re-established, carrier, "
        "speed and lanes), observed by the host's link watchdog.",
        "",
    ]
    if any(entry.get("driver_layer") == "emulated" for _host, entry in entries):
        lines += [
            "On the emulated driver layer nothing is built or loaded: a link profile on the veth stands in for the "
            "candidate, and the module facts are the fixture root's. This is not a driver result.",
            "",
        ]
    rows = []
    for host, entry in entries:
        taint = entry.get("kernel_taint") or {}
        watchdog = entry.get("watchdog")
        rows.append(
            [
                fmt.cell(host),
                fmt.cell(entry.get("driver_layer")),
                fmt.cell(entry.get("kernel_release")),
                fmt.value(entry.get("tx_e2e")),
                fmt.value(entry.get("peer_e2e")),
                "**yes**" if entry.get("peer_override") else fmt.value(entry.get("peer_override")),
                _module_facts(entry.get("module_before") or {}),
                _module_facts(entry.get("module_after") or {}),
                f"{fmt.value(taint.get('before'))} -> {fmt.value(taint.get('after'))}",
                (f"pid {fmt.value(watchdog.get('pid'))}, {fmt.value(watchdog.get('deadline_s'))} s" if watchdog
                 else "none"),
                _link_back(entry.get("link_back")),
            ]
        )
    lines += fmt.table(
        [
            "host",
            "driver layer",
            "kernel",
            "tx_e2e",
            "peer E2E",
            "peer override",
            "module before",
            "module after",
            "kernel taint",
            "watchdog",
            "link back after the load",
        ],
        rows,
    )
    lines.append("")
    # one build section per distinct build (both hosts usually load the same one)
    builds: dict[str, list[str]] = {}
    for host, entry in entries:
        emulated = entry.get("driver_layer") == "emulated"
        key = json.dumps([None if emulated else entry.get("build_host"), entry.get("build")], sort_keys=True)
        builds.setdefault(key, []).append(host)
    by_host = dict(entries)
    for hosts in builds.values():
        lines += [f"### Build for {fmt.join(hosts)}", "", *_build_lines(by_host[hosts[0]])]
        for host in hosts:
            message = by_host[host].get("message")
            if message:
                lines.append(f"- load on {host}: {fmt.value(message)}")
            if by_host[host].get("link_profile"):
                lines.append(f"- link profile standing in on {host}: `{by_host[host]['link_profile']}`")
        lines.append("")
    return lines


# --- counter deltas -----------------------------------------------------------------------------------------------


LINK_EVENT_WORDS = {"carrier": "carrier changed", "gone": "interface gone", "back": "interface back",
                    "counters_reset": "interface re-created (counters restarted)",
                    "unreadable_sample": "a sample could not be read"}


def link_event_texts(events: list[dict]) -> list[str]:
    """One phrase per link event of a window (the link_events filter's output): what, and when (UTC)."""
    texts = []
    for event in events:
        kind = str(event.get("kind"))
        text = LINK_EVENT_WORDS.get(kind, kind)
        if kind == "carrier":
            text += f" {fmt.count(event.get('changes'))} time(s)"
        at = str(event.get("at") or "")
        texts.append(f"{text} at {at[11:22]}" if at else text)
    return texts


def _window_notes(window: record_view.Window) -> list[str]:
    data = window.data
    notes = [str(n) for n in data.get("notes") or [] if n]
    if data.get("link_retrained"):
        before, after = data.get("link_before") or {}, data.get("link_after") or {}
        notes.append(
            f"the link changed during the window: {fmt.value(before.get('rx_speed_gbps'))}/"
            f"{fmt.value(before.get('tx_speed_gbps'))} Gb/s -> {fmt.value(after.get('rx_speed_gbps'))}/"
            f"{fmt.value(after.get('tx_speed_gbps'))} Gb/s per lane (rx/tx)"
        )
    events = link_event_texts(data.get("link_events") or [])
    if events:
        notes.append(f"the link's events during the window: {'; '.join(events)}")
    notes += [f"counter reset: {r}" for r in data.get("resets") or []]
    missing = data.get("missing") or []
    if missing:
        notes.append(f"counters missing from a snapshot: {', '.join(str(m) for m in missing)}")
    return notes


def _counter_deltas(windows: list[record_view.Window], emulated: bool) -> list[str]:
    lines = [
        "## Counter deltas per window and host",
        "",
        "Growth of each counter between a window's opening and closing snapshots. Receiver errors and bytes are the "
        "direct-link interface's; TCP retransmitted segments are host-wide (every interface). Receiver errors: CRC "
        "(rx_crc_errors), missed (rx_missed_errors), length (rx_length_errors), overrun (rx_over_errors), total "
        "(rx_errors, the kernel's own sum, which also counts other kinds).",
        "",
    ]
    if emulated:
        lines += [
            "Transport label: emulated. A veth never counts receiver CRC, missed, length or overrun errors, so those "
            "columns are 0 by construction here; the emulated damage shows as TCP retransmissions (and qdisc drops).",
            "",
        ]
    rows = []
    for w in windows:
        rows.append(
            [
                fmt.cell(w.name),
                fmt.cell(w.host),
                fmt.cell(w.interface),
                fmt.value(record_view.number(w.data.get("elapsed_s"))),
                *(fmt.count(w.counter(name)) for name in record_view.RX_ERROR_COUNTERS),
                fmt.count(w.counter("rx_errors")),
                fmt.count(w.counter("RetransSegs")),
                _bytes(w.counter("rx_bytes")),
                _bytes(w.counter("tx_bytes")),
                fmt.count(w.samples.get("count")) if w.samples.get("path") else "none",
            ]
        )
    lines += fmt.table(
        [
            "window",
            "host",
            "interface",
            "seconds",
            "rx CRC",
            "rx missed",
            "rx length",
            "rx overrun",
            "rx errors (total)",
            "TCP retrans segs",
            "received",
            "sent",
            "sampler samples",
        ],
        rows,
    )
    notes = [(w, note) for w in windows for note in _window_notes(w)]
    if notes:
        lines += ["", *[f"- {w.name} on {w.host}: {note}" for w, note in notes]]
    return [*lines, ""]


# --- restore: the driver ------------------------------------------------------------------------------------------


def _restore_driver(restores: dict) -> list[str]:
    drivers = [(host, r["driver"]) for host, r in sorted(restores.items()) if isinstance(r.get("driver"), dict)]
    if not drivers:
        return []
    rows = []
    for host, driver in drivers:
        persistence = driver.get("persistence") or {}
        taint = persistence.get("taint") or {}
        rows.append(
            [
                fmt.cell(host),
                fmt.value(driver.get("compared")),
                "; ".join(fmt.cell(d) for d in driver.get("differences") or []) or "none",
                _module_facts(driver.get("module") or {}),
                "; ".join(fmt.cell(d) for d in persistence.get("differences") or []) or "none",
                "; ".join(fmt.cell(p) for p in persistence.get("problems") or []) or "none",
                f"{fmt.value(taint.get('before'))} -> {fmt.value(taint.get('after'))}",
                ", ".join(f"`{fmt.cell(d)}`" for d in driver.get("private_dirs") or []) or "none",
            ]
        )
    lines = [
        "",
        "The driver after the restore: compared with the candidate's known-good snapshot; persistence: what the "
        "candidate could have left for the next boot (module files, options, initramfs).",
        "",
        *fmt.table(
            [
                "host",
                "compared",
                "differences",
                "module now",
                "persistence differences",
                "persistence problems",
                "kernel taint",
                "private build dirs checked",
            ],
            rows,
        ),
    ]
    notes = [(host, ((d.get("persistence") or {}).get("taint") or {}).get("note")) for host, d in drivers]
    notes = [f"- {host}: {note}" for host, note in notes if note]
    return lines + ([""] + notes if notes else [])


# --- plots --------------------------------------------------------------------------------------------------------


def _plots(planned: list[plots.Plot]) -> list[str]:
    """Each drawn plot shown in place (a Markdown image of its file under plots/, its title as the alt text and
    caption), then those left out and why."""
    lines = ["## Plots", ""]
    if not planned:
        return [*lines, "No plots: the record has no serving batches, counter windows or link tests.", ""]
    for plot in planned:
        if plot.skipped is None:
            lines += [f"![{plot.title}](plots/{plot.name})", "", f"*{plot.name}: {plot.title}*", ""]
    left_out = [f"- {plot.name} not drawn: {plot.skipped}" for plot in planned if plot.skipped is not None]
    return [*lines, *left_out, *([""] if left_out else [])]


findings = report_findings.findings


def render(record: dict, planned: list[plots.Plot] | None = None, reverifications: list[dict] | None = None,
           run_dir: Path | None = None) -> str:
    """report.md of a record. `planned`: the plots drawn and left out (plots.plan); by default the record's own plan,
    taking the sampler files it names to be present. `reverifications`: what `inferlab reverify` found when it ran
    this run's configuration again (reverify.read_kept), shown before the plots. `run_dir`: where the sampler series
    are, for what needs them beyond the record (the link's bytes by level under a concurrency sweep)."""
    run = record["run"]
    controller = run.get("controller") or {}
    lines = [
        f"# inferlab run {run['id']}",
        "",
        f"- playbook `{run['playbook']}`, inventory `{run['inventory']}`",
        f"- {run['started']} to {run['finished']}; ansible-runner status `{run['status']}`; "
        f"exit {run['exit_code']} ({run['exit_meaning']})",
        f"- controller {controller.get('hostname')}: ansible-core {controller.get('ansible_core')}, "
        f"inferlab {controller.get('inferlab')}",
        "",
    ]
    shows, limits = findings(record)
    lines += [
        "## What this run shows",
        "",
        *(f"- {line}" for line in shows or ["Nothing measured: no stage of this run wrote a result to the record."]),
        "",
    ]
    lines += ["## What it does not show", "", *(f"- {line}" for line in limits), ""]
    entries = record_view.journal_entries(record)
    if entries:
        lines += _journal(entries)
    batches = record_view.serving_batches(record)
    if batches:
        lines += _throughput_summary(batches)
    trials = record_view.serving_trials(record)
    if trials:
        lines += _measured_trials(trials)
    if record.get("verification"):
        lines += ["## Verification (known-good snapshot)", ""]
        for host, state in sorted(record["verification"].items()):
            lines += _verification(host, state)
    if record.get("candidate"):
        lines += _candidate(record["candidate"])
    if record.get("link_tests"):
        lines += [
            "## Link tests",
            "",
            "Throughput is iperf3's receiver-side rate. Each test ran inside its own counter window; the "
            "counter columns are that window's deltas per host.",
            "",
        ]
        for host, result in sorted(record["link_tests"].items()):
            lines += _link_tests(host, result)
    windows = record_view.counter_windows(record)
    if windows:
        lines += _counter_deltas(windows, record_view.is_emulated(record))
    if record.get("serving"):
        lines += [
            "## Serving",
            "",
            "Each mode was deployed, then accepted by the ladder (one response, repeated, concurrent, a repeated "
            "long prefix, a long context) inside one counter window. Per-request rates and batch aggregates "
            "are different figures and are never mixed. The throughput summary above has one table per kind; "
            "here is each mode's ladder step by step.",
            "",
        ]
        for mode, result in record["serving"].items():
            lines += _serving(mode, result)
        definitions = next(
            (b.batch["definitions"] for b in batches if isinstance(b.batch.get("definitions"), dict)), {}
        )
        if definitions:
            lines += ["Definitions of the workload figures (llm_workload):", ""]
            lines += [f"- `{name}`: {fmt.value(text)}" for name, text in sorted(definitions.items())]
            lines.append("")
        lines += report_prefix.section(record["serving"])
        lines += report_engine.section(record["serving"])
        lines += report_collectives.section(record["serving"], record_view.is_emulated(record))
    lines += report_sweep.section(record, run_dir)
    lines += report_pairs.section(record)
    lines += report_ladder.section(record)
    lines += report_engine_loopback.section(record)
    lines += report_leave_one_out.section(record)
    lines += report_quarantine.section(record)
    if (record.get("stages") or {}).get("link_ab"):
        lines += ["## Link A/B comparison", ""]
        for host, ab in sorted(record["stages"]["link_ab"].items()):
            lines += _link_ab(host, ab)
    if record.get("fallback"):
        lines += _fallback(record["fallback"])
    if record.get("continuity"):
        lines += [
            "## Continuity of the public route",
            "",
            "| prober | url | model | requests | failed | budget | worst gap s | served by |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for label, result in sorted(record["continuity"].items()):
            served = _served_by(result["by_backend"])
            verdict = "within" if result["within_budget"] else "**OVER**"
            lines.append(
                f"| {label} | {result['url']} | {result['model']} | {result['total']} | {result['failed']} "
                f"| {result['budget']} ({verdict}) | {fmt.value(result['worst_gap_s'])} | {served} |"
            )
        lines.append("")
    if record.get("restore"):
        lines += [
            "## Restore",
            "",
            "| host | verified | compared with | undone | direct link back | services serving again "
            "| GPUs after the restore | differences from known-good |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        checked = (record.get("stages") or {}).get("restore_check") or {}
        for host, restore in sorted(record["restore"].items()):
            undone_list = (restore.get("undo") or {}).get("undone", [])
            undone = len(undone_list) if isinstance(undone_list, list) else fmt.value(undone_list)
            diffs = "; ".join(fmt.cell(d) for d in restore["differences"]) or "none"
            compared = fmt.cell(restore.get("compared_with", "known_good").replace("_", " "))
            link = _link_back(restore.get("link_back"))
            gpus = fmt.cell(_gpu_holders(checked.get(host))) if host in checked else "-"
            serving = _services_back(restore.get("services"))
            lines.append(f"| {host} | {fmt.value(restore['verified'])} | {compared} | {undone} | {link} | {serving} "
                         f"| {gpus} | {diffs} |")
        lines += _restore_driver(record["restore"])
        lines.append("")
    if reverifications:
        lines += _reverifications(reverifications)
    lines += _plots(plots.plan(record) if planned is None else planned)
    return "\n".join(lines)


def _reverifications(kept: list[dict]) -> list[str]:
    lines = ["## Re-verification", "",
             "`inferlab reverify` ran this run's configuration again, as later runs from a fresh start, and compared "
             "them with the same control; each time is kept, the latest last, a verdict that did not hold included.",
             ""]
    for document in kept:
        if "unreadable" in document:
            lines += [f"The kept re-verifications cannot be read: {document['unreadable']}", ""]
            continue
        lines += [f"### {document.get('time', 'time not recorded')}", "", *reverify.render_lines(document), ""]
    return lines


def summary(record: dict) -> list[str]:
    """One line per verified or restored host, for the terminal."""
    lines = []
    for host, state in sorted(record["verification"].items()):
        failed = [c["name"] for c in state["checks"] if not c["ok"]]
        verdict = "passed" if state["ok"] else "FAILED: " + ", ".join(failed)
        lines.append(
            f"{host}: verification {verdict} ({len(state['checks']) - len(failed)}/{len(state['checks'])} checks)"
        )
    for host, restore in sorted(record["restore"].items()):
        verdict = "verified" if restore["verified"] else "NOT verified: " + "; ".join(restore["differences"])
        lines.append(f"{host}: restore {verdict}")
    for label, result in sorted(record.get("continuity", {}).items()):
        verdict = "within" if result["within_budget"] else "OVER"
        lines.append(
            f"continuity {label}: {result['failed']} of {result['total']} public-route requests failed "
            f"(budget {result['budget']}: {verdict})"
        )
    fallback = record.get("fallback", {})
    if "prove" in fallback:
        prove = fallback["prove"]
        lines.append(
            f"fallback: {prove['ok']} of {prove['requests']} public-route requests served with the primaries "
            f"paused, by {_served_by(prove['served_by'])}"
        )
    if "remove" in fallback:
        verdict = "byte-identical" if fallback["remove"]["byte_identical"] else "NOT the original"
        lines.append(f"fallback removed: gateway config {verdict}")
    for mode, result in record.get("serving", {}).items():
        acceptance = result["acceptance"]
        passed = sum(1 for step in acceptance["steps"] if step["passed"])
        verdict = "accepted" if acceptance["passed"] else "NOT accepted: " + "; ".join(acceptance["problems"])
        lines.append(f"serving {mode}: {verdict} ({passed}/{len(acceptance['steps'])} ladder steps)")
    return lines


def write(run_dir: Path, record: dict) -> Path:
    """report.md in the run directory; its plot list checks the sampler files in `run_dir` (plots.render draws
    them first)."""
    target = run_dir / "report.md"
    try:
        kept = reverify.read_kept(run_dir)
    except reverify.ReverifyError as exc:
        kept = [{"unreadable": str(exc)}]
    write_private(target, render(record, plots.plan(record, run_dir), kept, run_dir))
    return target

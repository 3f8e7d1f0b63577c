"""Render report.md from a validated record: run summary, per-host verification, link tests, serving, restore."""

from __future__ import annotations

from pathlib import Path


def _value(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        # medians of integer counters and sums of floats: no 13.899000000000001 in a table
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def _verification(host: str, state: dict) -> list[str]:
    link = state.get("link", {})
    lines = [
        f"### {host}: {'passed' if state.get('ok') else 'FAILED'}",
        "",
        f"- kernel {_value(state.get('kernel_release'))}; layers: "
        + ", ".join(f"{k}={_value(v)}" for k, v in sorted(state.get("layers", {}).items())),
        f"- link {link.get('interface')} {link.get('address')} -> {link.get('peer_address')}: "
        f"{_value(link.get('operstate'))}, MTU {_value(link.get('mtu'))}, "
        f"{_value(link.get('rx_speed_gbps'))}/{_value(link.get('tx_speed_gbps'))} Gb/s per lane (rx/tx), "
        f"lanes {_value(link.get('rx_lanes'))}/{_value(link.get('tx_lanes'))}",
        f"- GPUs ({_value(state.get('nvml_source'))}): "
        + ("; ".join(f"{g['index']}: {g['name']}, {g['memory_free_bytes'] // 2**20} MiB free" for g in state["gpus"])
           or "none"),
        "",
        "| check | ok | expected | found | variable |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in state.get("checks", []):
        lines.append(
            f"| {check['name']} | {'ok' if check['ok'] else '**FAIL**'} | {_value(check['expected'])} "
            f"| {_value(check['found'])} | `{check['variable']}` |"
        )
    lines.append("")
    return lines


def _stat(batch: dict, metric: str, key: str = "median", scale: float = 1.0) -> str:
    value = (batch.get(metric) or {}).get(key)
    return _value(None if value is None else value * scale)


def _serving(mode: str, result: dict) -> list[str]:
    """One served mode: the ladder, with per-request rates, batch aggregates and cache figures in separate columns
    whose names carry their definitions."""
    acceptance = result["acceptance"]
    layers = ", ".join(f"{k}={v}" for k, v in sorted(result["layers"].items()))
    traffic = acceptance.get("traffic") or {}
    lines = [f"### {mode}: {'accepted' if acceptance['passed'] else 'NOT accepted'} ({layers})", "",
             f"- served at {result['url']} by {len(result['ranks'])} ranks ({result['process_manager']}); "
             f"counter window `{_value(result.get('window'))}`",
             f"- direct-link traffic during the ladder: {_value(traffic.get('message'))}"]
    lines += [f"- problem: {problem}" for problem in acceptance["problems"]]
    lines += ["", "Per request (median over the step's requests):", "",
              "| step | kind | cache | ok/requests | TTFT ms | decode tok/s (excl. TTFT) | output tok/s (incl. TTFT) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    batches = [(step["step"], step.get("batch")) for step in acceptance["steps"]]
    for name, batch in batches:
        if not batch:
            lines.append(f"| {name} | — | — | did not run | — | — | — |")
            continue
        lines.append(f"| {name} | {batch['kind']} | {batch['cache']} | {_value(batch.get('ok'))}/"
                     f"{_value(batch.get('requests'))} | {_stat(batch, 'ttft_s', scale=1000)} "
                     f"| {_stat(batch, 'decode_tok_s')} | {_stat(batch, 'output_tok_s')} |")
    lines += ["", "Per batch:", "", "| step | concurrency | wall s | aggregate output tok/s (all tokens / wall) "
              "| cached tokens (sum) | accept length |", "| --- | --- | --- | --- | --- | --- |"]
    for name, batch in batches:
        if batch:
            accept = (batch.get("spec_accept_length") or {}).get("value")
            lines.append(f"| {name} | {batch['concurrency']} | {_value(batch.get('wall_s'))} "
                         f"| {_value(batch.get('aggregate_output_tok_s'))} "
                         f"| {_value(batch.get('cached_tokens_total'))} | {_value(accept)} |")
    definitions = next((b.get("definitions") for _name, b in batches if b and b.get("definitions")), None)
    if definitions:
        lines += ["", "Definitions:", ""] + [f"- `{name}`: {text}" for name, text in sorted(definitions.items())]
    cached_long = [b for n, b in batches if n == "long_context" and b and (b.get("cached_tokens_total") or 0) > 0]
    if cached_long:
        lines += ["", f"Note: the long-context request reused {cached_long[0]['cached_tokens_total']} cached "
                  "tokens, so its TTFT is not a cold-prefill result."]
    lines.append("")
    return lines


def _gbps(bps) -> str:
    return "—" if bps is None else f"{bps / 1e9:.2f}"


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
        f"| rx errors (crc, over, missed, length) {a} / {b} |",
        "| --- | --- | --- | --- | --- |",
    ]

    def counters(test: dict) -> tuple[str, str]:
        per_host = test.get("host_counters") or {}
        retrans = " / ".join(f"{_value((per_host.get(h) or {}).get('RetransSegs'))} "
                             f"({_value((per_host.get(h) or {}).get('retrans_pct'))}%)" for h in (a, b))
        errors = " / ".join(
            ", ".join(_value((per_host.get(h) or {}).get(k)) for k in
                      ("rx_crc_errors", "rx_over_errors", "rx_missed_errors", "rx_length_errors"))
            for h in (a, b))
        return retrans, errors

    rows = []
    if "asymmetry" in tests:
        rows.append(("asymmetry (bidir)", tests["asymmetry"]["a_to_b_bps"], tests["asymmetry"]["b_to_a_bps"],
                     tests["asymmetry"]))
    sweep = tests.get("flow_sweep")
    if sweep:
        for flows in sorted(sweep["a_to_b"], key=int):
            rows.append((f"flow sweep, {flows} flow(s)", sweep["a_to_b"][flows], sweep["b_to_a"].get(flows), sweep))
    if "window" in tests:
        rows.append((f"window ({tests['window']['window_bytes']} B, one flow)", tests["window"]["a_to_b_bps"], None,
                     tests["window"]))
    load = (tests.get("loaded_probes") or {}).get("load")
    if load:
        rows.append(("load under the probes (bidir)", load["a_to_b_bps"], load["b_to_a_bps"], tests["loaded_probes"]))
    for name, forward, reverse, test in rows:
        retrans, errors = counters(test)
        lines.append(f"| {name} | {_gbps(forward)} | {_gbps(reverse)} | {retrans} | {errors} |")
    probes = [(t, d) for t in ("probes", "loaded_probes") for d in ("a_to_b", "b_to_a") if (tests.get(t) or {}).get(d)]
    if probes:
        lines += ["", "| probes | direction | loss % | mean ms | p50 ms | p99 ms |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for test, direction in probes:
            probe = tests[test][direction]
            label = f"{a} -> {b}" if direction == "a_to_b" else f"{b} -> {a}"
            lines.append(f"| {'loaded' if test == 'loaded_probes' else 'unloaded'} | {label} | {probe['loss_pct']} "
                         f"| {_value(probe['mean_ms'])} | {_value(probe['p50_ms'])} | {_value(probe['p99_ms'])} |")
    lines.append("")
    return lines


def _link_ab(host: str, ab: dict) -> list[str]:
    conditions = [row["condition"] for row in ab["table"]]
    lines = [
        f"### {' vs '.join(conditions)} ({ab['repetitions']} interleaved repetitions, transport: "
        f"{ab['transport_label']}, shaped host {ab['shaped_host']})",
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
            cells.append("—" if not stats.get("n") else
                         f"{_value(stats['median'])} ({_value(stats['min'])} to {_value(stats['max'])}, {stats['n']})")
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
    lines = ["## Fallback route", "",
             "Real requests through the exact public route (the gateway URL, the public role, the clients' key); "
             "`x-litellm-model-api-base` names the backend that served each one.", "",
             "| step | requests | ok | failed | served by | primary serves again |",
             "| --- | --- | --- | --- | --- | --- |"]
    negative = fallback.get("negative_proof")
    if negative:
        verdict = "reproduced" if negative["reproduced"] else "**not reproduced**"
        ok = negative["requests"] - negative["failed"]
        lines.append(f"| without the fallback, primaries paused (expected to fail: {verdict}) | {negative['requests']} "
                     f"| {ok} | {negative['failed']} | — | {_primary_again(negative)} |")
    prove = fallback.get("prove")
    if prove:
        lines.append(f"| with the fallback, primaries paused | {prove['requests']} | {prove['ok']} | {prove['failed']} "
                     f"| {_served_by(prove['served_by'])} | {_primary_again(prove)} |")
    lines.append("")
    add, remove = fallback.get("add"), fallback.get("remove")
    if add:
        steps = add.get("steps", [])
        applied = ", ".join(f"{s['instance']} {'drained' if s['drained'] else 'not drained'} "
                            f"{_value(s['seconds'])} s" for s in steps)
        lines.append(f"- added `fallbacks: [{{{add['public_model']}: [{add['target_model']}]}}]` to `{add['config']}` "
                     f"on {add['gateway_host']} (original sha256 `{add['original_sha256'][:16]}…`), applied through "
                     f"{add['front']}: {applied or 'already added'}")
    if remove:
        verdict = "byte-identical" if remove["byte_identical"] else "**NOT the original**"
        lines.append(f"- removed: the config is {verdict} (sha256 `{remove['config_sha256'][:16]}…`), "
                     f"primary serving again: {_primary_again(remove)}")
    if negative and negative["errors"]:
        lines.append(f"- the failure without the fallback: {negative['errors'][0]}")
    lines.append("")
    return lines


def render(record: dict) -> str:
    run = record["run"]
    lines = [
        f"# inferlab run {run['id']}",
        "",
        f"- playbook `{run['playbook']}`, inventory `{run['inventory']}`",
        f"- {run['started']} to {run['finished']}; ansible-runner status `{run['status']}`; "
        f"exit {run['exit_code']} ({run['exit_meaning']})",
        f"- controller {run['controller']['hostname']}: ansible-core {run['controller']['ansible_core']}, "
        f"inferlab {run['controller']['inferlab']}",
        "",
    ]
    if record["verification"]:
        lines += ["## Verification (known-good snapshot)", ""]
        for host, state in sorted(record["verification"].items()):
            lines += _verification(host, state)
    if record.get("link_tests"):
        lines += ["## Link tests", "",
                  "Throughput is iperf3's receiver-side rate. Each test ran inside its own counter window; the "
                  "counter columns are that window's deltas per host.", ""]
        for host, result in sorted(record["link_tests"].items()):
            lines += _link_tests(host, result)
    if record.get("serving"):
        lines += ["## Serving", "",
                  "Each mode was deployed, then accepted by the ladder (one response, repeated, concurrent, a repeated "
                  "long prefix, a long context) inside one counter window. Per-request rates and batch aggregates "
                  "are different figures and are never mixed.", ""]
        for mode, result in record["serving"].items():
            lines += _serving(mode, result)
    if record["stages"].get("link_ab"):
        lines += ["## Link A/B comparison", ""]
        for host, ab in sorted(record["stages"]["link_ab"].items()):
            lines += _link_ab(host, ab)
    if record.get("fallback"):
        lines += _fallback(record["fallback"])
    if record.get("continuity"):
        lines += ["## Continuity of the public route", "",
                  "| prober | url | model | requests | failed | budget | worst gap s | served by |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for label, result in sorted(record["continuity"].items()):
            served = _served_by(result["by_backend"])
            verdict = "within" if result["within_budget"] else "**OVER**"
            lines.append(f"| {label} | {result['url']} | {result['model']} | {result['total']} | {result['failed']} "
                         f"| {result['budget']} ({verdict}) | {_value(result['worst_gap_s'])} | {served} |")
        lines.append("")
    if record["restore"]:
        lines += ["## Restore", "", "| host | verified | undone | differences from known-good |",
                  "| --- | --- | --- | --- |"]
        for host, restore in sorted(record["restore"].items()):
            undone = len(restore["undo"].get("undone", []))
            diffs = "; ".join(restore["differences"]) or "none"
            lines.append(f"| {host} | {_value(restore['verified'])} | {undone} | {diffs} |")
        lines.append("")
    return "\n".join(lines)


def summary(record: dict) -> list[str]:
    """One line per verified or restored host, for the terminal."""
    lines = []
    for host, state in sorted(record["verification"].items()):
        failed = [c["name"] for c in state["checks"] if not c["ok"]]
        verdict = "passed" if state["ok"] else "FAILED: " + ", ".join(failed)
        lines.append(f"{host}: verification {verdict} ({len(state['checks']) - len(failed)}/{len(state['checks'])} "
                     "checks)")
    for host, restore in sorted(record["restore"].items()):
        verdict = "verified" if restore["verified"] else "NOT verified: " + "; ".join(restore["differences"])
        lines.append(f"{host}: restore {verdict}")
    for label, result in sorted(record.get("continuity", {}).items()):
        verdict = "within" if result["within_budget"] else "OVER"
        lines.append(f"continuity {label}: {result['failed']} of {result['total']} public-route requests failed "
                     f"(budget {result['budget']}: {verdict})")
    fallback = record.get("fallback", {})
    if "prove" in fallback:
        prove = fallback["prove"]
        lines.append(f"fallback: {prove['ok']} of {prove['requests']} public-route requests served with the primaries "
                     f"paused, by {_served_by(prove['served_by'])}")
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
    target = run_dir / "report.md"
    target.write_text(render(record))
    return target

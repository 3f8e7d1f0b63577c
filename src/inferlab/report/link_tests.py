"""report.md's link test sections: the link test suite per host and the link A/B repetitions."""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import counters as report_counters
from inferlab.report import text as fmt

# The receiver-error counters as a column header names them: crc, missed, length, over.
RX_ERROR_SHORT = ", ".join(n.removeprefix("rx_").removesuffix("_errors") for n in record_view.RX_ERROR_COUNTERS)


def link_tests(host: str, result: dict) -> list[str]:
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
    rows = [[fmt.cell(event.get("at")), host, fmt.cell(report_counters.link_event_texts([dict(event, at=None)])[0])]
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


def link_ab(host: str, ab: dict) -> list[str]:
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

"""What this run shows, and what it does not show: the two lists report.md opens with, generated from the record
alone (tests/package/test_report_sections.py scans them for words that claim more than was observed)."""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import collectives as report_collectives
from inferlab.report import engine as report_engine
from inferlab.report import engine_loopback as report_engine_loopback
from inferlab.report import ladder as report_ladder
from inferlab.report import leave_one_out as report_leave_one_out
from inferlab.report import pairs as report_pairs
from inferlab.report import prefix as report_prefix
from inferlab.report import quarantine as report_quarantine
from inferlab.report import sweep as report_sweep
from inferlab.report import text as fmt

MIN_TRIALS = 3  # fewer samples than this is not a statistic (verdict_policy.MIN_SAMPLES)


def _representative_step(batches: list[record_view.Batch]) -> str | None:
    """The single-stream step to quote: the one with the most requests, `repeated` first among equals."""
    single = [b for b in batches if b.batch.get("concurrency") == 1 and record_view.stat(b.batch, "output_tok_s")]
    if not single:
        return None
    best = max(single, key=lambda b: (record_view.stat(b.batch, "output_tok_s").get("n") or 0, b.step == "repeated"))
    return best.step


def _serving_shows(record: dict, batches: list[record_view.Batch]) -> list[str]:
    shows = []
    for mode, result in (record.get("serving") or {}).items():
        acceptance = result.get("acceptance") or {}
        steps = acceptance.get("steps") or []
        passed = sum(1 for s in steps if s.get("passed"))
        layers = record_view.mode_layers(result)
        if acceptance.get("passed"):
            shows.append(
                f"Mode {mode} ({layers}) served real API requests and was accepted by its ladder ({passed} "
                f"of {len(steps)} steps)."
            )
        else:
            problems = "; ".join(str(p) for p in acceptance.get("problems") or []) or "see the ladder"
            shows.append(
                f"Mode {mode} ({layers}) was NOT accepted ({passed} of {len(steps)} steps passed): {problems}."
            )
        traffic = acceptance.get("traffic") or {}
        if traffic.get("message"):
            verdict = "went over the direct link" if traffic.get("ok") else "did NOT clearly go over the direct link"
            shows.append(f"Mode {mode}: its ladder's traffic {verdict}: {traffic['message']}.")
    for mode, trials in record_view.serving_trials(record).items():
        figures = trials.figures
        described = []
        for key, label in (("single_stream_output_tok_s", "single-stream output tok/s (TTFT included)"),
                           ("aggregate_output_tok_s", "aggregate output tok/s")):
            figure = figures.get(key) or {}
            if record_view.number(figure.get("median")) is not None:
                described.append(
                    f"{label} median {fmt.value(figure['median'])} (min {fmt.value(figure.get('min'))}, max "
                    f"{fmt.value(figure.get('max'))})"
                )
        if described:
            shows.append(
                f"Mode {mode}: observed over {trials.count} measured trials: {fmt.join(described)}."
            )
    step = _representative_step(batches)
    if step:
        figures = []
        for b in batches:
            stats = record_view.stat(b.batch, "output_tok_s")
            if b.step == step and stats:
                figures.append(
                    f"{b.mode} {fmt.value(stats['median'])} (n={fmt.value(stats.get('n'))}, {fmt.cache(b.batch)} cache)"
                )
        shows.append(
            f"Observed single-stream output tok/s per request (TTFT included), median of the `{step}` step: "
            f"{fmt.join(figures)}."
        )
    for b in batches:
        accept = (b.batch.get("spec_accept_length") or {}).get("value")
        if b.step == step and record_view.number(accept) is not None:
            shows.append(
                f"Mode {b.mode}: speculative accept length {fmt.value(accept)} observed on the `{step}` step, so "
                "the speculative path was active."
            )
    return shows


def _counter_shows(windows: list[record_view.Window], emulated: bool) -> list[str]:
    shows = []
    if not windows:
        return shows
    damaged = [w for w in windows if (w.rx_errors() or 0) > 0 or (w.counter("rx_errors") or 0) > 0]
    interfaces = fmt.join(sorted({w.interface for w in windows if w.interface})) or "the link"
    if damaged:
        for w in damaged:
            parts = ", ".join(
                f"{label} {fmt.count(w.counter(name))}"
                for name, label in zip(
                    record_view.RX_ERROR_COUNTERS, ("CRC", "missed", "length", "overrun"), strict=True
                )
            )
            shows.append(
                f"Receiver errors observed on {w.interface} of {w.host} in window {w.name}: {parts} (total "
                f"{fmt.count(w.counter('rx_errors'))})."
            )
    elif not emulated:
        shows.append(
            f"No receiver CRC, missed, length or overrun errors on {interfaces} in any of the "
            f"{len({w.name for w in windows})} counter windows."
        )
    retrans = {}
    for w in windows:
        value = w.counter("RetransSegs")
        if value is not None:
            retrans.setdefault(w.host, []).append((value, w.name))
    if retrans:
        parts = []
        for host, values in sorted(retrans.items()):
            top, name = max(values)
            parts.append(
                f"{host} {fmt.count(sum(v for v, _n in values))} over {len(values)} window(s) (most in {name}: "
                f"{fmt.count(top)})"
            )
        shows.append(f"TCP retransmitted segments observed (host-wide): {'; '.join(parts)}.")
    for w in windows:
        if w.data.get("link_retrained"):
            shows.append(f"The link changed speed or lanes during window {w.name} on {w.host}.")
        flaps = [e for e in w.data.get("link_events") or [] if e.get("kind") in record_view.LINK_FLAP_EVENTS]
        if flaps:
            shows.append(f"The link's carrier dropped or the interface went away during window {w.name} on {w.host}: "
                         f"{len(flaps)} event(s), listed under the window's counter deltas.")
    return shows


def _candidate_shows(candidates: dict) -> list[str]:
    shows = []
    groups: dict[str, list[str]] = {}
    for host, entry in sorted(candidates.items()):
        before, after = entry.get("module_before") or {}, entry.get("module_after") or {}
        taint = entry.get("kernel_taint") or {}
        if entry.get("driver_layer") == "emulated":
            text = (
                f"the emulated stand-in for the candidate was set (link profile "
                f"`{fmt.value(entry.get('link_profile'))}`; the fixture root shows srcversion "
                f"`{fmt.value(after.get('srcversion'))}`)"
            )
        else:
            text = (
                f"the candidate was loaded (srcversion `{fmt.value(after.get('srcversion'))}` in place of "
                f"`{fmt.value(before.get('srcversion'))}`; tx_e2e {fmt.value(entry.get('tx_e2e'))}, "
                "peer advertises E2E "
                f"{fmt.value(entry.get('peer_e2e'))}, peer override {fmt.value(entry.get('peer_override'))}; kernel "
                f"taint {fmt.value(taint.get('before'))} -> {fmt.value(taint.get('after'))})"
            )
        groups.setdefault(text, []).append(host)
    for text, hosts in groups.items():
        shows.append(f"On {fmt.join(hosts)}: {text}.")
    return shows


def _link_ab_first_shows(record: dict) -> list[str]:
    """Whether the network-only A/B proved the driver's effect on the link before the candidate's serving measured
    model speed on it (integrity before speed), or the plan's recorded reason for leaving it out."""
    modes = sorted(mode for mode, result in (record.get("serving") or {}).items()
                   if isinstance(result, dict) and (result.get("layers") or {}).get("driver") == "candidate")
    if not modes:
        return []
    served = f"The candidate driver's serving ({fmt.join(modes)})"
    entries = {e["stage"]: e for e in record_view.journal_entries(record)}
    ab = entries.get("link_ab")
    if ab and ab.get("status") == "ok":
        return [f"{served} came after the network-only A/B (stage link_ab), which measured the driver's effect on "
                "the link alone."]
    plan = ((record.get("stages") or {}).get("experiment") or {}).get("plan") or {}
    if plan.get("link_ab_opt_out"):
        return [f"{served} ran without the network-only A/B before it: the plan left link_ab out because "
                f"{plan['link_ab_opt_out'].rstrip('.')}."]
    if ab:
        return [f"{served} ran after a network-only A/B that did not pass (stage link_ab {ab.get('status')})."]
    return [f"{served} ran without the network-only A/B before it in this run."]


def _fallback_shows(fallback: dict) -> list[str]:
    shows = []
    negative, prove, remove = fallback.get("negative_proof"), fallback.get("prove"), fallback.get("remove")
    if negative:
        verdict = "the gap was reproduced" if negative.get("reproduced") else "the expected gap was NOT reproduced"
        shows.append(
            f"Without the fallback and with the primaries paused, {negative.get('failed')} of "
            f"{negative.get('requests')} public-route requests failed: {verdict}."
        )
    if prove:
        shows.append(
            f"With the fallback and the primaries paused, {prove.get('ok')} of {prove.get('requests')} "
            f"public-route requests were served, by "
            f"{', '.join(f'{b} ({n})' for b, n in sorted((prove.get('served_by') or {}).items())) or 'none'}."
        )
    if remove:
        verdict = "byte-identical to the original" if remove.get("byte_identical") else "NOT the original"
        shows.append(f"After the fallback was removed the gateway config is {verdict}.")
    return shows


def _restore_shows(restores: dict) -> list[str]:
    shows = []
    for host, restore in sorted(restores.items()):
        against = {"known_good": "its known-good snapshot", "inventory_expectations": "the inventory's expectations"}
        compared = against.get(restore.get("compared_with"), "its expectations")
        if restore.get("verified"):
            shows.append(f"Restore verified on {host} against {compared}: no differences.")
        else:
            diffs = "; ".join(str(d) for d in restore.get("differences") or []) or "unverified"
            shows.append(f"Restore NOT verified on {host} ({diffs}): a person must look.")
        driver = restore.get("driver") or {}
        persistence = driver.get("persistence") or {}
        if driver.get("compared"):
            left = (driver.get("differences") or []) + (persistence.get("differences") or [])
            shows.append(
                f"On {host} the driver after the restore matches the stock snapshot and nothing of the candidate "
                "persisted."
                if not left
                else f"On {host} the driver after the restore differs: {'; '.join(left)}."
            )
    return shows


def _shows(
    record: dict, batches: list[record_view.Batch], windows: list[record_view.Window], emulated: bool
) -> list[str]:
    shows = []
    for host, state in sorted((record.get("verification") or {}).items()):
        checks = state.get("checks") or []
        failed = [c for c in checks if not c.get("ok")]
        if failed:
            named = "; ".join(
                f"{c.get('name')} (expected {fmt.value(c.get('expected'))}, found {fmt.value(c.get('found'))})"
                for c in failed
            )
            shows.append(f"{host} FAILED verification: {named}.")
        else:
            shows.append(
                f"{host} passed verification ({len(checks)} of {len(checks)} checks, real requests to its "
                "services included)."
            )
    entries = record_view.journal_entries(record)
    if entries:
        by_status: dict[str, list[str]] = {}
        for entry in entries:
            by_status.setdefault(str(entry.get("status")), []).append(entry["stage"])
        counts = ", ".join(f"{len(names)} {status}" for status, names in by_status.items())
        text = f"The stage journal records {len(entries)} stages: {counts}."
        measured = [
            f"{e['stage']} against {e['control']} ({fmt.layer_change(e)})"
            for e in entries
            if e.get("measured") and e.get("control")
        ]
        if measured:
            text += f" Measured stages, each one declared layer from its control: {'; '.join(measured)}."
        shows.append(text)
    shows += _serving_shows(record, batches)
    shows += report_prefix.shows(record.get("serving") or {})
    shows += report_engine.shows(record.get("serving") or {})
    shows += report_sweep.shows(record)
    shows += report_collectives.shows(record.get("serving") or {}, emulated)
    shows += _counter_shows(windows, emulated)
    for result in (record.get("link_tests") or {}).values():
        pair = result.get("pair") or {}
        verdicts = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in (result.get("verdicts") or {}).items() if v)
        shows.append(f"Link test {pair.get('a')} <-> {pair.get('b')} ({result.get('transport_label')}): {verdicts}.")
    shows += report_pairs.shows(record)
    shows += report_ladder.shows(record)
    shows += report_engine_loopback.shows(record)
    shows += report_leave_one_out.shows(record)
    shows += report_quarantine.shows(record)
    for host, ab in sorted(((record.get("stages") or {}).get("link_ab") or {}).items()):
        if not isinstance(ab, dict):
            continue
        conditions = [row for row in ab.get("table") or [] if isinstance(row, dict)]
        names = sorted({n for row in conditions for n in row.get("metrics") or {} if n.endswith("_gbps")})
        for name in names:
            cells = [
                f"{row.get('condition')} {fmt.value((row['metrics'].get(name) or {}).get('median'))}"
                for row in conditions
                if (row.get("metrics") or {}).get(name)
            ]
            shows.append(
                f"Link A/B from {host} ({ab.get('transport_label')}, {ab.get('repetitions')} interleaved "
                f"repetitions): median {name} {fmt.join(cells)}."
            )
    shows += _candidate_shows(record.get("candidate") or {})
    shows += _link_ab_first_shows(record)
    shows += _fallback_shows(record.get("fallback") or {})
    for label, result in sorted((record.get("continuity") or {}).items()):
        verdict = "within" if result.get("within_budget") else "OVER"
        shows.append(
            f"Continuity (prober `{label}`): {result.get('failed')} of {result.get('total')} public-route "
            f"requests failed (budget {result.get('budget')}: {verdict}); worst gap "
            f"{fmt.value(result.get('worst_gap_s'))} s."
        )
    shows += _restore_shows(record.get("restore") or {})
    return shows


def _speculation_limits(record: dict) -> list[str]:
    limits = []
    serving = record.get("serving") or {}
    by_runtime: dict[str, dict[str, str]] = {}
    for mode, result in serving.items():
        layers = result.get("layers") or {}
        by_runtime.setdefault(str(layers.get("runtime")), {})[mode] = str(layers.get("speculation"))
    for runtime, modes in sorted(by_runtime.items()):
        speculative = {m: s for m, s in modes.items() if s != "none"}
        controls = [m for m, s in modes.items() if s == "none"]
        if speculative and not controls:
            names = fmt.join(sorted({s.upper() for s in speculative.values()}))
            limits.append(
                f"No control without speculative decoding on the same runtime (runtime={runtime}; served: "
                f"{fmt.join(sorted(speculative))}): {names}'s share of any speed-up is unknown."
            )
        elif speculative and controls:
            limits.append(
                f"{fmt.join(controls)} and {fmt.join(sorted(speculative))} ran once each, one after the other in "
                "this run (not interleaved): their difference is one observation, and `inferlab compare` "
                "over repeated runs is what gives it a confidence interval."
            )
    return limits


def _trial_limits(record: dict, batches: list[record_view.Batch], windows: list[record_view.Window]) -> list[str]:
    limits = []
    few: dict[str, list[str]] = {}
    for b in batches:
        stats = record_view.stat(b.batch, "output_tok_s") or record_view.stat(b.batch, "ttft_s")
        n = stats.get("n") if stats else None
        if isinstance(n, int) and n < MIN_TRIALS:
            few.setdefault(f"{b.step} (n={n})", []).append(b.mode)
    if few:
        steps = "; ".join(f"{step} of {fmt.join(modes)}" for step, modes in few.items())
        limits.append(
            f"A ladder step with fewer than {MIN_TRIALS} requests is not a statistic: {steps}. Their medians are "
            "single observations."
        )
    for host, ab in sorted(((record.get("stages") or {}).get("link_ab") or {}).items()):
        repetitions = ab.get("repetitions") if isinstance(ab, dict) else None
        if isinstance(repetitions, int) and repetitions < MIN_TRIALS:
            limits.append(
                f"The link A/B from {host} ran {repetitions} repetition(s) per condition: fewer than "
                f"{MIN_TRIALS} is not a statistic."
            )
    trials = record_view.serving_trials(record)
    few_trials = [f"{mode} ({t.count})" for mode, t in trials.items() if t.count < MIN_TRIALS]
    if few_trials:
        limits.append(f"Fewer than {MIN_TRIALS} measured trials is not a statistic: {fmt.join(few_trials)}.")
    if trials:
        limits.append(
            "Each mode's trials ran in one block in one deployment (switching modes restarts the ranks): their "
            "spread is within that deployment. Deployment-to-deployment spread shows only across whole runs "
            "(inferlab compare of repeated runs)."
        )
    elif record.get("serving"):
        limits.append(
            "No measured trials: the serving figures come from single ladder batches, so they have no spread "
            "across trials (set inferlab_trials)."
        )
    names = {w.name for w in windows}
    if names and not any(name.rsplit("_", 1)[-1].isdigit() for name in names):
        limits.append("Each counter window ran once: one trial per condition, so its deltas have no spread.")
    return limits


def _limits(
    record: dict, batches: list[record_view.Batch], windows: list[record_view.Window], emulated: bool
) -> list[str]:
    limits = []
    declared = record_view.driver_layers(record)
    if emulated:
        why = (
            ""
            if "emulated" in declared
            else " (inferred: the lab inference server ran and no driver layer is declared)"
        )
        if "ethernet" in record_view.link_kinds(record):
            limits.append(
                f"The links were emulated{why}: veths on the lab's switch, whose tc shaping (each port's rate, the "
                "suspect's per-flow cap) stood in for the hosts' NICs. No figure here is a NIC's result; the "
                "lab reproduces the failure's shape, not its hardware."
            )
        else:
            limits.append(
                f"The driver layer was emulated{why}: tc link profiles on a veth stood in for thunderbolt_net. "
                "No figure here is a driver result; that needs the kernel driver layer on real hosts."
            )
        if windows or record.get("link_tests"):
            limits.append(
                "Receiver CRC, missed, length and overrun columns are 0 by construction: a veth never counts "
                "them. The lab's transport damage shows only as qdisc drops and TCP retransmissions."
            )
    elif not declared and (windows or batches):
        limits.append(
            "The record declares no driver layer (no verify, link test or candidate stage in this run), so "
            "it does not say whether the receiver-error counters could count at all: a veth never does."
        )
    if record_view.lab_server(record):
        limits.append(
            "The tokens came from the lab inference server (`inferlab.lab.server`), which speaks SGLang's "
            "API without a model on GPUs: its tok/s measure the lab's transport and scheduling, not a "
            "model's speed."
        )
    reused: dict[str, list[str]] = {}
    for b in batches:
        cached = record_view.number(b.batch.get("cached_tokens_total"))
        if b.step in ("long_context", "repeated_prefix") and (cached or b.batch.get("cache") == "warm"):
            amount = (f"{fmt.count(cached)} cached prompt tokens" if cached
                      else "a warm cache, cached tokens not reported")
            reused.setdefault(b.step, []).append(f"{b.mode}: {amount}")
    for step, modes in reused.items():
        limits.append(
            f"The {step} step reused a cached prefix ({'; '.join(modes)}), so its TTFT and rates are not a "
            "cold-prefill result."
        )
    limits += _speculation_limits(record)
    entries = record_view.journal_entries(record)
    left = [f"{e['stage']} ({e.get('status')})" for e in entries if e.get("status") in ("failed", "skipped")]
    if left:
        limits.append(f"Stages that failed or were skipped left no complete result here: {fmt.join(left)}.")
    unfinished = [e["stage"] for e in entries if e.get("status") == "running"]
    if unfinished:
        limits.append(f"Stage {fmt.join(unfinished)} never finished (journaled as running): the run stopped during it.")
    status = {e["stage"]: e.get("status") for e in entries}
    for e in entries:
        control = e.get("control")
        if e.get("measured") and control and e.get("status") == "ok" and status.get(control) != "ok":
            why = f"which was {status[control]}" if control in status else "which did not run"
            limits.append(
                f"Stage {e['stage']} was measured against {control}, {why}: its change ({fmt.layer_change(e)}) has no "
                "control in this run."
            )
    limits += _trial_limits(record, batches, windows)
    if any((b.batch.get("concurrency") or 1) > 1 for b in batches):
        limits.append(
            "An aggregate tok/s is a concurrent batch's output over its wall time, not any one request's rate."
        )
    if batches and not windows:
        limits.append("No counter window recorded transport counters beside the serving figures.")
    if windows and not any(w.samples.get("path") for w in windows):
        limits.append(
            "No sampler series in the record: the counters are known only at each window's edges, not "
            "over time within it."
        )
    for w in windows:
        if w.data.get("resets"):
            limits.append(f"Window {w.name} on {w.host}: a counter went backwards, so that delta is unknown.")
    damaged = [w for w in windows if (w.rx_errors() or 0) > 0 or (w.counter("RetransSegs") or 0) > 0]
    if damaged and batches:
        limits.append(
            "Receiver errors or retransmissions observed in the same window as the tok/s are a theory for a "
            "slowdown, not its established cause: a one-layer change that removes them, reproduced from a "
            "fresh start, would support it."
        )
    candidates = record.get("candidate") or {}
    kernel = sorted(h for h, c in candidates.items() if c.get("driver_layer") == "kernel")
    if kernel:
        releases = fmt.join(sorted({str(candidates[h].get("kernel_release")) for h in kernel}))
        limits.append(
            f"The candidate ran on one pair of controllers and one kernel ({releases}): nothing here shows "
            "that tx_e2e is safe on other USB4 controllers or firmware, or as a default."
        )
    forced = sorted(h for h, c in candidates.items() if c.get("peer_override"))
    if forced:
        limits.append(
            f"tx_e2e was forced on {fmt.join(forced)} without the peer advertising E2E (peer override): "
            "outside the opt-in's safe condition."
        )
    if candidates and not batches:
        limits.append("No model workload ran with the candidate in this run: nothing here speaks for tok/s with it.")
    for host, restore in sorted((record.get("restore") or {}).items()):
        taint = ((restore.get("driver") or {}).get("persistence") or {}).get("taint") or {}
        if record_view.number(taint.get("after")):
            limits.append(
                f"The kernel on {host} stays tainted ({fmt.value(taint['after'])}) until a reboot: a restore "
                "cannot clear taint, and later runs on this boot start tainted."
            )
        if restore.get("compared_with") == "inventory_expectations":
            limits.append(
                f"The restore on {host} was checked against the inventory's expectations, not a known-good "
                "snapshot taken by verify."
            )
    snapshot = sorted(h for h, s in (record.get("verification") or {}).items() if s.get("nvml_source") == "snapshot")
    snapshot += sorted(
        {w.host for w in windows if (w.data.get("nvml_after") or {}).get("source") == "snapshot"} - set(snapshot)
    )
    if snapshot:
        limits.append(f"GPU facts on {fmt.join(snapshot)} were replayed from an NVML snapshot, not read from live "
                      "GPUs.")
    limits += report_ladder.limits(record)
    measured = batches or windows or record.get("link_tests") or record.get("candidate")
    if not measured and not limits:
        limits.append("This run measured no throughput, transport counters or driver: it shows no performance result.")
    if measured:
        hosts = {w.host for w in windows} | set(record.get("hosts") or {}) | set(record.get("verification") or {})
        on = "one pair of hosts" if len(hosts) <= 2 else f"{len(hosts)} hosts"
        limits.append(
            f"This is one run on {on}. A difference between configurations needs repeated whole runs "
            "compared together (`inferlab compare a1,...,a5 b1,...,b5`, one layer apart, exact rank tests); a "
            "result counts as re-verified only when "
            "it reproduces in a separate run from a fresh lab or restore (`--require-fresh`)."
        )
    return limits


def findings(record: dict) -> tuple[list[str], list[str]]:
    """(what this run shows, what it does not show), generated from the record."""
    batches, windows = record_view.serving_batches(record), record_view.counter_windows(record)
    emulated = record_view.is_emulated(record)
    return _shows(record, batches, windows, emulated), _limits(record, batches, windows, emulated)

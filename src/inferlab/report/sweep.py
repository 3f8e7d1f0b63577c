"""The report's concurrency sweep: TP2 against the routed replicas at each level (sweep.py), a table of each side's
figures, each level's reading of the aggregate tok/s (observed, not a verdict), the crossover, and what the link
carried during TP2's sweep.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from inferlab.analysis import metric_rows, sweep, verdict_policy
from inferlab.report import prefix as report_prefix
from inferlab.report import text as fmt
from inferlab.report.collectives import text_of


def _spread(values: tuple[float, ...]) -> str:
    if not values:
        return "—"
    return f"{text_of(statistics.median(values))} ({text_of(min(values))}–{text_of(max(values))}, n={len(values)})"


def _pair(median: float | None, p99: float | None) -> str:
    return f"{text_of(median)} / {text_of(p99)}"


def _shift(row: metric_rows.Row | None) -> str:
    if row is None or row.interval is None:
        return "—"
    bounds = report_prefix.interval_bounds(row.interval, row.a.n, row.b.n, "rounds")
    return f"{text_of(row.interval.estimate)} ({bounds})"


def _link_lines(found: sweep.Sweep, record: dict, run_dir: Path | None) -> list[str]:
    """What the link carried under TP2's batches, level by level (sweep.link_by_level), from the run directory."""
    if found.tp2 is None:
        return []
    if run_dir is None:
        return ["- The link under TP2's sweep: read from the run directory's sampler series, not given here."]
    levels, reason = sweep.link_by_level(record, found, run_dir)
    if reason:
        return [f"- The link under TP2's sweep: not measured by level: {reason}."]
    rows = [[str(link.level), _spread(tuple(b / 1024 for b in link.bytes_per_token)),
             "—" if link.implied_gbps is None else f"{link.implied_gbps:.3g}"] for link in levels]
    return [
        "",
        "The link under TP2's sweep (observed): the bytes both ring hosts sent on the link from the sampler sample "
        "at or before each batch's start to the first at or after its end (the interval encloses the batch by up "
        "to a sampler period each side), over the batch's output tokens; and that median times the level's median "
        "aggregate tok/s, the link rate the curve implies. Where the implied rate nears what the link carries, the "
        "link explains the curve's ceiling; where it stays far below, something else does.",
        "",
        *fmt.table(["concurrency", "link KiB sent per output token, median (min–max, n)", "implied link Gb/s"],
                   rows),
    ]


def _arrival(found) -> list[str]:
    """How a batch's requests arrived, when a side sent them at a rate (nothing for all at once)."""
    lines = []
    for side in (found.replicas, found.tp2):
        rate = side.sweep.get("request_rate") if side else None
        if rate is not None:
            burstiness = side.sweep.get("burstiness")
            lines.append(f"- {side.label}: the requests of a batch arrived at {rate:g} a second (gamma gaps of shape "
                         f"{burstiness:g}{', a Poisson process' if burstiness == 1 else ''}), at most the level in "
                         "flight, not all at once.")
    return lines + [""] if lines else []


def section(record: dict, run_dir: Path | None = None) -> list[str]:
    """`## Concurrency sweep`: nothing when the record has no sweep. With `run_dir`, the link's bytes by level."""
    found = sweep.build(record)
    if found is None:
        return []
    first = found.tp2 or found.replicas
    rounds = first.sweep.get("trials")
    lines = [
        "## Concurrency sweep: TP2 against the routed replicas",
        "",
        f"The same request mix on both topologies: at each concurrency level a concurrent batch of level x "
        f"{first.sweep.get('requests_per_slot')} requests, prompt {first.sweep.get('prompt_tokens')} and output "
        f"{first.sweep.get('output_tokens')} tokens, {rounds} round(s), each round sending every level once with "
        "the same prompts on both sides. Each topology's levels ran in one block, not interleaved with the other's: "
        "switching topologies means pausing the original replicas and starting the TP2 ranks (minutes on real "
        "hosts); within a block the rounds rotate through the levels, so that a drift reaches every level alike.",
        "",
        *_arrival(found),
        "Aggregate tok/s is the batch's output tokens over its wall time (the samples the reading compares, one per "
        "round); per-request tok/s, TTFT and ITL are the median over the rounds of each batch's own statistic. The "
        "two kinds of figure are never mixed.",
        "",
    ]
    rows = []
    for level in found.levels:
        for side in (found.replicas, found.tp2):
            figures = found.figures.get((side.topology, level)) if side else None
            if figures is None:
                continue
            rows.append([str(level), fmt.cell(side.label), str(figures.rounds), _spread(figures.aggregate_tok_s),
                         text_of(figures.per_request_tok_s), _pair(figures.ttft_ms, figures.ttft_p99_ms),
                         _pair(figures.itl_ms, figures.itl_p99_ms), f"{figures.failed} of {figures.requests}"])
    if rows:
        lines += fmt.table(["concurrency", "topology", "rounds", "aggregate output tok/s median (min–max, n)",
                            "per-request output tok/s", "TTFT ms median / p99", "ITL ms median / p99",
                            "failed requests"], rows)
        lines.append("")
    reading_rows = [[str(r.level), _shift(r.row),
                     f"{r.row.test.p_two_sided:.3g}" if r.row and r.row.test else "—", fmt.cell(r.reason), r.reading]
                    for r in found.readings]
    if reading_rows:
        lines += [
            "Each level's reading: TP2's aggregate tok/s against the replicas' (exact two-sided rank-sum test, each "
            f"level read at {100 * verdict_policy.ALPHA:.0f} % divided by the levels compared, Bonferroni; the shift "
            f"is TP2 minus the replicas, Hodges-Lehmann); {sweep.ONE_DEPLOYMENT}.",
            "",
            *fmt.table(["concurrency", "TP2 − replicas, aggregate tok/s", "p", "read as", "observed"], reading_rows),
            "",
        ]
    lines += [f"- Crossover: {found.crossover}."]
    lines += [f"- {note}." for note in found.not_run]
    lines += _link_lines(found, record, run_dir)
    lines.append("")
    return lines


def shows(record: dict) -> list[str]:
    """One line for "What this run shows": each level's reading (observed, not a verdict)."""
    found = sweep.build(record)
    if found is None or not found.readings:
        return []
    said = ", ".join(f"{r.level}: {r.reading.removeprefix('observed: ')}" for r in found.readings)
    return [f"Concurrency sweep, TP2 against the routed replicas (aggregate tok/s by level, observed in one run, "
            f"not a verdict): {said}; {found.crossover}."]


def across_runs(records: list[dict]) -> str:
    """`inferlab sweep RUN,...`: each level's verdict over several runs' sweeps (sweep.across_runs), in Markdown."""
    levels, verdicts = sweep.across_runs(records)
    ids = ", ".join(str((data.get("run") or {}).get("id")) for data in records)
    lines = [f"# inferlab sweep: {len(records)} runs ({ids})", ""]
    if not levels:
        return "\n".join(lines + ["No run has a concurrency sweep."]) + "\n"

    def spread(found: metric_rows.Spread | None) -> str:
        return "—" if found is None else (f"{text_of(found.median)} ({text_of(found.min)}–{text_of(found.max)}, "
                                          f"n={found.n})")

    rows = [[str(v.level), spread(v.row.a if v.row else None), spread(v.row.b if v.row else None), _shift(v.row),
             f"{v.row.test.p_two_sided:.3g}" if v.row and v.row.test else "—", fmt.cell(v.reason), v.verdict]
            for v in verdicts]
    return "\n".join(lines + [
        "Each run's median aggregate output tok/s over its rounds is one sample a side, so the test covers the "
        "spread between deployments, which a single run's rounds cannot (its report gives readings, not verdicts). "
        f"Both sides ran in every run, so from {verdict_policy.PAIRED_MIN_RUNS} runs the samples pair by run (the "
        "signed-rank test of the per-run differences); with fewer, the rank-sum test. Each level is read at "
        f"{100 * verdict_policy.ALPHA:.0f} % divided by the levels compared (Bonferroni); the shift is TP2 minus the "
        "replicas.",
        "",
        *fmt.table(["concurrency", "replicas, run medians", "TP2, run medians", "TP2 − replicas", "p", "read as",
                    "verdict"], rows),
    ]) + "\n"

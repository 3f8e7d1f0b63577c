"""What `inferlab compare` prints: a comparison as text (Markdown) or as JSON."""

from __future__ import annotations

from dataclasses import asdict

from inferlab.analysis import stats
from inferlab.analysis.compare import PAIRED_RUNS, Comparison
from inferlab.analysis.metric_rows import Spread
from inferlab.analysis.verdict_policy import (
    ALPHA,
    CONFIDENCE_PCT,
    MIN_SAMPLES,
    SUPPORTED,
    UNATTAINABLE,
    no_verdict_possible,
)


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _spread(spread: Spread) -> str:
    return f"{_fmt(spread.median)} ({_fmt(spread.min)} to {_fmt(spread.max)}, n={spread.n})"


def _shift(interval: stats.ShiftInterval | None) -> str:
    if interval is None:
        return "—"
    if interval.low is None:
        return f"{_fmt(interval.estimate)} (no {CONFIDENCE_PCT}% interval at this n)"
    return f"{_fmt(interval.estimate)} ({interval.bounds(_fmt)}, {interval.confidence_pct:.1f}%)"


def _reading_text(seen: str | None, test: stats.RankSumTest | None) -> str:
    if seen is None:
        return "—"
    return no_verdict_possible(test) if seen == UNATTAINABLE else seen


def _fingerprint_lines(comparison: Comparison) -> list[str]:
    """Every component of what ran that differs between A and B, and the declared layer that explains it."""
    if not comparison.fingerprint:
        return [f"A and B ran the same configuration: {comparison.fingerprint_components} components (kernel, "
                "firmware, drivers, link settings, engine versions, launch commands, model files) alike."]
    lines = ["| component | layer | A | B | explained by |", "| --- | --- | --- | --- | --- |"]
    for found in comparison.fingerprint:
        explained = found.explained_by or ("recorded in one run only" if found.one_sided else "**nothing**")
        lines.append(f"| {found.component} | {found.layer} | {found.a or '(not recorded)'} "
                     f"| {found.b or '(not recorded)'} | {explained} |")
    return lines


def _method_text(design: str) -> str:
    if design == PAIRED_RUNS:
        return (f"the shift, the paired Hodges-Lehmann estimate (the median of the Walsh averages of the per-run "
                f"differences b - a) with its exact {CONFIDENCE_PCT}% interval (the shifts the test does not "
                "reject); p, the exact two-sided Wilcoxon signed-rank p-value of the per-run differences (zeros left "
                "out, ties take midranks).")
    return (f"the shift, the Hodges-Lehmann estimate (the median of all differences b - a) with its exact "
            f"distribution-free {CONFIDENCE_PCT}% interval and that interval's exact confidence (with ties: the "
            "shifts the test does not reject); p, the exact two-sided Wilcoxon-Mann-Whitney rank-sum p-value (ties "
            "take midranks).")


def render_text(comparison: Comparison) -> str:
    a, b = comparison.run_a, comparison.run_b
    lines = [f"# inferlab compare: A {a['id']} vs B {b['id']}", ""]
    for which, run in (("A", a), ("B", b)):
        lines.append(
            f"- {which}: `{run['playbook']}`, started {run['started']}, status {run['status']}, exit {run['exit_code']}"
        )
    lines += ["", "## Declared layers", "", "| layer | A | B | |", "| --- | --- | --- | --- |"]
    for name, (value_a, value_b) in comparison.layers.items():
        mark = "**differs**" if name == comparison.changed_layer else ""
        lines.append(f"| {name} | {value_a or '(not recorded)'} | {value_b or '(not recorded)'} | {mark} |")
    lines += ["", "## Configuration fingerprint", ""] + _fingerprint_lines(comparison)
    lines += [
        "",
        "## Differences (B - A)",
        "",
        f"Samples: {comparison.design}. Each side: median (min to max, n samples); B - A is the difference of the "
        f"medians. With at least {MIN_SAMPLES} samples a side: {_method_text(comparison.design)} An interval's end "
        "said 'above' or 'below' is open: the test rejects that shift itself. "
        f"`observed` reads p at {ALPHA:g}; a verdict reads each of its k metrics at {ALPHA:g} / k (`family`, "
        "Bonferroni), so that one metric off 0 among many by chance does not carry it. docs/STATISTICS.md says "
        "why these methods and what they assume.",
    ]
    section = None
    for row in comparison.rows:
        if row.section != section:
            section = row.section
            lines += [
                "",
                f"### {section}",
                "",
                f"| metric | better | A | B | B - A | shift ({CONFIDENCE_PCT}% interval) | p | observed | family "
                "| counts for |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            ]
        p = "—" if row.test is None else f"{row.test.p_two_sided:.3g}"
        family = "—" if row.family_alpha is None else (
            f"at {row.family_alpha:.3g}: {_reading_text(row.family_observed, row.test)}")
        lines.append(
            f"| {row.name} | {row.better or '—'} | {_spread(row.a)} | {_spread(row.b)} | {_fmt(row.difference)} "
            f"| {_shift(row.interval)} | {p} | {_reading_text(row.observed, row.test)} | {family} | {row.role} |"
        )
    if not comparison.rows:
        lines.append("No metric is in both records.")
    lines += ["", "## Verdicts", ""]
    for verdict in comparison.verdicts:
        lines.append(f"- {verdict.claim}: **{verdict.verdict}** ({verdict.reason})")
        if comparison.require_fresh:
            fresh, why = comparison.fresh_b
            if verdict.verdict != SUPPORTED:
                lines.append("  - re-verified: not applicable (not supported here)")
            else:
                lines.append(f"  - re-verified: {'yes' if verdict.re_verified else 'no'}: B {why}")
    lines += ["", "## Notes", ""] + [f"- {note}" for note in comparison.notes]
    return "\n".join(lines) + "\n"


def as_json(comparison: Comparison) -> dict:
    return {
        "run_a": comparison.run_a,
        "run_b": comparison.run_b,
        "layers": {name: {"a": a, "b": b} for name, (a, b) in comparison.layers.items()},
        "changed_layer": comparison.changed_layer,
        "aa_pair": comparison.changed_layer is None,
        "design": comparison.design,
        "transport_label": comparison.transport_label,
        "statistics": {
            "difference": "median(B) - median(A)",
            **({"test": "Wilcoxon signed-rank of the per-run differences b - a, two-sided, zeros left out, "
                        "midranks for ties",
                "exact_up_to_pairs": stats.EXACT_MAX_PAIRS,
                "shift": "paired Hodges-Lehmann: median of the Walsh averages of b - a, with the shifts the test "
                         "does not reject"}
               if comparison.design == PAIRED_RUNS else
               {"test": "Wilcoxon-Mann-Whitney rank-sum, two-sided, midranks for ties",
                "exact_up_to_pooled_samples": stats.EXACT_MAX_POOLED,
                "shift": "Hodges-Lehmann: median of all b - a, with its distribution-free interval (with ties: the "
                         "shifts the test does not reject)"}),
            "confidence_pct": CONFIDENCE_PCT,
            "alpha": ALPHA,
            "family": "Bonferroni: alpha / k for each of a claim's k metrics",
            "min_samples": MIN_SAMPLES,
        },
        "fingerprint": {"components": comparison.fingerprint_components,
                        "differences": [asdict(found) for found in comparison.fingerprint]},
        "rows": [asdict(row) for row in comparison.rows],
        "verdicts": [asdict(v) for v in comparison.verdicts],
        "require_fresh": comparison.require_fresh,
        "fresh_b": None
        if comparison.fresh_b is None
        else {"fresh": comparison.fresh_b[0], "reason": comparison.fresh_b[1]},
        "notes": comparison.notes,
    }

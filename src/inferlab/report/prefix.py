"""The report's cold-against-warm prefix part: each served mode's prefix trials by label, and the warm-minus-cold
shift of each figure with its interval, from the rank-sum statistics `inferlab compare` uses (stats.py).

A mode's `prefix_trials` (roles/acceptance, tasks/prefix_trials.yml): pairs of one long prompt, sent cold (the
prefix cache flushed first) then warm, each label confirmed per trial by the server's cached_tokens (the record's
`proven`). Only confirmed trials carry figures. The shift is an observation of this run, read as `compare` reads a
metric; with few pairs no interval reaches 95 % and the report says so instead of printing one.
"""

from __future__ import annotations

from inferlab.analysis import stats, verdict_policy
from inferlab.report.collectives import text_of

# key, name, which way is better
FIGURES = (("ttft_ms", "TTFT ms", "lower"), ("prefill_tok_s", "prefill tok/s (prompt tokens / TTFT)", "higher"),
           ("decode_tok_s", "decode tok/s (TTFT excluded)", "higher"))
# compare's readings of B (here warm) against A (cold), in this section's words
READINGS = {verdict_policy.B_BETTER: "warm better", verdict_policy.B_WORSE: "warm worse"}


def _cell(figure: dict) -> str:
    if not figure.get("n"):
        return "—"
    return f"{text_of(figure['median'])} ({text_of(figure['min'])}–{text_of(figure['max'])}, n={figure['n']})"


def _values(figure: dict) -> list[float]:
    return [v for v in figure.get("values") or [] if v is not None]


def interval_bounds(interval: stats.ShiftInterval, m: int, n: int, samples: str) -> str:
    """A Hodges-Lehmann interval as the report prints it, or why there is none at m vs n `samples` (trials, ...)."""
    if interval.low is None:
        return f"no {verdict_policy.CONFIDENCE_PCT} % interval at {m} vs {n} {samples}"
    return f"{interval.confidence_pct:.0f} % interval {interval.bounds(text_of)}"


def shift(cold: dict, warm: dict, better: str) -> str:
    """Warm minus cold for one figure: compare's reading at its level (warm better or worse, no clear difference, or
    no verdict possible at these sizes), the Hodges-Lehmann shift, its 95 % interval where the sizes allow one, and
    the two-sided rank-sum p."""
    a, b = _values(cold), _values(warm)
    if not a or not b:
        return "no shift: a label has no confirmed trial"
    interval = stats.hodges_lehmann(a, b, verdict_policy.CONFIDENCE_PCT)
    test = stats.rank_sum_test(a, b)
    reading = verdict_policy.reading(test, verdict_policy.ALPHA, better)
    bounds = interval_bounds(interval, len(a), len(b), "trials")
    return (f"{READINGS.get(reading, reading)}: {text_of(interval.estimate)} ({bounds}; rank-sum p "
            f"{test.p_two_sided:.3g}, at least {test.smallest_p:.3g})")


def _traced(serving: dict) -> dict[str, dict]:
    return {mode: result["prefix_trials"] for mode, result in serving.items()
            if isinstance(result.get("prefix_trials"), dict)}


def section(serving: dict) -> list[str]:
    """`## Cold against warm prefix`: per mode, a table by label and the warm-minus-cold shift of each figure."""
    traced = _traced(serving)
    if not traced:
        return []
    lines = [
        "## Cold against warm prefix",
        "",
        "Pairs of one long prompt: cold with the prefix cache flushed first, then warm (the same prompt again). A "
        "label counts only where the server's cached tokens confirm it (0 cold, above 0 warm). Median (min–max, n) "
        "over the confirmed trials; the shift is warm minus cold (Hodges-Lehmann), read as `inferlab compare` reads "
        f"a metric (two-sided rank-sum test at {100 * verdict_policy.ALPHA:.0f} %; 3 pairs can give no verdict, 4 "
        "can).",
        "",
    ]
    for mode, trials in traced.items():
        prompt = sorted({t.get("prompt_tokens") for t in trials.get("trials") or [] if t.get("prompt_tokens")})
        proven = {label: sum(1 for t in trials.get("trials") or [] if t["label"] == label and t.get("proven"))
                  for label in ("cold", "warm")}
        lines += [
            f"### {mode}: {trials.get('pairs')} pairs, prompt {', '.join(f'{p:,}' for p in prompt) or '—'} tokens "
            f"({'every label confirmed' if trials.get('passed') else 'NOT every label confirmed'})",
            "",
            "| label | confirmed trials | " + " | ".join(figure[1] for figure in FIGURES) + " |",
            "| --- | --- | " + " | ".join(["---"] * len(FIGURES)) + " |",
        ]
        for label in ("cold", "warm"):
            figures = (trials.get("figures") or {}).get(label) or {}
            lines.append(f"| {label} | {proven[label]} | "
                         + " | ".join(_cell(figures.get(figure[0]) or {}) for figure in FIGURES) + " |")
        lines.append("")
        for key, name, better in FIGURES:
            cold = ((trials.get("figures") or {}).get("cold") or {}).get(key) or {}
            warm = ((trials.get("figures") or {}).get("warm") or {}).get(key) or {}
            lines.append(f"- warm minus cold, {name}: {shift(cold, warm, better)}")
        lines += [f"- problem: {problem}" for problem in trials.get("problems") or []]
        lines.append("")
    return lines


def shows(serving: dict) -> list[str]:
    """One line per mode with prefix trials, for "What this run shows"."""
    found = []
    for mode, trials in _traced(serving).items():
        figures = trials.get("figures") or {}
        cold = (figures.get("cold") or {}).get("ttft_ms") or {}
        warm = (figures.get("warm") or {}).get("ttft_ms") or {}
        proof = ("each label confirmed by the server's cached tokens" if trials.get("passed")
                 else "NOT every label confirmed: " + "; ".join(trials.get("problems") or []))
        found.append(f"Mode {mode}, cold against warm prefix ({trials.get('pairs')} pairs, observed): median TTFT "
                     f"cold {text_of(cold.get('median'))} ms, warm {text_of(warm.get('median'))} ms ({proof}).")
    return found

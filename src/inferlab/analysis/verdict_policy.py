"""The verdict policy of a comparison: the level a claim keeps (ALPHA), how one metric's test is read at a level, the
family rule that reads each of a claim's k metrics at ALPHA / k (Bonferroni), and the verdict of a claim from its
metrics, withheld where the samples cannot carry one (one run a side, an A/A pair). docs/STATISTICS.md says why."""

from __future__ import annotations

from dataclasses import dataclass, replace

from inferlab.analysis import stats
from inferlab.analysis.metric_rows import INFO, Metric, Row, Spread
from inferlab.analysis.record_input import split_mode

CONFIDENCE_PCT = 95  # of the shift interval; its complement is the error rate a claim keeps
ALPHA = (100 - CONFIDENCE_PCT) / 100
MIN_SAMPLES = 3  # fewer a side: no test (at 3 vs 3 the smallest two-sided p is 0.1, so a test but no verdict)
# Two modes of the same runs pair by run from this many runs: the signed-rank test's smallest p, 2 / 2^runs, is then
# 0.0078, within reach of a claim of up to 6 metrics (0.05 / 6); with fewer runs it could not reach the level that
# the rank-sum test (which ignores the pairing: valid, and conservative here) reaches with the same runs. Chosen by
# the number of runs alone, never by the figures, so the level holds.
PAIRED_MIN_RUNS = 8

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
NO_VERDICT = "no verdict"  # an A/A pair: nothing declared differs, so there is no claim to judge
# What one metric's test shows (`observed`, `family_observed`).
B_BETTER = "B better"
B_WORSE = "B worse"
NO_CLEAR = "no clear difference"
TOO_FEW = "too few samples"
NO_DIRECTION = "no direction"
UNATTAINABLE = "no verdict possible"  # no samples of these sizes could reach the level: see no_verdict_possible


@dataclass(frozen=True)
class Verdict:
    claim: str
    verdict: str
    reason: str
    re_verified: bool | None = None  # None unless require_fresh


def no_verdict_possible(test: stats.RankSumTest | stats.SignedRankTest) -> str:
    """The words for a metric whose sizes cannot reach the level it is read at."""
    return f"no verdict possible at {test.sizes()}: the smallest exact p is {test.smallest_p:.3g}"


def needed_for(test: stats.RankSumTest | stats.SignedRankTest, alpha: float) -> str:
    """How many samples a side (pairs, for the paired test) could reach `alpha`."""
    if test.method == stats.SIGNED_RANK:
        return f"at least {stats.pairs_needed(alpha)} pairs"
    return f"at least {stats.samples_needed(alpha)} samples a side"


def reading(test: stats.RankSumTest, alpha: float, better: str | None) -> str:
    """What one metric's rank-sum test shows when read at level `alpha` (two-sided): on whose side B is, no clear
    difference, or no verdict possible when no samples of these sizes could reach `alpha`."""
    if better is None:
        return NO_DIRECTION
    if not stats.reaches(test.smallest_p, alpha):
        return UNATTAINABLE
    if not stats.reaches(test.p_two_sided, alpha):
        return NO_CLEAR
    return B_BETTER if test.b_higher == (better == "higher") else B_WORSE


def compare_metric(a: Metric, b: Metric, paired: bool = False) -> Row:
    """One metric's row: both spreads, the difference of medians and, with at least MIN_SAMPLES a side, the exact
    rank-sum test and the Hodges-Lehmann shift with its interval (read at ALPHA alone: `observed`). `paired`: the
    i-th samples of A and B were measured together (two modes of one run), so the signed-rank test of the
    differences and the paired shift instead."""
    spread_a, spread_b = Spread.of(a.samples), Spread.of(b.samples)
    test = interval = None
    seen = TOO_FEW
    if min(spread_a.n, spread_b.n) >= MIN_SAMPLES:
        if paired:
            test = stats.signed_rank_test(a.samples, b.samples)
            interval = stats.paired_shift(a.samples, b.samples, CONFIDENCE_PCT)
        else:
            test = stats.rank_sum_test(a.samples, b.samples)
            interval = stats.hodges_lehmann(a.samples, b.samples, CONFIDENCE_PCT)
        seen = reading(test, ALPHA, a.better)
    role = a.role if a.role == b.role else INFO  # e.g. ladder rates where only one run ran trials
    difference = spread_b.median - spread_a.median
    return Row(a.section, a.name, a.better, role, spread_a, spread_b, difference, test, interval, seen)


def family_alpha(metrics: int) -> float:
    """Bonferroni: each of k metrics behind one claim is read at ALPHA / k, so that the claim keeps ALPHA."""
    return ALPHA / max(metrics, 1)


def with_family_alpha(rows: list[Row], role: str) -> list[Row]:
    """`rows` with family_alpha and family_observed set on the rows of `role` that have a test."""
    def in_family(row: Row) -> bool:
        return row.role == role and row.test is not None

    alpha = family_alpha(sum(1 for row in rows if in_family(row)))
    return [
        replace(row, family_alpha=alpha, family_observed=reading(row.test, alpha, row.better)) if in_family(row)
        else row
        for row in rows
    ]


def claim_verdict(claim: str, rows: list[Row], role: str) -> Verdict:
    """The claim's verdict from its metrics' tests, each read at its family alpha (ALPHA where none was set):
    supported when B is better on at least one and worse on none, not supported the reverse, else inconclusive.
    This is the verdict the samples support; compare() withholds it where the samples cannot carry one (one run
    a side, an A/A pair)."""
    def seen(row: Row) -> str:
        return row.family_observed or row.observed

    counted = [r for r in rows if r.role == role and r.test is not None and r.better is not None]
    if not counted:
        return Verdict(claim, INCONCLUSIVE, f"no {role} metric has at least {MIN_SAMPLES} samples on both sides")
    alpha = family_alpha(len(counted))
    each = f" each ({ALPHA:g} / {len(counted)}, Bonferroni)" if len(counted) > 1 else ""
    methods = sorted({r.test.method for r in counted})
    tally = (f"of {len(counted)} {role} metric(s), exact {' and '.join(methods)} test at two-sided "
             f"p <= {alpha:.3g}{each}")
    better = [r for r in counted if seen(r) == B_BETTER]
    worse = [r for r in counted if seen(r) == B_WORSE]
    if better and not worse:
        return Verdict(claim, SUPPORTED, f"observed: B better on {len(better)} {tally}, worse on none")
    if worse and not better:
        return Verdict(claim, NOT_SUPPORTED, f"observed: B worse on {len(worse)} {tally}, better on none")
    if better and worse:
        return Verdict(claim, INCONCLUSIVE, f"observed: B better on {len(better)} and worse on {len(worse)} {tally}")
    unattainable = [r for r in counted if seen(r) == UNATTAINABLE]
    if len(unattainable) == len(counted):
        largest = max(unattainable, key=lambda r: (r.test.m * r.test.n, -r.test.smallest_p))
        return Verdict(
            claim,
            INCONCLUSIVE,
            f"{no_verdict_possible(largest.test)}, above the {alpha:.3g} each of {len(counted)} {role} metric(s) "
            f"needs; {needed_for(largest.test, alpha)} can reach it",
        )
    cannot = f" ({len(unattainable)} of them could not reach it at their n)" if unattainable else ""
    return Verdict(claim, INCONCLUSIVE, f"observed: no clear difference {tally}{cannot}")


def what_gives_a_verdict(rows: list[Row], role: str, ids: tuple[str, str]) -> str:
    """How many whole runs a side the claim of `role` needs at ALPHA with its metrics (each run gives every metric
    one sample), and the command; `ids` (A's and B's run ids) name the modes when the sides are RUN:MODE."""
    metrics = max(1, sum(1 for r in rows if r.role == role and r.better is not None))
    needed = stats.samples_needed(family_alpha(metrics))
    (_run_a, mode_a), (_run_b, mode_b) = split_mode(ids[0]), split_mode(ids[1])
    if mode_a and mode_b:
        runs = f"RUN1:{mode_a},...,RUN{needed}:{mode_a} RUN1:{mode_b},...,RUN{needed}:{mode_b}"
    else:
        runs = f"a1,...,a{needed} b1,...,b{needed}"
    return (
        f"repeat whole runs, at least {needed} a side for {metrics} {role} metric(s) at {ALPHA:g} (Bonferroni), "
        f"and compare them together: inferlab compare {runs}"
    )


def one_run_a_side(verdict: Verdict, rows: list[Row], role: str, ids: tuple[str, str]) -> Verdict:
    """A verdict withheld: with one run a side the samples share one deployment each, so the test does not cover
    the spread between runs of one configuration, which alone can separate two runs."""
    return Verdict(
        verdict.claim,
        INCONCLUSIVE,
        f"one run a side: each side's samples share one deployment, so no test here covers the spread between "
        f"whole runs. For a verdict, {what_gives_a_verdict(rows, role, ids)}. Within the runs the test read "
        f"{verdict.verdict}: {verdict.reason}",
    )


def aa_pair(verdict: Verdict) -> Verdict:
    """No verdict between runs that declare no differing layer: they repeat one configuration."""
    return Verdict(
        verdict.claim,
        NO_VERDICT,
        "A/A pair: no declared layer differs, so the differences measure the noise floor between runs of one "
        "configuration, not an effect",
    )

"""Small-sample statistics for `inferlab compare`: the Wilcoxon-Mann-Whitney rank-sum test and the Hodges-Lehmann
shift with its distribution-free confidence interval.

Both rest on one fact: when A and B come from one distribution (the samples are exchangeable), each of the
C(m+n, n) ways to split the pooled samples into m for A and n for B is equally likely. A p-value is then a count of
splits divided by C(m+n, n), which this module computes exactly (no random draws, so the same samples always give
the same figures) by dynamic programming over the ranks, up to EXACT_MAX_POOLED pooled samples; beyond that, by the
normal approximation with the tie correction (Hollander, Wolfe & Chicken, Nonparametric Statistical Methods, 3rd ed.,
2014, ch. 4). Ties get midranks, and the exact test is then conditional on the tie pattern, so it stays exact.

The smallest p-value a split of m and n can give is 2 / C(m+n, n) two-sided (complete separation): 0.1 at 3 vs 3,
2/70 at 4 vs 4, 2/252 at 5 vs 5. A test at level alpha can only reject when that is <= alpha (`smallest_p`,
`samples_needed`). With ties, the interval is the test inverted (the shifts it does not reject, in exact integer
arithmetic), so that it excludes 0 exactly when p <= alpha. Paired samples (two modes measured in each run): the
exact Wilcoxon signed-rank test and the paired Hodges-Lehmann shift (`signed_rank_test`, `paired_shift`). Why these
methods, their assumptions and their calibration: docs/STATISTICS.md. Standard library only.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist, median

EXACT_MAX_POOLED = 60  # pooled samples up to which p-values and interval ranks are exact (a few ms each)
EXACT_MAX_PAIRS = 60  # pairs up to which the signed-rank test is exact
RANK_SUM, SIGNED_RANK = "rank-sum", "signed-rank"  # the test a comparison used: independent sides, or paired


@dataclass(frozen=True)
class RankSumTest:
    """The rank-sum test of B against A. `u` is the Mann-Whitney count of pairs (a, b) with b > a, a tie counting
    1/2; 0 means every B sample is below every A sample, m*n every one above."""

    m: int  # samples of A
    n: int  # samples of B
    u: float
    p_b_higher: float  # one-sided: the chance of a U this large or larger when A and B are exchangeable
    p_b_lower: float  # one-sided: the chance of a U this small or smaller
    p_two_sided: float  # 2 * the smaller one-sided p, at most 1
    smallest_p: float  # the smallest two-sided p any samples of these sizes can give: 2 / C(m+n, n)
    exact: bool  # False: the normal approximation (more than EXACT_MAX_POOLED pooled samples)
    method: str = RANK_SUM

    @property
    def b_higher(self) -> bool:
        """Whether the evidence, whatever its strength, points to B being the higher."""
        return self.p_b_higher < self.p_b_lower

    def sizes(self) -> str:
        return f"n={self.m} vs {self.n}"


@dataclass(frozen=True)
class SignedRankTest:
    """The Wilcoxon signed-rank test of B against A paired (A's i-th sample and B's i-th are measured together, e.g.
    two modes of one run): the differences b - a, zeros left out (Wilcoxon's rule), ranked by size with midranks;
    `t_plus` is the rank sum of the positive ones. Exact: each of the 2^pairs sign patterns is equally likely when
    A and B are exchangeable within each pair, so a run's own level, shared by both sides, cancels."""

    pairs: int  # pairs whose difference is not zero: the test's n
    zeros: int  # pairs with b == a, left out
    t_plus: float
    p_b_higher: float
    p_b_lower: float
    p_two_sided: float
    smallest_p: float  # 2 / 2^pairs: every difference on one side
    exact: bool  # False: the normal approximation (more than EXACT_MAX_PAIRS pairs)
    method: str = SIGNED_RANK

    @property
    def b_higher(self) -> bool:
        return self.p_b_higher < self.p_b_lower

    @property
    def m(self) -> int:
        return self.pairs

    @property
    def n(self) -> int:
        return self.pairs

    def sizes(self) -> str:
        return f"{self.pairs} pairs" + (f" ({self.zeros} equal, left out)" if self.zeros else "")


@dataclass(frozen=True)
class ShiftInterval:
    """The Hodges-Lehmann estimate of the shift B - A and its distribution-free confidence interval."""

    estimate: float  # the median of the m*n differences b - a
    low: float | None  # None when no interval reaches the requested confidence at these sizes
    high: float | None
    # the interval's exact confidence (>= the requested; an inverted one: the requested, the test's exact level);
    # when none: the widest one's
    confidence_pct: float
    exact: bool
    # With ties the interval is the set of shifts the test does not reject (inverted), and an end the test rejects
    # at itself but not just inside it is open: excluded, so that the interval excludes 0 exactly when p <= alpha.
    low_open: bool = False
    high_open: bool = False

    def excludes(self, value: float) -> bool:
        """Whether `value` lies outside the interval (False when there is none)."""
        if self.low is None:
            return False
        return (value < self.low or (value == self.low and self.low_open)
                or value > self.high or (value == self.high and self.high_open))

    def bounds(self, text=str) -> str:
        """'LOW to HIGH', an open end said as 'above LOW' / 'below HIGH'."""
        return (f"{'above ' if self.low_open else ''}{text(self.low)} to "
                f"{'below ' if self.high_open else ''}{text(self.high)}")


def reaches(p: float, alpha: float) -> bool:
    """p <= alpha, forgiving the rounding of a level written as a percentage (1 - 90/100 is 0.0999...98)."""
    return p <= alpha * (1 + 1e-9)


def smallest_p(m: int, n: int) -> float:
    """The smallest two-sided p of a rank-sum test of m against n samples: every sample of one side beyond every
    sample of the other, 1 split in C(m+n, n) each way."""
    return min(1.0, 2 / math.comb(m + n, n))


def samples_needed(alpha: float, at_most: int = 30) -> int | None:
    """The fewest samples a side (the same number on both) with which a two-sided rank-sum test can reach alpha;
    None when more than `at_most` would be needed."""
    return next((k for k in range(1, at_most + 1) if reaches(smallest_p(k, k), alpha)), None)


def pairs_needed(alpha: float, at_most: int = 30) -> int | None:
    """The fewest pairs with which a two-sided signed-rank test can reach alpha (2 / 2^pairs <= alpha); None when
    more than `at_most` would be needed."""
    return next((k for k in range(1, at_most + 1) if reaches(min(1.0, 2 / 2**k), alpha)), None)


def doubled_midranks(values: list[float]) -> list[int]:
    """Twice each value's rank among `values` (1-based, ties sharing the mean of their ranks), in input order:
    doubling keeps a midrank such as 2.5 an integer."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + 1) + (end + 1)  # first rank + last rank = twice their mean
        start = end + 1
    return ranks


@lru_cache(maxsize=4096)  # an inverted interval asks for many tie patterns, which recur across metrics and runs
def rank_sum_counts(pooled_ranks: tuple[int, ...], n: int) -> tuple[int, ...]:
    """counts[s]: how many ways to choose n of `pooled_ranks` (doubled midranks, sorted) sum to s. Subset-sum
    dynamic programming, one row per subset size, newest rank first so that each rank is used once."""
    total = sum(sorted(pooled_ranks)[-n:]) if n else 0
    by_size = [[0] * (total + 1) for _size in range(n + 1)]
    by_size[0][0] = 1
    for chosen, rank in enumerate(pooled_ranks, start=1):
        for size in range(min(chosen, n), 0, -1):
            smaller, row = by_size[size - 1], by_size[size]
            row[rank:] = [have + extra for have, extra in zip(row[rank:], smaller, strict=False)]
    return tuple(by_size[n])


def _tail_probabilities(pooled_ranks: list[int], n: int, observed: int) -> tuple[float, float]:
    """(P(W >= observed), P(W <= observed)) of B's doubled rank sum W over all equally likely splits."""
    counts = rank_sum_counts(tuple(sorted(pooled_ranks)), n)
    splits = sum(counts)
    at_least = sum(counts[observed:])
    at_most = sum(counts[: observed + 1])
    return at_least / splits, at_most / splits


def _normal_tail_probabilities(ranks: list[int], m: int, n: int, observed: int) -> tuple[float, float]:
    """The same by the normal approximation to B's rank sum, with the tie correction to its variance and a
    continuity correction of half a rank (Hollander, Wolfe & Chicken, ch. 4)."""
    pooled = m + n
    rank_sum = observed / 2
    mean = n * (pooled + 1) / 2
    ties: dict[int, int] = {}
    for rank in ranks:
        ties[rank] = ties.get(rank, 0) + 1
    tie_term = sum(t**3 - t for t in ties.values()) / (pooled * (pooled - 1))
    variance = m * n / 12 * ((pooled + 1) - tie_term)
    if variance <= 0:
        return 1.0, 1.0
    normal = NormalDist(mean, math.sqrt(variance))
    return 1 - normal.cdf(rank_sum - 0.5), normal.cdf(rank_sum + 0.5)


def _check_samples(a, b) -> tuple[list[float], list[float]]:
    a, b = list(a), list(b)
    if not a or not b:
        raise ValueError(f"a rank-sum test needs samples on both sides (found {len(a)} in A, {len(b)} in B)")
    for value in a + b:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"a sample must be a finite number, found {value!r}")
    return [float(v) for v in a], [float(v) for v in b]


def rank_sum_test(a, b) -> RankSumTest:
    """The Wilcoxon-Mann-Whitney rank-sum test of B against A, two one-sided p-values and the two-sided one.
    Exact (the permutation distribution of B's midrank sum) up to EXACT_MAX_POOLED pooled samples."""
    return _rank_sum_test(*_check_samples(a, b))


def _rank_sum_test(a: list, b: list) -> RankSumTest:
    """rank_sum_test on checked samples (floats, or the exact integers an inverted interval shifts)."""
    m, n = len(a), len(b)
    ranks = doubled_midranks(a + b)
    observed = sum(ranks[m:])
    u = observed / 2 - n * (n + 1) / 2
    exact = m + n <= EXACT_MAX_POOLED
    if exact:
        higher, lower = _tail_probabilities(ranks, n, observed)
    else:
        higher, lower = _normal_tail_probabilities(ranks, m, n, observed)
    return RankSumTest(m, n, u, higher, lower, min(1.0, 2 * min(higher, lower)), smallest_p(m, n), exact)


def _lower_tail_u(m: int, n: int) -> list[float]:
    """P(U <= c) for c = 0..m*n when A and B are exchangeable and nothing ties (the interval's coverage)."""
    counts = rank_sum_counts(tuple(range(2, 2 * (m + n) + 1, 2)), n)
    splits = sum(counts)
    offset = n * (n + 1)  # the smallest doubled rank sum: B holding ranks 1..n
    cumulative, running = [], 0
    for u in range(m * n + 1):
        running += counts[offset + 2 * u]
        cumulative.append(running / splits)
    return cumulative


def hodges_lehmann(a, b, confidence_pct: float = 95) -> ShiftInterval:
    """The shift estimate median(b - a over all pairs) and the interval [D(k), D(mn+1-k)] of the sorted pairwise
    differences, with k the largest such that 2 * P(U <= k-1) <= 1 - confidence: its coverage is exactly
    1 - 2 * P(U <= k-1) for continuous samples under a pure shift (Bauer 1972; Hollander, Wolfe & Chicken, ch. 4).
    When even k = 1 (min to max of the differences) falls short, no interval: low and high are None and
    confidence_pct is the widest interval's (90 % at 3 vs 3)."""
    a, b = _check_samples(a, b)
    m, n = len(a), len(b)
    differences = sorted(y - x for x in a for y in b)
    alpha = 1 - confidence_pct / 100
    exact = m + n <= EXACT_MAX_POOLED
    if exact and len(set(a + b)) < m + n:
        # ties: the no-ties ranks below would not match the tied test; invert the test itself, in exact integers
        ints, denominator = _integers(a + b)
        ints_a, ints_b = ints[:m], ints[m:]
        return _inverted_interval(
            median(differences), sorted({y - x for x in ints_a for y in ints_b}), Fraction(denominator),
            # a probe is twice a shift in the points' units: the samples doubled, B's less the probe
            lambda probe: reaches(_rank_sum_test([2 * x for x in ints_a], [2 * y - probe for y in ints_b]).p_two_sided,
                                  alpha),
            confidence_pct, smallest_p(m, n))
    if exact:
        lower_tail = _lower_tail_u(m, n)
        k = 0
        while k < len(lower_tail) and reaches(2 * lower_tail[k], alpha):
            k += 1  # the interval [D(k), D(mn+1-k)] covers with 1 - 2 * P(U <= k-1)
        coverage = 1 - 2 * lower_tail[max(k - 1, 0)]
    else:
        z = NormalDist().inv_cdf(1 - alpha / 2)
        k = math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))
        coverage = 1 - alpha
    if k < 1:
        return ShiftInterval(median(differences), None, None, 100 * coverage, exact)
    return ShiftInterval(median(differences), differences[k - 1], differences[-k], 100 * coverage, exact)


def _integers(values: list[float]) -> tuple[list[int], int]:
    """Floats as integers over one common denominator (every float is k / 2^e, so the largest denominator is
    common), so that shifting and comparing them is exact and fast."""
    fractions = [Fraction(v) for v in values]
    denominator = max(f.denominator for f in fractions)
    return [int(f * denominator) for f in fractions], denominator


def _inverted_interval(estimate: float, points: list[int], scale: Fraction, rejects, confidence_pct: float,
                       smallest: float) -> ShiftInterval:
    """The shifts the test does not reject at the interval's level, bounded by the sorted `points` (the shifts, times
    `scale`, at which the statistic changes): between two points the samples keep their order, so the test reads
    the same as at their midpoint. `rejects(probe)` is asked at probes in half the points' units (2 x a point, or the
    sum of two neighbours: their midpoint), so that every probe is an integer. An end found only just inside a
    point (the point itself rejected) is open. Binary search from the estimate outwards: the shifts not rejected
    are one run. When even the widest interval falls short of the level, no interval (None), with the widest
    one's confidence."""
    probes, at_point = [2 * points[0] - 2], [False]
    for left, right in zip(points, points[1:], strict=False):
        probes += [2 * left, left + right]
        at_point += [True, False]
    probes += [2 * points[-1], 2 * points[-1] + 2]
    at_point += [True, False]
    if not rejects(probes[0]) or not rejects(probes[-1]):
        return ShiftInterval(estimate, None, None, 100 * (1 - smallest), True)
    centre = min(bisect_left(probes, 2 * Fraction(estimate) * scale), len(probes) - 1)  # at or just above it
    if rejects(probes[centre]):
        return ShiftInterval(estimate, None, None, 100 * (1 - smallest), True)

    def edge(inside: int, outside: int) -> int:
        """The last probe not rejected going from `inside` (not rejected) towards `outside` (rejected)."""
        while abs(inside - outside) > 1:
            middle = (inside + outside) // 2
            if rejects(probes[middle]):
                outside = middle
            else:
                inside = middle
        return inside

    first, last = edge(centre, 0), edge(centre, len(probes) - 1)
    low = probes[first] if at_point[first] else probes[first - 1]
    high = probes[last] if at_point[last] else probes[last + 1]
    return ShiftInterval(estimate, float(low / (2 * scale)), float(high / (2 * scale)), confidence_pct, True,
                         not at_point[first], not at_point[last])


# --- paired samples -----------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def signed_rank_counts(ranks: tuple[int, ...]) -> tuple[int, ...]:
    """counts[s]: how many of the 2^len(ranks) sign patterns give the positive ranks (doubled midranks) the sum s."""
    counts = [1] + [0] * sum(ranks)
    for rank in ranks:
        counts[rank:] = [have + extra for have, extra in zip(counts[rank:], counts, strict=False)]
    return tuple(counts)


def _check_pairs(a, b) -> tuple[list[float], list[float]]:
    a, b = _check_samples(a, b)
    if len(a) != len(b):
        raise ValueError(f"a paired test needs one B sample for each A sample (found {len(a)} in A, {len(b)} in B)")
    return a, b


def signed_rank_test(a, b) -> SignedRankTest:
    """The Wilcoxon signed-rank test of B against A, a[i] paired with b[i]: exact (the 2^pairs equally likely sign
    patterns of the ranked differences, ties by midranks) up to EXACT_MAX_PAIRS pairs, else the normal
    approximation with the tie correction."""
    a, b = _check_pairs(a, b)
    return _signed_rank_test([y - x for x, y in zip(a, b, strict=True)])


def _signed_rank_test(differences: list) -> SignedRankTest:
    nonzero = [d for d in differences if d != 0]
    pairs, zeros = len(nonzero), len(differences) - len(nonzero)
    if not pairs:  # every pair equal: no difference seen, where as many unequal pairs could have shown one
        return SignedRankTest(0, zeros, 0.0, 1.0, 1.0, 1.0, min(1.0, 2 / 2**zeros), True)
    ranks = doubled_midranks([abs(d) for d in nonzero])
    observed = sum(rank for rank, d in zip(ranks, nonzero, strict=True) if d > 0)
    exact = pairs <= EXACT_MAX_PAIRS
    if exact:
        counts = signed_rank_counts(tuple(sorted(ranks)))
        patterns = sum(counts)
        higher, lower = sum(counts[observed:]) / patterns, sum(counts[: observed + 1]) / patterns
    else:
        mean, deviation = sum(ranks) / 4, math.sqrt(sum(r * r for r in ranks)) / 4  # in ranks, not doubled
        normal = NormalDist(mean, deviation)
        higher, lower = 1 - normal.cdf(observed / 2 - 0.5), normal.cdf(observed / 2 + 0.5)
    return SignedRankTest(pairs, zeros, observed / 2, higher, lower, min(1.0, 2 * min(higher, lower)),
                          min(1.0, 2 / 2**pairs), exact)


def paired_shift(a, b, confidence_pct: float = 95) -> ShiftInterval:
    """The paired Hodges-Lehmann shift, the median of the Walsh averages (d_i + d_j) / 2, i <= j, of the
    differences d = b - a, and the shifts the signed-rank test does not reject at 1 - confidence (inverted, in
    exact arithmetic: the test reads the same between two Walsh averages)."""
    a, b = _check_pairs(a, b)
    differences = [y - x for x, y in zip(a, b, strict=True)]
    walsh = [(differences[i] + differences[j]) / 2 for i in range(len(a)) for j in range(i, len(a))]
    alpha = 1 - confidence_pct / 100
    ints, denominator = _integers(a + b)
    exact = [y - x for x, y in zip(ints[: len(a)], ints[len(a):], strict=True)]
    points = sorted({exact[i] + exact[j] for i in range(len(a)) for j in range(i, len(a))})  # 2 x Walsh averages
    return _inverted_interval(
        median(walsh), points, Fraction(2 * denominator),
        # a probe is four times a shift in the differences' units
        lambda probe: reaches(_signed_rank_test([4 * d - probe for d in exact]).p_two_sided, alpha),
        confidence_pct, min(1.0, 2 / 2 ** len(a)))

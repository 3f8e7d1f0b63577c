"""inferlab.analysis.stats: the exact rank-sum test and the Hodges-Lehmann interval against values worked by hand at n =
3, 5 and 10 a side, and against a brute-force enumeration of every split where ties make hand work long; the signed-rank
test of paired samples and its interval likewise; with ties, intervals that agree with their tests."""

import itertools
import math
import random

import pytest

from inferlab.analysis import stats


def enumerated_p(a, b) -> tuple[float, float]:
    """(P(U >= u), P(U <= u)) by listing every split of the pooled samples: the definition the DP must match."""
    pooled = list(a) + list(b)

    def u_of(b_side, a_side):
        return sum(1.0 if y > x else 0.5 if y == x else 0.0 for x in a_side for y in b_side)

    observed = u_of(b, a)
    splits = [set(chosen) for chosen in itertools.combinations(range(len(pooled)), len(b))]
    values = [u_of([pooled[i] for i in s], [pooled[i] for i in range(len(pooled)) if i not in s]) for s in splits]
    return (sum(v >= observed for v in values) / len(values), sum(v <= observed for v in values) / len(values))


# --- the rank-sum test, by hand -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "splits"),
    [(3, 20), (5, 252), (10, 184_756)],  # C(6, 3), C(10, 5), C(20, 10)
)
def test_complete_separation_is_one_split_in_all(m, splits):
    a, b = list(range(m)), list(range(100, 100 + m))
    test = stats.rank_sum_test(a, b)
    assert test.u == m * m
    assert test.p_b_higher == pytest.approx(1 / splits)
    assert test.p_b_lower == 1.0
    assert test.p_two_sided == pytest.approx(2 / splits)
    assert test.smallest_p == pytest.approx(2 / splits)
    assert test.b_higher and test.exact
    reversed_test = stats.rank_sum_test(b, a)  # pylint: disable=arguments-out-of-order  # swapped on purpose
    assert reversed_test.p_b_lower == pytest.approx(1 / splits) and not reversed_test.b_higher


def test_three_against_three_complete_separation_is_p_0_05_one_sided_0_1_two_sided():
    # the case: every B trial beats every A trial (A 196.6-203.5, B 203.9-209.2)
    test = stats.rank_sum_test([196.6, 200.1, 203.5], [203.9, 206.0, 209.2])
    assert (test.p_b_higher, test.p_two_sided, test.smallest_p) == (0.05, 0.1, 0.1)


def test_three_against_three_one_pair_out_of_order():
    # A 1, 2, 4 and B 3, 5, 6: B beats A in 8 of 9 pairs. U for 3 vs 3 takes 0..9 in 1, 1, 2, 3, 3, 3, 3, 2, 1, 1 of
    # the 20 splits, so P(U >= 8) = 2/20 and the two-sided p is 0.2.
    test = stats.rank_sum_test([1, 2, 4], [3, 5, 6])
    assert test.u == 8
    assert test.p_b_higher == pytest.approx(2 / 20)
    assert test.p_b_lower == pytest.approx(19 / 20)
    assert test.p_two_sided == pytest.approx(0.2)


def test_five_against_five_one_pair_out_of_order():
    # U = 24 of 25: U = 25 and U = 24 are one split each of 252, so P(U >= 24) = 2/252 and two-sided 4/252
    test = stats.rank_sum_test([1, 2, 3, 4, 6], [5, 7, 8, 9, 10])
    assert test.u == 24
    assert test.p_b_higher == pytest.approx(2 / 252)
    assert test.p_two_sided == pytest.approx(4 / 252)


def test_ten_against_ten_two_pairs_out_of_order():
    # U = 98 of 100: U >= 98 in 1 (U = 100) + 1 (99) + 2 (98: one A value up two places, or two up one) splits
    a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12]
    b = [10, 11, 13, 14, 15, 16, 17, 18, 19, 20]
    test = stats.rank_sum_test(a, b)
    assert test.u == 98
    assert test.p_b_higher == pytest.approx(4 / 184_756)


def test_identical_samples_give_p_1():
    test = stats.rank_sum_test([5, 5, 5], [5, 5, 5])
    assert test.u == 4.5
    assert (test.p_b_higher, test.p_b_lower, test.p_two_sided) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1, 1, 2], [1, 2, 2]),
        ([0, 0, 0, 3, 7], [0, 3, 3, 9, 9]),  # counters: many zeros
        ([1.5, 2.5, 2.5, 4.0], [2.5, 4.0, 4.0, 6.0, 7.5, 7.5]),
    ],
)
def test_ties_take_midranks_and_stay_exact(a, b):
    test = stats.rank_sum_test(a, b)
    higher, lower = enumerated_p(a, b)
    assert (test.p_b_higher, test.p_b_lower) == (pytest.approx(higher), pytest.approx(lower))
    assert test.exact


@pytest.mark.parametrize(("m", "n"), [(3, 3), (4, 6), (5, 5), (3, 8)])
def test_the_dynamic_programme_matches_enumeration(m, n):
    rng = random.Random(m * 100 + n)
    a = [round(rng.gauss(0, 1), 3) for _sample in range(m)]
    b = [round(rng.gauss(0.5, 1), 3) for _sample in range(n)]
    test = stats.rank_sum_test(a, b)
    higher, lower = enumerated_p(a, b)
    assert (test.p_b_higher, test.p_b_lower) == (pytest.approx(higher), pytest.approx(lower))


def test_the_order_of_the_samples_does_not_matter():
    a, b = [3.1, 9.4, 2.2, 5.0, 7.7], [8.8, 4.1, 9.9, 6.3, 10.2]
    assert stats.rank_sum_test(a, b) == stats.rank_sum_test(a[::-1], sorted(b))


def test_doubled_midranks():
    assert stats.doubled_midranks([10, 30, 20, 20]) == [2, 8, 5, 5]  # ranks 1, 4, 2.5, 2.5
    assert stats.doubled_midranks([7, 7, 7]) == [4, 4, 4]


def test_beyond_the_exact_limit_the_normal_approximation_is_used_and_close():
    rng = random.Random(5)
    a = [rng.gauss(0, 1) for _sample in range(31)]
    b = [rng.gauss(0.4, 1) for _sample in range(30)]
    approximate = stats.rank_sum_test(a, b)
    assert not approximate.exact
    ranks = stats.doubled_midranks(a + b)
    exact_higher, _lower = stats._tail_probabilities(ranks, 30, sum(ranks[31:]))
    assert approximate.p_b_higher == pytest.approx(exact_higher, abs=0.005)


@pytest.mark.parametrize(
    ("alpha", "needed"),
    [(0.05, 4), (0.05 / 2, 5), (0.05 / 4, 5), (0.05 / 8, 6), (1e-30, None)],
)
def test_samples_needed(alpha, needed):
    # two-sided smallest p: 2/20 at 3, 2/70 at 4, 2/252 at 5, 2/924 at 6 a side
    assert stats.samples_needed(alpha) == needed


# --- the Hodges-Lehmann interval, by hand -------------------------------------------------------------------------


def test_three_against_three_has_no_95_percent_interval_and_says_the_widest_is_90():
    interval = stats.hodges_lehmann([1, 2, 3], [4, 5, 6])
    assert interval.low is None and interval.high is None
    assert interval.confidence_pct == pytest.approx(90)  # 1 - 2/20: min to max of the nine differences
    assert interval.estimate == 3  # differences 1, 2, 2, 3, 3, 3, 4, 4, 5
    at_90 = stats.hodges_lehmann([1, 2, 3], [4, 5, 6], confidence_pct=90)
    assert (at_90.low, at_90.high, at_90.confidence_pct) == (1, 5, pytest.approx(90))


def test_five_against_five_is_the_third_difference_from_each_end():
    # P(U <= 2) = 4/252 and P(U <= 3) = 7/252 for 5 vs 5, so k = 3: [D(3), D(23)] with confidence 1 - 8/252
    a, b = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
    interval = stats.hodges_lehmann(a, b)
    differences = sorted(y - x for x in a for y in b)
    assert (interval.low, interval.high) == (differences[2], differences[22]) == (2, 8)
    assert interval.confidence_pct == pytest.approx(100 * (1 - 8 / 252))
    assert interval.estimate == 5


def test_ten_against_ten_is_the_24th_difference_from_each_end():
    # the two-sided 5 % critical value of U for 10 vs 10 is 23 (reject when U <= 23): k = 24
    a = [float(x) for x in range(10)]
    b = [x + 0.25 for x in a]
    interval = stats.hodges_lehmann(a, b)
    differences = sorted(y - x for x in a for y in b)
    assert (interval.low, interval.high) == (differences[23], differences[76])
    assert interval.confidence_pct == pytest.approx(95.67, abs=0.01)
    assert interval.estimate == 0.25


def test_the_interval_agrees_with_the_test():
    # without ties, the 95 % interval excludes 0 exactly when the two-sided p is at most 0.05
    rng = random.Random(11)
    for _pair in range(200):
        a = [rng.gauss(0, 1) for _sample in range(6)]
        b = [rng.gauss(1.2, 1) for _sample in range(6)]
        interval, test = stats.hodges_lehmann(a, b), stats.rank_sum_test(a, b)
        excludes_zero = interval.low > 0 or interval.high < 0
        assert excludes_zero == (test.p_two_sided <= 0.05)


def test_with_ties_the_interval_is_the_shifts_the_test_does_not_reject():
    # the case the no-ties ranks got wrong: p 0.0476 rejects at 0.05 while [0, 3] held 0; now 0 is an open end
    a, b = [0, 0, 0, 1, 1], [1, 1, 2, 2, 3]
    test, interval = stats.rank_sum_test(a, b), stats.hodges_lehmann(a, b)
    assert test.p_two_sided == pytest.approx(0.047619, abs=1e-6)
    assert (interval.low, interval.low_open, interval.high, interval.high_open) == (0.0, True, 2.0, False)
    assert interval.excludes(0) and not interval.excludes(0.5)
    assert interval.bounds() == "above 0.0 to 2.0"


def test_with_ties_the_interval_and_the_test_never_disagree():
    # tie-heavy counters (retransmissions, errors): 0 outside the 95 % interval exactly when p <= 0.05
    rng = random.Random(5)
    for _pair in range(400):
        a = [rng.choice([0, 0, 1, 1, 2, 3]) for _sample in range(rng.choice([3, 4, 5, 6, 8]))]
        b = [rng.choice([0, 1, 1, 2, 2, 3, 4]) for _sample in range(rng.choice([3, 4, 5, 6, 8]))]
        test, interval = stats.rank_sum_test(a, b), stats.hodges_lehmann(a, b)
        assert interval.excludes(0) == stats.reaches(test.p_two_sided, 0.05), (a, b, test, interval)


# --- the signed-rank test of paired samples -----------------------------------------------------------------------


def enumerated_signed_p(differences) -> tuple[float, float]:
    """(P(T+ >= t), P(T+ <= t)) by listing every sign pattern of the nonzero differences' midranks."""
    nonzero = [d for d in differences if d != 0]
    ranks = [r / 2 for r in stats.doubled_midranks([abs(d) for d in nonzero])]
    observed = sum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    sums = [sum(r for r, sign in zip(ranks, signs, strict=True) if sign)
            for signs in itertools.product((False, True), repeat=len(ranks))]
    return sum(v >= observed for v in sums) / len(sums), sum(v <= observed for v in sums) / len(sums)


def test_every_pair_higher_is_one_sign_pattern_in_all():
    test = stats.signed_rank_test([1, 2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 8])
    assert test.p_b_higher == 1 / 64 and test.p_two_sided == 2 / 64 == test.smallest_p
    assert test.b_higher and test.method == stats.SIGNED_RANK and test.sizes() == "6 pairs"


@pytest.mark.parametrize("pairs", [4, 6, 9])
def test_the_signed_rank_counts_match_enumeration_with_ties_and_zeros(pairs):
    rng = random.Random(pairs)
    for _draw in range(20):
        a = [rng.choice([0, 1, 2]) for _pair in range(pairs)]
        b = [x + rng.choice([-2, -1, 0, 1, 1, 2]) for x in a]
        test = stats.signed_rank_test(a, b)
        higher, lower = enumerated_signed_p([y - x for x, y in zip(a, b, strict=True)])
        assert (test.p_b_higher, test.p_b_lower) == (pytest.approx(higher), pytest.approx(lower))
        assert test.zeros == sum(x == y for x, y in zip(a, b, strict=True))


def test_a_shared_run_level_cancels_in_the_paired_test():
    # each run's level moves both modes: the rank-sum test sees the spread of the levels, the paired one only the
    # differences (+2 in every run but one)
    levels = [100, 140, 90, 160, 120, 80, 150, 110]
    a, b = levels, [x + 2 for x in levels[:-1]] + [levels[-1] + 1]
    assert stats.signed_rank_test(a, b).p_two_sided < 0.01 < stats.rank_sum_test(a, b).p_two_sided
    interval = stats.paired_shift(a, b)
    assert interval.estimate == 2 and interval.excludes(0) and not interval.excludes(1.5)


def test_the_paired_interval_and_test_never_disagree():
    rng = random.Random(7)
    for draw in range(300):
        pairs = rng.choice([3, 5, 6, 7, 8, 10])
        if draw % 2:
            a = [rng.gauss(0, 1) for _pair in range(pairs)]
            b = [x + rng.gauss(0.7, 1) for x in a]
        else:
            a = [rng.choice([0, 1, 1, 2, 3]) for _pair in range(pairs)]
            b = [x + rng.choice([-1, 0, 0, 1, 1, 2]) for x in a]
        test, interval = stats.signed_rank_test(a, b), stats.paired_shift(a, b)
        assert interval.excludes(0) == stats.reaches(test.p_two_sided, 0.05), (a, b, test, interval)


def test_five_pairs_have_no_95_percent_interval_and_need_six():
    interval = stats.paired_shift([1, 2, 3, 4, 5], [2, 3, 4, 5, 7])
    assert interval.low is None and interval.confidence_pct == pytest.approx(93.75)
    assert stats.pairs_needed(0.05) == 6 and stats.pairs_needed(0.025) == 7


def test_unequal_pairs_are_refused_with_the_reason():
    for method in (stats.signed_rank_test, stats.paired_shift):
        with pytest.raises(ValueError, match=r"one B sample for each A sample \(found 3 in A, 2 in B\)"):
            method([1, 2, 3], [1, 2])


# --- malformed input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([], [1, 2, 3], "needs samples on both sides (found 0 in A, 3 in B)"),
        ([1, 2, 3], [], "needs samples on both sides (found 3 in A, 0 in B)"),
        ([1, 2, math.nan], [1, 2, 3], "a sample must be a finite number, found nan"),
        ([1, 2, 3], [1, math.inf, 3], "a sample must be a finite number, found inf"),
        ([1, 2, "3"], [1, 2, 3], "a sample must be a finite number, found '3'"),
        ([1, 2, True], [1, 2, 3], "a sample must be a finite number, found True"),
        ([1, None, 2], [1, 2, 3], "a sample must be a finite number, found None"),
    ],
)
def test_malformed_samples_are_refused_with_the_reason(a, b, message):
    for method in (stats.rank_sum_test, stats.hodges_lehmann, stats.signed_rank_test, stats.paired_shift):
        with pytest.raises(ValueError) as refused:
            method(a, b)
        assert str(refused.value).endswith(message)

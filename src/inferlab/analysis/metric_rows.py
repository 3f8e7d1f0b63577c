"""What a comparison is made of, below both its verdict policy and the comparison itself: a metric's samples on one
side, their spread, and the row that sets A's against B's."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from inferlab.analysis import stats

SPEED, TRANSPORT, INFO = "speed", "transport", "info"  # which verdict a metric counts for (info: none)


@dataclass(frozen=True)
class Metric:
    section: str
    name: str
    better: str | None  # "higher", "lower", or None: shown without a direction
    role: str  # SPEED, TRANSPORT or INFO: which verdict the metric counts for
    samples: tuple[float, ...]


@dataclass(frozen=True)
class Spread:
    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples) -> Spread:
        return cls(statistics.median(samples), min(samples), max(samples), len(samples))


@dataclass(frozen=True)
class Row:
    section: str
    name: str
    better: str | None
    role: str
    a: Spread
    b: Spread
    difference: float  # median of B - median of A
    test: stats.RankSumTest | None  # None: fewer than MIN_SAMPLES on a side
    interval: stats.ShiftInterval | None  # the Hodges-Lehmann shift B - A and its interval; None with the test
    observed: str  # the test read at ALPHA
    # The level the claim's verdict reads this metric at (ALPHA / k for k metrics behind the claim, Bonferroni), and
    # the reading there; None: the metric counts for no claim or has no test.
    family_alpha: float | None = None
    family_observed: str | None = None

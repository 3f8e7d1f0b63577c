"""The concurrency sweep of a record: TP2 across the link against the original replicas behind the router, the same
request mix at each concurrency level, one batch per level and round on each side.

- The sides: `serving.<mode>.sweep` (TP2, swept inside the mode's counter window) and `stages.sweep.replicas` (the
  replicas through the router, swept in the experiment's control stage, or not run with the reason).
- Per level and side (`LevelFigures`): the batch aggregate output tok/s of each round (the samples), the median over
  the rounds of each batch's per-request output tok/s median, of its TTFT and ITL medians and p99s, and the failed
  requests. Batch aggregates and per-request rates are different figures and are kept apart.
- Per level (`LevelReading`): the aggregate tok/s of TP2 against the replicas' by `compare_metric` (verdict_policy:
  exact rank-sum test, Hodges-Lehmann shift TP2 - replicas with its interval), every level's test read at a Bonferroni
  level over the levels compared (`with_family_alpha`): "observed: TP2 higher", "observed: replicas higher", "no clear
  difference" or "no reading". Observed, not a verdict: each topology's rounds ran on one deployment, in one block (the
  replicas in the control stage, TP2 minutes later), so whatever differs between the two blocks (a drift, a warm cache,
  the deployment itself) reaches every level alike, and no test over the rounds, Bonferroni or not, can tell it from the
  topology (simulated in tests/package/test_stats_calibration.py). A verdict needs several runs' sweeps, each run's
  per-level median one sample, as compare does for repeated runs.
- The crossover: where the side with the higher median aggregate changes from one level to the next. Medians
  observed, not a verdict.
- The link under TP2 (`link_by_level`, with the run directory): TP2's sweep runs in its mode's counter window, whose
  sampler series has each ring host's link counters about once a second. For each batch, the bytes the ring hosts
  sent on the link between the last sample at or before its start and the first at or after its end, over the
  batch's output tokens: link bytes per output token, whose median over the rounds, times the level's aggregate
  tok/s, is the link rate the curve implies. The interval encloses the batch (up to a sampler period each side), so
  the bytes include what the link carried just around it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from inferlab.analysis import metric_rows, verdict_policy
from inferlab.record.view import counter_windows, epoch, mode_layers, number, read_samples, sampler_file

TP2, REPLICAS = "tp2", "replicas"
TP2_FASTER, REPLICAS_FASTER, INCONCLUSIVE = "TP2 faster", "replicas faster", "inconclusive"  # across runs only
TP2_HIGHER, REPLICAS_HIGHER = "observed: TP2 higher", "observed: replicas higher"
NO_CLEAR, NO_READING = "no clear difference", "no reading"
# Why a level's reading is not a verdict, said once beside the readings.
ONE_DEPLOYMENT = (
    "observed, not a verdict: each topology's rounds ran on one deployment, one block after the other, so a "
    "difference between the two blocks (a drift, a warm cache, the deployment) moves every level alike, and no test "
    "over the rounds can tell it from the topology; a verdict needs several runs' sweeps, each run's per-level "
    "median one sample"
)
# The replicas' route in the report's words (roles/experiment: the router, else the public route's gateway)
ROUTES = {"router": "the router", "public": "the public route's gateway"}


@dataclass(frozen=True)
class Side:
    topology: str  # TP2 or REPLICAS
    label: str  # what the report calls it: "TP2 (baseline: runtime=sglang_tp2, ...)", "replicas (router)"
    sweep: dict  # the record's sweep object
    window: str | None = None  # TP2's: the counter window its mode's sweep ran in


@dataclass(frozen=True)
class LevelFigures:
    level: int
    rounds: int  # batches sent at this level
    aggregate_tok_s: tuple[float, ...]  # one per round with a figure
    per_request_tok_s: float | None  # medians over the rounds of each batch's statistic
    ttft_ms_rounds: tuple[float, ...]  # each round's batch TTFT median, in ms (the plot's spread)
    ttft_p99_ms: float | None
    itl_ms: float | None
    itl_p99_ms: float | None
    failed: int  # failed requests, plus the requests of batches never sent
    requests: int

    @property
    def ttft_ms(self) -> float | None:
        return statistics.median(self.ttft_ms_rounds) if self.ttft_ms_rounds else None


@dataclass(frozen=True)
class LevelReading:
    """What one level's rounds show (observed, not a verdict: ONE_DEPLOYMENT)."""

    level: int
    row: metric_rows.Row | None  # None: a side has no figure at this level
    reading: str
    reason: str


@dataclass(frozen=True)
class Sweep:
    tp2: Side | None
    replicas: Side | None
    levels: tuple[int, ...]
    figures: dict[tuple[str, int], LevelFigures]  # (topology, level)
    readings: tuple[LevelReading, ...]
    crossover: str
    not_run: tuple[str, ...]


def sides(record: dict) -> tuple[Side | None, Side | None]:
    """The TP2 side (the first served mode with a sweep) and the replicas' side of the record, each or both None."""
    tp2 = next(
        (Side(TP2, f"TP2 ({mode}: {mode_layers(result)})", result["sweep"], result.get("window"))
         for mode, result in (record.get("serving") or {}).items()
         if isinstance(result, dict) and isinstance(result.get("sweep"), dict)),
        None,
    )
    found = ((record.get("stages") or {}).get("sweep") or {}).get(REPLICAS)
    route = found.get("route") if isinstance(found, dict) else None
    replicas = (Side(REPLICAS, f"replicas (through {ROUTES.get(route, route)})" if route else "replicas", found)
                if isinstance(found, dict) else None)
    return tp2, replicas


def _median(values: list[float | None], scale: float = 1.0) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) * scale if present else None


def _statistic(batch: dict, figure: str, key: str) -> float | None:
    value = batch.get(figure)
    return number(value.get(key)) if isinstance(value, dict) else None


def level_figures(sweep: dict, level: int) -> LevelFigures:
    points = [p for p in sweep.get("points") or [] if isinstance(p, dict) and p.get("level") == level]
    batches = [p["batch"] for p in points if isinstance(p.get("batch"), dict)]
    # a batch never sent counts every request it held as failed
    unsent = int(level) * int(sweep.get("requests_per_slot") or 1) * (len(points) - len(batches))
    failed = sum(int(b.get("failed") or 0) for b in batches) + unsent
    requests = sum(int(b.get("ok") or 0) + int(b.get("failed") or 0) for b in batches) + unsent
    ttft_ms = [_statistic(b, "ttft_s", "median") for b in batches]
    return LevelFigures(
        level=level,
        rounds=len(points),
        aggregate_tok_s=tuple(v for v in (number(b.get("aggregate_output_tok_s")) for b in batches) if v is not None),
        per_request_tok_s=_median([_statistic(b, "output_tok_s", "median") for b in batches]),
        ttft_ms_rounds=tuple(v * 1000 for v in ttft_ms if v is not None),
        ttft_p99_ms=_median([_statistic(b, "ttft_s", "p99") for b in batches], 1000),
        itl_ms=_median([_statistic(b, "itl_s", "median") for b in batches], 1000),
        itl_p99_ms=_median([_statistic(b, "itl_s", "p99") for b in batches], 1000),
        failed=failed,
        requests=requests,
    )


def _reading(level: int, row: metric_rows.Row) -> LevelReading:
    seen = row.family_observed or row.observed
    if seen == verdict_policy.B_BETTER:
        return LevelReading(level, row, TP2_HIGHER, f"TP2 higher, p within {row.family_alpha:.3g}")
    if seen == verdict_policy.B_WORSE:
        return LevelReading(level, row, REPLICAS_HIGHER, f"TP2 lower, p within {row.family_alpha:.3g}")
    if row.test is not None and seen == verdict_policy.UNATTAINABLE:
        return LevelReading(level, row, NO_READING, verdict_policy.no_verdict_possible(row.test)
                            + f" (read at {row.family_alpha:.3g})")
    if seen == verdict_policy.NO_CLEAR:
        return LevelReading(level, row, NO_CLEAR, f"p above {row.family_alpha:.3g}")
    return LevelReading(level, row, NO_READING,
                        f"fewer than {verdict_policy.MIN_SAMPLES} rounds with a figure on a side")


def _compared(levels: list[int], figures: dict[tuple[str, int], LevelFigures]):
    """(level, replicas' aggregate tok/s, TP2's) for each level with figures on both topologies."""
    for level in levels:
        a, b = figures.get((REPLICAS, level)), figures.get((TP2, level))
        if a and b and a.aggregate_tok_s and b.aggregate_tok_s:
            yield level, a.aggregate_tok_s, b.aggregate_tok_s


def _read_by_level(samples: dict[int, tuple[tuple, tuple]], what: str = "",
                   paired_from: int | None = None) -> dict[int, metric_rows.Row]:
    """Each level's row, TP2's aggregate tok/s (B) against the replicas' (A), from `samples` {level: (replicas,
    tp2)}, read at a Bonferroni level over the levels; paired (by run) where a level has `paired_from` or more."""
    rows = {}
    for level, (replicas, tp2) in samples.items():
        metric = f"aggregate output tok/s at concurrency {level}{what}"
        rows[level] = verdict_policy.compare_metric(
            metric_rows.Metric("sweep", metric, "higher", metric_rows.SPEED, replicas),
            metric_rows.Metric("sweep", metric, "higher", metric_rows.SPEED, tp2),
            paired=paired_from is not None and len(replicas) >= paired_from)
    return dict(zip(rows, verdict_policy.with_family_alpha(list(rows.values()), metric_rows.SPEED), strict=True))


def readings(levels: list[int], figures: dict[tuple[str, int], LevelFigures]) -> tuple[LevelReading, ...]:
    """Each level's reading of the aggregate tok/s of TP2 (B) against the replicas (A): observed, not a verdict."""
    read = _read_by_level({level: (replicas, tp2) for level, replicas, tp2 in _compared(levels, figures)})
    return tuple(
        _reading(level, read[level]) if level in read
        else LevelReading(level, None, NO_READING, "a topology has no aggregate figure at this level")
        for level in levels
    )


def crossover(levels: list[int], figures: dict[tuple[str, int], LevelFigures]) -> str:
    """Where the topology with the higher median aggregate tok/s changes, in words (observed medians)."""
    ahead = []
    for level, replicas_tok_s, tp2_tok_s in _compared(levels, figures):
        tp2, replicas = statistics.median(tp2_tok_s), statistics.median(replicas_tok_s)
        ahead.append((level, TP2 if tp2 > replicas else REPLICAS if replicas > tp2 else None))
    if not ahead:
        return "no level has figures on both topologies"
    changes = [(prev, cur) for prev, cur in zip(ahead, ahead[1:], strict=False) if prev[1] != cur[1]]
    if not changes:
        leader = ahead[0][1]
        return (f"no crossover observed: {'TP2' if leader == TP2 else 'the replicas'} had the higher median at every "
                f"level compared" if leader else "no crossover observed: the medians were equal at every level")
    words = [f"from concurrency {prev[0]} to {cur[0]} the higher median goes from "
             f"{_name(prev[1])} to {_name(cur[1])}" for prev, cur in changes]
    return "observed crossover: " + "; ".join(words) + " (medians; each level's reading says what the rounds show)"


def _name(topology: str | None) -> str:
    return {TP2: "TP2", REPLICAS: "the replicas"}.get(topology, "neither (equal)")


@dataclass(frozen=True)
class LinkAtLevel:
    level: int
    bytes_per_token: tuple[float, ...]  # one per batch whose interval the samples enclose
    implied_gbps: float | None  # median bytes per token x median aggregate tok/s x 8 / 1e9


def _enclosed_bytes(samples: list[dict], interface: str, start: float, end: float) -> float | None:
    """tx bytes on `interface` from the last sample at or before `start` to the first at or after `end`."""
    before = [s for s in samples if s["t_wall"] <= start]
    after = [s for s in samples if s["t_wall"] >= end]
    if not before or not after:
        return None
    first = number(((before[-1].get("interfaces") or {}).get(interface) or {}).get("tx_bytes"))
    last = number(((after[0].get("interfaces") or {}).get(interface) or {}).get("tx_bytes"))
    return None if first is None or last is None or last < first else last - first


def link_by_level(record: dict, found: Sweep, run_dir: Path) -> tuple[tuple[LinkAtLevel, ...], str | None]:
    """Per level, the link bytes the ring hosts sent per output token of TP2's batches, from the sampler series of
    the counter window that holds TP2's sweep; () and the reason when that cannot be read."""
    if found.tp2 is None:
        return (), None
    window_name = found.tp2.window
    windows = [w for w in counter_windows(record) if w.name == window_name]
    series = [(w, sampler_file(run_dir, w)) for w in windows]
    series = [(w, path) for w, path in series if path is not None and path.is_file() and w.interface]
    if not windows or len(series) != len(windows):
        return (), f"the sampler series of TP2's window {window_name or '(none)'} are not all in the run directory"
    hosts = [(w.interface, read_samples(path)) for w, path in series]
    per_level = {level: [] for level in found.levels}
    for point in found.tp2.sweep.get("points") or []:
        batch, start = point.get("batch") or {}, epoch(point.get("started"))
        wall, rate = number(batch.get("wall_s")), number(batch.get("aggregate_output_tok_s"))
        if start is None or not wall or not rate or point.get("level") not in per_level:
            continue
        sent = [_enclosed_bytes(samples, interface, start, start + wall) for interface, samples in hosts]
        if None not in sent:
            per_level[point["level"]].append(sum(sent) / (rate * wall))
    found_levels = []
    for level, values in per_level.items():
        rates = found.figures[(TP2, level)].aggregate_tok_s if (TP2, level) in found.figures else ()
        implied = (statistics.median(values) * statistics.median(rates) * 8 / 1e9) if values and rates else None
        found_levels.append(LinkAtLevel(level, tuple(values), implied))
    return tuple(found_levels), None


def build(record: dict) -> Sweep | None:
    """The record's sweep, or None when neither topology was swept."""
    tp2, replicas = sides(record)
    if tp2 is None and replicas is None:
        return None
    present = [s for s in (tp2, replicas) if s is not None]
    levels = sorted({int(level) for s in present for level in s.sweep.get("levels") or []})
    figures = {(s.topology, level): level_figures(s.sweep, level) for s in present for level in levels
               if not s.sweep.get("not_run")}
    not_run = [f"{s.label}: not run, {s.sweep['not_run']}" for s in present if s.sweep.get("not_run")]
    not_run += [f"{name}: not swept in this run" for name, s in (("TP2", tp2), ("the replicas", replicas))
                if s is None]
    return Sweep(tp2, replicas, tuple(levels), figures, readings(levels, figures), crossover(levels, figures),
                 tuple(not_run))


@dataclass(frozen=True)
class LevelVerdict:
    """One level's verdict over several runs' sweeps: each run's median aggregate tok/s a side is one sample, so the
    test covers the spread between deployments that a single run's rounds cannot."""

    level: int
    row: metric_rows.Row | None  # None: fewer than verdict_policy.MIN_SAMPLES runs with both sides at this level
    verdict: str  # TP2_FASTER, REPLICAS_FASTER or INCONCLUSIVE
    reason: str


def across_runs(records: list[dict]) -> tuple[list[int], tuple[LevelVerdict, ...]]:
    """The levels and each level's verdict, TP2 (B) against the replicas (A), over the sweeps of `records` (one
    experiment each): per run and level, each side's median aggregate tok/s over its rounds. Both sides ran in every
    run, so the samples pair by run (the signed-rank test from verdict_policy.PAIRED_MIN_RUNS runs, the rank-sum
    test below that), each level read at 0.05 over the levels compared (Bonferroni)."""
    built = [found for found in (build(data) for data in records) if found is not None]
    levels = sorted({level for found in built for level in found.levels})
    pairs: dict[int, list[tuple[float, float]]] = {}
    for found in built:
        for level, replicas, tp2 in _compared(found.levels, found.figures):
            pairs.setdefault(level, []).append((statistics.median(replicas), statistics.median(tp2)))
    read = _read_by_level({level: (tuple(a for a, _b in found), tuple(b for _a, b in found))
                           for level, found in pairs.items() if len(found) >= verdict_policy.MIN_SAMPLES},
                          " (run medians)", verdict_policy.PAIRED_MIN_RUNS)
    verdicts = []
    for level in levels:
        row = read.get(level)
        seen = row and (row.family_observed or row.observed)
        if row is None:
            verdicts.append(LevelVerdict(level, None, INCONCLUSIVE, f"fewer than {verdict_policy.MIN_SAMPLES} runs "
                                         "swept both topologies at this level"))
        elif seen in (verdict_policy.B_BETTER, verdict_policy.B_WORSE):
            faster = TP2_FASTER if seen == verdict_policy.B_BETTER else REPLICAS_FASTER
            verdicts.append(LevelVerdict(level, row, faster, f"{row.test.method} test over {row.test.sizes()}, p "
                                         f"within {row.family_alpha:.3g}"))
        elif seen == verdict_policy.UNATTAINABLE:
            verdicts.append(LevelVerdict(level, row, INCONCLUSIVE, verdict_policy.no_verdict_possible(row.test)
                                         + f" (read at {row.family_alpha:.3g})"))
        else:
            verdicts.append(LevelVerdict(level, row, INCONCLUSIVE, f"no clear difference at {row.family_alpha:.3g}"))
    return levels, tuple(verdicts)

"""`inferlab compare RUN_A RUN_B`: two runs' records side by side, one declared layer apart.

What it does, in order:
- Declared layers: each host's seams (`hosts.*.layers`, `verification.*.layers`, the link tests' `driver_layer`),
  the served modes' `layers` (runtime, speculation), and any `inferlab_layer_<name>` extra var of the run (for a
  change the record does not otherwise carry, e.g. `-e inferlab_layer_link_profile=lossy`). More than one layer
  that both records declare and that differs: refused (`LayersDiffer`), naming the layers.
- Metrics, matched by section and name: the served modes' measured trials (one value per trial: single-stream
  tok/s, aggregate tok/s, TTFT), per-request rates and TTFT of every ladder step (by kind and cache label, never
  mixed), the link tests' per-second throughput, the link A/B repetitions, and counter-window deltas. Where a mode
  ran trials, its speed claim rests on them and the ladder's per-request rates are info only.
- Per metric: median, min and max per side; B - A as the difference of medians. With at least MIN_SAMPLES samples a
  side (stats.py): the exact two-sided Wilcoxon-Mann-Whitney rank-sum test (its p-value counts the equally likely
  splits of the pooled samples; ties take midranks) and the Hodges-Lehmann shift with its exact distribution-free
  CONFIDENCE_PCT% interval, or none where no such interval exists at that n (3 vs 3). A metric whose sizes cannot
  reach the level it is read at says so (`no verdict possible at n=3 vs 3: the smallest exact p is 0.1`).
- Verdicts for "B is faster" (speed metrics) and "B has fewer transport errors" (receiver errors on real hosts; TCP
  retransmissions where the driver layer is emulated, labelled `emulated`): `supported` when at least one metric's
  test puts B on its better side and none on A's, `not supported` when the reverse, `inconclusive` otherwise. A
  claim resting on k metrics reads each at ALPHA / k (Bonferroni, `family_alpha`), so that the claim as a whole
  keeps a 5% error rate. Withheld: one run a side gives `inconclusive` ("one run a side", with what would give a
  verdict), since its samples share one deployment and the test cannot cover the spread between whole runs; runs
  that declare no differing layer are an A/A pair and get `no verdict`: their differences measure the noise floor.
  docs/STATISTICS.md: the methods, their assumptions and their calibration.
- Repeated whole runs: each side may be several runs of one configuration (`compare([a1, a2, a3], [b1, b2, b3])`,
  `inferlab compare a1,a2,a3 b1,b2,b3`). The runs of a side must declare the same layers and serve the same modes.
  Each run then gives one sample per metric, its median, so the test covers the spread between whole runs (a fresh
  deployment, driver load or service restart each), which trials inside one run cannot. Several runs on one side
  and one on the other is refused: a run's medians and one run's own samples are different quantities.
- One served mode of a run (`RUN:MODE`, `mode_view`): the mode's serving result and its own counter windows as a
  record of its own, so that two modes of one run (e.g. nextn and nextn_candidate, the driver layer apart) compare
  like two runs.
- `require_fresh`: a supported verdict counts as re-verified only when B's record says it started from a fresh start,
  a new lab or a verified restore (the driver and the services restarted, the hosts verified, their ledgers clean):
  `stages.fresh_start.<host>` = `{"from": "lab_up" | "restore", "verified": true, "time": ...}` for every host
  listed. The staged experiment writes it at its verify stage (roles/experiment, fresh_start.yml). A first run on
  a host inferlab never changed (`"from": "untouched"`) does not count: nothing was restarted for it, so it
  re-verifies nothing (a fix is not a fix until it re-verifies cold). Nor does a B that is
  not later than A: every run of B must have started after every run of A ended (`run.started`, `run.finished`), so
  that its fresh start came after the original; two modes of one run never re-verify each other.

Pure functions over parsed records; the statistics use the standard library only.

The parts, each its own module: record_input (reading records, `RUN:MODE`), run_layers (declared layers, fresh
starts), record_metrics (the metrics of a record), metric_rows (Metric, Spread, Row), verdict_policy (ALPHA, reading a
test, the family rule, a claim's verdict); this module puts them together. report/compare_output.py prints the result.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from inferlab.analysis import fingerprint
from inferlab.analysis.metric_rows import SPEED, TRANSPORT, Metric, Row
from inferlab.analysis.record_input import CompareError, RecordInputError, check_record, split_mode
from inferlab.analysis.record_metrics import extract_metrics
from inferlab.analysis.run_layers import (
    LAYER_EXTRAVAR_PREFIX,
    LayersDiffer,
    declared_layers,
    fresh_start,
    pair_modes,
    transport_label,
)
from inferlab.analysis.verdict_policy import (
    INCONCLUSIVE,
    MIN_SAMPLES,
    NO_VERDICT,
    PAIRED_MIN_RUNS,
    SUPPORTED,
    TOO_FEW,
    Verdict,
    aa_pair,
    claim_verdict,
    compare_metric,
    one_run_a_side,
    with_family_alpha,
)

# Where a side's samples come from (`design`).
ONE_RUN = "one run a side"
WHOLE_RUNS = "repeated whole runs"
PAIRED_RUNS = "repeated whole runs, paired"  # two modes of the same runs: each run measured both sides


@dataclass
class Comparison:
    run_a: dict
    run_b: dict
    layers: dict[str, tuple[str | None, str | None]]
    changed_layer: str | None
    transport_label: str
    rows: list[Row]
    verdicts: list[Verdict]
    notes: list[str] = field(default_factory=list)
    require_fresh: bool = False
    fresh_b: tuple[bool, str] | None = None
    design: str = ONE_RUN  # ONE_RUN or WHOLE_RUNS
    # What the records say ran (fingerprint.py): every component that differs between A and B, with the declared
    # layer that explains it (None: none does); and how many components A's fingerprint has.
    fingerprint: list[fingerprint.Difference] = field(default_factory=list)
    fingerprint_components: int = 0


def _group(records, which: str) -> list[dict]:
    """One side of the comparison: a record or a non-empty list of records of one configuration."""
    group = records if isinstance(records, list) else [records]
    if not group:
        raise CompareError(f"RUN_{which}: no run given")
    if len(group) == 1:
        return [check_record(group[0], f"RUN_{which}")]
    return [check_record(data, f"RUN_{which}[{i}]") for i, data in enumerate(group)]


def _ids(group: list[dict]) -> list[str]:
    return [data["run"]["id"] for data in group]


def _same_configuration(group: list[dict], which: str, modes: list[str]) -> dict[str, str]:
    """The layers the runs of one side declare; refused when they serve other modes or declare other layers."""
    first = group[0]
    for data in group[1:]:
        if list(data.get("serving") or {}) != list(first.get("serving") or {}):
            raise CompareError(
                f"the runs of {which} must repeat one configuration, but {data['run']['id']} served "
                f"{', '.join(data.get('serving') or {}) or 'no mode'} and {first['run']['id']} "
                f"{', '.join(first.get('serving') or {}) or 'no mode'}"
            )
    layers = [_reading(f"RUN_{which}", data, declared_layers, modes) for data in group]
    for data, theirs in zip(group[1:], layers[1:], strict=True):
        for name in sorted(set(layers[0]) | set(theirs)):
            if layers[0].get(name) != theirs.get(name):
                raise CompareError(
                    f"the runs of {which} must repeat one configuration, but they differ in layer {name} "
                    f"({first['run']['id']}: {layers[0].get(name)}, {data['run']['id']}: {theirs.get(name)})"
                )
    return layers[0]


def _paired_by_run(group_a: list[dict], group_b: list[dict]) -> tuple[list[dict], bool]:
    """B's runs in A's order, and True when the sides are two modes of the same runs (RUN:MODE, each run once a
    side) and at least PAIRED_MIN_RUNS of them, so that each run's samples pair; else B unchanged and False."""
    runs_a = [split_mode(i)[0] for i in _ids(group_a)]
    by_run_b = {split_mode(i)[0]: data for i, data in zip(_ids(group_b), group_b, strict=True)}
    modes = [split_mode(i)[1] for i in _ids(group_a) + _ids(group_b)]
    if all(modes) and len(set(runs_a)) == len(runs_a) == len(group_b) and set(runs_a) == set(by_run_b):
        return [by_run_b[run] for run in runs_a], len(runs_a) >= PAIRED_MIN_RUNS
    return group_b, False


def _per_run_medians(per_run: list[dict[tuple[str, str], Metric]]) -> dict[tuple[str, str], Metric]:
    """Several runs' metrics -> one Metric per key that every run has, with one sample per run: its median."""
    if len(per_run) == 1:
        return per_run[0]
    keys = [key for key in per_run[0] if all(key in metrics for metrics in per_run[1:])]
    return {
        key: replace(per_run[0][key], samples=tuple(statistics.median(m[key].samples) for m in per_run))
        for key in keys
    }


def compare(
    record_a: dict | list[dict],
    record_b: dict | list[dict],
    require_fresh: bool = False,
    later_than: list[dict] | None = None,
) -> Comparison:
    """Compare B against A, each one record or several records of repeated whole runs (`later_than`: the runs that
    B must have started after, with require_fresh; default A's). Raises RecordInputError for a malformed record,
    LayersDiffer when more than one declared layer differs, CompareError when a run is on both sides, the runs of a
    side are not one configuration, or one side has several runs and the other one."""
    group_a, group_b = _group(record_a, "A"), _group(record_b, "B")
    repeated = len(group_a) > 1 or len(group_b) > 1
    if repeated and min(len(group_a), len(group_b)) == 1:
        raise CompareError(
            f"give several runs on both sides or one on each (found {len(group_a)} for A and {len(group_b)} for "
            "B): several runs give one sample per run, their median, and one run its own samples, which are "
            "different quantities"
        )
    ids_a, ids_b = _ids(group_a), _ids(group_b)
    both = sorted(set(ids_a) & set(ids_b)) or sorted({i for i in ids_a + ids_b if (ids_a + ids_b).count(i) > 1})
    if both:
        raise CompareError(
            f"RUN_A and RUN_B are the same run ({', '.join(both)}): compare two runs"
            if not repeated
            else f"a run is given twice ({', '.join(both)}): each run counts once, on one side"
        )
    record_a, record_b = group_a[0], group_b[0]
    notes = []
    if not repeated and ids_a[0].rpartition(":")[0] and ids_a[0].rpartition(":")[0] == ids_b[0].rpartition(":")[0]:
        notes.append(
            "A and B are two served modes of one run (RUN:MODE): they ran one after the other on the same "
            "deployment, so whatever drifted in between is in the difference too; the run's link tests and other "
            "counter windows are left out"
        )
    for which, group in (("A", group_a), ("B", group_b)):
        for data in group:
            if data["run"].get("exit_code") != 0:
                run = data["run"]["id"] if len(group) > 1 else which
                notes.append(
                    f"{run}'s run did not succeed (exit {data['run'].get('exit_code')}): its figures may be partial"
                )
    pairs = pair_modes(record_a, record_b)
    paired_a, paired_b = {a for a, _b in pairs}, {b for _a, b in pairs}
    for which, data, paired in (("A", record_a, paired_a), ("B", record_b, paired_b)):
        unpaired = [mode for mode in (data.get("serving") or {}) if mode not in paired]
        if unpaired:
            notes.append(f"served mode(s) {', '.join(unpaired)} only in {which}: not compared")

    layers_a = _same_configuration(group_a, "A", [a for a, _b in pairs])
    layers_b = _same_configuration(group_b, "B", [b for _a, b in pairs])
    layers = {name: (layers_a.get(name), layers_b.get(name)) for name in sorted(set(layers_a) | set(layers_b))}
    differing = {name: (a, b) for name, (a, b) in layers.items() if a is not None and b is not None and a != b}
    one_sided = [name for name, (a, b) in layers.items() if (a is None) != (b is None)]
    if len(differing) > 1:
        raise LayersDiffer(differing)
    if one_sided:
        notes.append(f"layer(s) recorded in one run only, so not checked: {', '.join(one_sided)}")
    changed = next(iter(differing), None)
    if changed is None:
        notes.append(
            "A/A pair: no declared layer differs, so these runs repeat one configuration and their differences "
            "measure the noise floor (per metric: B - A, and with repeated runs the spread of the run medians); "
            "no verdict is given. If they differ in something the records do not declare, declare it with "
            f"-e {LAYER_EXTRAVAR_PREFIX}NAME=VALUE"
        )

    group_b, paired = _paired_by_run(group_a, group_b) if repeated else (group_b, False)
    transport = transport_label(group_a + group_b)
    labels = {a: a if a == b else f"{a} -> {b}" for a, b in pairs}
    metrics_a = _per_run_medians([_reading("RUN_A", data, extract_metrics, labels, transport) for data in group_a])
    labels_b = {b: labels[a] for a, b in pairs}
    metrics_b = _per_run_medians([_reading("RUN_B", data, extract_metrics, labels_b, transport) for data in group_b])
    rows = [compare_metric(metrics_a[key], metrics_b[key], paired) for key in metrics_a if key in metrics_b]
    only = {
        which: [key for key in mine if key not in theirs]
        for which, mine, theirs in (("A", metrics_a, metrics_b), ("B", metrics_b, metrics_a))
    }
    for which, keys in only.items():
        if keys:
            notes.append(f"{len(keys)} metric(s) only in {which}, not compared (first: {keys[0][0]}: {keys[0][1]})")
    if any(r.observed == TOO_FEW for r in rows):
        notes.append(
            f"a metric with fewer than {MIN_SAMPLES} samples on either side gets no test and counts for no "
            f"verdict: run more {'whole runs' if repeated else 'trials'}"
        )
    if paired:
        notes.append(
            f"each sample is one whole run's median, and each of the {len(group_a)} runs measured both sides (two "
            "modes of one run): the samples are paired by run, and the signed-rank test of the differences B - A "
            "(the paired shift: the median of their Walsh averages) takes out each run's own level; a metric that "
            "not every run of a side has is left out"
        )
    elif repeated:
        notes.append(
            f"each sample is one whole run's median ({len(group_a)} runs in A, {len(group_b)} in B): the test covers "
            "the spread between whole runs; a metric that not every run of a side has is left out"
        )
    else:
        notes.append(
            "samples come from within each run (measured trials, requests, 1 s intervals, repetitions, trial "
            "windows): the test covers their spread, not the spread between whole runs, so a speed or transport "
            "verdict needs repeated whole runs (RUN_A and RUN_B as comma-separated lists): one run a side is "
            "inconclusive, with the differences still shown"
        )

    transport_claim = "B has fewer transport errors"
    if transport == "emulated":
        transport_claim += " (emulated: TCP retransmissions caused by the lab's tc link profiles)"
        notes.append(
            "transport errors are emulated in this lab: the tc link profiles cause qdisc drops and TCP "
            "retransmissions, and a veth never counts receiver CRC or overrun errors; qdisc drops are not in "
            "the record, so the transport verdict rests on TCP retransmissions"
        )
    elif transport == "kernel":
        transport_claim += " (receiver errors: crc, over, missed, length)"
    else:
        transport_claim += f" (driver layer {transport}: TCP retransmissions and receiver errors both count)"
    for role in (SPEED, TRANSPORT):
        rows = with_family_alpha(rows, role)
    claims = (("B is faster", SPEED), (transport_claim, TRANSPORT))
    verdicts = [claim_verdict(claim, rows, role) for claim, role in claims]
    if changed is None:
        verdicts = [aa_pair(verdict) for verdict in verdicts]
    elif not repeated:
        ids = (ids_a[0], ids_b[0])
        verdicts = [one_run_a_side(v, rows, role, ids) for v, (_claim, role) in zip(verdicts, claims, strict=True)]

    prints_a = [fingerprint.fingerprint(data, {a: labels[a] for a, _b in pairs}) for data in group_a]
    prints_b = [fingerprint.fingerprint(data, {b: labels_b[b] for _a, b in pairs}) for data in group_b]
    apart, withheld = _fingerprint_apart(prints_a, prints_b, group_a, group_b, differing, notes)
    if withheld:
        verdicts = [Verdict(v.claim, INCONCLUSIVE if changed else NO_VERDICT, withheld) for v in verdicts]

    fresh_b = None
    if require_fresh:
        fresh_b = _group_fresh(group_b, group_a if later_than is None else later_than)
        verdicts = [Verdict(v.claim, v.verdict, v.reason, v.verdict == SUPPORTED and fresh_b[0]) for v in verdicts]
    if changed is not None:
        notes.append(
            f"a supported verdict is what these {'runs' if repeated else 'two runs'} show; why B differs stays a "
            "theory until the effect reproduces in a separate run that started from a fresh lab or restore "
            "(--require-fresh)"
        )
    return Comparison(
        run_a=_run_summary(group_a),
        run_b=_run_summary(group_b),
        layers=layers,
        changed_layer=changed,
        transport_label=transport,
        rows=rows,
        verdicts=verdicts,
        notes=notes,
        require_fresh=require_fresh,
        fresh_b=fresh_b,
        design=PAIRED_RUNS if paired else WHOLE_RUNS if repeated else ONE_RUN,
        fingerprint=apart,
        fingerprint_components=len(prints_a[0]),
    )


def _fingerprint_apart(prints_a: list[dict], prints_b: list[dict], group_a: list[dict], group_b: list[dict],
                       differing: dict, notes: list[str]) -> tuple[list[fingerprint.Difference], str | None]:
    """The fingerprint differences between A and B (first runs), and why the verdicts are withheld (None: they are
    not): a difference no declared layer explains, or runs of one side that differ among themselves. A component
    only one record has (an older record) is listed and noted, never a reason to withhold."""
    apart = fingerprint.differences(prints_a[0], prints_b[0], differing)
    one_sided = [d for d in apart if d.one_sided]
    if one_sided:
        notes.append(f"{len(one_sided)} fingerprint component(s) recorded in one run only, so not checked (first: "
                     f"{one_sided[0].component})")
    reasons = []
    unexplained = [d for d in apart if not d.one_sided and d.explained_by is None]
    if unexplained:
        declared = f"the declared layer {next(iter(differing))}" if differing else "no declared layer"
        reasons.append(f"A and B differ in more than {declared}: {fingerprint.describe(unexplained)}")
    for which, prints, group in (("A", prints_a, group_a), ("B", prints_b, group_b)):
        for data, theirs in zip(group[1:], prints[1:], strict=True):
            inside = [d for d in fingerprint.differences(prints[0], theirs, {}) if not d.one_sided]
            if inside:
                reasons.append(f"the runs of {which} are not one configuration: {group[0]['run']['id']} and "
                               f"{data['run']['id']} differ in {fingerprint.describe(inside, 3)}")
    if not reasons:
        return apart, None
    notes.append("no verdict across more than one layer: " + "; ".join(reasons) + ". Change one layer at a time "
                 "(or declare a deliberate change with -e " + LAYER_EXTRAVAR_PREFIX + "NAME=VALUE)")
    return apart, "; ".join(reasons) + ": no verdict across more than one layer"


def _reading(which: str, data: dict, read, *args):
    """read(data, *args), naming the run in a RecordInputError."""
    try:
        return read(data, *args)
    except RecordInputError as exc:
        raise RecordInputError(f"{which} {data['run']['id']}: {exc}") from None


def _group_fresh(group: list[dict], originals: list[dict]) -> tuple[bool, str]:
    """fresh_start of every run of side B, each started after every run of side A (the originals) ended: fresh when
    every one is."""
    early = _not_later(group, originals)
    if early:
        return False, early
    if len(group) == 1:
        return fresh_start(group[0])
    stale = [(data["run"]["id"], why) for data in group for fresh, why in [fresh_start(data)] if not fresh]
    if stale:
        return False, "; ".join(f"{run} {why}" for run, why in stale)
    return True, f"every one of its {len(group)} runs started from a verified fresh lab or restore"


def _not_later(group: list[dict], originals: list[dict]) -> str:
    """Why side B is not later than side A (a run of B started before a run of A ended, or a time is missing), or
    '' when every B run started after every A run ended."""
    ends = [(_utc(data["run"].get("finished")), data["run"]["id"]) for data in originals]
    if any(end is None for end, _run in ends):
        missing = ", ".join(run for end, run in ends if end is None)
        return f"A's end is not recorded ({missing}), so B cannot be shown to be later"
    last_end, last_run = max(ends)
    early = []
    for data in group:
        started = _utc(data["run"].get("started"))
        if started is None or started < last_end:
            early.append(f"{data['run']['id']} started {data['run'].get('started') or 'at an unrecorded time'}")
    if early:
        return (f"is not a later run: {', '.join(early)}, before {last_run} ended ({last_end:%Y-%m-%dT%H:%M:%SZ}); "
                "a re-verification is a separate run after the original")
    return ""


def _utc(value) -> datetime | None:
    """An ISO 8601 time as an aware UTC datetime (the record's times are UTC), or None."""
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _run_summary(group: list[dict]) -> dict:
    """A side's runs: one run's id, playbook, start, status and exit code; for several, their ids joined, the
    first start, every status and playbook that occurs, and the first non-zero exit code (else 0)."""
    runs = [data["run"] for data in group]
    if len(runs) == 1:
        return {key: runs[0].get(key) for key in ("id", "playbook", "started", "status", "exit_code")}
    return {
        "id": ", ".join(run["id"] for run in runs),
        "runs": [run["id"] for run in runs],
        "playbook": ", ".join(dict.fromkeys(str(run.get("playbook")) for run in runs)),
        "started": min(str(run.get("started")) for run in runs),
        "status": ", ".join(dict.fromkeys(str(run.get("status")) for run in runs)),
        "exit_code": next((run.get("exit_code") for run in runs if run.get("exit_code") != 0), 0),
    }

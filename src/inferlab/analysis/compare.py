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
  re-verifies nothing (the field reports' rule: a fix is not a fix until it re-verifies cold). Nor does a B that is
  not later than A: every run of B must have started after every run of A ended (`run.started`, `run.finished`), so
  that its fresh start came after the original; two modes of one run never re-verify each other.

Pure functions over parsed records; the statistics use the standard library only.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from inferlab.analysis import fingerprint, stats
from inferlab.record import record
from inferlab.record import view as record_view

CONFIDENCE_PCT = 95  # of the shift interval; its complement is the error rate a claim keeps
ALPHA = (100 - CONFIDENCE_PCT) / 100
MIN_SAMPLES = 3  # fewer a side: no test (at 3 vs 3 the smallest two-sided p is 0.1, so a test but no verdict)
# Two modes of the same runs pair by run from this many runs: the signed-rank test's smallest p, 2 / 2^runs, is then
# 0.0078, within reach of a claim of up to 6 metrics (0.05 / 6); with fewer runs it could not reach the level that
# the rank-sum test (which ignores the pairing: valid, and conservative here) reaches with the same runs. Chosen by
# the number of runs alone, never by the figures, so the level holds.
PAIRED_MIN_RUNS = 8
FRESH_SOURCES = ("lab_up", "restore")  # "untouched" (a first run on a host never changed) restarted nothing
LAYER_EXTRAVAR_PREFIX = "inferlab_layer_"
TRIAL_SUFFIX = re.compile(r"^(?P<base>.+)_(?P<trial>\d+)$")

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
NO_VERDICT = "no verdict"  # an A/A pair: nothing declared differs, so there is no claim to judge
# Where a side's samples come from (`design`).
ONE_RUN = "one run a side"
WHOLE_RUNS = "repeated whole runs"
PAIRED_RUNS = "repeated whole runs, paired"  # two modes of the same runs: each run measured both sides
SPEED, TRANSPORT, INFO = "speed", "transport", "info"  # which verdict a metric counts for (info: none)
# What one metric's test shows (`observed`, `family_observed`).
B_BETTER = "B better"
B_WORSE = "B worse"
NO_CLEAR = "no clear difference"
TOO_FEW = "too few samples"
NO_DIRECTION = "no direction"
UNATTAINABLE = "no verdict possible"  # no samples of these sizes could reach the level: see no_verdict_possible

# Per-request figures of a workload batch (llm_workload's records): key, name with its definition, better, role,
# scale. Where the served mode ran measured trials, the speed claim rests on those instead (TRIAL_METRICS) and these
# count as info: the requests of one batch are not repetitions.
REQUEST_METRICS = (
    ("output_tok_s", "output tok/s per request (TTFT included)", "higher", SPEED, 1),
    ("decode_tok_s", "decode tok/s per request (TTFT excluded)", "higher", INFO, 1),
    ("ttft_s", "TTFT ms per request", "lower", INFO, 1000),
)
# Per-batch figures of a ladder step (llm_workload's batch): key, name with its definition, better. Information only:
# one value a batch, so a sample a run (with repeated runs, the runs' medians); records from before them have none.
BATCH_METRICS = (
    ("request_throughput_req_s", "requests/s of the batch (OK requests / wall time)", "higher"),
    ("total_token_throughput_tok_s", "total tok/s of the batch ((prompt + output tokens) / wall time)", "higher"),
)
# Per-trial figures of a served mode's measured trials (serving.<mode>.trials.figures): key, better, role. One
# value per trial, so that the samples are repetitions.
TRIAL_METRICS = (
    ("single_stream_output_tok_s", "higher", SPEED),
    ("aggregate_output_tok_s", "higher", SPEED),
    ("single_stream_decode_tok_s", "higher", INFO),
    ("single_stream_ttft_ms", "lower", INFO),
)
# Per-trial figures of the cold and warm prefix trials (serving.<mode>.prefix_trials.figures.<label>): key, better.
# Information only: one value per proven trial of that label.
PREFIX_METRICS = (("ttft_ms", "lower"), ("prefill_tok_s", "higher"), ("decode_tok_s", "higher"))


class CompareError(Exception):
    """The two runs cannot be compared; the message says why."""


class RecordInputError(CompareError):
    """A record that is not a readable inferlab record.json."""


class LayersDiffer(CompareError):
    def __init__(self, layers: dict[str, tuple[str, str]]):
        self.layers = layers
        described = ", ".join(f"{name} ({a} -> {b})" for name, (a, b) in sorted(layers.items()))
        super().__init__(
            f"refusing to compare: the runs differ in {len(layers)} declared layers: {described}. Change one layer "
            "at a time, and compare two runs that differ in that layer only."
        )


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


@dataclass(frozen=True)
class Verdict:
    claim: str
    verdict: str
    reason: str
    re_verified: bool | None = None  # None unless require_fresh


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


# --- reading records ----------------------------------------------------------------------------------------------


def _mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordInputError(f"{where} must be an object, found {type(value).__name__}")
    return value


def _sequence(value, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordInputError(f"{where} must be a list, found {type(value).__name__}")
    return value


def _number(value, where: str) -> float | None:
    """A sample: a number, or None when the record says it was not measured."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordInputError(f"{where} must be a number or null, found {value!r}")
    return float(value)


def check_record(data, where: str) -> dict:
    """The few things every later step relies on; the rest is checked where it is read."""
    if not isinstance(data, dict):
        raise RecordInputError(f"{where}: expected a JSON object, found {type(data).__name__}")
    if data.get("schema_version") != 1:
        raise RecordInputError(f"{where}: schema_version {data.get('schema_version')!r}, expected 1")
    run = data.get("run")
    if not isinstance(run, dict) or not isinstance(run.get("id"), str):
        raise RecordInputError(f"{where}: no run.id, so not an inferlab record")
    for section in ("hosts", "verification", "serving", "link_tests", "stages"):
        _mapping(data.get(section), f"{where}: {section}")
    _mapping(run.get("extravars"), f"{where}: run.extravars")
    return data


def load_record(path: Path) -> dict:
    """record.json of a run directory (or that file itself), read and validated by record.read, then checked
    enough to compare."""
    try:
        data = record.read(path)
    except record.RecordError as exc:
        where = "" if record.record_path(path).is_file() else f"; is {path} a run directory?"
        raise RecordInputError(record.one_line(exc) + where) from None
    return check_record(data, str(record.record_path(path)))


def mode_view(record: dict, mode: str) -> dict:
    """One served mode of a run as a record of its own (``RUN:MODE``), so that two modes of one run compare like two
    runs: the mode's serving result and its own counter windows (``window_<its window>`` and trial windows of it),
    the run's hosts and verification (their layers hold for every mode) and its fresh start (``stages.fresh_start``:
    the run's, so every mode's; `--require-fresh` and `inferlab reverify` read it), and ``run.id`` ``<id>:<mode>``.
    The run's link tests, link A/B and other windows are left out: they are the same on both sides, not the mode's.
    Raises RecordInputError when the run did not serve ``mode``."""
    serving = _mapping(record.get("serving"), "serving")
    if mode not in serving:
        raise RecordInputError(
            f"{record['run']['id']} served no mode {mode!r} (served: {', '.join(serving) or 'none'})"
        )
    window = _mapping(serving[mode], f"serving.{mode}").get("window")
    stages = {
        name: value
        for name, value in _mapping(record.get("stages"), "stages").items()
        if (window and _window_base(name) == f"window_{window}") or name == "fresh_start"
    }
    run = {**record["run"], "id": f"{record['run']['id']}:{mode}"}
    return {**record, "run": run, "serving": {mode: serving[mode]}, "stages": stages, "link_tests": {}}


def _window_base(stage: str) -> str:
    """``window_<name>`` of a stage ``window_<name>`` or of one of its trials ``window_<name>_<N>``."""
    trial = TRIAL_SUFFIX.match(stage)
    return trial["base"] if trial else stage


def split_mode(value: str) -> tuple[str, str | None]:
    """``RUN:MODE`` -> ``(RUN, MODE)``; a value without a mode suffix -> ``(value, None)``."""
    run, sep, mode = value.rpartition(":")
    if sep and run and mode and "/" not in mode:
        return run, mode
    return value, None


# --- layers -------------------------------------------------------------------------------------------------------


def _joined(by_host: dict[str, str]) -> str:
    values = set(by_host.values())
    if len(values) == 1:
        return values.pop()
    return ", ".join(f"{host}={value}" for host, value in sorted(by_host.items()))


def declared_layers(record: dict, modes: list[str]) -> dict[str, str]:
    """Layer name -> value for one run. A host layer whose hosts disagree reads `host=value, ...`; served modes
    contribute the values of the modes being compared (`modes`)."""
    per_host: dict[str, dict[str, str]] = {}
    for section in ("hosts", "verification"):
        for host, entry in _mapping(record.get(section), section).items():
            layers = _mapping(_mapping(entry, f"{section}.{host}").get("layers"), f"{section}.{host}.layers")
            for name, value in layers.items():
                per_host.setdefault(name, {}).setdefault(host, str(value))
    for host, test in _mapping(record.get("link_tests"), "link_tests").items():
        value = _mapping(test, f"link_tests.{host}").get("driver_layer")
        if value is not None:
            per_host.setdefault("driver_layer", {}).setdefault(host, str(value))
    layers = {name: _joined(by_host) for name, by_host in per_host.items()}
    serving = _mapping(record.get("serving"), "serving")
    per_mode: dict[str, set[str]] = {}
    for mode in modes:
        mode_layers = _mapping(_mapping(serving[mode], f"serving.{mode}").get("layers"), f"serving.{mode}.layers")
        for name, value in mode_layers.items():
            per_mode.setdefault(name, set()).add(str(value))
    layers.update({name: ",".join(sorted(values)) for name, values in per_mode.items()})
    for key, value in _mapping(record["run"].get("extravars"), "run.extravars").items():
        if key.startswith(LAYER_EXTRAVAR_PREFIX) and len(key) > len(LAYER_EXTRAVAR_PREFIX):
            layers[key[len(LAYER_EXTRAVAR_PREFIX) :]] = str(value)
    return layers


def pair_modes(record_a: dict, record_b: dict) -> list[tuple[str, str]]:
    """Served modes to compare: those both runs have by name; else, when each run served one mode, that pair."""
    modes_a, modes_b = list(record_a.get("serving") or {}), list(record_b.get("serving") or {})
    common = [mode for mode in modes_a if mode in modes_b]
    if common:
        return [(mode, mode) for mode in common]
    if len(modes_a) == 1 and len(modes_b) == 1:
        return [(modes_a[0], modes_b[0])]
    return []


def transport_label(records: list[dict]) -> str:
    """`emulated`, `kernel`, `mixed`, or `unknown` when no record says which driver layer carried the traffic."""
    labels = set()
    for data in records:
        for section in ("hosts", "verification"):
            for entry in (data.get(section) or {}).values():
                labels.add((entry.get("layers") or {}).get("driver_layer"))
        for test in (data.get("link_tests") or {}).values():
            labels.add(test.get("transport_label"))
        for ab in ((data.get("stages") or {}).get("link_ab") or {}).values():
            labels.add(ab.get("transport_label") if isinstance(ab, dict) else None)
    labels &= {"emulated", "kernel"}
    if len(labels) == 1:
        return labels.pop()
    return "mixed" if labels else "unknown"


def fresh_start(record: dict) -> tuple[bool, str]:
    """Whether the run started from a fresh start on every host, and why, naming each start's kind and time (see
    the module docstring)."""
    entries = (record.get("stages") or {}).get("fresh_start")
    if not entries or not isinstance(entries, dict):
        return False, ("has no stages.fresh_start in its record (the staged experiment's verify stage writes it), "
                       "so it counts as not fresh")
    stale = []
    for host, entry in sorted(entries.items()):
        entry = entry if isinstance(entry, dict) else {}
        if entry.get("verified") is not True:
            stale.append(f"{host} (not verified)")
        elif entry.get("from") == "untouched":
            stale.append(f"{host} (untouched: a first run on a host inferlab never changed restarted nothing)")
        elif entry.get("from") not in FRESH_SOURCES:
            stale.append(f"{host} (from {entry.get('from')!r})")
    if stale:
        return False, (f"stages.fresh_start does not show a verified fresh start ({' or '.join(FRESH_SOURCES)}) for "
                       f"{', '.join(stale)}")
    starts = ", ".join(f"{host} from a {entry['from']} at {entry.get('time', 'an unrecorded time')}"
                       for host, entry in sorted(entries.items()))
    return True, f"started from a verified fresh start: {starts}"


# --- metrics ------------------------------------------------------------------------------------------------------


def _counter_roles(transport: str) -> tuple[str, str]:
    """(role of TCP retransmissions, role of receiver errors): a veth never counts receiver errors, and on real
    hosts receiver errors are the transport damage itself; when unknown, both count."""
    return {"emulated": (TRANSPORT, INFO), "kernel": (INFO, TRANSPORT)}.get(transport, (TRANSPORT, TRANSPORT))


def _rx_errors(counters: dict, where: str) -> float | None:
    values = [_number(counters.get(name), f"{where}.{name}") for name in record_view.RX_ERROR_COUNTERS]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _window_counters(window: dict, where: str) -> tuple[str | None, float | None, float | None]:
    """(link interface, TCP retransmitted segments, receiver errors on the link) of one counter-window fragment."""
    link = _mapping(window.get("link_before") or window.get("link_after"), f"{where}.link_before")
    interface = link.get("interface")
    retrans = _number(_mapping(window.get("tcp"), f"{where}.tcp").get("RetransSegs"), f"{where}.tcp.RetransSegs")
    interfaces = _mapping(window.get("interfaces"), f"{where}.interfaces")
    rx = None
    if interface in interfaces:
        rx = _rx_errors(
            _mapping(interfaces[interface], f"{where}.interfaces.{interface}"), f"{where}.interfaces.{interface}"
        )
    return interface, retrans, rx


def _link_ab_kind(name: str, transport: str) -> tuple[str, str]:
    """(better, role) of one link_ab_metrics name."""
    retrans_role, rx_role = _counter_roles(transport)
    if name.endswith("_gbps"):
        return "higher", SPEED
    if name.endswith("_tcp_retrans"):
        return "lower", retrans_role
    if name.endswith("_rx_errors"):
        return "lower", rx_role
    return "lower", INFO  # retransmission shares, iperf3's own counts, probe loss and round-trip times


class _Metrics(dict):
    """(section, name) -> Metric; a metric without samples is left out."""

    def add(self, section: str, name: str, better: str | None, role: str, samples: list[float | None]) -> None:
        samples = [s for s in samples if s is not None]
        if samples:
            self[(section, name)] = Metric(section, name, better, role, tuple(samples))

    def add_counters(
        self, section: str, prefix: str, roles: tuple[str, str], retrans: list, rx: list, interface: str | None = None
    ) -> None:
        self.add(section, f"{prefix}TCP retransmitted segments", "lower", roles[0], retrans)
        on = f" on {interface}" if interface else ""
        self.add(section, f"{prefix}receiver errors{on} (crc+over+missed+length)", "lower", roles[1], rx)


def _serving_metrics(metrics: _Metrics, record: dict, modes: dict[str, str], roles: tuple[str, str]) -> set[str]:
    """Per-request figures of every ladder step, by kind and cache label, and the mode's counter window; returns the
    window stages it used."""
    serving, stages = _mapping(record.get("serving"), "serving"), _mapping(record.get("stages"), "stages")
    used = set()
    for mode, label in modes.items():
        where = f"serving.{mode}"
        result = _mapping(serving[mode], where)
        acceptance = _mapping(result.get("acceptance"), f"{where}.acceptance")
        trials = _mapping(result.get("trials") or {}, f"{where}.trials")
        figures = _mapping(trials.get("figures") or {}, f"{where}.trials.figures")
        for key, better, role in TRIAL_METRICS:
            figure = _mapping(figures.get(key) or {}, f"{where}.trials.figures.{key}")
            values = _sequence(figure.get("values") or [], f"{where}.trials.figures.{key}.values")
            numbers = [_number(v, f"{where}.trials.figures.{key}.values[{n}]") for n, v in enumerate(values)]
            name = f"{figure.get('definition', key)} (one value per trial)"
            metrics.add(f"serving {label}: measured trials", name, better, role, numbers)
        prefix = _mapping(result.get("prefix_trials") or {}, f"{where}.prefix_trials")
        for cache in ("cold", "warm") if prefix else ():
            for key, better in PREFIX_METRICS:
                fwhere = f"{where}.prefix_trials.figures.{cache}.{key}"
                figure = _mapping(_mapping(prefix.get("figures"), f"{where}.prefix_trials.figures").get(cache, {})
                                  .get(key) or {}, fwhere)
                values = [v for v in _sequence(figure.get("values") or [], f"{fwhere}.values") if v is not None]
                numbers = [_number(v, f"{fwhere}.values[{n}]") for n, v in enumerate(values)]
                metrics.add(f"serving {label}: {cache} prefix trials",
                            f"{figure.get('definition', key)} (one value per proven trial)", better, INFO, numbers)
        request_role = INFO if trials.get("count") else None
        for i, step in enumerate(_sequence(acceptance.get("steps"), f"{where}.acceptance.steps")):
            step_where = f"{where}.acceptance.steps[{i}]"
            step = _mapping(step, step_where)
            batch = _mapping(step.get("batch"), f"{step_where}.batch")
            if not batch:
                continue
            section = f"serving {label}: {step.get('step')} ({batch.get('kind')}, {batch.get('cache')} cache)"
            where_records = f"{step_where}.batch.records"
            requests = [
                (n, r)
                for n, r in enumerate(_sequence(batch.get("records"), where_records))
                if isinstance(r, dict) and r.get("ok") is True
            ]
            for key, name, better, role, scale in REQUEST_METRICS:
                values = [_number(r.get(key), f"{where_records}[{n}].{key}") for n, r in requests]
                scaled = [None if v is None else v * scale for v in values]
                metrics.add(section, name, better, request_role or role, scaled)
            for key, name, better in BATCH_METRICS:
                metrics.add(section, name, better, INFO, [_number(batch.get(key), f"{step_where}.batch.{key}")])
        if result.get("window"):
            stage = f"window_{result['window']}"
            used.add(stage)
            for host, window in sorted(_mapping(stages.get(stage), f"stages.{stage}").items()):
                interface, retrans, rx = _window_counters(_mapping(window, f"stages.{stage}.{host}"), stage)
                metrics.add_counters(f"serving {label}: counter window", f"{host}: ", roles, [retrans], [rx], interface)
    return used


def _link_test_metrics(metrics: _Metrics, record: dict, roles: tuple[str, str]) -> None:
    """Per-second throughput of the bidirectional test, and each test's counter deltas per host."""
    for host, test in sorted(_mapping(record.get("link_tests"), "link_tests").items()):
        where = f"link_tests.{host}"
        test = _mapping(test, where)
        pair = _mapping(test.get("pair"), f"{where}.pair")
        a, b = pair.get("a"), pair.get("b")
        section = f"link test {a} <-> {b}"
        tests = _mapping(test.get("tests"), f"{where}.tests")
        asymmetry = _mapping(tests.get("asymmetry"), f"{where}.tests.asymmetry")
        where_intervals = f"{where}.tests.asymmetry.intervals"
        intervals = [
            (n, iv)
            for n, iv in enumerate(_sequence(asymmetry.get("intervals"), where_intervals))
            if isinstance(iv, dict) and not iv.get("omitted")
        ]
        for key, source, sink in (("forward_bps", a, b), ("reverse_bps", b, a)):
            values = [_number(iv.get(key), f"{where_intervals}[{n}].{key}") for n, iv in intervals]
            name = f"{source} -> {sink} Gb/s per 1 s interval (bidirectional test)"
            metrics.add(section, name, "higher", SPEED, [None if v is None else v / 1e9 for v in values])
        for test_name, result in sorted(tests.items()):
            where_counters = f"{where}.tests.{test_name}.host_counters"
            counters = _mapping(_mapping(result, f"{where}.tests.{test_name}").get("host_counters"), where_counters)
            for counter_host, values in sorted(counters.items()):
                values = _mapping(values, f"{where_counters}.{counter_host}")
                retrans = _number(values.get("RetransSegs"), f"{where_counters}.{counter_host}.RetransSegs")
                rx = _rx_errors(values, f"{where_counters}.{counter_host}")
                metrics.add_counters(section, f"{test_name}: {counter_host} ", roles, [retrans], [rx])


def _link_ab_metrics(metrics: _Metrics, stages: dict, transport: str) -> None:
    """The link A/B's repetitions, per condition (link_ab_metrics' names)."""
    for host, ab in sorted(_mapping(stages.get("link_ab"), "stages.link_ab").items()):
        where = f"stages.link_ab.{host}"
        samples: dict[tuple[str, str], list[float | None]] = {}
        for i, repetition in enumerate(_sequence(_mapping(ab, where).get("runs"), f"{where}.runs")):
            repetition = _mapping(repetition, f"{where}.runs[{i}]")
            for name, value in _mapping(repetition.get("metrics"), f"{where}.runs[{i}].metrics").items():
                number = _number(value, f"{where}.runs[{i}].metrics.{name}")
                samples.setdefault((str(repetition.get("condition")), name), []).append(number)
        for (condition, name), values in sorted(samples.items()):
            metrics.add(f"link A/B {host}, condition {condition}", name, *_link_ab_kind(name, transport), values)


def _window_metrics(metrics: _Metrics, stages: dict, skip: set[str], roles: tuple[str, str]) -> None:
    """Counter windows of their own (link tests, experiments); windows `<name>_<N>` are trials of `<name>`."""
    trials: dict[str, dict[str, list[dict]]] = {}
    for stage, by_host in sorted(stages.items()):
        if not stage.startswith("window_") or stage in skip:
            continue
        match = TRIAL_SUFFIX.match(stage.removeprefix("window_"))
        base = match["base"] if match else stage.removeprefix("window_")
        for host, window in _mapping(by_host, f"stages.{stage}").items():
            trials.setdefault(base, {}).setdefault(host, []).append(_mapping(window, f"stages.{stage}.{host}"))
    for base, by_host in sorted(trials.items()):
        for host, windows in sorted(by_host.items()):
            counted = [_window_counters(w, f"stages.window_{base}*.{host}") for w in windows]
            interface = next((c[0] for c in counted if c[0]), None)
            metrics.add_counters(
                f"counter window {base}",
                f"{host}: ",
                roles,
                [c[1] for c in counted],
                [c[2] for c in counted],
                interface,
            )


def extract_metrics(record: dict, modes: dict[str, str], transport: str) -> dict[tuple[str, str], Metric]:
    """(section, name) -> Metric for one run. `modes` maps each served mode to compare to its label, shared by both
    runs, so that e.g. baseline in A and nextn in B land in the same rows."""
    metrics = _Metrics()
    roles = _counter_roles(transport)
    stages = _mapping(record.get("stages"), "stages")
    windows_of_modes = _serving_metrics(metrics, record, modes, roles)
    _link_test_metrics(metrics, record, roles)
    _link_ab_metrics(metrics, stages, transport)
    _window_metrics(metrics, stages, windows_of_modes, roles)
    return dict(metrics)


# --- statistics ---------------------------------------------------------------------------------------------------


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


# --- the comparison -----------------------------------------------------------------------------------------------


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


# --- output -------------------------------------------------------------------------------------------------------


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

"""The record as the report, the plots and the CLI read it: counter windows, workload batches, measured trials, the
layers a run declared. Plain Python over a parsed record.json, with no drawing library, so that commands that only
read a record do not import matplotlib (plots.py draws from these same readers, so the report's tables and the plots
agree).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# The receiver-error counters, in the order the report's and the plots' columns show them.
RX_ERROR_COUNTERS = ("rx_crc_errors", "rx_missed_errors", "rx_length_errors", "rx_over_errors")
# The link events (the collection's link_events filter's kinds) that mean the link itself went away for a moment:
# its carrier dropped, or the interface disappeared, came back or was re-created.
LINK_FLAP_EVENTS = ("carrier", "gone", "back", "counters_reset")
# The ladder's steps in the order they run.
STEP_ORDER = ("first_response", "repeated", "concurrent", "repeated_prefix", "long_context")
# The measured trials' figures (serving.<mode>.trials.figures), with their definitions as titles.
TRIAL_FIGURES = (
    ("single_stream_output_tok_s", "Single-stream output tok/s per trial (median per request, TTFT included)"),
    ("single_stream_decode_tok_s", "Single-stream decode tok/s per trial (median per request, TTFT excluded)"),
    ("single_stream_ttft_ms", "Single-stream TTFT ms per trial (median per request)"),
    ("aggregate_output_tok_s", "Aggregate output tok/s per trial (the concurrent batch: all output tokens / wall)"),
)


def epoch(text) -> float | None:
    """Seconds since the epoch of a UTC ISO time (`2026-11-30T13:43:09.086287Z`); None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def number(value) -> float | None:
    """A counter or a figure from the record: None for null, booleans and anything not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class Window:
    """One host's fragment of one counter window (`stages.window_<name>.<host>`)."""

    stage: str
    name: str
    host: str
    opened: float | None
    closed: float | None
    data: dict

    @property
    def interface(self) -> str | None:
        """The direct-link interface the window watched (its link snapshot), else thunderbolt0 when counted."""
        for key in ("link_before", "link_after"):
            link = self.data.get(key)
            if isinstance(link, dict) and link.get("interface"):
                return link["interface"]
        interfaces = self.data.get("interfaces") or {}
        return "thunderbolt0" if "thunderbolt0" in interfaces else None

    def link_counters(self) -> dict:
        counters = (self.data.get("interfaces") or {}).get(self.interface or "")
        return counters if isinstance(counters, dict) else {}

    def counter(self, name: str) -> float | None:
        """A delta on the link interface, or a TCP one (`RetransSegs`)."""
        if name in ("RetransSegs", "OutSegs", "InSegs", "InErrs"):
            return number((self.data.get("tcp") or {}).get(name))
        return number(self.link_counters().get(name))

    def rx_errors(self) -> float | None:
        """CRC + missed + length + overrun errors on the link interface; None when none of them was counted."""
        values = [self.counter(name) for name in RX_ERROR_COUNTERS]
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    @property
    def samples(self) -> dict:
        samples = self.data.get("samples")
        return samples if isinstance(samples, dict) else {}


def counter_windows(record: dict) -> list[Window]:
    """Every counter window of the record, by opening time, then name, then host."""
    found = []
    for stage, by_host in (record.get("stages") or {}).items():
        if not stage.startswith("window_") or not isinstance(by_host, dict):
            continue
        for host, data in by_host.items():
            if isinstance(data, dict):
                opened, closed = epoch(data.get("opened_at")), epoch(data.get("closed_at"))
                found.append(Window(stage, stage.removeprefix("window_"), host, opened, closed, data))
    return sorted(found, key=lambda w: (w.opened if w.opened is not None else math.inf, w.name, w.host))


@dataclass(frozen=True)
class Batch:
    """One workload batch of a served mode's acceptance ladder."""

    mode: str
    layers: str
    step: str
    batch: dict

    @property
    def condition(self) -> str:
        return f"{self.step} ({self.batch.get('cache')} cache)"


def stage_fragments(record: dict, shape: Callable[[dict], bool]) -> list[tuple[str, dict]]:
    """Every fragment under `stages` that has the shape `shape` accepts, labelled `stage (host)`, in stage then host
    order: the sections of stages without a record section of their own (the matrix, the ladder, leave-one-out) find
    theirs by shape, so a stage renamed by its variable is still found, and anything else there is left out."""
    found = []
    for stage, by_host in sorted((record.get("stages") or {}).items()):
        if not isinstance(by_host, dict):
            continue
        found += [(f"{stage} ({host})", fragment) for host, fragment in sorted(by_host.items())
                  if isinstance(fragment, dict) and shape(fragment)]
    return found


def mode_layers(result: dict) -> str:
    layers = result.get("layers") or {}
    return ", ".join(f"{k}={v}" for k, v in sorted(layers.items()))


def serving_batches(record: dict) -> list[Batch]:
    """The batches of every served mode, in the record's mode order and the ladder's step order."""
    found = []
    for mode, result in (record.get("serving") or {}).items():
        steps = ((result.get("acceptance") or {}).get("steps")) or []
        for step in steps:
            if isinstance(step.get("batch"), dict):
                found.append(Batch(mode, mode_layers(result), step.get("step", "?"), step["batch"]))
    order = {step: i for i, step in enumerate(STEP_ORDER)}
    modes = list(dict.fromkeys(b.mode for b in found))
    return sorted(found, key=lambda b: (order.get(b.step, len(order)), modes.index(b.mode)))


@dataclass
class ModeTrials:
    """A served mode's measured trials (serving.<mode>.trials)."""

    mode: str
    layers: str
    count: int
    figures: dict
    problems: list


def serving_trials(record: dict) -> dict[str, ModeTrials]:
    """The measured trials of every served mode that ran any, in the record's mode order."""
    found = {}
    for mode, result in (record.get("serving") or {}).items():
        trials = result.get("trials") if isinstance(result, dict) else None
        if isinstance(trials, dict) and trials.get("count"):
            found[mode] = ModeTrials(
                mode, mode_layers(result), trials["count"], trials.get("figures") or {}, trials.get("problems") or []
            )
    return found


def stat(batch: dict, metric: str) -> dict | None:
    """A per-request statistic of a batch ({median, min, max, n, ...}) when it has a median."""
    value = batch.get(metric)
    return value if isinstance(value, dict) and number(value.get("median")) is not None else None


def read_samples(path: Path) -> list[dict]:
    """The sampler's JSON lines; a line cut short (a killed sampler) or not an object is left out."""
    samples = []
    with path.open() as handle:
        for line in handle:
            try:
                sample = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(sample, dict) and number(sample.get("t_wall")) is not None:
                samples.append(sample)
    return samples


def sampler_file(run_dir: Path | None, window: Window) -> Path | None:
    """The run-directory file of a window's sampler series, when the record names one with samples in it."""
    path, count = window.samples.get("path"), number(window.samples.get("count"))
    if not path or not count:
        return None
    return Path(path) if run_dir is None else run_dir / path


def driver_layers(record: dict) -> set[str]:
    """Every driver layer the record declares: hosts, verification, link tests, the candidate, and every stage fragment
    that names one (link profiles, the day-one matrix, the ladder, leave-one-out)."""
    found = set()
    for section in ("hosts", "verification"):
        for entry in (record.get(section) or {}).values():
            found.add((entry.get("layers") or {}).get("driver_layer"))
    for section in ("link_tests", "candidate"):
        for entry in (record.get(section) or {}).values():
            found.add(entry.get("driver_layer"))
    # link profiles, the day-one matrix, the ladder, leave-one-out: each stage fragment that declares one
    for by_host in (record.get("stages") or {}).values():
        for entry in (by_host.values() if isinstance(by_host, dict) else []):
            found.add(entry.get("driver_layer") if isinstance(entry, dict) else None)
    for entry in ((record.get("stages") or {}).get("link_ab") or {}).values():
        found.add(entry.get("transport_label") if isinstance(entry, dict) else None)
    return found & {"kernel", "emulated"}


# The lab inference server's module in a rank's argv: its name now, and before 0.2.0 (records of older runs)
LAB_SERVER_MODULES = ("inferlab.lab.server", "inferlab.labserver")


def link_kinds(record: dict) -> set[str]:
    """The link kinds the record's stage fragments name (the matrix, the ladder, leave-one-out): `ethernet` or
    `thunderbolt`; empty when none says."""
    found = set()
    for by_host in (record.get("stages") or {}).values():
        for entry in (by_host.values() if isinstance(by_host, dict) else []):
            if isinstance(entry, dict) and isinstance(entry.get("link_kind"), str):
                found.add(entry["link_kind"])
    return found


def lab_server(record: dict) -> bool:
    """Whether a served mode ran the lab inference server rather than SGLang."""
    for result in (record.get("serving") or {}).values():
        for rank in (result.get("ranks") or {}).values():
            argv = rank.get("argv") or []
            if any(str(arg) in LAB_SERVER_MODULES for arg in argv):
                return True
    return False


def is_emulated(record: dict) -> bool:
    """Whether the transport was the lab's emulation: declared so, or (no driver layer declared) the lab inference
    server ran, which exists only in the lab."""
    declared = driver_layers(record)
    return "emulated" in declared or (not declared and lab_server(record))


def journal_entries(record: dict) -> list[dict]:
    """The stage journal's entries, each with its stage name, in the run's order (by index; unnumbered last)."""
    journal = record.get("journal") or {}
    entries = [
        dict(entry, stage=entry.get("stage") or name) for name, entry in journal.items() if isinstance(entry, dict)
    ]
    return sorted(entries, key=lambda e: (e["index"] if isinstance(e.get("index"), int) else math.inf, e["stage"]))

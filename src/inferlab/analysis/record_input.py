"""The records a comparison reads: record.json read and checked enough to compare, one served mode of a run as a
record of its own (`RUN:MODE`), and the checked readers of a record's values that every later step uses."""

from __future__ import annotations

import re
from pathlib import Path

from inferlab.record import record

TRIAL_SUFFIX = re.compile(r"^(?P<base>.+)_(?P<trial>\d+)$")


class CompareError(Exception):
    """The two runs cannot be compared; the message says why."""


class RecordInputError(CompareError):
    """A record that is not a readable inferlab record.json."""


def as_mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordInputError(f"{where} must be an object, found {type(value).__name__}")
    return value


def as_list(value, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordInputError(f"{where} must be a list, found {type(value).__name__}")
    return value


def as_sample(value, where: str) -> float | None:
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
        as_mapping(data.get(section), f"{where}: {section}")
    as_mapping(run.get("extravars"), f"{where}: run.extravars")
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
    serving = as_mapping(record.get("serving"), "serving")
    if mode not in serving:
        raise RecordInputError(
            f"{record['run']['id']} served no mode {mode!r} (served: {', '.join(serving) or 'none'})"
        )
    window = as_mapping(serving[mode], f"serving.{mode}").get("window")
    stages = {
        name: value
        for name, value in as_mapping(record.get("stages"), "stages").items()
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

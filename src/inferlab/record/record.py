"""Assemble `record.json` from a run directory's fragments and validate it against the shipped JSON Schema."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import platform
import socket
from importlib import metadata
from pathlib import Path

import jsonschema

from inferlab import paths
from inferlab.record import redaction
from inferlab.system import liveness
from inferlab.system.private_files import write_private

SCHEMA_VERSION = 1
RECORD_FILE = "record.json"
# Bounds a record read back must keep (run directories are copied between machines and kept for months): deeper
# nesting than any record has (they reach 10) would exhaust the readers' recursion, and an integer beyond 64 bits
# or a float beyond a double cannot be formatted or compared as the readers do.
MAX_DEPTH = 64
MAX_INTEGER = 2**63 - 1
# One command may read a record several times (runs list --where, reverify, matrix): what is wrong with a
# record's bytes is kept, by their sha256, so that each is checked once.
SCHEMA_CACHE_SIZE = 4096
_PROBLEMS: dict[bytes, str | None] = {}
# Stages with a dedicated section in the record; every other stage lands under "stages".
SECTIONS = {"verify": "verification", "restore": "restore", "link_test": "link_tests", "serving": "serving",
            "continuity": "continuity", "fallback": "fallback", "candidate": "candidate",
            "journal": "journal"}


class RecordError(Exception):
    """A fragment or the assembled record is not what the schema promises."""


def load_schema() -> dict:
    return json.loads(paths.SCHEMA.read_text())


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema())


def read_fragments(run_dir: Path) -> dict[str, dict[str, dict]]:
    """`fragments/<stage>/<host>.json` -> {stage: {host: fragment}}; a fragment must be a JSON object."""
    stages: dict[str, dict[str, dict]] = {}
    for path in sorted((run_dir / "fragments").glob("*/*.json")):
        try:
            fragment = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise RecordError(f"fragment {path} is not valid JSON: {exc}") from exc
        if not isinstance(fragment, dict):
            raise RecordError(f"fragment {path} is not a JSON object")
        stages.setdefault(path.parent.name, {})[path.stem] = fragment
    return stages


def controller_versions() -> dict:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {
        "hostname": socket.gethostname(),
        "machine_id": liveness.machine_id(),  # what tells two controllers apart: a short hostname may not
        "python": platform.python_version(),
        "ansible_core": version("ansible-core"),
        "ansible_runner": version("ansible-runner"),
        "inferlab": version("inferlab"),
    }


def assemble(run_dir: Path, run: dict) -> dict:
    """Build the record: `run` is the run metadata (see the schema's `run`); the rest comes from the fragments."""
    stages = read_fragments(run_dir)
    record = {
        "schema_version": SCHEMA_VERSION,
        "run": {**run, "controller": controller_versions()},
        "hosts": {},
        **{section: {} for section in SECTIONS.values()},
        "stages": {},
    }
    for stage, by_host in stages.items():
        section = SECTIONS.get(stage)
        if section:
            record[section] = by_host
        else:
            record["stages"][stage] = by_host
    # A host is described by a fragment about that host (its "host" field names it, as host_verify's do; the
    # verification's first, with what the host runs on); a serving fragment is about a mode across the ring, and its
    # "layers" are the experiment's, not a host's.
    for stage in ["verify", *sorted(stages)]:
        for host, fragment in stages.get(stage, {}).items():
            if host not in record["hosts"] and fragment.get("host") == host and "layers" in fragment:
                record["hosts"][host] = {
                    "kernel_release": fragment.get("kernel_release"),
                    "layers": fragment["layers"],
                }
                if fragment.get("identity") is not None:
                    record["hosts"][host]["identity"] = fragment["identity"]
    return record


def schema_problems(record: dict, most: int = 20) -> list[str]:
    """`path: what is wrong` for the first `most` places where `record` does not match the schema."""
    errors = sorted(_validator().iter_errors(record), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in errors[:most]]


def validate(record: dict, name: str = "record.json") -> None:
    problems = schema_problems(record)
    if problems:
        raise RecordError(f"{name} does not match record.schema.json:\n  " + "\n  ".join(problems))


def one_line(exc: RecordError) -> str:
    """A RecordError's message on one line (a schema error lists its places on the lines below the first)."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()).replace(":;", ":")


def write(run_dir: Path, run: dict) -> Path:
    """record.json, assembled from the fragments, with every value shaped like a secret redacted wherever it is (a
    rank's argv with --api-key, a URL with credentials: inferlab.record.redaction), validated, written whole."""
    record = redaction.redact_value(assemble(run_dir, run))
    validate(record)
    target = run_dir / "record.json"
    write_private(target, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return target


def record_path(run: Path) -> Path:
    """record.json of a run directory, or `run` itself when it names a file."""
    run = Path(run)
    return run / RECORD_FILE if run.is_dir() else run


def read(run: Path) -> dict:
    """The record of a run directory (or its record.json), read as untrusted input: a run directory may come from
    another machine or be damaged. Raises RecordError, naming the file and what is wrong with it, unless the file is
    UTF-8 JSON (no NaN or Infinity), an object within MAX_DEPTH and MAX_INTEGER, and valid against the schema; every
    reader (runs, query, compare, matrix, report, reverify) reads records here and may then rely on the schema's
    types."""
    target = record_path(run)
    try:
        raw = target.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise RecordError(f"{target}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RecordError(f"{target} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise RecordError(f"{target} is nested deeper than {MAX_DEPTH} levels: not a record") from None
    except ValueError as exc:  # JSONDecodeError, _refuse_constant, an integer of more digits than Python converts
        raise RecordError(f"{target} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{target} holds a JSON {type(data).__name__}, not a record (an object)")
    problem = _problem(data, hashlib.sha256(raw).digest())
    if problem:
        raise RecordError(f"{target}{problem}")
    return data


def _problem(data: dict, digest: bytes) -> str | None:
    """What is wrong with a parsed record (beyond the bounds, or against the schema), as the end of a sentence that
    names the file; None when nothing is. Kept by the sha256 of the record's bytes (SCHEMA_CACHE_SIZE)."""
    if digest not in _PROBLEMS:
        if len(_PROBLEMS) >= SCHEMA_CACHE_SIZE:
            _PROBLEMS.clear()
        beyond = _out_of_bounds(data)
        problems = [] if beyond else schema_problems(data)
        if beyond:
            _PROBLEMS[digest] = f": {beyond}"
        elif problems:
            _PROBLEMS[digest] = " does not match record.schema.json:\n  " + "\n  ".join(problems)
        else:
            _PROBLEMS[digest] = None
    return _PROBLEMS[digest]


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _out_of_bounds(data: dict) -> str | None:
    """What in `data` a reader could not handle (nesting, a number's size, a string that is not text), or None."""
    pending = [("", data, 1)]
    while pending:
        where, value, depth = pending.pop()
        if depth > MAX_DEPTH:
            return f"{where or '(top)'} is nested deeper than {MAX_DEPTH} levels"
        if isinstance(value, dict):
            for key, item in value.items():
                if not _is_text(key):
                    return f"{where or '(top)'} has a key that is not valid Unicode text ({key!r})"
                pending.append((f"{where}/{key}", item, depth + 1))
        elif isinstance(value, list):
            pending += [(f"{where}/{n}", item, depth + 1) for n, item in enumerate(value)]
        elif isinstance(value, str) and not _is_text(value):
            return f"{where}: not valid Unicode text ({value[:40]!r})"
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
            return f"{where}: the integer {str(value)[:24]}... is beyond 64 bits"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"{where}: {value} is not a finite number"
    return None


def _is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (JSON's \\ud800), which cannot be written out as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

"""Assemble `record.json` from a run directory's fragments and validate it against the shipped JSON Schema."""

from __future__ import annotations

import json
import platform
import socket
from importlib import metadata
from pathlib import Path

import jsonschema

from inferlab import paths

SCHEMA_VERSION = 1
# Stages with a dedicated section in the record; every other stage lands under "stages".
SECTIONS = {"verify": "verification", "restore": "restore", "link_test": "link_tests", "serving": "serving",
            "continuity": "continuity", "fallback": "fallback", "candidate": "candidate",
            "journal": "journal"}


class RecordError(Exception):
    """A fragment or the assembled record is not what the schema promises."""


def load_schema() -> dict:
    return json.loads(paths.SCHEMA.read_text())


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


def validate(record: dict) -> None:
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in errors[:20]]
        raise RecordError("record.json does not match record.schema.json:\n  " + "\n  ".join(lines))


def write(run_dir: Path, run: dict) -> Path:
    record = assemble(run_dir, run)
    validate(record)
    target = run_dir / "record.json"
    target.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return target

"""List and prune run directories, so they don't pile up under runs/.

Only a real directory (not a symlink) named `<UTC %Y%m%dT%H%M%SZ>-<playbook stem>`, optionally with a `.N` suffix
(runner.new_run_dir), is a run directory here. Anything else under the runs root is never listed as a run nor
removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePath

from inferlab import exit_codes
from inferlab.record import record
from inferlab.system import liveness

RUN_DIR_NAME = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)-(?P<stem>[A-Za-z0-9_.-]+?)(?:\.(?P<n>\d+))?$")
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
# what a run is while its `inferlab run` still works on it: never pruned
BUSY = ("running", "restoring")
# a run without a record whose controller ran on another machine: its liveness cannot be checked here
OTHER_CONTROLLER = "other-controller"
# the known-good snapshots a run takes before its first change (roles/host_verify, roles/tbnet_candidate)
SNAPSHOT_DIRS = ("known_good", "known_good_driver")
# record.json's exit codes that say no restore is owed: success, nothing changed, restored and verified
ENDED_CLEAN = (exit_codes.SUCCESS, exit_codes.PRECONDITION_FAILED, exit_codes.EXPERIMENT_FAILED_RESTORED)


@dataclass(frozen=True)
class RunDir:
    name: str
    path: Path
    playbook: str
    started: str  # UTC ISO 8601
    status: str  # ansible-runner's status, or running / restoring / other-controller / interrupted / unknown
    exit_code: int | None  # inferlab's, from record.json
    ansible_rc: int | None
    size_bytes: int
    controller_pid: int | None
    # why record.json could not be read (record.read), or None when it was read or is not there
    record_problem: str | None = None
    # the run may have changed hosts and no restore was verified against its known_good/ snapshots (needs_restore)
    awaits_restore: bool = False

    def as_json(self) -> dict:
        return {**asdict(self), "path": str(self.path)}


def parse_name(name: str) -> tuple[datetime, int] | None:
    """(start time, suffix) of a run directory name, or None when the name is not one."""
    match = RUN_DIR_NAME.match(name)
    if not match:
        return None
    try:
        started = datetime.strptime(match["stamp"], STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return started, int(match["n"] or 1)


def is_run_dir(path: Path) -> bool:
    return parse_name(path.name) is not None and path.is_dir() and not path.is_symlink()


def _read_json(path: Path) -> dict:
    """A JSON object from `path`, or {} when it is missing or not an object: listing must survive broken runs."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return {}
    return data if isinstance(data, dict) else {}


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def tree_size(path: Path) -> int:
    """Bytes of the files under `path`, symlinks counted as links (never followed)."""
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        entries = files + [d for d in dirs if os.path.islink(os.path.join(root, d))]
        for name in entries:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed while we walked
                continue
    return total


def read_record_run(path: Path) -> tuple[dict, str | None]:
    """(the record's `run`, None), ({}, why the record cannot be read), or ({}, None) when there is no record."""
    if not (path / record.RECORD_FILE).exists():
        return {}, None
    try:
        return record.read(path / record.RECORD_FILE)["run"], None
    except record.RecordError as exc:
        return {}, record.one_line(exc)


def describe(path: Path) -> RunDir:
    """What a run directory says about itself: record.json first (read as any reader reads it: a record that cannot
    be read is named in `record_problem`, and the rest is still described), then run.json (written when
    ansible-runner returned), then ansible-runner's own artifacts/*/status and rc. A run without record.json whose
    controller process (env/extravars: its pid and start time, liveness.py) lives is `running`, or `restoring` once
    its restore after a cancel has started, or `other-controller` when it was made on another machine; one with no
    status at all whose controller is gone is `interrupted`."""
    started_from_name, _n = parse_name(path.name)
    run, problem = read_record_run(path)
    summary = _read_json(path / "run.json")
    stem = RUN_DIR_NAME.match(path.name)["stem"]
    status = run.get("status") or _text_field(summary, "status")
    ansible_rc = run.get("ansible_rc", summary.get("ansible_rc"))
    artifacts = sorted((path / "artifacts").glob("*/status"))
    if not status and artifacts:
        status = _read_text(artifacts[-1])
        rc_text = _read_text(artifacts[-1].with_name("rc"))
        ansible_rc = int(rc_text) if rc_text and rc_text.lstrip("-").isdigit() and len(rc_text) < 12 else None
    extravars = _read_json(path / "env" / "extravars")
    pid = liveness.valid_pid(extravars.get(liveness.PID_VAR))
    controller = liveness.controller_state(extravars, started_from_name)
    if controller != liveness.DEAD and not (path / record.RECORD_FILE).exists():
        # its `inferlab run` still works on it: the playbook, or the restore after a cancel (run.json already
        # says canceled), or the record; or it may, on the machine that made it
        if controller == liveness.ELSEWHERE:
            status = OTHER_CONTROLLER
        else:
            status = "restoring" if (path / "artifacts" / "restore").is_dir() else "running"
    if not status:
        status = "interrupted" if pid else "unknown"
    exit_code = run.get("exit_code")
    described = RunDir(
        name=path.name,
        path=path,
        playbook=str(run.get("playbook") or _text_field(summary, "playbook") or stem),
        started=str(run.get("started") or _text_field(summary, "started")
                    or started_from_name.strftime("%Y-%m-%dT%H:%M:%SZ")),
        status=str(status),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        ansible_rc=ansible_rc if isinstance(ansible_rc, int) and not isinstance(ansible_rc, bool) else None,
        size_bytes=tree_size(path),
        controller_pid=pid,
        record_problem=problem,
    )
    return replace(described, awaits_restore=needs_restore(described))


def _text_field(data: dict, key: str) -> str | None:
    """A string field of run.json (which nothing validates), or None."""
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def has_snapshots(path: Path) -> bool:
    """Whether the run took a known-good snapshot (known_good/, known_good_driver/): the baseline a later restore
    verifies the hosts against."""
    return any(f.is_file() for d in SNAPSHOT_DIRS for f in (path / d).glob("*.json"))


def restore_verified(path: Path) -> bool:
    """Whether a restore in this run directory verified every host (fragments/restore/*.json, each verified)."""
    found = [_read_json(f) for f in sorted((path / "fragments" / "restore").glob("*.json"))]
    return bool(found) and all(f.get("verified") is True for f in found)


def needs_restore(run: RunDir) -> bool:
    """A run that may have changed hosts and whose own restore did not verify them against its known-good
    snapshots: it took snapshots, it is not running, its record does not say it ended clean (0), changed nothing
    (10) or restored verified (11), and no restore in its directory verified. Its known_good/ is the only baseline a
    later restore can verify against (`inferlab run restore -e restore_known_good_dir=<run>/known_good`)."""
    if run.status in BUSY or run.exit_code in ENDED_CLEAN or not has_snapshots(run.path):
        return False
    return not restore_verified(run.path)


def restored_by(restore_run: Path) -> str | None:
    """The name of the run whose known-good snapshots a standalone restore run verified against (its extra var
    restore_known_good_dir, `<run>/known_good`), or None when it names none or did not verify."""
    target = _read_json(restore_run / "env" / "extravars").get("restore_known_good_dir")
    if not isinstance(target, str) or not target or not restore_verified(restore_run):
        return None
    return PurePath(target.rstrip("/")).parent.name


def list_runs(root: Path) -> list[RunDir]:
    """Run directories under `root` (the CLI's: --root, else Settings.runs), oldest first. A run that awaits a
    restore stops awaiting it once a later run's restore verified against its snapshots (restored_by)."""
    if not root.is_dir():
        return []
    found = [describe(p) for p in sorted((p for p in root.iterdir() if is_run_dir(p)),
                                         key=lambda p: (parse_name(p.name), p.name))]
    restored = {restored_by(r.path) for r in found}
    return [replace(r, awaits_restore=False) if r.awaits_restore and r.name in restored else r for r in found]


def kept_reason(run: RunDir) -> str | None:
    """Why `runs prune` keeps an old run, or None when it may remove it."""
    if run.status in BUSY:
        return f"still {run.status} (controller pid {run.controller_pid})"
    if run.status == OTHER_CONTROLLER:
        return (f"made by a controller on another machine (pid {run.controller_pid} there), which may still work on "
                "it; name it to remove it")
    if run.awaits_restore:
        return ("interrupted and never restored: its known_good/ snapshots are the only baseline a restore can "
                "verify against (inferlab run restore -e restore_known_good_dir=<run>/known_good); name it to remove "
                "it")
    return None


def select_prunable(runs: list[RunDir], keep: int, named: Collection[str] = ()) -> tuple[list[RunDir], list[RunDir]]:
    """(to remove, kept although old) for keeping the `keep` newest: a run that is still running, or restoring
    after a cancel, is never removed; one that awaits a restore, or was made on another controller, only when
    `named` holds its name (kept_reason says why each is kept)."""
    if keep < 1:
        raise ValueError(f"--keep must be at least 1, got {keep}")
    ordered = sorted(runs, key=lambda r: (parse_name(r.name), r.name))
    old = ordered[:-keep]

    def kept(run: RunDir) -> bool:
        return run.status in BUSY or (kept_reason(run) is not None and run.name not in named)

    return [r for r in old if not kept(r)], [r for r in old if kept(r)]


def remove(run: RunDir) -> None:
    """Delete one run directory, re-checking that it still is one right before."""
    if not is_run_dir(run.path):
        raise ValueError(f"{run.path} is not a run directory; not removing it")
    shutil.rmtree(run.path)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def render_table(runs: list[RunDir]) -> str:
    header = ("NAME", "STARTED", "PLAYBOOK", "STATUS", "EXIT", "SIZE")
    rows = [header] + [
        (
            r.name,
            r.started,
            r.playbook,
            r.status,
            "—" if r.exit_code is None else str(r.exit_code),
            human_size(r.size_bytes),
        )
        for r in runs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines + notes(runs))


def notes(runs: list[RunDir]) -> list[str]:
    """The lines below the table: each run whose record.json cannot be read, with why, and each that awaits a
    restore (runs prune keeps it)."""
    unreadable = [f"- {r.name}: {r.record_problem}" for r in runs if r.record_problem]
    awaiting = [f"- {r.name}" for r in runs if r.awaits_restore]
    lines = []
    if unreadable:
        lines += ["", "record.json cannot be read (the run is listed from what else it left):", *unreadable]
    if awaiting:
        lines += ["", "interrupted and never restored (runs prune keeps them and their known_good/ snapshots unless "
                  "named):", *awaiting]
    return lines

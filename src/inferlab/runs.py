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
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from inferlab import paths

RUN_DIR_NAME = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)-(?P<stem>[A-Za-z0-9_.-]+?)(?:\.(?P<n>\d+))?$")
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
# what a run is while its `inferlab run` still works on it: never pruned
BUSY = ("running", "restoring")


@dataclass(frozen=True)
class RunDir:
    name: str
    path: Path
    playbook: str
    started: str  # UTC ISO 8601
    status: str  # ansible-runner's status, or running / interrupted / unknown
    exit_code: int | None  # inferlab's, from record.json
    ansible_rc: int | None
    size_bytes: int
    controller_pid: int | None

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
        data = json.loads(path.read_text())
    except (OSError, ValueError):
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


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe(path: Path) -> RunDir:
    """What a run directory says about itself: record.json first, then run.json (written when ansible-runner
    returned), then ansible-runner's own artifacts/*/status and rc. A run without record.json whose controller
    process (env/extravars) lives is `running`, or `restoring` once its restore after a cancel has started; one
    with no status at all whose controller is gone is `interrupted`."""
    started_from_name, _n = parse_name(path.name)
    run = _read_json(path / "record.json").get("run") or {}
    summary = _read_json(path / "run.json")
    stem = RUN_DIR_NAME.match(path.name)["stem"]
    status = run.get("status") or summary.get("status")
    ansible_rc = run.get("ansible_rc", summary.get("ansible_rc"))
    artifacts = sorted((path / "artifacts").glob("*/status"))
    if not status and artifacts:
        status = _read_text(artifacts[-1])
        rc_text = _read_text(artifacts[-1].with_name("rc"))
        ansible_rc = int(rc_text) if rc_text and rc_text.lstrip("-").isdigit() else None
    pid = _read_json(path / "env" / "extravars").get("inferlab_controller_pid")
    pid = pid if isinstance(pid, int) else None
    alive = pid_alive(pid) if pid else False
    if alive and not (path / "record.json").exists():
        # its `inferlab run` still works on it: the playbook, or the restore after a cancel (run.json already
        # says canceled), or the record
        status = "restoring" if (path / "artifacts" / "restore").is_dir() else "running"
    if not status:
        status = "interrupted" if pid else "unknown"
    exit_code = run.get("exit_code")
    return RunDir(
        name=path.name,
        path=path,
        playbook=str(run.get("playbook") or summary.get("playbook") or stem),
        started=str(run.get("started") or summary.get("started") or started_from_name.strftime("%Y-%m-%dT%H:%M:%SZ")),
        status=str(status),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        ansible_rc=ansible_rc if isinstance(ansible_rc, int) else None,
        size_bytes=tree_size(path),
        controller_pid=pid,
    )


def list_runs(runs_root: Path | None = None) -> list[RunDir]:
    """Run directories under `runs_root` (default runs/), oldest first."""
    root = runs_root or paths.RUNS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if is_run_dir(p)]
    return [describe(p) for p in sorted(found, key=lambda p: (parse_name(p.name), p.name))]


def select_prunable(runs: list[RunDir], keep: int) -> tuple[list[RunDir], list[RunDir]]:
    """(to remove, kept although old) for keeping the `keep` newest: a run that is still running, or restoring
    after a cancel, is never removed."""
    if keep < 1:
        raise ValueError(f"--keep must be at least 1, got {keep}")
    ordered = sorted(runs, key=lambda r: (parse_name(r.name), r.name))
    old = ordered[:-keep]
    return [r for r in old if r.status not in BUSY], [r for r in old if r.status in BUSY]


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
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)

"""report.md's stage journal: each stage's outcome, duration and changes."""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt


def _duration(start, end) -> str:
    first, last = record_view.epoch(start), record_view.epoch(end)
    if first is None or last is None or last < first:
        return "—"
    seconds = last - first
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _changes(entry: dict) -> str:
    """A journal entry's `changes`: the stage table's text (or a list of them)."""
    changes = entry.get("changes")
    if isinstance(changes, list):
        return "; ".join(fmt.cell(c) for c in changes) or "—"
    return fmt.cell(changes or None)


def journal(entries: list[dict]) -> list[str]:
    lines = [
        "## Stage journal",
        "",
        "The staged experiment's stages in run order (UTC). A measured stage names its control and the one declared "
        "layer it changes against it.",
        "",
    ]
    rows = []
    for entry in entries:
        status = entry.get("status")
        measured = entry.get("measured")
        rows.append(
            [
                fmt.cell(entry.get("index")),
                fmt.cell(entry["stage"]),
                f"**{status}**" if status in ("failed", "running") else fmt.cell(status),
                (fmt.cell(entry.get("control")) if entry.get("control") else "— (the control)") if measured else "—",
                fmt.layer_change(entry),
                fmt.cell(entry.get("started")),
                _duration(entry.get("started"), entry.get("finished")),
                _changes(entry),
                fmt.cell(entry.get("note") or None),
            ]
        )
    header = ["#", "stage", "status", "measured against", "layer change", "started", "took", "changes", "note"]
    lines += fmt.table(header, rows)
    return [*lines, ""]

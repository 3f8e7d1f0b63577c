"""How the report prints a value: the small text helpers every section of report.md shares (report.py and the
section modules beside it), one place for each."""

from __future__ import annotations

import datetime

from inferlab.record import view as record_view


def value(item) -> str:
    """A value as a table prints it: a dash for none, yes/no, floats without float noise."""
    if item is None:
        return "—"
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, float):
        # medians of integer counters and sums of floats: no 13.899000000000001 in a table
        return f"{item:.0f}" if abs(item) >= 1000 else f"{item:.4g}"
    return str(item)


def cell(item) -> str:
    """Record text inside a Markdown table cell: a pipe or a line break would end the cell."""
    return value(item).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table of cells already printed (``cell`` where a value can hold a pipe or a line break)."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *["| " + " | ".join(r) + " |" for r in rows],
    ]


def tenths(item) -> str:
    """A figure to one decimal (tok/s and the like), a dash for none."""
    number = record_view.number(item)
    return "—" if number is None else f"{number:.1f}"


def spread_cells(spread: dict) -> list[str]:
    """A figure over repeated runs as table cells: how many, each run's value, the median."""
    values = spread.get("values")
    return [value(spread.get("n")), ", ".join(tenths(v) for v in values) if isinstance(values, list) else "—",
            tenths(spread.get("median"))]


def count(item) -> str:
    number = record_view.number(item)
    return "—" if number is None else f"{number:.0f}"


def utc_seconds(seconds) -> str:
    """Seconds since the epoch as a UTC time (a dash for none)."""
    if record_view.number(seconds) is None:
        return "—"
    return datetime.datetime.fromtimestamp(float(seconds), tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gbps(bps) -> str:
    return "—" if bps is None else f"{bps / 1e9:.2f}"


def join(items: list[str]) -> str:
    """Items in a sentence: `a`, `a and b`, `a, b and c`."""
    items = list(items)
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def cache(batch: dict) -> str:
    """A workload batch's cache label, and whether the cache was flushed first."""
    label = value(batch.get("cache"))
    return f"{label} (flushed)" if batch.get("cache_flushed") else label


def layer_change(entry: dict) -> str:
    """The one layer a journal entry's stage changes."""
    return cell(entry.get("layer_change") or entry.get("layer"))

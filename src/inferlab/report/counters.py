"""report.md's counter deltas: each counter window's TCP and link counters, and the link's events."""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt


def _bytes(value) -> str:
    number = record_view.number(value)
    if number is None:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(number) >= size:
            return f"{number / size:.3g} {unit}"
    return f"{number:.0f} B"


LINK_EVENT_WORDS = {"carrier": "carrier changed", "gone": "interface gone", "back": "interface back",
                    "counters_reset": "interface re-created (counters restarted)",
                    "unreadable_sample": "a sample could not be read"}


def link_event_texts(events: list[dict]) -> list[str]:
    """One phrase per link event of a window (the link_events filter's output): what, and when (UTC)."""
    texts = []
    for event in events:
        kind = str(event.get("kind"))
        text = LINK_EVENT_WORDS.get(kind, kind)
        if kind == "carrier":
            text += f" {fmt.count(event.get('changes'))} time(s)"
        at = str(event.get("at") or "")
        texts.append(f"{text} at {at[11:22]}" if at else text)
    return texts


def _window_notes(window: record_view.Window) -> list[str]:
    data = window.data
    notes = [str(n) for n in data.get("notes") or [] if n]
    if data.get("link_retrained"):
        before, after = data.get("link_before") or {}, data.get("link_after") or {}
        notes.append(
            f"the link changed during the window: {fmt.value(before.get('rx_speed_gbps'))}/"
            f"{fmt.value(before.get('tx_speed_gbps'))} Gb/s -> {fmt.value(after.get('rx_speed_gbps'))}/"
            f"{fmt.value(after.get('tx_speed_gbps'))} Gb/s per lane (rx/tx)"
        )
    events = link_event_texts(data.get("link_events") or [])
    if events:
        notes.append(f"the link's events during the window: {'; '.join(events)}")
    notes += [f"counter reset: {r}" for r in data.get("resets") or []]
    missing = data.get("missing") or []
    if missing:
        notes.append(f"counters missing from a snapshot: {', '.join(str(m) for m in missing)}")
    return notes


def counter_deltas(windows: list[record_view.Window], emulated: bool) -> list[str]:
    lines = [
        "## Counter deltas per window and host",
        "",
        "Growth of each counter between a window's opening and closing snapshots. Receiver errors and bytes are the "
        "direct-link interface's; TCP retransmitted segments are host-wide (every interface). Receiver errors: CRC "
        "(rx_crc_errors), missed (rx_missed_errors), length (rx_length_errors), overrun (rx_over_errors), total "
        "(rx_errors, the kernel's own sum, which also counts other kinds).",
        "",
    ]
    if emulated:
        lines += [
            "Transport label: emulated. A veth never counts receiver CRC, missed, length or overrun errors, so those "
            "columns are 0 by construction here; the emulated damage shows as TCP retransmissions (and qdisc drops).",
            "",
        ]
    rows = []
    for w in windows:
        rows.append(
            [
                fmt.cell(w.name),
                fmt.cell(w.host),
                fmt.cell(w.interface),
                fmt.value(record_view.number(w.data.get("elapsed_s"))),
                *(fmt.count(w.counter(name)) for name in record_view.RX_ERROR_COUNTERS),
                fmt.count(w.counter("rx_errors")),
                fmt.count(w.counter("RetransSegs")),
                _bytes(w.counter("rx_bytes")),
                _bytes(w.counter("tx_bytes")),
                fmt.count(w.samples.get("count")) if w.samples.get("path") else "none",
            ]
        )
    lines += fmt.table(
        [
            "window",
            "host",
            "interface",
            "seconds",
            "rx CRC",
            "rx missed",
            "rx length",
            "rx overrun",
            "rx errors (total)",
            "TCP retrans segs",
            "received",
            "sent",
            "sampler samples",
        ],
        rows,
    )
    notes = [(w, note) for w in windows for note in _window_notes(w)]
    if notes:
        lines += ["", *[f"- {w.name} on {w.host}: {note}" for w, note in notes]]
    return [*lines, ""]

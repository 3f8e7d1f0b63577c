"""A host's timeline from the background sampler: link throughput and TCP retransmissions, windows and batches
shaded."""

from __future__ import annotations

import math
from pathlib import Path

from inferlab.plots.canvas import BATCH_COLOUR, GBPS, SIZES, WINDOW_COLOUR, empty, pyplot, save
from inferlab.record.view import Window, counter_windows, epoch, number, read_samples, serving_batches


def _rates(samples: list[dict], interface: str | None, t0: float) -> tuple[list[float], ...]:
    """(seconds since t0, received Gb/s, sent Gb/s, retransmitted segments/s) between consecutive samples."""
    xs, rx, tx, retrans = [], [], [], []

    def delta(a, b) -> float | None:
        a, b = number(a), number(b)
        return None if a is None or b is None or b < a else b - a

    for before, after in zip(samples, samples[1:], strict=False):
        dt = delta(before.get("t_mono"), after.get("t_mono")) or delta(before.get("t_wall"), after.get("t_wall"))
        if not dt:
            continue
        old = (before.get("interfaces") or {}).get(interface) or {}
        new = (after.get("interfaces") or {}).get(interface) or {}
        received, sent = (
            delta(old.get("rx_bytes"), new.get("rx_bytes")),
            delta(old.get("tx_bytes"), new.get("tx_bytes")),
        )
        resent = delta((before.get("tcp") or {}).get("RetransSegs"), (after.get("tcp") or {}).get("RetransSegs"))
        xs.append(after["t_wall"] - t0)
        rx.append(math.nan if received is None else received * 8 / dt / GBPS)
        tx.append(math.nan if sent is None else sent * 8 / dt / GBPS)
        retrans.append(math.nan if resent is None else resent / dt)
    return xs, rx, tx, retrans


def timeline(record: dict, host: str, series: list[tuple[Window, Path]], target: Path) -> Path:
    """The sampler's series of one host: link Gb/s each way and TCP retransmissions per second, with its counter
    windows (grey) and the workload batches (orange) shaded."""
    windows = counter_windows(record)
    starts = [w.opened for w in windows if w.opened is not None]
    samples_by_window = [(w, read_samples(path)) for w, path in series]
    firsts = [s[0]["t_wall"] for _w, s in samples_by_window if s]
    t0 = min(starts + firsts) if starts + firsts else 0.0
    xs, rx, tx, retrans = [], [], [], []
    for window, samples in samples_by_window:
        part = _rates(samples, window.interface, t0)
        if xs and part[0]:  # a gap between windows: no line across it
            for values in (xs, rx, tx, retrans):
                values.append(math.nan)
        for values, new in zip((xs, rx, tx, retrans), part, strict=True):
            values.extend(new)
    fig, (gbps, resent) = pyplot().subplots(2, 1, figsize=SIZES["timeline"], sharex=True)
    interface = next((w.interface for w, _p in series if w.interface), "the link")
    gbps.set_title(f"{host}: {interface} throughput from the sampler (received and sent, Gb/s)", fontsize=9)
    resent.set_title(f"{host}: TCP retransmitted segments per second (host-wide)", fontsize=9)
    shaded_batches = []
    for batch in serving_batches(record):
        start, wall = epoch(batch.batch.get("started")), number(batch.batch.get("wall_s"))
        if start is not None and wall:
            shaded_batches.append((start - t0, start - t0 + wall))
    for ax in (gbps, resent):
        for window in (w for w in windows if w.host == host and w.opened is not None and w.closed is not None):
            ax.axvspan(window.opened - t0, window.closed - t0, color=WINDOW_COLOUR, alpha=0.5, linewidth=0)
        for start, end in shaded_batches:
            ax.axvspan(start, end, color=BATCH_COLOUR, alpha=0.35, linewidth=0)
    if not any(not math.isnan(x) for x in xs):
        empty(gbps, "fewer than two readable samples in the sampler series")
    else:
        gbps.plot(xs, rx, label="received", linewidth=2, alpha=0.6, drawstyle="steps-pre")
        gbps.plot(xs, tx, label="sent", linewidth=1, linestyle="--", drawstyle="steps-pre")
        resent.plot(xs, retrans, color="tab:red", linewidth=1, drawstyle="steps-pre", label="retransmitted segments/s")
    gbps.set_ylim(bottom=0)
    resent.set_ylim(bottom=0)
    gbps.set_ylabel("Gb/s", fontsize=8)
    resent.set_ylabel("segments/s", fontsize=8)
    resent.set_xlabel("seconds since the first counter window opened", fontsize=8)
    top = gbps.get_ylim()[1]
    for window in (w for w in windows if w.host == host and w.opened is not None):
        gbps.annotate(
            window.name,
            (window.opened - t0, top),
            xytext=(2, -2),
            textcoords="offset points",
            fontsize=7,
            va="top",
            color="0.3",
        )
    handles, labels = gbps.get_legend_handles_labels()
    handles.append(pyplot().Rectangle((0, 0), 1, 1, color=WINDOW_COLOUR, alpha=0.5))
    labels.append("counter window")
    if shaded_batches:
        handles.append(pyplot().Rectangle((0, 0), 1, 1, color=BATCH_COLOUR, alpha=0.35))
        labels.append("workload batch (llm_workload)")
    gbps.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if resent.get_legend_handles_labels()[0]:
        resent.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for ax in (gbps, resent):
        ax.tick_params(labelsize=7)
    return save(fig, target)

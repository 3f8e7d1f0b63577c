"""The serving and counter plots: tok/s per mode and ladder step, the measured trials, the counter-window deltas."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inferlab.plots.canvas import DPI, GIB, SIZES, empty, grouped_bars, pyplot, save
from inferlab.record.view import TRIAL_FIGURES, Batch, ModeTrials, Window, is_emulated, number, stat


def serving_throughput(batches: list[Batch], target: Path) -> Path:
    """tok/s per mode and step: one panel per kind of figure, never mixed; bars are medians over the step's
    requests, whiskers min to max, n above each bar."""
    panels = (
        ("output_tok_s", "Single-stream output tok/s per request\n(TTFT included; concurrency 1)", True),
        ("decode_tok_s", "Decode tok/s per request\n(TTFT and its token excluded; concurrency 1)", True),
        (
            "aggregate_output_tok_s",
            "Aggregate output tok/s per batch\n(all output tokens / batch wall time; concurrency > 1)",
            False,
        ),
    )
    modes = list(dict.fromkeys((b.mode, b.layers) for b in batches))
    fig, axes = pyplot().subplots(1, len(panels), figsize=SIZES["serving_tok_s"])
    for ax, (metric, title, single) in zip(axes, panels, strict=True):
        chosen = [b for b in batches if (b.batch.get("concurrency") == 1) == single]
        groups = list(dict.fromkeys(b.condition for b in chosen))
        ax.set_title(title, fontsize=9)
        if not groups:
            empty(ax, "no batch of this kind in the record")
            continue
        series = []
        for mode, layers in modes:
            cells = []
            for group in groups:
                batch = next((b.batch for b in chosen if b.mode == mode and b.condition == group), None)
                cells.append(_cell(batch, metric) if batch else None)
            series.append((f"{mode} ({layers})", cells))
        grouped_bars(ax, [g.replace(" (", "\n(") for g in groups], series, "tok/s")
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=max(1, len(labels)), fontsize=8, frameon=False)
    fig.suptitle("Serving: medians per mode and step; whiskers: min to max over the step's requests", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(target, dpi=DPI)
    pyplot().close(fig)
    return target


def trial_throughput(trials: dict[str, ModeTrials], target: Path) -> Path:
    """The measured trials: single-stream and aggregate tok/s in separate panels, a bar per mode at the median
    across trials, whiskers min to max, and each trial's value as a dot."""
    panels = [f for f in TRIAL_FIGURES if f[0] in ("single_stream_output_tok_s", "aggregate_output_tok_s")]
    fig, axes = pyplot().subplots(1, len(panels), figsize=SIZES["serving_trials"])
    modes = list(trials.values())
    for ax, (key, title) in zip(axes, panels, strict=True):
        ax.set_title(title.replace(" (", "\n("), fontsize=9)
        figures = [(m, m.figures.get(key) or {}) for m in modes]
        figures = [(m, f) for m, f in figures if number(f.get("median")) is not None]
        if not figures:
            empty(ax, "no trial gave this figure")
            continue
        for x, (m, figure) in enumerate(figures):
            median = figure["median"]
            ax.bar(x, median, color=f"C{modes.index(m)}", alpha=0.75)
            ax.errorbar(x, median, yerr=[[median - figure["min"]], [figure["max"] - median]], color="black",
                        capsize=4, linewidth=1)
            dots = [v for v in figure.get("values") or [] if number(v) is not None]
            ax.scatter([x] * len(dots), dots, color="black", s=10, zorder=3)
            ax.annotate(f"n={figure.get('n')}", (x, figure["max"]), textcoords="offset points", xytext=(0, 6),
                        ha="center", fontsize=7)
        # one layer a line: side by side, three modes' layers overlapped
        ax.set_xticks(range(len(figures)), [f"{m.mode}\n" + m.layers.replace(", ", "\n") for m, _f in figures],
                      fontsize=7)
        ax.set_ylabel("tok/s", fontsize=8)
        top = max(f["max"] for _m, f in figures)
        ax.set_ylim(0, top * 1.18 if top > 0 else 1)
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle("Measured trials: median across trials; whiskers min to max; dots: one per trial", fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=DPI)
    pyplot().close(fig)
    return target


def _cell(batch: dict, metric: str) -> dict | None:
    if metric == "aggregate_output_tok_s":
        value = number(batch.get(metric))
        return None if value is None else {"value": value, "note": f"x{batch.get('concurrency')}"}
    stats = stat(batch, metric)
    if stats is None:
        return None
    return {
        "value": stats["median"],
        "low": number(stats.get("min")),
        "high": number(stats.get("max")),
        "note": f"n={stats.get('n')}",
    }


def counter_deltas(record: dict, windows: list[Window], target: Path) -> Path:
    """Per window and host: TCP retransmitted segments, receiver errors on the link, bytes each way."""
    names = list(dict.fromkeys(w.name for w in windows))
    hosts = sorted({w.host for w in windows})
    by_key = {(w.name, w.host): w for w in windows}
    interfaces = sorted({w.interface for w in windows if w.interface})
    link = "/".join(interfaces) or "the link"

    def cells(host: str, value: Callable[[Window], float | None], scale: float = 1.0) -> list[dict | None]:
        found = []
        for name in names:
            window = by_key.get((name, host))
            v = value(window) if window else None
            found.append(None if v is None else {"value": v / scale})
        return found

    fig, (retrans, rx, moved) = pyplot().subplots(3, 1, figsize=SIZES["counter_deltas"])
    groups = [n.replace("_", " ") for n in names]
    retrans.set_title("TCP retransmitted segments in the window (host-wide)", fontsize=9)
    grouped_bars(retrans, groups, [(h, cells(h, lambda w: w.counter("RetransSegs"))) for h in hosts], "segments")
    retrans.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    rx.set_title(f"Receiver errors on {link} (CRC + missed + length + overrun)", fontsize=9)
    rx_series = [(h, cells(h, Window.rx_errors)) for h in hosts]
    grouped_bars(rx, groups, rx_series, "errors")
    if not any(c and c["value"] for _h, cs in rx_series for c in cs):
        note = "0 in every window" + (
            ": a veth never counts them (emulated driver layer)" if is_emulated(record) else ""
        )
        rx.text(0.5, 0.5, note, transform=rx.transAxes, ha="center", va="center", fontsize=9, color="0.3")
    rx.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    moved.set_title(f"Bytes on {link} in the window (GiB)", fontsize=9)
    series = []
    for host in hosts:
        series.append((f"{host} received", cells(host, lambda w: w.counter("rx_bytes"), GIB)))
        series.append((f"{host} sent", cells(host, lambda w: w.counter("tx_bytes"), GIB)))
    grouped_bars(moved, groups, series, "GiB")
    moved.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("Counter-window deltas per host (closing snapshot minus opening snapshot)", fontsize=10)
    return save(fig, target)

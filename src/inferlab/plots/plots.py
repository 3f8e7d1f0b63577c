"""Plots of a run's record (plots/*.png), drawn with matplotlib's Agg backend so no display is needed.

`plan(record, run_dir)` says which plots the record has data for, and why any other was left out; `render` draws
them. Each plot appears only when its data exists:

- `serving_tok_s.png`: tok/s per served mode (its layers) and ladder step (its cache label), one panel per kind of
  figure (single-stream, decode, aggregate), with the spread (min to max) over the step's requests;
- `serving_trials.png`: the measured trials per served mode (its layers): single-stream and aggregate tok/s, one
  panel each, bars the median across trials, whiskers min to max, one dot per trial;
- `serving_prefix_ttft.png`, `serving_collectives.png`: the cold and warm prefix trials' TTFT, and the bytes of
  NCCL's collectives beside the link's bytes sent and the theory (plots_prefix_collectives);
- `counter_deltas.png`: counter-window deltas per host: TCP retransmissions, receiver errors, bytes each way;
- `timeline_<host>.png`: link throughput and TCP retransmissions over time from the background sampler, with the
  counter windows and the workload batches shaded (the sampler's JSON lines, which the record names by path);
- `link_throughput_<host>.png`, `link_asymmetry_intervals_<host>.png`, `link_rtt_<host>.png`: the link test suite,
  RTT unloaded against loaded.

The readers of the record are record_view's, shared with report.py, so the report's tables and the plots agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inferlab.analysis import sweep
from inferlab.plots import prefix_collectives as plots_prefix_collectives
from inferlab.plots import sweep as plots_sweep
from inferlab.record.view import (
    LINK_FLAP_EVENTS,
    TRIAL_FIGURES,
    Batch,
    ModeTrials,
    Window,
    counter_windows,
    epoch,
    is_emulated,
    number,
    read_samples,
    sampler_file,
    serving_batches,
    serving_trials,
    stat,
)

GBPS = 1e9
GIB = 2**30
DPI = 100
# Figure sizes in inches; a PNG is (width * DPI) x (height * DPI) pixels.
SIZES = {
    "serving_tok_s": (13.0, 4.8),
    "serving_trials": (10.0, 4.8),
    "serving_prefix_ttft": (9.0, 4.6),
    "serving_collectives": (11.0, 4.8),
    "counter_deltas": (11.0, 8.0),
    "timeline": (12.0, 6.0),
    "sweep_concurrency": (12.0, 4.8),
}
WINDOW_COLOUR, BATCH_COLOUR = "0.85", "tab:orange"


# --- the plan -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plot:
    """A plot the record has data for (`skipped` None) or one left out, and why."""

    name: str
    title: str
    skipped: str | None = None
    draw: Callable[[Path], Path] | None = field(default=None, compare=False, repr=False)


def _sampler_plots(record: dict, run_dir: Path | None) -> list[Plot]:
    windows = counter_windows(record)
    plots = []
    for host in sorted({w.host for w in windows}):
        mine = [w for w in windows if w.host == host]
        named = [(w, sampler_file(run_dir, w)) for w in mine]
        with_series = [(w, p) for w, p in named if p is not None]
        title = f"{host}: link throughput and TCP retransmissions over time (sampler), windows shaded"
        name = f"timeline_{host}.png"
        if not with_series:
            plots.append(Plot(name, title, f"the record has no sampler series for {host} (no window recorded samples)"))
            continue
        if run_dir is not None:
            missing = [str(p.relative_to(run_dir)) for _w, p in with_series if not p.is_file()]
            with_series = [(w, p) for w, p in with_series if p.is_file()]
            if not with_series:
                plots.append(
                    Plot(
                        name,
                        title,
                        f"the sampler series the record names are missing from the run directory: {', '.join(missing)}",
                    )
                )
                continue
            plots.append(Plot(name, title, None, lambda target, h=host, s=with_series: timeline(record, h, s, target)))
        else:
            plots.append(Plot(name, title))
    return plots


def _link_plots(record: dict) -> list[Plot]:
    plots = []
    for host, result in sorted((record.get("link_tests") or {}).items()):
        tests = result.get("tests") or {}
        if set(tests) - {"soak"}:
            plots.append(
                Plot(
                    f"link_throughput_{host}.png",
                    f"link test from {host}: throughput per direction",
                    None,
                    lambda target, r=result: throughput_bars(r, target),
                )
            )
        if tests.get("soak"):
            plots.append(
                Plot(
                    f"link_soak_{host}.png",
                    f"link soak from {host}: each probe's throughput both ways, and the link's events",
                    None,
                    lambda target, r=result: soak_timeline(r, target),
                )
            )
        if (tests.get("asymmetry") or {}).get("intervals"):
            plots.append(
                Plot(
                    f"link_asymmetry_intervals_{host}.png",
                    f"link test from {host}: bidirectional test, per interval",
                    None,
                    lambda target, r=result: asymmetry_intervals(r, target),
                )
            )
        if tests.get("probes") or tests.get("loaded_probes"):
            plots.append(
                Plot(
                    f"link_rtt_{host}.png",
                    f"link test from {host}: RTT unloaded against loaded",
                    None,
                    lambda target, r=result: rtt_distributions(r, target),
                )
            )
    return plots


def plan(record: dict, run_dir: Path | None = None) -> list[Plot]:
    """The plots of this record: drawn ones with `draw` (when `run_dir` is given), left-out ones with the reason.
    Without `run_dir`, a sampler series the record names is taken to be there."""
    plots = []
    batches = serving_batches(record)
    if batches:
        plots.append(
            Plot(
                "serving_tok_s.png",
                "tok/s per mode (layers) and ladder step, spread over the requests",
                None,
                lambda target: serving_throughput(batches, target),
            )
        )
    trials = serving_trials(record)
    if trials:
        plots.append(
            Plot(
                "serving_trials.png",
                "tok/s per mode (layers) over the measured trials, spread across trials",
                None,
                lambda target: trial_throughput(trials, target),
            )
        )
    prefix = plots_prefix_collectives.prefix_modes(record)
    if prefix:
        plots.append(
            Plot(
                "serving_prefix_ttft.png",
                "TTFT of the cold and warm prefix trials per mode, spread across trials",
                None,
                lambda target: plots_prefix_collectives.prefix_ttft(prefix, target),
            )
        )
    collectives = plots_prefix_collectives.collective_modes(record)
    if collectives:
        plots.append(
            Plot(
                "serving_collectives.png",
                "bytes of NCCL's collectives, the link's bytes sent and the all-reduce theory per mode and host",
                None,
                lambda target: plots_prefix_collectives.collective_bytes(collectives, target),
            )
        )
    swept = sweep.build(record)
    if swept is not None and swept.figures:
        plots.append(
            Plot(
                "sweep_concurrency.png",
                "aggregate tok/s and TTFT against concurrency, TP2 and the routed replicas, spread over the rounds",
                None,
                lambda target: plots_sweep.concurrency_curves(swept, target),
            )
        )
    windows = counter_windows(record)
    if windows:
        plots.append(
            Plot(
                "counter_deltas.png",
                "counter-window deltas per host",
                None,
                lambda target: counter_deltas(record, windows, target),
            )
        )
        plots += _sampler_plots(record, run_dir)
    plots += _link_plots(record)
    if run_dir is None:
        plots = [Plot(p.name, p.title, p.skipped) for p in plots]
    return plots


def render(run_dir: Path, record: dict) -> list[Path]:
    """Draw every plot the record has data for; returns the files written."""
    out = run_dir / "plots"
    written = []
    for plot in plan(record, run_dir):
        if plot.skipped is None and plot.draw is not None:
            out.mkdir(exist_ok=True)
            written.append(plot.draw(out / plot.name))
    return written


# --- drawing ------------------------------------------------------------------------------------------------------


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed), imported when the first plot is drawn: reading a
    record, planning its plots and writing the report do not need it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, target: Path) -> Path:
    fig.tight_layout()
    fig.savefig(target, dpi=DPI)
    pyplot().close(fig)
    return target


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _grouped_bars(ax, groups: list[str], series: list[tuple[str, list[dict | None]]], ylabel: str) -> None:
    """Bars per group and series; a cell is {value, low, high, note} or None. Whiskers from low to high."""
    width = 0.8 / max(1, len(series))
    top = 0.0
    for i, (label, cells) in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [c["value"] if c else 0.0 for c in cells]
        bars = ax.bar(xs, heights, width=width * 0.95, label=label)
        colour = bars.patches[0].get_facecolor() if bars.patches else None
        for x, cell in zip(xs, cells, strict=True):
            if not cell:
                continue
            low, high = cell.get("low"), cell.get("high")
            if low is not None and high is not None and high > low:
                ax.errorbar(
                    [x],
                    [cell["value"]],
                    yerr=[[cell["value"] - low], [high - cell["value"]]],
                    fmt="none",
                    ecolor="black",
                    capsize=3,
                    linewidth=1,
                )
            peak = max(cell["value"], high or 0.0)
            top = max(top, peak)
            if cell.get("note"):
                ax.annotate(
                    cell["note"],
                    (x, peak),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color=colour,
                )
    ax.set_xticks(range(len(groups)), groups, fontsize=7)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_ylim(0, top * 1.18 if top > 0 else 1)
    ax.tick_params(axis="y", labelsize=7)


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
            _empty(ax, "no batch of this kind in the record")
            continue
        series = []
        for mode, layers in modes:
            cells = []
            for group in groups:
                batch = next((b.batch for b in chosen if b.mode == mode and b.condition == group), None)
                cells.append(_cell(batch, metric) if batch else None)
            series.append((f"{mode} ({layers})", cells))
        _grouped_bars(ax, [g.replace(" (", "\n(") for g in groups], series, "tok/s")
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
            _empty(ax, "no trial gave this figure")
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
    _grouped_bars(retrans, groups, [(h, cells(h, lambda w: w.counter("RetransSegs"))) for h in hosts], "segments")
    retrans.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    rx.set_title(f"Receiver errors on {link} (CRC + missed + length + overrun)", fontsize=9)
    rx_series = [(h, cells(h, Window.rx_errors)) for h in hosts]
    _grouped_bars(rx, groups, rx_series, "errors")
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
    _grouped_bars(moved, groups, series, "GiB")
    moved.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("Counter-window deltas per host (closing snapshot minus opening snapshot)", fontsize=10)
    return save(fig, target)


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
        _empty(gbps, "fewer than two readable samples in the sampler series")
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


def _directions(pair: dict) -> tuple[str, str]:
    return f"{pair['a']} -> {pair['b']}", f"{pair['b']} -> {pair['a']}"


def throughput_bars(result: dict, target: Path) -> Path:
    """Per-direction throughput of each iperf3 test (receiver side, Gb/s)."""
    tests = result["tests"]
    labels, forward, reverse = [], [], []
    if "asymmetry" in tests:
        labels.append("asymmetry\n(bidir)")
        forward.append(tests["asymmetry"]["a_to_b_bps"])
        reverse.append(tests["asymmetry"]["b_to_a_bps"])
    for flows, bps in sorted((tests.get("flow_sweep") or {}).get("a_to_b", {}).items(), key=lambda kv: int(kv[0])):
        labels.append(f"sweep\n{flows} flow(s)")
        forward.append(bps)
        reverse.append(tests["flow_sweep"]["b_to_a"].get(flows))
    if "window" in tests:
        labels.append("window\n(one flow)")
        forward.append(tests["window"]["a_to_b_bps"])
        reverse.append(None)
    if "loaded_probes" in tests and tests["loaded_probes"].get("load"):
        labels.append("load under\nprobes (bidir)")
        forward.append(tests["loaded_probes"]["load"]["a_to_b_bps"])
        reverse.append(tests["loaded_probes"]["load"]["b_to_a_bps"])
    a_to_b, b_to_a = _directions(result["pair"])
    fig, ax = pyplot().subplots(figsize=(max(6, 1.2 * len(labels)), 4))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [(v or 0) / GBPS for v in forward], width=0.4, label=a_to_b)
    ax.bar([x + 0.2 for x in xs], [(v or 0) / GBPS for v in reverse], width=0.4, label=b_to_a)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("Gb/s (receiver side)")
    ax.set_title(f"Direct link {result['pair']['interface']}: throughput per direction ({result['transport_label']})")
    ax.legend()
    return save(fig, target)


def soak_timeline(result: dict, target: Path) -> Path:
    """The soak as a timeline: each probe's rate both ways (a failed probe as a cross at 0), and each host's link
    events as vertical lines, in seconds from the first probe (a probe without a start time at its planned place)."""
    soak = result["tests"]["soak"]
    probes, interval = soak["probes"], soak.get("interval_s") or 0
    # the soak's start, from the first probe that has a start time, less the intervals before it
    first = next((p for p in probes if p.get("started_at") is not None), None)
    origin = first["started_at"] - first["index"] * interval if first else 0.0

    def at(probe: dict) -> float:
        return (probe["started_at"] - origin) if probe.get("started_at") is not None else probe["index"] * interval

    a_to_b, b_to_a = _directions(result["pair"])
    fig, ax = pyplot().subplots(figsize=(8, 3.8))
    done = [p for p in probes if p["ok"]]
    for key, label in (("a_to_b_bps", a_to_b), ("b_to_a_bps", b_to_a)):
        ax.plot([at(p) for p in done], [(p[key] or 0) / GBPS for p in done], marker="o", label=label)
    failed = [p for p in probes if not p["ok"]]
    if failed:
        ax.plot([at(p) for p in failed], [0] * len(failed), "x", color="red", markersize=9,
                label=f"probe failed ({len(failed)})")
    styles = ("--", ":")
    for n, (host, events) in enumerate(sorted((soak.get("events") or {}).items())):
        flaps = [e for e in events if e.get("kind") in LINK_FLAP_EVENTS and e.get("t_wall") is not None]
        for m, event in enumerate(flaps):
            ax.axvline(event["t_wall"] - origin, color="grey", linestyle=styles[n % 2], linewidth=1,
                       label=f"link event on {host}" if m == 0 else None)
    ax.set_xlabel("seconds into the soak")
    ax.set_ylabel("Gb/s (receiver side)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Soak of {result['pair']['interface']}: {soak['text']}", fontsize=7, wrap=True)
    ax.legend(fontsize=7)
    return save(fig, target)


def asymmetry_intervals(result: dict, target: Path) -> Path:
    """Per-interval throughput of the bidirectional test, both directions."""
    intervals = result["tests"]["asymmetry"]["intervals"]
    a_to_b, b_to_a = _directions(result["pair"])
    fig, ax = pyplot().subplots(figsize=(7, 3.5))
    ends = [i["end"] for i in intervals]
    ax.plot(ends, [(i["forward_bps"] or 0) / GBPS for i in intervals], marker="o", label=a_to_b)
    ax.plot(ends, [(i["reverse_bps"] or 0) / GBPS for i in intervals], marker="o", label=b_to_a)
    ax.set_xlabel("seconds into the test")
    ax.set_ylabel("Gb/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Bidirectional test: {result['verdicts']['asymmetry']}", fontsize=8)
    ax.legend()
    return save(fig, target)


def rtt_distributions(result: dict, target: Path) -> Path:
    """Round-trip times of the probes, unloaded against loaded, per direction."""
    a_to_b, b_to_a = _directions(result["pair"])
    series, labels = [], []
    for test, title in (("probes", "unloaded"), ("loaded_probes", "loaded")):
        for key, direction in (("a_to_b", a_to_b), ("b_to_a", b_to_a)):
            probe = (result["tests"].get(test) or {}).get(key)
            if probe:
                series.append(probe["replies_ms"] or [0.0])
                labels.append(f"{title}\n{direction}\nloss {probe['loss_pct']}%")
    fig, ax = pyplot().subplots(figsize=(max(6, 1.6 * len(series)), 4))
    ax.boxplot(series, showfliers=True)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.set_ylabel("RTT (ms, log scale)")
    ax.set_yscale("log")
    from matplotlib import ticker  # after pyplot() chose the backend

    plain = ticker.FuncFormatter(lambda value, position: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="both", labelsize=7)
    ax.set_title("Probe round-trip times over the direct link: unloaded against loaded", fontsize=10)
    return save(fig, target)

"""What every plot shares: matplotlib's pyplot on the Agg backend (imported at the first drawing), the figure sizes,
saving, and the bars with whiskers the serving and counter plots draw."""

from __future__ import annotations

from pathlib import Path

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


def empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def grouped_bars(ax, groups: list[str], series: list[tuple[str, list[dict | None]]], ylabel: str) -> None:
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

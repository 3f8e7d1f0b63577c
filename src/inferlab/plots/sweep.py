"""The concurrency sweep's plot (plots.plan lists it; report_sweep has its table): `sweep_concurrency.png`, the
aggregate output tok/s and the TTFT median against the concurrency level, one line per topology at the median over
its rounds, shaded from the rounds' min to max (TTFT: from the rounds' batch medians' min to max), on a log2 axis.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from inferlab.analysis import sweep
from inferlab.plots import canvas

TOPOLOGY_COLOURS = {sweep.TP2: "tab:blue", sweep.REPLICAS: "tab:orange"}


def concurrency_curves(found: sweep.Sweep, target: Path) -> Path:
    fig, (tok_ax, ttft_ax) = canvas.pyplot().subplots(1, 2, figsize=canvas.SIZES["sweep_concurrency"])
    for side in (found.replicas, found.tp2):
        if side is None or side.sweep.get("not_run"):
            continue
        colour = TOPOLOGY_COLOURS[side.topology]
        for ax, figure in ((tok_ax, "aggregate_tok_s"), (ttft_ax, "ttft_ms_rounds")):
            levels, medians, lows, highs = [], [], [], []
            for level in found.levels:
                values = getattr(found.figures[(side.topology, level)], figure)
                if values:
                    levels.append(level)
                    medians.append(statistics.median(values))
                    lows.append(min(values))
                    highs.append(max(values))
            if levels:
                ax.plot(levels, medians, marker="o", color=colour, label=side.label)
                ax.fill_between(levels, lows, highs, color=colour, alpha=0.2)
    for ax, ylabel in ((tok_ax, "aggregate output tok/s (batch)"), (ttft_ax, "TTFT ms (batch median)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(found.levels), [str(level) for level in found.levels])
        ax.set_xlabel("concurrency", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.legend(fontsize=7)
    tok_ax.set_title("Aggregate tok/s: median over the rounds, shaded min to max", fontsize=9)
    ttft_ax.set_title("TTFT: median of the rounds' batch medians, shaded min to max", fontsize=9)
    return canvas.save(fig, target)

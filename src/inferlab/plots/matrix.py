"""The compatibility matrix's plot: the candidate driver's difference against stock per combination."""

from __future__ import annotations

from pathlib import Path

from inferlab.analysis import matrix
from inferlab.plots import canvas


def plot(table: matrix.Matrix, target: Path) -> Path:
    """The candidate's difference against stock per combination, with its interval where there is one."""
    plt = canvas.pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.6 + 0.5 * max(1, len(table.rows))))
    measured = [r for r in table.rows if r.candidate and r.candidate.difference is not None]
    for y, row in enumerate(measured):
        c = row.candidate
        if c.interval:
            ax.plot(c.interval, [y, y], color="0.5", linewidth=2)
        ax.plot([c.difference], [y], "o", color="C0")
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.invert_yaxis()  # C1, the combination with the most runs, on top
    ax.set_yticks(range(len(measured)), [f"{r.label} ({r.candidate.runs} run{'s' * (r.candidate.runs > 1)})"
                                         for r in measured])
    ax.set_xlabel("candidate - stock, aggregate output tok/s (95 % interval where one reaches it)")
    if not measured:
        ax.set_title("no combination has both drivers measured", fontsize=9)
    return canvas.save(fig, target)

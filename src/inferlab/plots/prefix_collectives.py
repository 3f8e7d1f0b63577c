"""Two serving plots that report_prefix and report_collectives have tables for (plots.plan lists them):

- `serving_prefix_ttft.png`: TTFT of the cold and warm prefix trials per served mode, a bar per label at the median
  of its confirmed trials, whiskers min to max, one dot per trial;
- `serving_collectives.png`: per mode and ring host, the bytes NCCL's collectives moved in the ladder's window (from
  their COLL lines or Inspector records) beside the bytes the host sent on the link in that window (its counters)
  and the TP all-reduces' theory per rank: three bars a host, observed twice and theory once.
"""

from __future__ import annotations

from pathlib import Path

from inferlab.plots import canvas
from inferlab.record.view import mode_layers, number

LABEL_COLOURS = {"cold": "tab:blue", "warm": "tab:orange"}


def prefix_modes(record: dict) -> dict[str, dict]:
    """Every served mode with prefix trials, in the record's order."""
    return {mode: result for mode, result in (record.get("serving") or {}).items()
            if isinstance(result, dict) and isinstance(result.get("prefix_trials"), dict)}


def collective_modes(record: dict) -> dict[str, dict]:
    """Every served mode whose collectives were traced, in the record's order."""
    return {mode: result for mode, result in (record.get("serving") or {}).items()
            if isinstance(result, dict) and isinstance(result.get("collectives"), dict)}


def prefix_ttft(modes: dict[str, dict], target: Path) -> Path:
    fig, ax = canvas.pyplot().subplots(figsize=canvas.SIZES["serving_prefix_ttft"])
    ticks = []
    for x, (mode, result) in enumerate(modes.items()):
        figures = result["prefix_trials"].get("figures") or {}
        ticks.append(f"{mode}\n({mode_layers(result)})")
        for offset, label in ((-0.2, "cold"), (0.2, "warm")):
            figure = (figures.get(label) or {}).get("ttft_ms") or {}
            median = number(figure.get("median"))
            if median is None:
                continue
            ax.bar(x + offset, median, width=0.38, color=LABEL_COLOURS[label], alpha=0.75,
                   label=label if x == 0 else None)
            ax.errorbar(x + offset, median, yerr=[[median - figure["min"]], [figure["max"] - median]],
                        color="black", capsize=4, linewidth=1)
            dots = [v for v in figure.get("values") or [] if number(v) is not None]
            ax.scatter([x + offset] * len(dots), dots, color="black", s=10, zorder=3)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=7)
    ax.set_ylabel("TTFT ms", fontsize=8)
    ax.legend(fontsize=8)
    ax.set_title("Cold against warm prefix: median of the confirmed trials; whiskers min to max; dots: one per trial",
                 fontsize=9)
    return canvas.save(fig, target)


def collective_bytes(modes: dict[str, dict], target: Path) -> Path:
    fig, ax = canvas.pyplot().subplots(figsize=canvas.SIZES["serving_collectives"])
    series = (("NCCL collectives (observed)", "tab:green"), ("link bytes sent (observed)", "tab:blue"),
              ("all-reduce theory per rank", "0.6"))
    ticks, x = [], 0
    for mode, result in modes.items():
        collectives = result["collectives"]
        overhead = collectives.get("wire_overhead") or {}
        theory = (overhead.get("theory") or {}).get("theory_bytes_sent_per_rank")
        for host, found in sorted((collectives.get("hosts") or {}).items()):
            moved = sum(k.get("bytes") or 0 for k in ((found or {}).get("collectives") or {}).values())
            sent = ((overhead.get("hosts") or {}).get(host) or {}).get("observed_bytes_sent")
            for offset, value, (name, colour) in zip((-0.27, 0, 0.27), (moved if found else None, sent, theory),
                                                     series, strict=True):
                if number(value) is not None:
                    ax.bar(x + offset, value / 2**20, width=0.26, color=colour, label=name if x == 0 else None)
            ticks.append(f"{mode}\n{host}")
            x += 1
    ax.set_xticks(range(len(ticks)), ticks, fontsize=7)
    ax.set_ylabel("MiB in the ladder's window", fontsize=8)
    ax.legend(fontsize=8)
    ax.set_title("NCCL's collectives, the link's bytes sent and the TP all-reduce theory, per mode and host",
                 fontsize=9)
    return canvas.save(fig, target)

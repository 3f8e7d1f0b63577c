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
This module plans; the drawing is in canvas (what every plot shares), serving, timeline, link, prefix_collectives
and sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inferlab.analysis import sweep
from inferlab.plots import prefix_collectives as plots_prefix_collectives
from inferlab.plots import sweep as plots_sweep
from inferlab.plots.link import asymmetry_intervals, rtt_distributions, soak_timeline, throughput_bars
from inferlab.plots.serving import counter_deltas, serving_throughput, trial_throughput
from inferlab.plots.timeline import timeline
from inferlab.record.view import counter_windows, sampler_file, serving_batches, serving_trials

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

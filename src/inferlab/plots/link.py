"""The link test suite's plots: throughput per direction, the soak, the bidirectional intervals and the RTTs."""

from __future__ import annotations

from pathlib import Path

from inferlab.plots.canvas import GBPS, pyplot, save
from inferlab.record.view import LINK_FLAP_EVENTS


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

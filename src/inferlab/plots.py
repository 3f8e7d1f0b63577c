"""Plots of a run's record (plots/*.png), drawn with matplotlib's Agg backend so no display is needed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

GBPS = 1e9


def _save(fig, target: Path) -> Path:
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target


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
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels)), 4))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [(v or 0) / GBPS for v in forward], width=0.4, label=a_to_b)
    ax.bar([x + 0.2 for x in xs], [(v or 0) / GBPS for v in reverse], width=0.4, label=b_to_a)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("Gb/s (receiver side)")
    ax.set_title(f"Direct link {result['pair']['interface']}: throughput per direction ({result['transport_label']})")
    ax.legend()
    return _save(fig, target)


def asymmetry_intervals(result: dict, target: Path) -> Path:
    """Per-interval throughput of the bidirectional test, both directions."""
    intervals = result["tests"]["asymmetry"]["intervals"]
    a_to_b, b_to_a = _directions(result["pair"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ends = [i["end"] for i in intervals]
    ax.plot(ends, [(i["forward_bps"] or 0) / GBPS for i in intervals], marker="o", label=a_to_b)
    ax.plot(ends, [(i["reverse_bps"] or 0) / GBPS for i in intervals], marker="o", label=b_to_a)
    ax.set_xlabel("seconds into the test")
    ax.set_ylabel("Gb/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Bidirectional test: {result['verdicts']['asymmetry']}", fontsize=8)
    ax.legend()
    return _save(fig, target)


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
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(series)), 4))
    ax.boxplot(series, showfliers=True)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.set_ylabel("RTT (ms)")
    ax.set_yscale("log")
    ax.set_title("Probe round-trip times over the direct link")
    return _save(fig, target)


def render(run_dir: Path, record: dict) -> list[Path]:
    """Draw every plot the record has data for; returns the files written."""
    out = run_dir / "plots"
    written = []
    for host, result in sorted(record.get("link_tests", {}).items()):
        out.mkdir(exist_ok=True)
        tests = result["tests"]
        written.append(throughput_bars(result, out / f"link_throughput_{host}.png"))
        if tests.get("asymmetry", {}).get("intervals"):
            written.append(asymmetry_intervals(result, out / f"link_asymmetry_intervals_{host}.png"))
        if tests.get("probes") or tests.get("loaded_probes"):
            written.append(rtt_distributions(result, out / f"link_rtt_{host}.png"))
    return written

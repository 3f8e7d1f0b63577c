"""Benchmark `inferlab report` (report.md and plots/*.png) on a large record, for the README (aim: <= 5 s).

Not a test: it prints figures (median, min and max of N runs) and the machine they were taken on. The record is
synthetic, grown from the real lab record tests/unit/fixtures/report/serve.json: its two served modes, and
`--windows` counter windows (default 10) on each of its two hosts, each window with a sampler series, together
`--samples` samples per host (default 1,000, spread evenly over the windows), written in the sampler's format at
the paths the record names. Each run renders what `inferlab report RUN_DIR` renders (api.render_outputs: the plots,
then report.md) into a fresh run directory.

    .venv/bin/python tests/bench/bench_report.py [--runs 5] [--windows 10] [--samples 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from inferlab import api  # noqa: E402
from inferlab.record import view as record_view  # noqa: E402

FIXTURE = REPO / "tests" / "unit" / "fixtures" / "report" / "serve.json"
AIM_S = 5.0
WINDOW_S = 120  # seconds per synthetic window
GAP_S = 30  # between windows


def machine() -> str:
    cpus = os.cpu_count()
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.node()}: {model}, {cpus} CPUs, {mem_gib:.0f} GiB, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_record(windows: int, samples_per_host: int) -> tuple[dict, dict[str, list[str]]]:
    """The record, and per sampler file (relative path) its JSON lines."""
    base = json.loads(FIXTURE.read_text())
    record = copy.deepcopy(base)
    template = base["stages"]["window_serve_nextn"]
    hosts = sorted(template)
    start = record_view.epoch(template[hosts[0]]["opened_at"])
    per_window = max(2, samples_per_host // windows)
    record["stages"] = {}
    files: dict[str, list[str]] = {}
    for w in range(windows):
        name = f"trial_{w + 1}"
        opened = start + w * (WINDOW_S + GAP_S)
        interval = WINDOW_S / per_window
        for h, host in enumerate(hosts):
            window = copy.deepcopy(template[host])
            path = f"windows/{name}/samples/{host}.jsonl"
            window.update(window=name, opened_at=iso(opened), closed_at=iso(opened + WINDOW_S), elapsed_s=WINDOW_S)
            window["samples"] = {"path": path, "count": per_window, "interval_s": interval, "log": None,
                                 "stop_reason": "SIGTERM"}
            window["tcp"]["RetransSegs"] = 100 * (w + 1) * (h + 1)
            record["stages"].setdefault(f"window_{name}", {})[host] = window
            lines, moved, resent = [], 0, 0
            for i in range(per_window):
                moved += int(1.5e9 / 8 * interval * (1 + 0.5 * math.sin(i / 7)))
                resent += (i * 7919 + w) % 13
                lines.append(json.dumps({
                    "t_wall": round(opened + i * interval, 6), "t_mono": round(5000 + opened - start + i * interval, 6),
                    "interfaces": {"thunderbolt0": {"rx_bytes": moved, "tx_bytes": moved, "rx_crc_errors": 0},
                                   "mgmt0": {"rx_bytes": i * 1000, "tx_bytes": i * 1000}},
                    "tcp": {"RetransSegs": resent, "OutSegs": i * 1000, "InSegs": i * 900, "InErrs": 0},
                    "tcp_ext": {"TCPLostRetransmit": 0, "TCPTimeouts": 0},
                }, separators=(",", ":")))
            files[path] = lines
    return record, files


def one_run(record: dict, files: dict[str, list[str]]) -> tuple[float, int, int]:
    """Seconds to render the plots and report.md into a fresh run directory; plots written; report bytes."""
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        run_dir = Path(tmp)
        for path, lines in files.items():
            target = run_dir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(lines) + "\n")
        began = time.perf_counter()
        report = api.render_outputs(run_dir, record)
        elapsed = time.perf_counter() - began
        return elapsed, len(list((run_dir / "plots").glob("*.png"))), report.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--samples", type=int, default=1000, help="sampler samples per host, over all windows")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    record, files = build_record(args.windows, args.samples)
    samples = sum(len(lines) for lines in files.values())
    one_run(record, files)  # warm: imports, font cache
    runs = [one_run(record, files) for _run in range(args.runs)]
    times = [seconds for seconds, _plots, _size in runs]
    result = {
        "machine": machine(),
        "windows": args.windows,
        "hosts": len({p.split("/")[-1] for p in files}),
        "samples_total": samples,
        "plots": runs[0][1],
        "report_bytes": runs[0][2],
        "runs": args.runs,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "aim_s": AIM_S,
    }
    print(f"machine: {result['machine']}")
    print(f"record: {args.windows} counter windows x {result['hosts']} hosts, {samples} sampler samples "
          f"({samples // max(1, result['hosts'])} per host), 2 served modes")
    print(f"render (plots/*.png then report.md): median {result['median_s']:.2f} s, min {result['min_s']:.2f} s, "
          f"max {result['max_s']:.2f} s over {args.runs} runs; {result['plots']} plots, report "
          f"{result['report_bytes']} bytes; aim <= {AIM_S:.0f} s: {'met' if result['median_s'] <= AIM_S else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["median_s"] <= AIM_S else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the embedded lab as a user runs it: `inferlab lab up` from nothing, `inferlab run verify`, `lab down`.

Not a test: it prints figures (median, min, max of N runs, wall-clock seconds) for the README's Performance section,
and the machine they were taken on. It leaves the demo lab as it found it (up or down).

    .venv/bin/python tests/bench/bench_lab.py [--runs 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INFERLAB = [sys.executable, "-m", "inferlab.cli"]


def timed(argv: list[str]) -> float:
    start = time.monotonic()
    subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def lab_is_up() -> bool:
    out = subprocess.run([*INFERLAB, "lab", "status", "--json"], cwd=REPO, check=True, capture_output=True, text=True)
    return json.loads(out.stdout).get("state") == "up"


def machine() -> str:
    cpus = os.cpu_count()
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {cpus} CPUs, {mem_gib:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def summary(samples: list[float]) -> dict:
    return {"median_s": round(statistics.median(samples), 2), "min_s": round(min(samples), 2),
            "max_s": round(max(samples), 2), "runs": len(samples)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    was_up = lab_is_up()
    samples: dict[str, list[float]] = {"lab up from nothing": [], "inferlab run verify (both hosts)": [],
                                       "lab down": []}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        if was_up:
            timed([*INFERLAB, "lab", "down"])
        for n in range(args.runs):
            samples["lab up from nothing"].append(timed([*INFERLAB, "lab", "up"]))
            samples["inferlab run verify (both hosts)"].append(
                timed([*INFERLAB, "run", "verify", "--run-dir", f"{runs}/verify-{n}"]))
            samples["lab down"].append(timed([*INFERLAB, "lab", "down"]))
        if was_up:
            timed([*INFERLAB, "lab", "up"])

    figures = {"machine": machine(), "results": {name: summary(s) for name, s in samples.items()}}
    print(f"machine: {figures['machine']}")
    print("| what | median | min | max | runs |")
    print("| --- | --- | --- | --- | --- |")
    for name, result in figures["results"].items():
        print(f"| {name} | {result['median_s']} s | {result['min_s']} s | {result['max_s']} s | {result['runs']} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

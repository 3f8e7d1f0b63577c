"""A lab verdict found with repeated whole runs, then re-verified from a fresh start, and the A/A pair the same runs
give, for docs/STATISTICS.md.

Not a test: it runs the staged experiment's short plan (the candidate driver against the stock one, each measured
once a run) RUNS times on the demo lab, compares the candidate mode with the stock mode over those runs
(`inferlab compare R1:nextn,...  R1:nextn_candidate,...`), re-verifies that verdict with `inferlab reverify` (RUNS
new runs, each starting from the restore that ended the one before), and compares the stock mode of the first runs
with the stock mode of the re-runs: an A/A pair, whose verdicts must be `no verdict`. It prints what each step said,
with the runs named and the machine, and writes it as JSON with --json.

    .venv/bin/python tests/bench/bench_reverify.py [--runs 5] [--json FILE] [--runs-root DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from inferlab import paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lab import INFERLAB, lab_is_up, machine, timed  # noqa: E402

# A measured stage needs its control in the plan, and the TP2 stages need production paused behind a proven
# fallback: the shortest plan that measures the candidate against the stock driver.
STAGES = ["verify", "known_good", "control", "prober", "fallback", "pause", "tp2_baseline", "tp2_nextn",
          "candidate_build", "tp2_nextn_candidate"]
# One measured trial a mode and run: whole runs are the samples (compare takes each run's median).
EXTRA_VARS = {"experiment_stages": STAGES, "inferlab_trials": 1, "inferlab_prefix_trials": 0,
              "experiment_link_ab_opt_out": "the benchmark measures re-verification of the serving verdict"}


def inferlab_json(argv: list[str]) -> dict:
    done = subprocess.run([*INFERLAB, *argv, "--json"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"inferlab {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def verdicts(comparison: dict) -> dict[str, str]:
    return {v["claim"]: f"{v['verdict']}: {v['reason']}" for v in comparison["verdicts"]}


def main() -> int:
    settings = paths.Settings.resolve()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write what each step said here")
    parser.add_argument("--runs-root", type=Path, default=settings.runs, help="where the runs go (default runs/)")
    args = parser.parse_args()
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    inventory = str(settings.repo_root / "inventory" / "lab" / "hosts.yml")
    originals, walls = [], []
    for n in range(1, args.runs + 1):
        run_dir = args.runs_root / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-reverify-bench"
        started = time.monotonic()
        code = subprocess.run([*INFERLAB, "run", "experiment", "-i", inventory, "--run-dir", str(run_dir),
                               "-e", json.dumps(EXTRA_VARS)], check=False).returncode
        walls.append(round(time.monotonic() - started, 1))
        print(f"run {n}: {run_dir} exit {code} in {walls[-1]} s", flush=True)
        if code != 0:
            raise SystemExit(f"{run_dir} failed with exit {code}")
        originals.append(str(run_dir))
    stock = ",".join(f"{r}:nextn" for r in originals)
    candidate = ",".join(f"{r}:nextn_candidate" for r in originals)
    found = inferlab_json(["compare", stock, candidate])
    again = inferlab_json(["reverify", stock, candidate, "-i", inventory])
    reruns = [spec.rpartition(":")[0] for spec in again["b_again"]]
    aa = inferlab_json(["compare", stock, ",".join(f"{r}:nextn" for r in reruns)])
    result = {
        "machine": machine(), "plan": EXTRA_VARS, "runs": originals, "reruns": reruns, "run_wall_s": walls,
        "candidate_against_stock": verdicts(found),
        "reverify": [{k: o[k] for k in ("claim", "original", "again", "held", "reason")} for o in again["outcomes"]],
        "aa_stock_mode": {"aa_pair": aa.get("aa_pair"), "verdicts": verdicts(aa)},
        "rows": [{k: r[k] for k in ("section", "name", "a", "b", "difference")}
                 for r in found["rows"] if r["section"].endswith("measured trials")],
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

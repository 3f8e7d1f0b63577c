"""Benchmark the embedded lab as a user runs it, for docs/PERFORMANCE.md.

Not a test: it prints figures (median, min, max of N runs, wall-clock seconds) and the machine they were taken on.
- `lab` (default): `inferlab lab up` from nothing, `inferlab run verify`, `lab down`; it leaves the demo lab as it
  found it (up or down);
- `link`: the full link suite with default durations, `inferlab run link_test` (brings the lab up if needed);
- `sampler`: the counter sampler's CPU cost at 1 Hz (utime + stime from /proc over 60 s, on the controller's own
  interfaces, the same code the hosts run);
- `serve`: lab TP2 (baseline mode of playbooks/serve.yml) with lab-a's direct link `clean` and then `lossy`, the two
  conditions interleaved run by run; figures from each run's record: the single-stream decode rate of the ladder's
  first request (cold cache, TTFT excluded), the aggregate rate of its 6 concurrent requests, and the TCP segments
  retransmitted on both hosts during the ladder. Ends with playbooks/restore.yml (no profile left);
- `fallback`: playbooks/fallback.yml with the gateway's two instances drained behind nginx, and with one instance
  and no front (its restart is an outage), interleaved run by run; figures from each run's record: the rolling
  restart's seconds, the prober's failed probes and worst gap, the fallback's latency with the primaries paused;
- `experiment`: the full staged experiment (`inferlab run experiment`, the restore included): its wall time, the
  restore stage's, and the share of the wall time spent in workload windows (the ladders and the control) against
  orchestration;
- `interrupt`: every stage boundary of the default plan, the middle of the TP2+NEXTN ladder and the dead man's
  switch, each killed and restored by tests/interrupt/interrupt.py: points tried and restored with nothing left,
  and the restore's wall time from the kill to a verified state;
- `goals`: the speed goals' figures (docs/PERFORMANCE.md), each run `--runs` times: the staged experiment (the
  `experiment` suite's figures), the link suite at default durations (its wall
  time and measurement share), `inferlab run verify`, and the kill in the middle of the TP2 baseline ladder to a
  verified restore. The fresh-clone `make test` is not here: it is the table `make test` prints.

    .venv/bin/python tests/bench/bench_lab.py [lab|link|sampler|serve|fallback|experiment|interrupt|goals]
        [--runs 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from inferlab import cli, paths
from inferlab.lab import status as lab_status

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


def bench_lab(runs_wanted: int) -> dict[str, list[float]]:
    was_up = lab_is_up()
    samples: dict[str, list[float]] = {"lab up from nothing": [], "inferlab run verify (both hosts)": [],
                                       "lab down": []}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        if was_up:
            timed([*INFERLAB, "lab", "down"])
        for n in range(runs_wanted):
            samples["lab up from nothing"].append(timed([*INFERLAB, "lab", "up"]))
            samples["inferlab run verify (both hosts)"].append(
                timed([*INFERLAB, "run", "verify", "--run-dir", f"{runs}/verify-{n}"]))
            samples["lab down"].append(timed([*INFERLAB, "lab", "down"]))
        if was_up:
            timed([*INFERLAB, "lab", "up"])
    return samples


def bench_link(runs_wanted: int) -> dict[str, list[float]]:
    """The link suite at its default durations: the wall time, and the share of it inside the tests' counter
    windows (their measurement)."""
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    samples: dict[str, list[float]] = {"inferlab run link_test (default durations)": [],
                                       "link suite: share inside counter windows (%)": []}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        for n in range(runs_wanted):
            run_dir = Path(runs) / f"link-{n}"
            wall = timed([*INFERLAB, "run", "link_test", "--run-dir", str(run_dir)])
            samples["inferlab run link_test (default durations)"].append(wall)
            samples["link suite: share inside counter windows (%)"].append(
                round(100 * counter_window_seconds(run_dir) / wall, 1))
    return samples


def bench_verify(runs_wanted: int) -> dict[str, list[float]]:
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    samples: dict[str, list[float]] = {"inferlab run verify (both hosts)": []}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        for n in range(runs_wanted):
            samples["inferlab run verify (both hosts)"].append(
                timed([*INFERLAB, "run", "verify", "--run-dir", f"{runs}/verify-{n}"]))
    return samples


def serve_figures(run_dir: Path) -> dict[str, float]:
    data = json.loads((run_dir / "record.json").read_text())
    steps = {s["step"]: s["batch"] for s in data["serving"]["baseline"]["acceptance"]["steps"]}
    window = data["serving"]["baseline"]["window"]
    retrans = 0
    for host_window in (run_dir / "fragments" / f"window_{window}").glob("*.json"):
        retrans += json.loads(host_window.read_text())["tcp"].get("RetransSegs", 0)
    return {"single-stream decode tok/s (cold, excl. TTFT)": steps["first_response"]["decode_tok_s"]["median"],
            "aggregate tok/s, 6 concurrent": steps["concurrent"]["aggregate_output_tok_s"],
            "TCP segments retransmitted in the ladder (both hosts)": retrans}


def bench_serve(runs_wanted: int) -> dict[str, list[float]]:
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    inventory = paths.Settings.resolve().repo_root / "inventory" / "lab" / "hosts.yml"
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        try:
            for n in range(runs_wanted):
                for profile in ("clean", "lossy"):
                    timed([*INFERLAB, "run", "link_profile", "-e", "link_profile_host=lab-a", "-e",
                           f"link_profile_name={profile}", "--run-dir", f"{runs}/profile-{profile}-{n}"])
                    run_dir = Path(runs) / f"serve-{profile}-{n}"
                    code = cli.run_and_record(REPO / "playbooks" / "serve.yml", inventory, run_dir,
                                              {"sglang_tp_modes": ["baseline"]})
                    if code != 0:
                        raise SystemExit(f"serve run {run_dir} failed with exit {code}")
                    for name, value in serve_figures(run_dir).items():
                        samples.setdefault(f"{name}, {profile}", []).append(value)
        finally:
            timed([*INFERLAB, "run", "restore", "--run-dir", f"{runs}/restore"])
    return samples


def fallback_figures(run_dir: Path, label: str) -> dict[str, float]:
    data = json.loads((run_dir / "record.json").read_text())
    fallback, prober = data["fallback"], data["continuity"][label]
    return {"add: rolling restart of the gateway": fallback["add"]["seconds"],
            "public-route probes failed (prober, 0.5 s interval)": prober["failed"],
            "public-route probes sent": prober["total"],
            "worst gap between answers": prober["worst_gap_s"],
            "fallback latency with the primaries paused (median)": fallback["prove"]["latency_s"]["median"]}


def bench_fallback(runs_wanted: int) -> dict[str, list[float]]:
    """playbooks/fallback.yml on the lab: two instances drained behind nginx, and one instance without a front (its
    restart is the outage the drain avoids), interleaved run by run."""
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    inventory = paths.Settings.resolve().repo_root / "inventory" / "lab" / "hosts.yml"
    first = lab_status.read_lab_json(lab_status.resolve_lab(inventory)[1])["gateway"]["instances"][0]
    single = {"inferlab_public_url": first["url"], "inferlab_gateway_front": {}, "continuity_budget": 1000,
              "continuity_label": "single-instance",
              "inferlab_gateway_instances": [{k: first[k] for k in
                                              ("name", "manager", "url", "pidfile", "log", "start_argv", "match")}]}
    conditions = {"two instances behind nginx, drained": ({}, "prober"),
                  "one instance, no front": (single, "single-instance")}
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        for n in range(runs_wanted):
            for condition, (extravars, label) in conditions.items():
                run_dir = Path(runs) / f"fallback-{label}-{n}"
                start = time.monotonic()
                code = cli.run_and_record(REPO / "playbooks" / "fallback.yml", inventory, run_dir, extravars)
                elapsed = time.monotonic() - start
                if code != 0:
                    raise SystemExit(f"fallback run {run_dir} failed with exit {code}")
                figures = {"whole run (inferlab run fallback)": elapsed, **fallback_figures(run_dir, label)}
                for name, value in figures.items():
                    samples.setdefault(f"{name}, {condition}", []).append(value)
    return samples


def iso_seconds(stamp: str) -> float:
    """Seconds since the epoch of a UTC ISO stamp, with or without fractions of a second."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def experiment_figures(run_dir: Path, wall_s: float) -> dict[str, float]:
    """The wall time, the restore stage's, and the share of the workload windows: the ladders' measured time
    (each mode's started_at..finished_at) plus the control's stage, against everything else (orchestration)."""
    data = json.loads((run_dir / "record.json").read_text())
    journal = data["journal"]
    windows = sum(iso_seconds(m["finished_at"]) - iso_seconds(m["started_at"]) for m in data["serving"].values())
    windows += iso_seconds(journal["control"]["finished"]) - iso_seconds(journal["control"]["started"])
    # the link test's counter windows (one per test; the first ring host's times stand for the pair)
    link_windows = sum(
        iso_seconds(first["closed_at"]) - iso_seconds(first["opened_at"])
        for name, by_host in data["stages"].items() if name.startswith("window_") and "serving" not in name
        for first in [next(iter(by_host.values()))])
    return {"full lab experiment, wall": wall_s,
            "link_test stage": iso_seconds(journal["link_test"]["finished"])
            - iso_seconds(journal["link_test"]["started"]),
            "restore stage (undo, verify, router)": iso_seconds(journal["restore"]["finished"])
            - iso_seconds(journal["restore"]["started"]),
            "share in workload windows (%)": round(100 * windows / wall_s, 1),
            "share in the link test's measurement windows (%)": round(100 * link_windows / wall_s, 1),
            "share inside counter windows (%)": round(100 * counter_window_seconds(run_dir) / wall_s, 1),
            "Ansible tasks (job events)": ansible_tasks(run_dir)}


def counter_window_seconds(run_dir: Path) -> float:
    """Seconds of the run inside at least one counter window, each window from its first opening to its last
    closing over the hosts (windows/<window>/open|close/<host>.json), overlapping windows counted once."""
    spans = []
    for window in (run_dir / "windows").glob("*/"):
        opened = [json.loads(p.read_text())["opened_at"] for p in (window / "open").glob("*.json")]
        closed = [json.loads(p.read_text())["closed_at"] for p in (window / "close").glob("*.json")]
        if opened and closed:
            spans.append((min(map(iso_seconds, opened)), max(map(iso_seconds, closed))))
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def ansible_tasks(run_dir: Path) -> int:
    """Tasks started, as ansible-runner's job events count them (playbook_on_task_start), over every playbook the
    run ran (the experiment, and a restore after a cancel)."""
    return sum(1 for path in run_dir.glob("artifacts/*/job_events/*.json")
               if json.loads(path.read_text()).get("event") == "playbook_on_task_start")


def bench_experiment(runs_wanted: int) -> dict[str, list[float]]:
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    inventory = paths.Settings.resolve().repo_root / "inventory" / "lab" / "hosts.yml"
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        for n in range(runs_wanted):
            run_dir = Path(runs) / f"experiment-{n}"
            started = time.monotonic()
            code = cli.run_and_record(REPO / "playbooks" / "experiment.yml", inventory, run_dir, {})
            wall = round(time.monotonic() - started, 1)
            if code != 0:
                raise SystemExit(f"experiment run {run_dir} failed with exit {code}")
            for name, value in experiment_figures(run_dir, wall).items():
                samples.setdefault(name, []).append(value)
    return samples


def bench_interrupt(runs_wanted: int) -> dict[str, list[float]]:
    """Every stage boundary of the default plan (and the dead man's switch once), each killed and restored by
    tests/interrupt/interrupt.py; the figure is the restore's wall time from the kill to the verified end."""
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    inventory = paths.Settings.resolve().repo_root / "inventory" / "lab" / "hosts.yml"
    stages = yaml.safe_load((REPO / "roles" / "experiment" / "defaults" / "main.yml").read_text())
    plan = stages["experiment_stages"]
    # The boundaries up to the link test with the whole plan; every later point with the plan less the link test
    # (which changes nothing lasting), so that each of them does not first sit through it again.
    sweeps = [(plan, plan[:plan.index("link_test") + 1]),
              ([s for s in plan if s != "link_test"],
               [*plan[plan.index("link_test") + 1:], "tp2_nextn+4", "deadman:tp2_baseline+2"])]
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        for n in range(runs_wanted):
            results = []
            for m, (sweep_plan, points) in enumerate(sweeps):
                out = Path(runs) / f"interrupt-{n}-{m}.json"
                subprocess.run([sys.executable, str(REPO / "tests" / "interrupt" / "interrupt.py"), "--inventory",
                                str(inventory), "--out", str(out), "--runs-root", f"{runs}/{n}-{m}",
                                "--stages", ",".join(sweep_plan), *points], check=False)
                results += json.loads(out.read_text())
            for r in results:
                print(f"bench: interrupt {r['point']}: {'ok' if r['ok'] else 'FAILED'} restore_s={r.get('restore_s')}",
                      file=sys.stderr)
            samples.setdefault("interruption points tried", []).append(len(results))
            samples.setdefault("interruption points restored, nothing left", []).append(
                sum(1 for r in results if r["ok"]))
            samples.setdefault("restore from a killed run to verified", []).extend(
                r["restore_s"] for r in results if r.get("restore_s") is not None and not r["point"].startswith("dead"))
    return samples


def bench_kill_to_restore(runs_wanted: int) -> dict[str, list[float]]:
    """A run killed 2 s into the TP2 baseline ladder (ranks up, originals paused, fallback added: every kind of
    change in place), then restored: the seconds from the kill to the verified end, as tests/interrupt measures it."""
    if not lab_is_up():
        timed([*INFERLAB, "lab", "up"])
    inventory = paths.Settings.resolve().repo_root / "inventory" / "lab" / "hosts.yml"
    plan = ["verify", "known_good", "control", "prober", "fallback", "pause", "tp2_baseline"]
    samples: dict[str, list[float]] = {"kill in the TP2 ladder -> verified restore": []}
    with tempfile.TemporaryDirectory(prefix="inferlab-bench-") as runs:
        for n in range(runs_wanted):
            out = Path(runs) / f"kill-{n}.json"
            subprocess.run([sys.executable, str(REPO / "tests" / "interrupt" / "interrupt.py"), "--inventory",
                            str(inventory), "--out", str(out), "--runs-root", f"{runs}/{n}",
                            "--stages", ",".join(plan), "tp2_baseline+2"], check=False)
            (result,) = json.loads(out.read_text())
            if not result["ok"] or result.get("restore_s") is None:
                raise SystemExit(f"kill point {n} was not restored with nothing left: {result}")
            samples["kill in the TP2 ladder -> verified restore"].append(result["restore_s"])
    return samples


def bench_goals(runs_wanted: int) -> dict[str, list[float]]:
    """The figures of the speed goals, each measured `runs_wanted` times (docs/PERFORMANCE.md, "The speed goals")."""
    return {**bench_experiment(runs_wanted), **bench_link(runs_wanted),
            **bench_kill_to_restore(runs_wanted), **bench_verify(runs_wanted)}


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def install_host_files(folder: str) -> Path:
    """The host files in ``folder`` as the ledger role installs them (its manifest, read by
    tests/unit/ledger_host.py); the ledger script's path."""
    spec = importlib.util.spec_from_file_location("ledger_host", REPO / "tests" / "unit" / "ledger_host.py")
    ledger_host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ledger_host)
    return ledger_host.install_ledger(folder)


def bench_sampler(runs_wanted: int, seconds: float = 60.0) -> dict[str, list[float]]:
    """CPU share of one core used by the sampler at 1 Hz, in percent, per run of `seconds`."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    samples: dict[str, list[float]] = {"sampler CPU at 1 Hz, % of one core": []}
    for _run in range(runs_wanted):
        with tempfile.TemporaryDirectory(prefix="inferlab-sampler-") as tmp:
            script = install_host_files(tmp)
            interfaces = sorted(os.listdir("/sys/class/net"))[:2]
            argv = [sys.executable, "-I", str(script), "sampler", "start", "--output", f"{tmp}/s.jsonl",
                    "--pidfile", f"{tmp}/s.pid", "--log", f"{tmp}/s.log", "--interval", "1.0"]
            for interface in interfaces:
                argv += ["--interface", interface]
            pid = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)["pid"]
            try:
                before, start = cpu_ticks(pid), time.monotonic()
                time.sleep(seconds)
                used, elapsed = cpu_ticks(pid) - before, time.monotonic() - start
            finally:
                os.kill(pid, 15)
            samples["sampler CPU at 1 Hz, % of one core"].append(100.0 * used / ticks_per_s / elapsed)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("suite", nargs="?", default="lab",
                        choices=["lab", "link", "sampler", "serve", "fallback", "experiment", "interrupt", "goals"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    suites = {"lab": bench_lab, "link": bench_link, "sampler": bench_sampler, "serve": bench_serve,
              "fallback": bench_fallback, "experiment": bench_experiment, "interrupt": bench_interrupt,
              "goals": bench_goals}
    samples = suites[args.suite](args.runs)
    figures = {"machine": machine(), "results": {name: summary(s) for name, s in samples.items()}}
    print(f"machine: {figures['machine']}")
    print("| what | median | min | max | runs |")
    print("| --- | --- | --- | --- | --- |")
    for name, result in figures["results"].items():
        unit = "" if any(word in name for word in ("%", "tok/s", "segments", "probes", "tasks")) else " s"
        print(f"| {name} | {result['median_s']}{unit} | {result['min_s']}{unit} | {result['max_s']}{unit} "
              f"| {result['runs']} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

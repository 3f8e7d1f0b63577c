"""Kill the staged experiment at chosen points and prove that a restore brings the lab back with nothing left.

    python tests/interrupt/interrupt.py --inventory INVENTORY --out RESULTS.json --runs-root DIR
        [--stages a,b,c] [--trials N] [--deadline-s N] POINT[@STAGES] [POINT[@STAGES] ...]

A POINT is ``STAGE`` (SIGKILL to ansible-playbook's process group as soon as the stage's journal entry says it
started: a stage boundary), ``STAGE+SECONDS`` (that long into the stage, e.g. ``tp2_nextn+4``: the middle of the
TP2+NEXTN ladder), or ``deadman:STAGE[+SECONDS]`` (the same kill, then NO restore.yml: the ring and gateway hosts'
dead man's switches must undo their ledgers by themselves, with no controller; restore.yml runs afterwards only to
verify, and must find nothing left to undo on the ring hosts), or ``hup:STAGE[+SECONDS]`` (``int:``, ``term:``: the
experiment through `inferlab run`, and at the point SIGHUP, SIGINT or SIGTERM to that process alone, as a closed
terminal or an operator would send it: `inferlab run` must end the playbook's processes, run its own restore, and
exit 11). ``@STAGES`` (comma-separated) is the plan that point's
run gets instead of --stages: the stages that lead to the point and nothing the point does not need, so that a
scenario pays only for what each kill proves.

For each point: the experiment runs through `ansible-playbook` in its own session, the kill comes at the point,
then `playbooks/restore.yml` runs against the killed run's known-good snapshots. At the kill, every ledger of the
lab (ring hosts, gateway, controller) must be locked by the killed run (the run holds its locks until its restore).
After the restore the lab is checked from the controller, where all of its files live:
- every restore fragment says verified;
- every ledger of the lab has no open entry and no lock;
- no process of the run is left on the hosts (ranks, dead man's switches, link watchdogs, the prober, iperf3), nor
  on the controller (a process carrying the run's mark, INFERLAB_RUN_ID: ansible-core's task workers are session
  leaders, outside the process group the kill ends, and the restore ends them before it takes the run's locks);
- no tc profile on any host's direct link; no private build directory in any host's state directory;
- the gateway config is byte-identical to its sha256 before the run, and every lab service and gateway daemon
  answers (`inferlab lab status`).
Results: one JSON object per point in RESULTS.json, with the restore's wall time (from the kill to the verified
end). Exit 0 when every point was restored with nothing left, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from inferlab.lab import processes as lab_processes  # noqa: E402
from inferlab.lab import status as lab_status  # noqa: E402
from inferlab.system import process_tree  # noqa: E402

PLAYBOOK = REPO / "playbooks" / "experiment.yml"
RESTORE = REPO / "playbooks" / "restore.yml"
# Command-line marks of the processes a run starts on the lab (ranks run inferlab.lab.server from a pidfile named
# sglang-*; the switches and watchdogs run the ledger script).
RUN_PROCESS_MARKS = ("deadman", "watch-link", "inferlab.prober", "iperf3", "sglang-")


# the points that signal `inferlab run` instead of killing ansible-playbook
SIGNAL_POINTS = {"hup": signal.SIGHUP, "int": signal.SIGINT, "term": signal.SIGTERM}


def parse_point(text: str) -> dict:
    text, _at, stages = text.partition("@")
    kind, colon, rest = text.partition(":")
    kind = kind if colon and kind in ("deadman", *SIGNAL_POINTS) else ""
    spec = rest if kind else text
    stage, _plus, seconds = spec.partition("+")
    return {"point": text, "stage": stage, "delay_s": float(seconds or 0), "deadman": kind == "deadman",
            "signal": SIGNAL_POINTS.get(kind), "stages": stages.split(",") if stages else None}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ansible_env(run_id: str | None = None) -> dict:
    """The environment `inferlab run` gives ansible-playbook: ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False
    when the caller has not set it (and the molecule inventory turns off the lab's pinned host keys), so Mitogen's
    strategy would otherwise refuse the hosts here that it accepts under `inferlab run`."""
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    env.setdefault("ANSIBLE_HOST_KEY_CHECKING", "False")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if run_id:  # the run's mark, as `inferlab run` gives it
        env[process_tree.RUN_MARK] = run_id
    return env


def journal_status(run_dir: Path, stage: str) -> str | None:
    path = run_dir / "fragments" / "journal" / f"{stage}.json"
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, ValueError):
        return None


def group_members(pgid: int, procfs: Path = Path("/proc")) -> list[int]:
    """The pids of process group ``pgid`` (field 5 of /proc/PID/stat)."""
    members = []
    for entry in procfs.iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(pgid):
                members.append(int(entry.name))
    return members


def unix_socket_paths(pids: list[int], procfs: Path = Path("/proc")) -> set[str]:
    """The filesystem paths of the unix sockets that ``pids`` hold open (/proc/PID/fd and /proc/net/unix)."""
    inodes = set()
    for pid in pids:
        try:
            fds = list((procfs / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    paths = set()
    for line in (procfs / "net" / "unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[6] in inodes and fields[7].startswith("/"):
            paths.add(fields[7])
    return paths


def kill_run(proc: subprocess.Popen) -> list[str]:
    """SIGKILL the run's process group, then remove the socket files Mitogen's processes of that group held: a
    killed multiplexer cannot remove its /tmp/mitogen_unix_*.sock itself. Found by the group's pids, never by a
    name pattern alone; returns the paths removed."""
    sockets = sorted(p for p in unix_socket_paths(group_members(proc.pid))
                     if Path(p).name.startswith("mitogen_unix_"))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    removed = []
    for path in sockets:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def run_until_killed(point: dict, inventory: Path, run_dir: Path, extravars: dict, timeout_s: float) -> dict:
    """Start the experiment in its own session; SIGKILL its whole process group at the point."""
    run_dir.mkdir(parents=True)
    (run_dir / "vars.json").write_text(json.dumps({**extravars, "inferlab_run_dir": str(run_dir)}))
    log = (run_dir / "ansible.log").open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOK),
         "-e", f"@{run_dir / 'vars.json'}"],
        cwd=REPO, env=ansible_env(run_dir.name), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started, reached = time.monotonic(), None
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            return {"killed": False, "reason": f"ansible-playbook exited {proc.returncode} before {point['point']}",
                    "failed_task": failed_task(run_dir / "ansible.log")}
        if reached is None and journal_status(run_dir, point["stage"]) is not None:
            reached = time.monotonic()
        if reached is not None and time.monotonic() - reached >= point["delay_s"]:
            removed = kill_run(proc)
            return {"killed": True, "stage_status": journal_status(run_dir, point["stage"]),
                    "killed_after_s": round(time.monotonic() - started, 1), "sockets_removed": removed}
        time.sleep(0.1)
    kill_run(proc)
    return {"killed": False, "reason": f"{point['point']} not reached within {timeout_s:.0f} s"}


def run_until_signaled(point: dict, inventory: Path, run_dir: Path, extravars: dict, timeout_s: float) -> dict:
    """Start the experiment through `inferlab run` in its own session; at the point send the point's signal to that
    process alone, and wait for it to end its playbook, restore and exit."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)  # the run directory itself is inferlab run's to make
    vars_file = run_dir.with_name(run_dir.name + "-vars.json")
    vars_file.write_text(json.dumps(extravars))
    log = run_dir.with_name(run_dir.name + "-inferlab.log").open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "inferlab"), "run", "experiment", "-i", str(inventory),
         "--run-dir", str(run_dir), "-e", f"@{vars_file}"],
        cwd=REPO, env=ansible_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started, reached = time.monotonic(), None
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            return {"killed": False, "reason": f"inferlab run exited {proc.returncode} before {point['point']}",
                    "failed_task": failed_task(run_dir / "artifacts" / "ansible" / "stdout")}
        if reached is None and journal_status(run_dir, point["stage"]) is not None:
            reached = time.monotonic()
        if reached is not None and time.monotonic() - reached >= point["delay_s"]:
            proc.send_signal(point["signal"])
            signaled = time.monotonic()
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"killed": True, "exit_code": None, "reason": f"inferlab run did not exit {timeout_s:.0f} s "
                        f"after {point['signal'].name}"}
            return {"killed": True, "stage_status": journal_status(run_dir, point["stage"]), "exit_code": rc,
                    "signaled_after_s": round(signaled - started, 1),
                    "restored_in_s": round(time.monotonic() - signaled, 1)}
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return {"killed": False, "reason": f"{point['point']} not reached within {timeout_s:.0f} s"}


def own_restore(run_dir: Path) -> dict:
    """The restore that `inferlab run` ran after the cancel, as restore() reports a separate one."""
    fragments = {p.stem: json.loads(p.read_text()) for p in (run_dir / "fragments" / "restore").glob("*.json")}
    status = run_dir / "artifacts" / "restore" / "status"
    return {"rc": 0 if status.is_file() and status.read_text() == "successful" else 1, "dir": str(run_dir),
            "failed_task": failed_task(run_dir / "artifacts" / "restore" / "stdout"),
            "verified": {host: f.get("verified") for host, f in fragments.items()},
            "undone": {host: (f.get("undo") or {}).get("undone", []) for host, f in fragments.items()},
            "differences": {host: f.get("differences") for host, f in fragments.items() if f.get("differences")}}


def wait_up(inventory: Path, timeout_s: float) -> dict:
    """The lab's status once it is up, or its last status after ``timeout_s``: one probe that times out while the
    machine is busy (a service's health answered late) makes a lab degraded for that probe only."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = lab_status.status(inventory)
        if status["state"] == "up" or time.monotonic() >= deadline:
            return status
        print(f"interrupt: the lab is {status['state']}: {'; '.join(status.get('problems', []))}; checking again",
              file=sys.stderr, flush=True)
        time.sleep(2.0)


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def failed_task(log: Path, lines: int = 12) -> list[str]:
    """The first and the last failed task of an ansible-playbook log (each from its "fatal:" or "failed:" line on;
    in an experiment the first is the stage's own failure, the last the outcome's), each line cut to 300 characters;
    the log's last lines when no task failed. Colour codes are taken out: under molecule the log is coloured, and a
    coloured "fatal:" line starts with one."""
    raw = log.read_text(errors="replace") if log.exists() else ""
    text = ANSI_ESCAPE.sub("", raw).splitlines()
    starts = [n for n, line in enumerate(text) if line.startswith(("fatal: [", "failed: ["))]
    if not starts:
        return text[-lines:]
    picked = [starts[0]] if starts[0] == starts[-1] else [starts[0], starts[-1]]
    return [line[:300] for start in picked for line in text[start:start + lines]]


def ledgers(lab_dir: Path) -> list[Path]:
    return sorted(lab_dir.glob("**/state/ledger/*.jsonl"))


def ledger_locks(lab_dir: Path) -> dict:
    """Each ledger lock file of the lab, by its path under the lab directory: the run id that holds it."""
    locks = {}
    for path in sorted(lab_dir.glob("**/state/ledger/*.lock")):
        name = str(path.relative_to(lab_dir))
        try:
            locks[name] = json.loads(path.read_text()).get("run_id")
        except (OSError, ValueError) as exc:
            locks[name] = f"unreadable: {exc}"
    return locks


def open_entries(path: Path) -> list[str]:
    last = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            last[entry["id"]] = entry
        except (ValueError, KeyError, TypeError):
            continue
    return [f"{path.name}: {e['kind']} {e['id']} {e['state']}" for e in last.values() if e["state"] != "undone"]


def wait_for_deadman(lab_dir: Path, timeout_s: float) -> float | None:
    """Seconds until no ring or gateway ledger has an open entry (the switches fired), or None - None too when
    there is no ring or gateway ledger at all (nothing to wait for is not a switch that fired)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        watched = [path for path in ledgers(lab_dir) if "controller" not in path.parts]
        if not watched:
            return None
        if not [e for path in watched for e in open_entries(path)]:
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    return None


def restore(inventory: Path, run_dir: Path) -> dict:
    restore_dir = run_dir.with_name(run_dir.name + "-restore")
    restore_dir.mkdir()
    extravars = {"inferlab_run_dir": str(restore_dir), "restore_known_good_dir": str(run_dir / "known_good"),
                 "restore_known_good_driver_dir": str(run_dir / "known_good_driver")}
    (restore_dir / "vars.json").write_text(json.dumps(extravars))
    with (restore_dir / "ansible.log").open("w") as log:
        rc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                             str(RESTORE), "-e", f"@{restore_dir / 'vars.json'}"],
                            cwd=REPO, env=ansible_env(), stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    fragments = {p.stem: json.loads(p.read_text()) for p in (restore_dir / "fragments" / "restore").glob("*.json")}
    return {"rc": rc, "dir": str(restore_dir), "failed_task": failed_task(restore_dir / "ansible.log") if rc else [],
            "verified": {host: f.get("verified") for host, f in fragments.items()},
            "undone": {host: (f.get("undo") or {}).get("undone", []) for host, f in fragments.items()},
            "differences": {host: f.get("differences") for host, f in fragments.items() if f.get("differences")}}


def leftovers(status: dict, lab_dir: Path, gateway_sha: str | None, run_id: str) -> dict:
    """What the run left behind, by kind; empty lists when nothing."""
    found = {"open_ledger_entries": [e for path in ledgers(lab_dir) for e in open_entries(path)],
             "ledger_locks": [f"{path}: held by {run_id}" for path, run_id in ledger_locks(lab_dir).items()],
             "processes": [], "tc_profiles": [], "build_dirs": [], "gateway_config": [], "lab_problems": [],
             "controller_processes": [f"{pid}: {(lab_processes.proc_cmdline(pid) or '')[:160]}"
                                      for pid in process_tree.marked(run_id)]}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid == os.getpid():  # this driver: its own arguments may name a point such as deadman:tp2_baseline+2
            continue
        cmdline = lab_processes.proc_cmdline(pid) or ""
        # the lab directory with its slash: lab imol's is a prefix of lab imolnr's
        if f"{lab_dir}/" in cmdline and any(mark in cmdline for mark in RUN_PROCESS_MARKS):
            found["processes"].append(f"{pid}: {cmdline[:160]}")
    # after the restore the stock driver is back: its link shows the profile the lab's hardware gives the stock
    # driver, or none where a restore removed a profile since the last reload (a tc_profile undo removes ours)
    stock = (json.loads((lab_dir / "link.json").read_text()).get("driver_profiles") or {}).get("stock", "clean")
    for host in status["hosts"]:
        profile = host.get("link_profile")
        if profile not in (None, "clean", stock):
            found["tc_profiles"].append(f"{host['name']}: {profile} (the stock driver's is {stock})")
        build = Path(host["state_dir"]) / "build"
        if build.is_dir() and any(build.iterdir()):
            found["build_dirs"].append(f"{host['name']}: {sorted(p.name for p in build.iterdir())}")
    config = status.get("gateway", {}).get("config")
    if gateway_sha and config and sha256(Path(config)) != gateway_sha:
        found["gateway_config"].append(f"{config}: sha256 differs from before the run")
    found["lab_problems"] = status.get("problems", [])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("points", nargs="+")
    parser.add_argument("--inventory", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs-root", type=Path, required=True)
    parser.add_argument("--stages", help="comma-separated experiment_stages (default: the role's)")
    parser.add_argument("--trials", type=int,
                        help="inferlab_trials of every run (default: the inventory's), and then no cold/warm "
                             "prefix trials; the kills prove the restore, not the measurement")
    parser.add_argument("--deadline-s", type=float, default=20.0,
                        help="the dead man's switch deadline at deadman: points (at the others, the role's default: "
                             "a deadline shorter than a stage would fire the switch mid-stage)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per point, to reach it")
    args = parser.parse_args(argv)
    _name, lab_dir = lab_status.resolve_lab(args.inventory)
    first = wait_up(args.inventory, 60.0)
    if first["state"] != "up":  # else the ledger and leftover checks below would look at nothing and pass
        print(f"interrupt: the lab of {args.inventory} is {first['state']} (lab dir {lab_dir}): "
              f"{'; '.join(first.get('problems', [])) or 'nothing built there'}; run `inferlab lab up` first",
              file=sys.stderr)
        return 2
    results = []
    for n, text in enumerate(args.points, 1):
        point = parse_point(text)
        stages = point["stages"] or (args.stages.split(",") if args.stages else None)
        plan = {"experiment_stages": stages} if stages else {}
        before = lab_status.status(args.inventory)
        config = before.get("gateway", {}).get("config")
        gateway_sha = sha256(Path(config)) if config else None
        text = point["point"]
        run_dir = args.runs_root / f"{n:02d}-{text.replace(':', '-').replace('+', '-')}"
        print(f"interrupt: {text}: running {','.join(stages) if stages else 'the default plan'} until the point",
              file=sys.stderr, flush=True)
        extravars = {**plan, **({"experiment_deadman_deadline_s": args.deadline_s} if point["deadman"] else {}),
                     **({"inferlab_trials": args.trials, "inferlab_prefix_trials": 0}
                        if args.trials is not None else {})}
        if point["signal"]:
            result = {"point": text, **run_until_signaled(point, args.inventory, run_dir, extravars, args.timeout_s)}
            if result["killed"]:
                result["restore"] = own_restore(run_dir)
                result["leftovers"] = leftovers(lab_status.status(args.inventory), lab_dir, gateway_sha, run_dir.name)
            result["ok"] = bool(result["killed"] and result["exit_code"] == 11 and result["restore"]["rc"] == 0
                                and result["restore"]["verified"] and all(result["restore"]["verified"].values())
                                and not any(result["leftovers"].values()))
        else:
            result = {"point": text, **run_until_killed(point, args.inventory, run_dir, extravars, args.timeout_s)}
        if point["signal"]:
            pass
        elif result["killed"]:
            t_kill = time.monotonic()
            # what the kill left open: none at a point after the prober started would mean the ledgers were not read
            result["open_entries_at_kill"] = [e for path in ledgers(lab_dir) for e in open_entries(path)]
            # the run locks every ring and gateway host's ledger and the controller's before its first stage and
            # holds them to its restore: a kill anywhere after that leaves them all held by the killed run
            result["locks_at_kill"] = ledger_locks(lab_dir)
            locked_by_run = (len(result["locks_at_kill"]) >= len(before["hosts"]) + 2
                             and set(result["locks_at_kill"].values()) == {run_dir.name})
            if point["deadman"]:
                result["deadman_s"] = wait_for_deadman(lab_dir, args.deadline_s + 60)
            result["restore"] = restore(args.inventory, run_dir)
            result["restore_s"] = round(time.monotonic() - t_kill, 1)
            result["leftovers"] = leftovers(lab_status.status(args.inventory), lab_dir, gateway_sha, run_dir.name)
            undone_by_restore = [u for host, u in result["restore"]["undone"].items() if u]
            result["ok"] = (locked_by_run and result["restore"]["rc"] == 0
                            and all(result["restore"]["verified"].values())
                            and bool(result["restore"]["verified"])
                            and not any(result["leftovers"].values())
                            and (not point["deadman"] or (result["deadman_s"] is not None
                                                          and not undone_by_restore)))
        else:
            result["ok"] = False
        print(f"interrupt: {text}: {'restored, nothing left' if result['ok'] else 'FAILED'} "
              f"{json.dumps({k: result.get(k) for k in ('restore_s', 'deadman_s', 'restored_in_s')})}", file=sys.stderr,
              flush=True)
        results.append(result)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

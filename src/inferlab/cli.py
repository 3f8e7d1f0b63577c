"""The `inferlab` command: run playbooks through ansible-runner, manage the embedded lab, render reports."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from inferlab import exit_codes, paths, plots, record, report, runner


class UsageError(Exception):
    pass


def parse_extravars(pairs: list[str]) -> dict:
    """`-e KEY=VALUE` and `-e @FILE` as ansible-playbook reads them: a KEY=VALUE value stays a string (argument
    specs convert types); FILE is YAML or JSON holding a mapping, for lists and dicts."""
    extravars = {}
    for pair in pairs:
        if pair.startswith("@"):
            extravars.update(read_vars_file(Path(pair[1:])))
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-e expects KEY=VALUE, got {pair!r}")
        extravars[key.strip()] = value
    return extravars


def read_vars_file(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"-e @{path}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"-e @{path}: not YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"-e @{path}: expected a mapping of variables, found {type(data).__name__}")
    return data


def render_outputs(run_dir: Path, data: dict) -> Path:
    """plots/*.png and report.md from a validated record; returns the report's path."""
    plots.render(run_dir, data)
    return report.write(run_dir, data)


def run_and_record(playbook: Path, inventory: Path, run_dir: Path, extravars: dict, check: bool = False) -> int:
    print(f"inferlab: run directory {run_dir}", file=sys.stderr, flush=True)
    outcome = runner.run_playbook(playbook, inventory, run_dir, extravars, check=check)
    code = runner.classify(outcome)
    run_meta = {
        "id": run_dir.name,
        "playbook": str(playbook.relative_to(paths.REPO_ROOT)) if playbook.is_relative_to(paths.REPO_ROOT)
        else str(playbook),
        "inventory": str(inventory),
        "started": outcome.started,
        "finished": outcome.finished,
        "status": outcome.status,
        "ansible_rc": outcome.rc,
        "exit_code": code,
        "exit_meaning": exit_codes.MEANING[code],
        "extravars": extravars,
        "stats": outcome.stats,
    }
    try:
        record_path = record.write(run_dir, run_meta)
        data = json.loads(record_path.read_text())
        render_outputs(run_dir, data)
        for line in report.summary(data):
            print(f"inferlab: {line}", file=sys.stderr)
    except record.RecordError as exc:
        print(f"inferlab: {exc}", file=sys.stderr)
        code = exit_codes.RESTORE_UNVERIFIED
    print(f"inferlab: {outcome.status}, exit {code} ({exit_codes.MEANING[code]})", file=sys.stderr)
    print(run_dir)
    return code


def resolve_inventory(value: str | None) -> Path:
    inventory = Path(value) if value else paths.DEFAULT_INVENTORY
    if not inventory.exists():
        raise UsageError(f"inventory {inventory} does not exist")
    return inventory.resolve()


def cmd_run(args: argparse.Namespace) -> int:
    try:
        playbook = runner.resolve_playbook(args.playbook)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    extravars = parse_extravars(args.extravars)
    inventory = resolve_inventory(args.inventory)
    run_dir = Path(args.run_dir).resolve() if args.run_dir else runner.new_run_dir(playbook)
    return run_and_record(playbook, inventory, run_dir, extravars, check=args.check)


def cmd_lab(args: argparse.Namespace) -> int:
    from inferlab import lab  # the lab's own helpers; imported here so `inferlab run` stays light

    inventory = resolve_inventory(args.inventory)
    if args.action == "status":
        status = lab.status(inventory)
        print(json.dumps(status, indent=2) if args.json else lab.render_status_text(status))
        return exit_codes.SUCCESS
    playbook = paths.PLAYBOOKS / f"lab_{args.action}.yml"
    return run_and_record(playbook, inventory, runner.new_run_dir(playbook), {})


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    record_path = run_dir / "record.json"
    if not record_path.is_file():
        raise UsageError(f"{record_path} not found: is {run_dir} a run directory?")
    data = json.loads(record_path.read_text())
    record.validate(data)
    print(render_outputs(run_dir, data))
    return exit_codes.SUCCESS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inferlab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a playbook through ansible-runner in a new run directory")
    run.add_argument("playbook", help="playbooks/NAME.yml, NAME.yml or NAME")
    run.add_argument("-i", "--inventory", help=f"inventory (default {paths.DEFAULT_INVENTORY})")
    run.add_argument("-e", "--extra-var", dest="extravars", action="append", default=[], metavar="KEY=VALUE|@FILE")
    run.add_argument("--run-dir", help="run directory (default runs/<UTC stamp>-<playbook>/)")
    run.add_argument("--check", action="store_true", help="check mode: report what would change, change nothing")
    run.set_defaults(func=cmd_run)

    lab = sub.add_parser("lab", help="the embedded two-host lab")
    lab.add_argument("action", choices=["up", "down", "status"])
    lab.add_argument("-i", "--inventory", help="lab inventory (default inventory/lab/hosts.yml)")
    lab.add_argument("--json", action="store_true", help="status as JSON")
    lab.set_defaults(func=cmd_lab)

    rep = sub.add_parser("report", help="render report.md of a run directory")
    rep.add_argument("run_dir")
    rep.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage; our contract says 13
        return exit_codes.SUCCESS if exc.code in (0, None) else exit_codes.USAGE
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"inferlab: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except record.RecordError as exc:
        print(f"inferlab: {exc}", file=sys.stderr)
        return exit_codes.RESTORE_UNVERIFIED


if __name__ == "__main__":
    sys.exit(main())

"""The `inferlab` command: run playbooks through ansible-runner, manage the embedded lab, render reports, compare
runs, query their records and prune old run directories."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import yaml

from inferlab import api, exit_codes, paths
from inferlab.analysis import compare, matrix, record_input, reverify
from inferlab.plots import matrix as matrix_plot
from inferlab.record import export, query, record, runs
from inferlab.report import compare_output, report
from inferlab.report import matrix as matrix_text
from inferlab.report import sweep as report_sweep
from inferlab.run import progress, runner, strategy

PACKAGE = "inferlab"
COLLECTION = "inferlab.distributed"


class UsageError(Exception):
    pass


def parse_extravars(pairs: list[str]) -> dict:
    """`-e KEY=VALUE`, `-e '{JSON}'` and `-e @FILE` as ansible-playbook reads them: a KEY=VALUE value stays a
    string (argument specs convert types); JSON is an object of variables; FILE is YAML or JSON holding a mapping,
    for lists and dicts."""
    extravars = {}
    for pair in pairs:
        if pair.startswith("@"):
            extravars.update(read_vars_file(Path(pair[1:])))
            continue
        if pair.lstrip().startswith("{"):
            try:
                data = json.loads(pair)
            except json.JSONDecodeError as exc:
                raise UsageError(f"-e {pair!r}: not a JSON object: {exc}") from None
            if not isinstance(data, dict):
                raise UsageError(f"-e {pair!r}: expected a JSON object of variables")
            extravars.update(data)
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


def run_and_record(
    playbook: Path,
    inventory: Path,
    run_dir: Path,
    extravars: dict,
    check: bool = False,
    strategy_name: str | None = None,
    verbose: bool = False,
    limit: str | None = None,
    settings: paths.Settings | None = None,
) -> int:
    """`inferlab run`: api.run (in `settings`; None resolves them) with a line per play or stage and each failed task
    on stderr (inferlab.run.progress), or ansible's whole output with `verbose`, then a summary on stderr; the run
    directory is the only line on stdout."""
    print(f"inferlab: run directory {run_dir}", file=sys.stderr, flush=True)
    result = api.run(playbook, inventory, extravars, run_dir, check=check, quiet=not verbose,
                     strategy_name=strategy_name, limit=limit,
                     event_handler=None if verbose else progress.Progress(run_dir), settings=settings)
    for line in report.summary(result.record) if result.record else []:
        print(f"inferlab: {line}", file=sys.stderr)
    for problem in result.problems:
        print(f"inferlab: {problem}", file=sys.stderr)
    if result.restore:
        verified = "verified" if result.restore["verified"] else "NOT verified"
        by = f" by {result.canceled_by}" if result.canceled_by else ""
        print(f"inferlab: the run was {result.status}{by}; restore.yml ran after it: {verified}", file=sys.stderr)
    if not verbose:
        print(f"inferlab: Ansible's whole output: {run_dir / 'artifacts' / 'ansible' / 'stdout'}", file=sys.stderr)
    print(f"inferlab: {result.status}, exit {result.rc} ({result.meaning})", file=sys.stderr)
    print(run_dir)
    return result.rc


def resolve_inventory(value: str | None, settings: paths.Settings) -> Path:
    try:
        return api.resolve_inventory(value, settings)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None


def cmd_run(args: argparse.Namespace, settings: paths.Settings) -> int:
    try:
        playbook = runner.resolve_playbook(args.playbook, settings)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    extravars = parse_extravars(args.extravars)
    inventory = resolve_inventory(args.inventory, settings)
    try:
        strategy.ansible_env(strategy.chosen(args.strategy))  # a bad $INFERLAB_STRATEGY or no Mitogen: no run dir
    except strategy.StrategyError as exc:
        raise UsageError(str(exc)) from None
    run_dir = Path(args.run_dir).resolve() if args.run_dir else runner.new_run_dir(playbook, settings.runs)
    if run_dir.is_dir() and any(run_dir.iterdir()):
        # its fragments, known-good snapshots and artifacts would mix with the new run's in one record
        raise UsageError(f"the run directory {run_dir} exists and is not empty: a run directory holds one run; name a "
                         "new one with --run-dir, or leave --run-dir out for runs/<UTC stamp>-<playbook>/")
    return run_and_record(playbook, inventory, run_dir, extravars, check=args.check, strategy_name=args.strategy,
                          verbose=args.verbose, limit=args.limit, settings=settings)


def cmd_lab(args: argparse.Namespace, settings: paths.Settings) -> int:
    from inferlab.lab import status as lab_status  # the lab's own helpers; imported here so `inferlab run` stays light

    inventory = resolve_inventory(args.inventory, settings)
    if args.action == "status":
        status = lab_status.status(inventory)
        print(json.dumps(status, indent=2) if args.json else lab_status.render_status_text(status))
        return exit_codes.SUCCESS
    playbook = settings.playbooks / f"lab_{args.action}.yml"
    return run_and_record(playbook, inventory, runner.new_run_dir(playbook, settings.runs), {}, verbose=args.verbose,
                          settings=settings)


def cmd_report(args: argparse.Namespace, settings: paths.Settings) -> int:
    run_dir = Path(args.run_dir)
    record_path = run_dir / "record.json"
    if not record_path.is_file():
        raise UsageError(f"{record_path} not found: is {run_dir} a run directory?")
    try:
        data = record.read(run_dir)
    except record.RecordError as exc:
        raise UsageError(f"{record.one_line(exc)}; nothing rendered") from exc
    print(api.render_outputs(run_dir, data))
    return exit_codes.SUCCESS


def cmd_runs(args: argparse.Namespace, settings: paths.Settings) -> int:
    root = Path(args.root) if args.root else settings.runs
    found = runs.list_runs(root)
    if args.action == "list":
        listed = found
        if args.where is not None:
            try:
                listed, without_record, unreadable = query.select_runs(found, args.where)
            except query.QueryError as exc:
                raise UsageError(str(exc)) from None
            note = query.describe_selection(args.where, len(found), len(listed), len(without_record), len(unreadable))
            print(f"inferlab: {note}", file=sys.stderr)
        print(json.dumps([r.as_json() for r in listed], indent=2) if args.json else runs.render_table(listed))
        return exit_codes.SUCCESS
    if args.where is not None:
        raise UsageError("--where selects what runs list shows; runs prune keeps the newest runs, whatever they hold")
    if args.keep is None or args.keep < 1:
        raise UsageError(f"runs prune needs --keep N with N >= 1 (got {args.keep}): it never removes every run")
    doomed, kept = runs.select_prunable(found, args.keep, named=set(args.unrestored or ()))
    for run in kept:
        print(f"kept {run.path}: {runs.kept_reason(run)}")
    verb = "would remove" if args.dry_run else "removed"
    for run in doomed:
        if not args.dry_run:
            runs.remove(run)
        print(f"{verb} {run.path} ({runs.human_size(run.size_bytes)})")
    freed = runs.human_size(sum(r.size_bytes for r in doomed))
    print(f"{verb} {len(doomed)} of {len(found)} run directories ({freed}); kept the {args.keep} newest")
    return exit_codes.SUCCESS


def resolve_run(value: str, root: Path) -> Path:
    """A run directory, a record.json, or the name of a run directory under `root` (--root, else Settings.runs), as
    `inferlab runs list` shows it."""
    path = Path(value)
    if not path.exists() and not path.is_absolute() and (root / value).exists():
        return root / value
    return path


def cmd_query(args: argparse.Namespace, settings: paths.Settings) -> int:
    root = Path(args.root) if args.root else settings.runs
    run = resolve_run(args.run, root)
    try:
        if not run.exists():
            raise query.QueryError(f"no run {args.run!r}: no such directory, and no run directory of that name "
                                   f"under {root}")
        value = query.query(run, args.expression)
    except query.QueryError as exc:
        raise UsageError(str(exc)) from None
    print(query.render(value, raw=args.raw))
    return exit_codes.SUCCESS


def cmd_sweep(args: argparse.Namespace, settings: paths.Settings) -> int:
    try:
        records = [record_input.load_record(resolve_run(run, settings.runs)) for run in args.runs.split(",")]
    except record_input.CompareError as exc:
        raise UsageError(str(exc)) from None
    print(report_sweep.across_runs(records), end="")
    return exit_codes.SUCCESS


def cmd_export(args: argparse.Namespace, settings: paths.Settings) -> int:
    root = Path(args.root) if args.root else settings.runs
    try:
        text = export.render(export.export(record_input.load_record(resolve_run(args.run, root)), args.format))
    except (record_input.CompareError, export.ExportError) as exc:
        raise UsageError(str(exc)) from None
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text, end="")
    return exit_codes.SUCCESS


def load_compared(value: str, root: Path) -> dict:
    """A run's record, or one served mode of it (``RUN:MODE``, record_input.mode_view); a run's name is looked up
    under `root`."""
    run, mode = record_input.split_mode(value)
    data = record_input.load_record(resolve_run(run, root))
    return record_input.mode_view(data, mode) if mode else data


def cmd_compare(args: argparse.Namespace, settings: paths.Settings) -> int:
    try:
        records_a = [load_compared(run, settings.runs) for run in args.run_a.split(",")]
        records_b = [load_compared(run, settings.runs) for run in args.run_b.split(",")]
        result = compare.compare(records_a, records_b, require_fresh=args.require_fresh)
    except record_input.CompareError as exc:
        raise UsageError(str(exc)) from None
    text = json.dumps(compare_output.as_json(result), indent=2) if args.json else compare_output.render_text(result)
    print(text, end="")
    if args.json:
        print()
    return exit_codes.SUCCESS


def cmd_matrix(args: argparse.Namespace, settings: paths.Settings) -> int:
    """Group the runs by what their ring hosts ran on; Markdown on stdout, CSV and a plot where asked."""
    given = [resolve_run(run, settings.runs) for run in args.runs] if args.runs else [settings.runs]
    try:
        table = matrix.build(given)
    except matrix.MatrixError as exc:
        raise UsageError(str(exc)) from None
    print(matrix_text.render_markdown(table), end="")
    if args.csv:
        Path(args.csv).write_text(matrix_text.render_csv(table))
    if args.plot:
        matrix_plot.plot(table, Path(args.plot))
    return exit_codes.SUCCESS


def cmd_reverify(args: argparse.Namespace, settings: paths.Settings) -> int:
    """Run each run of A and B again, interleaved (its playbook, inventory and extra vars, in a new run directory),
    then compare the new A with the new B (require_fresh, each new B later than the original B) and say of each
    claim whether it held, with A's drift from its original runs. Exit 0 when every re-run ran and the outcome is
    printed; a re-run's own exit code when one failed (its claims then did not re-verify)."""
    specs_a, specs_b = args.run_a.split(","), args.run_b.split(",")
    find = functools.partial(resolve_run, root=settings.runs)
    compared = functools.partial(load_compared, root=settings.runs)
    try:
        records_a, records_b = [compared(run) for run in specs_a], [compared(run) for run in specs_b]
        original = compare.compare(records_a, records_b)
        reruns = reverify.plan(original, [find(record_input.split_mode(run)[0]) for run in specs_a],
                               [find(record_input.split_mode(run)[0]) for run in specs_b], args.inventory,
                               settings=settings)
    except (record_input.CompareError, reverify.ReverifyError) as exc:
        raise UsageError(str(exc)) from None
    new_dirs, code, outcomes = {}, exit_codes.SUCCESS, None
    for rerun in reruns:
        print(f"inferlab: running {rerun.run_id} again ({rerun.playbook})", file=sys.stderr, flush=True)
        run_dir = runner.new_run_dir(Path(rerun.playbook), settings.runs)
        result = api.run(rerun.playbook, rerun.inventory, reverify.rerun_vars(rerun), run_dir,
                         strategy_name=args.strategy, event_handler=progress.Progress(run_dir), settings=settings)
        print(f"inferlab: {run_dir}: {result.status}, exit {result.rc} ({result.meaning})", file=sys.stderr)
        if result.rc != exit_codes.SUCCESS:
            code, outcomes = result.rc, reverify.failed_rerun(original, run_dir, result.rc, result.meaning)
            break
        new_dirs[rerun.run_dir] = run_dir
    new_a, new_b, a_drift = [], [], []
    if outcomes is None:
        new_a = [reverify.respec(spec, new_dirs, find) for spec in specs_a]
        new_b = [reverify.respec(spec, new_dirs, find) for spec in specs_b]
        try:
            records_new_a = [compared(run) for run in new_a]
            again = compare.compare(records_new_a, [compared(run) for run in new_b], require_fresh=True,
                                    later_than=records_b)
            a_drift = reverify.drift(compare.compare(records_a, records_new_a))
        except record_input.CompareError as exc:
            raise UsageError(f"the re-runs cannot be compared: {exc}") from None
        outcomes = reverify.judge(original, again)
    document = {**reverify.as_json(specs_a, specs_b, new_a, new_b, outcomes, a_drift), "time": runner.utc_iso()}
    # the outcome first: keeping it beside each original run, and its report, must not lose it
    print(json.dumps(document, indent=2) + "\n" if args.json else reverify.render_text(document), end="")
    for run_dir in dict.fromkeys(find(run) for run, _mode in map(record_input.split_mode, specs_b)):
        try:  # the original run's report shows it, kept beside its record
            reverify.keep(run_dir, document)
            report.write(run_dir, record_input.load_record(run_dir))
        except Exception as exc:  # noqa: BLE001 - whatever fails here, the outcome above stands
            print(f"inferlab: {run_dir}: the outcome could not be kept in the run directory: {exc!r}", file=sys.stderr)
    return code


def package_version(checkout: Path | None) -> str:
    """The installed package's version; from a source tree (``checkout``) that is not installed, its
    pyproject.toml's."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        pass
    pyproject = (checkout or paths.PACKAGE_DIR) / "pyproject.toml"
    try:
        return tomllib.loads(pyproject.read_text())["project"]["version"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        return f"unknown (not installed, and no version in {pyproject}: {exc})"


def collection_version(repo_root: Path) -> str:
    """The collection's version (``repo_root``: Settings.repo_root): galaxy.yml in a checkout, MANIFEST.json in an
    installed collection."""
    galaxy, manifest = repo_root / "galaxy.yml", repo_root / "MANIFEST.json"
    try:
        if galaxy.is_file():
            return str(yaml.safe_load(galaxy.read_text())["version"])
        if manifest.is_file():
            return str(json.loads(manifest.read_text())["collection_info"]["version"])
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError) as exc:
        return f"unknown ({exc.__class__.__name__} reading {galaxy if galaxy.is_file() else manifest}: {exc})"
    return f"unknown (neither {galaxy} nor {manifest})"


def version_text(settings: paths.Settings) -> str:
    """`inferlab --version`: the package's and the collection's versions, one line each."""
    return f"{PACKAGE} {package_version(settings.checkout)}\n{COLLECTION} {collection_version(settings.repo_root)}"


def exit_codes_text() -> str:
    """The exit codes for `inferlab --help`, from exit_codes.MEANING (their one list)."""
    width = max(len(str(code)) for code in exit_codes.MEANING)
    rows = [f"  {str(code).rjust(width)}  {meaning}" for code, meaning in exit_codes.MEANING.items()]
    return "exit codes:\n" + "\n".join(rows)


def build_parser(settings: paths.Settings) -> argparse.ArgumentParser:
    """The command line, its defaults named from ``settings``."""
    parser = argparse.ArgumentParser(
        prog="inferlab",
        description=__doc__,
        epilog=exit_codes_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the exit codes one per line
    )
    parser.add_argument(
        "--version",
        action="version",
        version=version_text(settings),
        help="print the package's and the collection's versions and exit",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="`inferlab COMMAND --help` for its own"
    )

    run = sub.add_parser("run", help="run a playbook through ansible-runner in a new run directory")
    run.add_argument("playbook", help="playbooks/NAME.yml, NAME.yml or NAME")
    run.add_argument("-i", "--inventory", help=f"inventory (default {settings.default_inventory})")
    run.add_argument(
        "-e",
        "--extra-var",
        dest="extravars",
        action="append",
        default=[],
        metavar="KEY=VALUE|@FILE",
        help="an extra variable, as ansible-playbook reads it (repeatable): KEY=VALUE (the value a string), a JSON "
        "object of variables, or @FILE (a YAML or JSON mapping, for lists and dicts)",
    )
    run.add_argument("--run-dir", help="run directory (default runs/<UTC stamp>-<playbook>/)")
    run.add_argument("--check", action="store_true", help="check mode: report what would change, change nothing")
    run.add_argument("--limit", metavar="PATTERN",
                     help="run on these hosts only (ansible-playbook's --limit); a restore after a cancel still "
                     "covers every host")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="show Ansible's whole output (default: a line per play or stage, and each failed task; the "
                     "whole output is in RUN_DIR/artifacts/ansible/stdout either way)")
    run.add_argument(
        "--strategy",
        choices=strategy.STRATEGIES,
        help=f"Ansible strategy (default ${strategy.ENV_VAR} or {strategy.DEFAULT}); a restore always runs on "
        f"{strategy.RESTORE}",
    )
    run.set_defaults(func=cmd_run)

    lab = sub.add_parser("lab", help="the embedded two-host lab")
    lab.add_argument(
        "action",
        choices=["up", "down", "status"],
        help="up: build the lab (playbooks/lab_up.yml; a second run changes nothing); down: remove it "
        "(playbooks/lab_down.yml); status: its hosts, links and services, changing nothing",
    )
    lab.add_argument("-i", "--inventory", help="lab inventory (default inventory/lab/hosts.yml)")
    lab.add_argument("--json", action="store_true", help="status as JSON")
    lab.add_argument("-v", "--verbose", action="store_true",
                     help="up, down: show Ansible's whole output (default: a line per play, and each failed task)")
    lab.set_defaults(func=cmd_lab)

    rep = sub.add_parser("report", help="render report.md of a run directory")
    rep.add_argument("run_dir", metavar="RUN_DIR", help="a run directory holding record.json")
    rep.set_defaults(func=cmd_report)

    comparison = sub.add_parser("compare", help="compare two runs that differ in one declared layer (B against A)")
    comparison.add_argument(
        "run_a",
        metavar="RUN_A",
        help="the control: a run directory, its record.json, or its name; RUN:MODE for one served mode of a run "
        "(two modes of one run compare like two runs); repeated whole runs of one configuration comma-separated "
        "(each gives one sample per metric, its median)",
    )
    comparison.add_argument("run_b", metavar="RUN_B", help="the candidate, the same way")
    comparison.add_argument(
        "--require-fresh",
        action="store_true",
        help="call a supported result re-verified only when B started from a fresh lab or restore",
    )
    comparison.add_argument("--json", action="store_true", help="the comparison as JSON")
    comparison.set_defaults(func=cmd_compare)

    again = sub.add_parser(
        "reverify",
        help="run A's and B's configurations again, interleaved, from a fresh start, compare the new runs, and say "
        "whether each verdict held",
        description="Each run of A and of B runs again as it ran (its playbook, inventory and extra vars, from its "
        "run directory), in a new run directory, A's and B's in turn (A B A B ...: a drift in time reaches both "
        "alike), two modes of one run once; then the new A is compared with the new B, whose runs must have "
        "started from a fresh lab or restore after the original B (compare --require-fresh), and A's drift from "
        "its original runs is shown. A supported verdict that is not supported again reads 'did not re-verify'.",
    )
    again.add_argument("run_a", metavar="RUN_A", help="the control, as for compare")
    again.add_argument("run_b", metavar="RUN_B", help="the runs whose verdict is re-verified, as for compare")
    again.add_argument("-i", "--inventory", help="inventory for the new runs (default: the one each run of B used)")
    again.add_argument(
        "--strategy",
        choices=strategy.STRATEGIES,
        help=f"Ansible strategy of the new runs (default ${strategy.ENV_VAR} or {strategy.DEFAULT})",
    )
    again.add_argument("--json", action="store_true", help="the outcome as JSON")
    again.set_defaults(func=cmd_reverify)

    grid = sub.add_parser(
        "matrix",
        help="group runs by what their ring hosts ran on (the compatibility matrix)",
        description="One row per combination of what the ring hosts ran on (the Thunderbolt host router's PCI ids, "
        "generation and NVM version, the peer, the link each way, the kernel, the distribution's driver, the board "
        "and BIOS; read at verification, through sysfs): the runs behind it, each stage's outcome over them, the "
        "link test's verdicts, and the candidate driver's aggregate output tok/s against the stock driver's as "
        "`inferlab compare` reads those runs. Runs without an identity for every host are listed apart.",
    )
    grid.add_argument("runs", metavar="RUN", nargs="*",
                      help="run directories, their names under the runs root, or a runs root (default: runs/)")
    grid.add_argument("--csv", metavar="FILE", help="also write the matrix as CSV to FILE")
    grid.add_argument("--plot", metavar="FILE", help="also plot the candidate's difference per combination (PNG)")
    grid.set_defaults(func=cmd_matrix)

    questions = sub.add_parser(
        "query",
        help="print one value of a run's record.json, picked by a JMESPath expression",
        description="Evaluate EXPRESSION (JMESPath, https://jmespath.org) over the record.json of RUN and print "
        "the result as JSON. A number in an expression is a literal in backticks: run.exit_code == `0`.",
    )
    questions.add_argument(
        "run",
        metavar="RUN",
        help="a run directory, its record.json, or its name under the runs root, as `inferlab runs list` shows it",
    )
    questions.add_argument(
        "expression",
        metavar="EXPRESSION",
        help="a JMESPath expression over record.json, e.g. run.status or "
        "serving.nextn.trials.figures.single_stream_output_tok_s.median",
    )
    questions.add_argument("--raw", action="store_true", help="print a string result bare, without JSON quotes")
    questions.add_argument("--root", help=f"where RUN is looked up by name (default {settings.runs})")
    questions.set_defaults(func=cmd_query)

    sweeps = sub.add_parser(
        "sweep",
        help="each concurrency level's verdict, TP2 against the replicas, over several runs' sweeps",
        description="The concurrency sweep of several staged experiments read together: each run's median "
        "aggregate tok/s per level and side is one sample, paired by run from 8 runs, each level read at 5 % over "
        "the levels (Bonferroni). A single run's sweep gives readings, not verdicts (its report).",
    )
    sweeps.add_argument("runs", metavar="RUN,RUN,...", help="the runs, comma-separated, as for compare")
    sweeps.set_defaults(func=cmd_sweep)

    exporting = sub.add_parser(
        "export",
        help="write a run's workload batches as SGLang's bench_serving or vLLM's bench serve write their results",
        description="Every workload batch of RUN's served modes (the acceptance ladder, the measured trials, the "
        "concurrency sweep), one JSON object a line, with the keys and definitions of the chosen benchmark's result "
        "file and the batch's origin in inferlab_* keys (docs/EVIDENCE.md).",
    )
    exporting.add_argument("run", metavar="RUN",
                           help="a run directory, its record.json, or its name under the runs root")
    exporting.add_argument("--format", choices=export.FORMATS, default="bench_serving",
                           help="whose result file to write (default bench_serving)")
    exporting.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    exporting.add_argument("--root", help=f"where RUN is looked up by name (default {settings.runs})")
    exporting.set_defaults(func=cmd_export)

    run_dirs = sub.add_parser("runs", help="list or prune run directories")
    run_dirs.add_argument(
        "action",
        choices=["list", "prune"],
        help="list: the run directories, oldest first; prune: remove all but the newest --keep N",
    )
    run_dirs.add_argument("--root", help=f"where the run directories are (default {settings.runs})")
    run_dirs.add_argument("--json", action="store_true", help="list as JSON")
    run_dirs.add_argument(
        "--where",
        metavar="EXPRESSION",
        help="list: only the runs whose record.json makes this JMESPath expression true (false, null, empty and "
        "missing are false; 0 is true); runs without a record are left out, and stderr says how many",
    )
    run_dirs.add_argument("--keep", type=int, metavar="N", help="prune: keep the N newest run directories")
    run_dirs.add_argument("--dry-run", action="store_true", help="prune: print what would be removed, remove nothing")
    run_dirs.add_argument("--unrestored", action="append", metavar="NAME",
                          help="prune: remove this run too although it awaits a restore (its known_good/ snapshots "
                               "are the only baseline a later restore can verify against) or was made on another "
                               "controller; repeatable")
    run_dirs.set_defaults(func=cmd_runs)
    return parser


def main(argv: list[str] | None = None, settings: paths.Settings | None = None) -> int:
    """The command: its settings resolved once (from os.environ and the current directory, unless given) and passed
    to what it calls."""
    settings = settings or paths.Settings.resolve()
    parser = build_parser(settings)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage; our contract says 13
        return exit_codes.SUCCESS if exc.code in (0, None) else exit_codes.USAGE
    try:
        return args.func(args, settings)
    except UsageError as exc:
        print(f"inferlab: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except record.RecordError as exc:
        print(f"inferlab: {exc}", file=sys.stderr)
        return exit_codes.RESTORE_UNVERIFIED


if __name__ == "__main__":
    sys.exit(main())

"""The scheduler API: run a playbook through ansible-runner, record and render the run, return what happened.

`inferlab run` is the CLI of `run()`. A scheduler can call it directly::

    from inferlab import api

    result = api.run("verify", "inventory/lab/hosts.yml")
    if result.rc != 0:
        print(result.status, result.rc, result.meaning, result.run_dir)

The run directory is ansible-runner's private_data_dir, so its artifacts (`artifacts/ansible/status`, `rc`, `stdout`,
`job_events/`) are where a scheduler that reads ansible-runner output already looks.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferlab import exit_codes, paths
from inferlab.plots import plots
from inferlab.record import record, runs
from inferlab.record.redaction import redact_vars
from inferlab.report import report
from inferlab.run import cancel, runner, strategy


@dataclass(frozen=True)
class RunResult:
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    rc: int  # inferlab's exit code (exit_codes.py): 0, 10, 11 or 12
    run_dir: Path
    record: dict | None  # the validated record.json; None when it could not be assembled
    ansible_rc: int | None = None  # ansible-playbook's own exit status (254 when canceled or timed out)
    record_error: str | None = None  # why there is no record, or why its report could not be rendered
    restore: dict | None = None  # the restore run after a cancel: {status, ansible_rc, verified}
    canceled_by: str | None = None  # a signal's name (SIGINT, SIGTERM, SIGHUP) or "callback"
    problems: tuple[str, ...] = ()  # what failed beside the playbook: ansible-runner itself, a file not written

    @property
    def succeeded(self) -> bool:
        return self.rc == exit_codes.SUCCESS

    @property
    def canceled(self) -> bool:
        return self.status == "canceled"

    @property
    def meaning(self) -> str:
        return exit_codes.MEANING[self.rc]


def resolve_inventory(inventory: str | Path | None, settings: paths.Settings) -> Path:
    path = Path(inventory) if inventory else settings.default_inventory
    if not path.exists():
        raise FileNotFoundError(f"inventory {path} does not exist")
    return path.resolve()


def render_outputs(run_dir: Path, data: dict) -> Path:
    """plots/*.png and report.md from a validated record; returns the report's path."""
    plots.render(run_dir, data)
    return report.write(run_dir, data)


def aborted(outcome: runner.RunOutcome) -> bool:
    """Canceled, timed out, or failed without play stats (ansible-playbook stopped before its recap: a parse error
    in a later task file, a crash): whatever the run changed is unknown."""
    return outcome.status in ("canceled", "timeout") or (outcome.status == "failed" and not outcome.stats)


def exit_code(outcome: runner.RunOutcome) -> int:
    """runner.classify, except that an aborted run without play stats is not taken to have changed nothing:
    ansible-playbook was stopped before it could count, so only a verified restore makes it 11."""
    if aborted(outcome) and not outcome.stats:
        if runs.restore_verified(outcome.run_dir):
            return exit_codes.EXPERIMENT_FAILED_RESTORED
        return exit_codes.RESTORE_UNVERIFIED
    return runner.classify(outcome)


# Playbooks whose cancel is not followed by a restore: the restore itself, the site dry run (it changes nothing) and
# the lab's own set-up and tear-down.
NO_RESTORE_AFTER_CANCEL = {"restore", "preflight", "lab_up", "lab_down"}


def restore_after_cancel(
    outcome: runner.RunOutcome,
    extravars: dict,
    quiet: bool,
    restore_playbook: str | Path = "restore",
    event_handler: Callable[[dict], bool] | None = None,
    *,
    settings: paths.Settings,
) -> dict | None:
    """An aborted run (canceled, timed out, or stopped before its recap) left whatever its ledgers recorded: run
    restore.yml in the same run directory, against the known-good snapshots the run wrote, before `inferlab run`
    exits. Its artifacts go to `artifacts/restore/`, its fragments beside the run's, so the record shows whether the
    restore verified. It runs on every host of the inventory, whatever --limit the run had: an undo of a host that
    holds no open entry changes nothing."""
    if not aborted(outcome) or outcome.playbook.stem in NO_RESTORE_AFTER_CANCEL:
        return None
    restore_vars = {
        **extravars,
        "restore_known_good_dir": str(outcome.run_dir / "known_good"),
        "restore_known_good_driver_dir": str(outcome.run_dir / "known_good_driver"),
    }
    try:
        restored = runner.run_playbook(
            runner.resolve_playbook(str(restore_playbook), settings),
            outcome.inventory,
            outcome.run_dir,
            restore_vars,
            quiet=quiet,
            ident="restore",
            cancel_callback=lambda: False,
            strategy_name=strategy.RESTORE,
            event_handler=event_handler,
            settings=settings,
        )
    except Exception as exc:  # noqa: BLE001 - ansible-runner itself failed (a full disk): the fragments say the rest
        return {"status": "failed", "ansible_rc": None, "verified": runs.restore_verified(outcome.run_dir),
                "error": f"{type(exc).__name__}: {exc}"}
    return {"status": restored.status, "ansible_rc": restored.rc, "verified": runs.restore_verified(outcome.run_dir)}


def run_metadata(outcome: runner.RunOutcome, code: int, extravars: dict, repo_root: Path) -> dict:
    """The record's `run` section (see record.schema.json); a secret in the extra vars is redacted (by the
    variable's name, and by the value's shape: inferlab.record.redaction). A playbook of the collection (under
    ``repo_root``, Settings.repo_root) is recorded relative to it."""
    playbook = outcome.playbook
    return {
        "id": outcome.run_id or outcome.run_dir.name,
        "playbook": str(playbook.relative_to(repo_root))
        if playbook.is_relative_to(repo_root)
        else str(playbook),
        "inventory": str(outcome.inventory),
        "started": outcome.started,
        "finished": outcome.finished,
        "status": outcome.status,
        "ansible_rc": outcome.rc,
        "exit_code": code,
        "exit_meaning": exit_codes.MEANING[code],
        "extravars": redact_vars(extravars),
        "stats": outcome.stats,
    }


def record_outcome(outcome: runner.RunOutcome, extravars: dict, restore: dict | None = None, *,
                   settings: paths.Settings) -> RunResult:
    """Assemble, validate and write the record of a finished run, then render its report and plots. A record that
    does not match the schema, or cannot be written (a full disk), makes the run 12: without it nobody can tell what
    the run changed. A report or plot that cannot be rendered keeps the run's code, with the reason in
    `record_error`: the record holds the run, and `inferlab report` renders it again."""
    code = exit_code(outcome)
    failed = functools.partial(RunResult, status=outcome.status, run_dir=outcome.run_dir, ansible_rc=outcome.rc,
                               restore=restore)
    try:
        record_path = record.write(outcome.run_dir, run_metadata(outcome, code, extravars, settings.repo_root))
        data = json.loads(record_path.read_text())
    except record.RecordError as exc:
        return failed(rc=exit_codes.RESTORE_UNVERIFIED, record=None, record_error=str(exc))
    except OSError as exc:
        return failed(rc=exit_codes.RESTORE_UNVERIFIED, record=None,
                      record_error=f"record.json could not be written: {exc.strerror or exc}")
    try:
        render_outputs(outcome.run_dir, data)
    except Exception as exc:  # noqa: BLE001 - a rendering bug or a full disk must not hide the run's outcome
        return failed(rc=code, record=data, record_error=f"the report could not be rendered: {type(exc).__name__}: "
                      f"{exc} (the record is whole: `inferlab report {outcome.run_dir}` renders it again)")
    return RunResult(
        status=outcome.status, rc=code, run_dir=outcome.run_dir, record=data, ansible_rc=outcome.rc, restore=restore
    )


def run(
    playbook: str | Path,
    inventory: str | Path | None,
    extravars: dict | None = None,
    run_dir: str | Path | None = None,
    cancel_callback: Callable[[], bool] | None = None,
    *,
    check: bool = False,
    quiet: bool = True,
    restore_playbook: str | Path | None = "restore",
    strategy_name: str | None = None,
    event_handler: Callable[[dict], bool] | None = None,
    status_handler: Callable[[dict, Any], None] | None = None,
    limit: str | None = None,
    settings: paths.Settings | None = None,
) -> RunResult:
    """Run `playbook` (a path, or a name under playbooks/) against `inventory` (None: the lab's) in `run_dir`
    (default `runs/<UTC stamp>-<playbook stem>/`), then write record.json, report.md and plots there.

    `cancel_callback` is polled while the playbook runs; when it returns True, ansible-runner stops the playbook and
    the result's status is `canceled`. Then restore.yml runs in the same run directory (`result.restore`), and the
    rc is 11 when it verified every host, else 12 (`restore_playbook=None`: no restore, for playbooks that change
    nothing). Without one, SIGINT, SIGTERM and SIGHUP cancel (a hang-up never cancels the restore playbook).
    `quiet` keeps ansible's output off stdout (it is in
    `artifacts/ansible/stdout` either way). `strategy_name` is the Ansible strategy (inferlab.run.strategy; None:
    $INFERLAB_STRATEGY or the default); a restore playbook, and the restore after a cancel, always run on `linear`.
    `event_handler` gets every ansible-runner job event (the run's, and the restore's after a cancel; it returns True
    to keep the event in the artifacts; inferlab.run.progress.Progress is the CLI's),
    `status_handler` each status change
    of the run. `limit` is ansible-playbook's --limit for the run (never for the restore after a cancel).
    Raises FileNotFoundError for a missing playbook or inventory, inferlab.run.strategy.StrategyError for an unknown
    strategy. `settings` (inferlab.paths.Settings) say where the collection, its ansible.cfg, the default inventory and
    the runs directory are; None: resolved from os.environ and the current directory now.
    """
    settings = settings or paths.Settings.resolve()
    playbook_path = runner.resolve_playbook(str(playbook), settings)
    inventory_path = resolve_inventory(inventory, settings)
    target = Path(run_dir).resolve() if run_dir else runner.new_run_dir(playbook_path, settings.runs)
    extravars = dict(extravars or {})
    chosen = strategy.RESTORE if playbook_path.stem == "restore" else strategy.chosen(strategy_name)
    # The handlers stay through the restore after a cancel: a second signal then changes nothing (the restore's own
    # callback never cancels), and a hang-up only moves the console to the run directory.
    run_id = str(extravars.get("inferlab_run_id") or runner.run_id_for(target))  # the mark of its processes
    with cancel.Cancel(target, run_id, cancel_callback, cancel_on_hangup=playbook_path.stem != "restore") as canceler:
        started = runner.utc_iso()
        try:
            outcome = runner.run_playbook(
                playbook_path,
                inventory_path,
                target,
                extravars,
                quiet=quiet,
                check=check,
                cancel_callback=canceler,
                strategy_name=chosen,
                event_handler=canceler.events(event_handler),
                status_handler=status_handler,
                limit=limit,
                run_id=run_id,
                settings=settings,
            )
        except Exception as exc:  # noqa: BLE001 - whatever failed, what the run changed is unknown: restore it
            outcome = runner.aborted_outcome(playbook_path, inventory_path, target, chosen, started, run_id, exc)
        outcome.canceled_by, outcome.ended_pids = canceler.requested_by, canceler.ended
        bookkeeping_error = runner.write_run_json(outcome)
        restore = (
            None
            if check or restore_playbook is None
            else restore_after_cancel(outcome, extravars, quiet, restore_playbook, event_handler, settings=settings)
        )
    result = record_outcome(outcome, extravars, restore, settings=settings)
    problems = tuple(p for p in (outcome.error, bookkeeping_error, result.record_error) if p)
    return dataclasses.replace(result, canceled_by=outcome.canceled_by, problems=problems)

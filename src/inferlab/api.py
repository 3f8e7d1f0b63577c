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

import json
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferlab import exit_codes, paths, plots, record, report, runner


@dataclass(frozen=True)
class RunResult:
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    rc: int  # inferlab's exit code (exit_codes.py): 0, 10, 11 or 12
    run_dir: Path
    record: dict | None  # the validated record.json; None when it could not be assembled
    ansible_rc: int | None = None  # ansible-playbook's own exit status (254 when canceled or timed out)
    record_error: str | None = None  # why there is no record

    @property
    def succeeded(self) -> bool:
        return self.rc == exit_codes.SUCCESS

    @property
    def canceled(self) -> bool:
        return self.status == "canceled"

    @property
    def meaning(self) -> str:
        return exit_codes.MEANING[self.rc]


def resolve_inventory(inventory: str | Path | None) -> Path:
    path = Path(inventory) if inventory else paths.DEFAULT_INVENTORY
    if not path.exists():
        raise FileNotFoundError(f"inventory {path} does not exist")
    return path.resolve()


def render_outputs(run_dir: Path, data: dict) -> Path:
    """plots/*.png and report.md from a validated record; returns the report's path."""
    plots.render(run_dir, data)
    return report.write(run_dir, data)


def exit_code(outcome: runner.RunOutcome) -> int:
    """runner.classify, except that a canceled or timed-out run without play stats is not taken to have changed
    nothing: ansible-playbook was stopped before it could count, so only a verified restore makes it 11."""
    if outcome.status in ("canceled", "timeout") and not outcome.stats:
        if runner.restore_verified(outcome.run_dir):
            return exit_codes.EXPERIMENT_FAILED_RESTORED
        return exit_codes.RESTORE_UNVERIFIED
    return runner.classify(outcome)


def run_metadata(outcome: runner.RunOutcome, code: int, extravars: dict) -> dict:
    """The record's `run` section (see record.schema.json)."""
    playbook = outcome.playbook
    return {
        "id": outcome.run_dir.name,
        "playbook": str(playbook.relative_to(paths.REPO_ROOT))
        if playbook.is_relative_to(paths.REPO_ROOT)
        else str(playbook),
        "inventory": str(outcome.inventory),
        "started": outcome.started,
        "finished": outcome.finished,
        "status": outcome.status,
        "ansible_rc": outcome.rc,
        "exit_code": code,
        "exit_meaning": exit_codes.MEANING[code],
        "extravars": extravars,
        "stats": outcome.stats,
    }


def record_outcome(outcome: runner.RunOutcome, extravars: dict) -> RunResult:
    """Assemble, validate and render the record of a finished run. A record that does not match the schema makes
    the run 12: without it nobody can tell what the run changed."""
    code = exit_code(outcome)
    try:
        record_path = record.write(outcome.run_dir, run_metadata(outcome, code, extravars))
        data = json.loads(record_path.read_text())
        render_outputs(outcome.run_dir, data)
    except record.RecordError as exc:
        return RunResult(
            status=outcome.status,
            rc=exit_codes.RESTORE_UNVERIFIED,
            run_dir=outcome.run_dir,
            record=None,
            ansible_rc=outcome.rc,
            record_error=str(exc),
        )
    return RunResult(status=outcome.status, rc=code, run_dir=outcome.run_dir, record=data, ansible_rc=outcome.rc)


class _SignalHandlersKept:
    """ansible-runner installs its own SIGINT/SIGTERM handlers when it gets no cancel callback, and leaves them
    installed; put the caller's back afterwards so a long-lived scheduler keeps its own."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        in_main = threading.current_thread() is threading.main_thread()
        self.saved = {sig: signal.getsignal(sig) for sig in self.SIGNALS} if in_main else {}
        return self

    def __exit__(self, *exc_info):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def run(
    playbook: str | Path,
    inventory: str | Path | None,
    extravars: dict | None = None,
    run_dir: str | Path | None = None,
    cancel_callback: Callable[[], bool] | None = None,
    *,
    check: bool = False,
    quiet: bool = True,
) -> RunResult:
    """Run `playbook` (a path, or a name under playbooks/) against `inventory` (None: the lab's) in `run_dir`
    (default `runs/<UTC stamp>-<playbook stem>/`), then write record.json, report.md and plots there.

    `cancel_callback` is polled while the playbook runs; when it returns True, ansible-runner stops the playbook and
    the result's status is `canceled` (rc 11 when a restore in the run was verified, else 12; 10 only when the play
    stats say nothing changed). Without one, SIGINT and SIGTERM cancel. `quiet` keeps ansible's output off stdout
    (it is in `artifacts/ansible/stdout` either way). Raises FileNotFoundError for a missing playbook or inventory.
    """
    playbook_path = runner.resolve_playbook(str(playbook))
    inventory_path = resolve_inventory(inventory)
    target = Path(run_dir).resolve() if run_dir else runner.new_run_dir(playbook_path)
    extravars = dict(extravars or {})
    with _SignalHandlersKept():
        outcome = runner.run_playbook(
            playbook_path, inventory_path, target, extravars, quiet=quiet, check=check, cancel_callback=cancel_callback
        )
    return record_outcome(outcome, extravars)

"""Run a playbook through ansible-runner in a run directory, and classify the outcome into inferlab's exit codes."""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ansible_runner

from inferlab import exit_codes, paths
from inferlab.record import runs
from inferlab.run import strategy
from inferlab.system import liveness, process_tree
from inferlab.system.private_files import make_private_dir, write_private


@dataclass
class RunOutcome:
    run_dir: Path
    playbook: Path
    inventory: Path
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    rc: int
    stats: dict = field(default_factory=dict)
    started: str = ""
    finished: str = ""
    strategy: str = ""
    run_id: str = ""  # the id its ledger entries and locks carry (run_id_for)
    canceled_by: str | None = None  # what canceled it: a signal's name (SIGINT, SIGTERM, SIGHUP) or "callback"
    ended_pids: list[int] = field(default_factory=list)  # the playbook's process tree, ended by the cancel
    error: str | None = None  # why ansible-runner itself failed (aborted_outcome)

    @property
    def succeeded(self) -> bool:
        return self.status == "successful" and self.rc == 0

    @property
    def changed_total(self) -> int:
        return sum((self.stats.get("changed") or {}).values())


def utc_stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def utc_iso(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_dir(playbook: Path, runs_root: Path) -> Path:
    """`<runs_root>/<UTC stamp>-<playbook stem>/` (runs_root: Settings.runs), with a numeric suffix if two runs start
    in the same second."""
    base = runs_root / f"{utc_stamp()}-{playbook.stem}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}.{n}")
    return candidate


def run_id_for(run_dir: Path) -> str:
    """The id of the run in ``run_dir``: the directory's name and 8 random hex digits, so that two runs started in the
    same second (two controllers, two operators) never share one, and a lock or ledger entry names exactly one run.
    The restore after a cancel runs in the same directory and keeps the run's id (env/extravars has it), so the
    locks the run holds are its own."""
    try:
        known = json.loads((run_dir / "env" / "extravars").read_text()).get("inferlab_run_id")
    except (OSError, ValueError, AttributeError):
        known = None
    return known if isinstance(known, str) and known else f"{run_dir.name}-{secrets.token_hex(4)}"


def resolve_playbook(name: str, settings: paths.Settings) -> Path:
    """Accept `playbooks/verify.yml`, `verify.yml` or `verify`, relative to the cwd or the collection."""
    if settings.collection is None:
        raise FileNotFoundError(paths.not_found_message(settings.collection_looked))
    given = Path(name)
    candidates = [given, settings.repo_root / given, settings.playbooks / given, settings.playbooks / f"{given}.yml"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise FileNotFoundError(f"playbook {name!r} not found (looked in the current directory and {settings.playbooks})")


def run_playbook(
    playbook: Path,
    inventory: Path,
    run_dir: Path,
    extravars: dict | None = None,
    quiet: bool = False,
    check: bool = False,
    cancel_callback: Callable[[], bool] | None = None,
    ident: str = "ansible",
    strategy_name: str = strategy.RESTORE,
    event_handler: Callable[[dict], bool] | None = None,
    status_handler: Callable[[dict, Any], None] | None = None,
    limit: str | None = None,
    run_id: str | None = None,
    *,
    settings: paths.Settings,
) -> RunOutcome:
    """Run `playbook` with `run_dir` as ansible-runner's private_data_dir; plays get it as `inferlab_run_dir`.

    `cancel_callback` is ansible-runner's: polled while the playbook runs, True cancels it (status `canceled`).
    Without one, ansible-runner cancels on SIGINT or SIGTERM when called from the main thread. `ident` names the
    artifacts directory (`artifacts/<ident>/`): the restore that follows a canceled run keeps its own.
    `strategy_name` is the Ansible strategy (inferlab.run.strategy); run.json says which one ran. `event_handler` and
    `status_handler` are ansible-runner's (each job event; each status change), `limit` ansible-playbook's --limit,
    `run_id` the run's id (run_id_for by default; an `inferlab_run_id` in `extravars` wins over both).
    `settings` say which ansible.cfg and collection Ansible gets.
    """
    make_private_dir(run_dir)
    started = utc_iso()
    # The ledger lock names this process as the run's holder, so a lock left by a killed run is seen as stale.
    all_vars = {"inferlab_run_dir": str(run_dir), "inferlab_run_id": run_id or run_id_for(run_dir),
                **liveness.controller_vars(), **(extravars or {})}
    # Never on a command line: ansible-runner would put a dict of extra vars in ansible-playbook's argv (and in
    # artifacts/<ident>/command), where `ps` shows them. A file it passes as `-e @env/extravars` instead.
    write_private(run_dir / "env" / "extravars", json.dumps(all_vars))
    installed = settings.installed_collections_path()
    envvars = {
        "ANSIBLE_CONFIG": str(settings.ansible_cfg),
        "ANSIBLE_NOCOLOR": "0" if sys.stdout.isatty() else "1",
        # ansible-playbook lives beside this interpreter (the venv), which need not be on the caller's PATH.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        **strategy.ansible_env(strategy_name),
        # every process of the run inherits it: a cancel, or the restore after a kill, finds them all by it
        process_tree.RUN_MARK: all_vars["inferlab_run_id"],
        # an installed collection (paths.py): the packaged ansible.cfg's collections_path (.collections beside it)
        # holds none, and this variable overrides it
        **({"ANSIBLE_COLLECTIONS_PATH": str(installed)} if installed else {}),
    }
    # ansible-runner writes env/envvars on a directory's first run and, on a later run in the same directory (the
    # restore after a cancel), lets that file override the environment passed here: the restore's strategy included.
    (run_dir / "env" / "envvars").unlink(missing_ok=True)
    result = ansible_runner.run(
        private_data_dir=str(run_dir),
        playbook=str(playbook),
        inventory=str(inventory),
        envvars=envvars,
        quiet=quiet,
        ident=ident,
        rotate_artifacts=0,
        cmdline="--check --diff" if check else None,
        cancel_callback=cancel_callback,
        event_handler=event_handler,
        status_handler=status_handler,
        limit=limit,
    )
    outcome = RunOutcome(
        run_dir=run_dir,
        playbook=playbook,
        inventory=inventory,
        status=result.status,
        rc=result.rc,
        stats=result.stats or {},
        started=started,
        finished=utc_iso(),
        strategy=strategy_name,
        run_id=all_vars["inferlab_run_id"],
    )
    return outcome


def aborted_outcome(playbook: Path, inventory: Path, run_dir: Path, strategy_name: str, started: str, run_id: str,
                    error: BaseException) -> RunOutcome:
    """The outcome of a run whose ansible-runner call raised (a full disk under its artifacts, a crash): status
    `failed` with no play stats, so what it changed is unknown and the restore after a cancel runs."""
    return RunOutcome(run_dir=run_dir, playbook=playbook, inventory=inventory, status="failed", rc=-1,
                      started=started, finished=utc_iso(), strategy=strategy_name, run_id=run_id,
                      error=f"{type(error).__name__}: {error}")


def write_run_json(outcome: RunOutcome) -> str | None:
    """run.json, written whole then renamed; the error's text when it could not be written (a full disk): the
    bookkeeping never stops what must follow (the restore after a cancel)."""
    try:
        write_private(outcome.run_dir / "run.json", json.dumps(outcome_summary(outcome), indent=2) + "\n")
    except OSError as exc:
        return f"run.json could not be written: {exc.strerror or exc}"
    return None


def outcome_summary(outcome: RunOutcome) -> dict:
    return {
        "playbook": str(outcome.playbook),
        "inventory": str(outcome.inventory),
        "status": outcome.status,
        "ansible_rc": outcome.rc,
        "stats": outcome.stats,
        "started": outcome.started,
        "finished": outcome.finished,
        "strategy": outcome.strategy,
        **({"canceled_by": outcome.canceled_by, "ended_pids": outcome.ended_pids} if outcome.canceled_by else {}),
        **({"error": outcome.error} if outcome.error else {}),
    }


def restore_ran(run_dir: Path) -> bool:
    """Whether a restore in the run wrote a fragment (runs.restore_verified says whether it verified)."""
    return any((run_dir / "fragments" / "restore").glob("*.json"))


def classify(outcome: RunOutcome) -> int:
    """Map a finished run to the exit codes of exit_codes.py.

    A failed run that changed nothing on any host is a failed precondition (10), unless a restore in it could not be
    verified (12: a standalone restore that finds a difference changes nothing itself). One that changed something is
    11 only when a restore in the same run verified the hosts against their known-good state, else 12.
    """
    if outcome.succeeded:
        return exit_codes.SUCCESS
    if restore_ran(outcome.run_dir) and not runs.restore_verified(outcome.run_dir):
        return exit_codes.RESTORE_UNVERIFIED
    if outcome.changed_total == 0:
        return exit_codes.PRECONDITION_FAILED
    if runs.restore_verified(outcome.run_dir):
        return exit_codes.EXPERIMENT_FAILED_RESTORED
    return exit_codes.RESTORE_UNVERIFIED

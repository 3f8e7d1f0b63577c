"""Re-verification of a comparison: `inferlab reverify A B` runs both configurations again, interleaved (A B A B
...), as separate and later runs from a fresh start, compares the new A with the new B, and says of each claim
whether its verdict held, beside how far A itself drifted between the original runs and the new ones.

A verdict is re-verified only by a separate run, later than the original, of the same plan, that started from a
fresh start (a fix is not a fix until it re-verifies cold). So each run is run again: the
same playbook, inventory and extra vars (read from the run directory's private ``env/extravars``, so that a secret
the record redacts is passed again), in a new run directory, after the original ended. A's runs are run again too,
each before B's of the same rank: comparing the original A with new B runs alone would compare two blocks of time,
all A then all B, and a drift in the order the runs ran (the machine warming, a neighbour's load) would read as an
effect (simulated in tests/package/test_stats_calibration.py: a drift of 0.5 % a run gives "supported" in 13.5 % of
5-against-5 comparisons with no true difference when every A ran first, 1.2 % interleaved, against a nominal 2.5 %).
Two modes of the same runs (RUN:MODE on both sides) re-run each run once. The staged experiment records the fresh
start it began from (``stages.fresh_start``), which `compare --require-fresh` checks for every new run of B, each
later than every original run of B. A claim whose original verdict was supported and is not supported again, or
whose new runs did not start fresh, reads "did not re-verify"; it is never dropped. Pure functions; the CLI runs the
playbooks.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from inferlab import paths
from inferlab.analysis import compare, metric_rows, record_input, verdict_policy
from inferlab.system import liveness

# What ansible-runner's wrapper adds to a run's extra vars (runner.run_playbook); a re-run gets its own.
RUNNER_VARS = ("inferlab_run_dir", "inferlab_run_id", *liveness.CONTROLLER_VARS)
# The extra var a re-run carries, naming the run it re-verifies (record.json keeps it under run.extravars).
REVERIFIES_VAR = "inferlab_reverifies"

# Each original run of B keeps what every re-verification of it found, the latest last, never dropped; its report
# shows them (report.py, "Re-verification").
KEPT_FILE = "reverifications.json"

HELD = "re-verified"
NOT_HELD = "did not re-verify"
NOTHING = "nothing to re-verify"


class ReverifyError(Exception):
    """A run that cannot be run again as it was (no record, no extra vars file)."""


@dataclass(frozen=True)
class Rerun:
    """One run of side B to run again: its run directory, the mode compared (or None), and how it ran."""

    run_dir: Path
    mode: str | None
    run_id: str
    playbook: Path  # one of the collection's playbooks (collection_playbook)
    inventory: Path  # the user's, or the collection's own (collection_inventory)
    extravars: dict


@dataclass(frozen=True)
class Outcome:
    claim: str
    original: str
    again: str
    held: str
    reason: str


def rerun_of(run_dir: Path, mode: str | None = None, inventory: str | Path | None = None, *,
             settings: paths.Settings) -> Rerun:
    """How the run in ``run_dir`` ran: its record's playbook (collection_playbook), the inventory the user names
    (``inventory``) or else its record's (collection_inventory), and its extra vars from ``env/extravars`` (the
    values as given, secrets included; the wrapper's own variables left out). The collection is ``settings``'."""
    data = record_input.load_record(run_dir)
    run = data["run"]
    playbook = collection_playbook(run["playbook"], run["id"], settings.playbooks)
    chosen = Path(inventory) if inventory else collection_inventory(run["inventory"], run["id"], settings.repo_root)
    private = Path(run_dir) / "env" / "extravars"
    try:
        extravars = json.loads(private.read_text())
    except OSError as exc:
        raise ReverifyError(f"{private}: cannot read the run's extra vars ({exc.strerror or exc}), so it cannot be run "
                            "again as it was") from None
    except (ValueError, RecursionError) as exc:
        raise ReverifyError(f"{private}: not JSON ({exc})") from None
    if not isinstance(extravars, dict):
        raise ReverifyError(f"{private}: expected a JSON object of extra vars")
    return Rerun(run_dir=Path(run_dir), mode=mode, run_id=run["id"], playbook=playbook, inventory=chosen,
                 extravars={k: v for k, v in extravars.items() if k not in RUNNER_VARS and k != REVERIFIES_VAR})


def plan(original: compare.Comparison, runs_a: list[Path], runs_b: list[Path],
         inventory: str | Path | None = None, *, settings: paths.Settings) -> list[Rerun]:
    """The runs to run again, interleaved (A's first, B's first, A's second, ...: a drift in time then reaches both
    sides alike), each run directory once (two modes of one run are one re-run), each rerun_of with the user's
    ``inventory``; refused when no verdict of the original comparison was supported: nothing would be
    re-verified."""
    if not any(v.verdict == verdict_policy.SUPPORTED for v in original.verdicts):
        verdicts = ", ".join(f"{v.claim}: {v.verdict}" for v in original.verdicts) or "no claim"
        raise ReverifyError(f"nothing to re-verify: no verdict of A against B was supported ({verdicts}), so "
                            "nothing is run again (a re-run borrows production for nothing)")
    ranks = max(len(runs_a), len(runs_b))
    interleaved = [side[i] for i in range(ranks) for side in (runs_a, runs_b) if i < len(side)]
    return [rerun_of(run_dir, inventory=inventory, settings=settings) for run_dir in dict.fromkeys(interleaved)]


def respec(spec: str, new_dirs: dict[Path, Path], resolve) -> str:
    """A RUN or RUN:MODE argument with its run replaced by the run that ran it again (``resolve``: the CLI's way
    from an argument to its run directory)."""
    run, mode = record_input.split_mode(spec)
    again = new_dirs[resolve(run)]
    return f"{again}:{mode}" if mode else str(again)


def drift(original_a: compare.Comparison) -> list[dict]:
    """How A moved between its original runs and the new ones (``original_a``: compare of the original A against
    the new A, an A/A pair): each speed and transport metric's medians and their change, observed."""
    return [{"metric": f"{row.section}: {row.name}", "original": row.a.median, "again": row.b.median,
             "change_pct": 100 * row.difference / row.a.median if row.a.median else None}
            for row in original_a.rows if row.role in (metric_rows.SPEED, metric_rows.TRANSPORT)]


def collection_playbook(recorded: str, run_id: str, playbooks: Path) -> Path:
    """The collection's playbook a record names (``playbooks/<name>.yml``, as `inferlab run` records one of the
    collection's), resolved under the collection, never against the current directory. Raises ReverifyError for
    any other: a path outside the collection's playbooks/ (an absolute one, ``..``, a link out), or none there."""
    playbooks = playbooks.resolve()
    given = Path(recorded)
    target = (given if given.is_absolute() else playbooks.parent / given).resolve()
    if target.parent != playbooks or target.suffix != ".yml" or not target.is_file():
        raise ReverifyError(f"run {run_id}'s record names the playbook {recorded!r}, which is not one of the "
                            f"collection's playbooks ({playbooks}/<name>.yml): inferlab reverify runs only those")
    return target


def collection_inventory(recorded: str, run_id: str, collection: Path) -> Path:
    """The inventory a record names, when it is the collection's own: a file or directory under the collection's
    inventory/ (resolved there, never against the current directory), and not an executable (Ansible runs an
    executable inventory as a script). Raises ReverifyError for any other, asking for ``-i``."""
    shipped = (collection / "inventory").resolve()
    given = Path(recorded)
    target = (given if given.is_absolute() else shipped.parent / given).resolve()
    why = None
    if not target.is_relative_to(shipped) or not target.exists():
        why = f"it is not an inventory the collection ships (under {shipped})"
    elif target.is_file() and os.access(target, os.X_OK):
        why = "it is an executable, which Ansible would run as an inventory script"
    if why:
        raise ReverifyError(f"run {run_id}'s record names the inventory {recorded!r}, and {why}: name the inventory "
                            "of the new runs with -i")
    return target


def rerun_vars(rerun: Rerun) -> dict:
    """The extra vars of the new run: the original's, and the run it re-verifies."""
    return {**rerun.extravars, REVERIFIES_VAR: rerun.run_id}


def judge(original: compare.Comparison, again: compare.Comparison) -> list[Outcome]:
    """Each claim of the original comparison, against the comparison of the new runs (made with require_fresh):
    held only when it was supported and is supported again by later runs from a fresh start."""
    outcomes = []
    for first, second in zip(original.verdicts, again.verdicts, strict=True):
        if first.verdict != verdict_policy.SUPPORTED:
            outcomes.append(Outcome(first.claim, first.verdict, second.verdict, NOTHING,
                                    f"the original verdict was {first.verdict}, not supported"))
        elif second.verdict == verdict_policy.SUPPORTED and second.re_verified:
            outcomes.append(Outcome(first.claim, first.verdict, second.verdict, HELD,
                                    f"supported again by later runs from a fresh start: {again.fresh_b[1]}"))
        elif second.verdict == verdict_policy.SUPPORTED:
            outcomes.append(Outcome(first.claim, first.verdict, second.verdict, NOT_HELD,
                                    f"supported again, but B {again.fresh_b[1]}"))
        else:
            outcomes.append(Outcome(first.claim, first.verdict, second.verdict, NOT_HELD,
                                    f"{second.verdict} this time: {second.reason}"))
    return outcomes


def failed_rerun(original: compare.Comparison, run_dir: Path, code: int, meaning: str) -> list[Outcome]:
    """Every claim, when a new run of B failed (no record to compare): a supported one did not re-verify."""
    why = f"the re-run {run_dir} failed: exit {code} ({meaning})"
    return [Outcome(v.claim, v.verdict, "none", NOT_HELD if v.verdict == verdict_policy.SUPPORTED else NOTHING, why)
            for v in original.verdicts]


def render_lines(document: dict) -> list[str]:
    """What one re-verification found (``as_json``'s document) as Markdown lines: the runs, a row per claim (the new
    B against the new A, run interleaved) and A's drift from its original runs."""
    failed = "none (a re-run failed)"
    lines = [f"- A, the original runs: {', '.join(document['a'])}",
             f"- B, the original runs: {', '.join(document['b'])}",
             f"- A, run again (interleaved with B): {', '.join(document.get('a_again') or []) or failed}",
             f"- B, run again from a fresh start: {', '.join(document['b_again']) or failed}",
             "", "| claim | original verdict | again | outcome |", "| --- | --- | --- | --- |"]
    outcomes = document["outcomes"]
    lines += [f"| {o['claim']} | {o['original']} | {o['again']} | **{o['held']}** |" for o in outcomes]
    lines.append("")
    lines += [f"- {o['claim']}: {o['held']}: {o['reason']}" for o in outcomes]
    if document.get("a_drift"):
        lines += ["", "A's drift between its original runs and the new ones (medians, observed: a drift this size "
                  "between two blocks of runs is why A runs again beside B):", "",
                  "| metric | A, original | A, again | change |", "| --- | --- | --- | --- |"]
        lines += [f"| {d['metric']} | {d['original']:.4g} | {d['again']:.4g} | "
                  f"{'—' if d['change_pct'] is None else format(d['change_pct'], '+.1f') + ' %'} |"
                  for d in document["a_drift"]]
    return lines


def render_text(document: dict) -> str:
    """`inferlab reverify`'s output for one re-verification (``as_json``'s document)."""
    return "\n".join(["# inferlab reverify", "", *render_lines(document)]) + "\n"


def as_json(a_ids: list[str], b_ids: list[str], new_a: list[str], new_b: list[str], outcomes: list[Outcome],
            a_drift: list[dict]) -> dict:
    return {"a": a_ids, "b": b_ids, "a_again": new_a, "b_again": new_b, "outcomes": [asdict(o) for o in outcomes],
            "a_drift": a_drift}


def read_kept(run_dir: Path) -> list[dict]:
    """The re-verifications kept in ``run_dir`` (KEPT_FILE), oldest first; [] when it has none."""
    path = Path(run_dir) / KEPT_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ReverifyError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("outcomes"), list)
                                             for d in data):
        raise ReverifyError(f"{path}: expected a JSON list of re-verifications, each with its outcomes")
    return data


def keep(run_dir: Path, document: dict) -> Path:
    """Add ``document`` (as_json's, with its ``time``) to the re-verifications kept in ``run_dir``: the file is
    written whole beside the old one, then renamed over it, so a crash leaves the old list."""
    target = Path(run_dir) / KEPT_FILE
    kept = [*read_kept(run_dir), document]
    partial = target.with_name(f".{KEPT_FILE}.partial")
    partial.write_text(json.dumps(kept, indent=2) + "\n")
    os.replace(partial, target)
    return target

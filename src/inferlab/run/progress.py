"""What `inferlab run` shows while a playbook runs, instead of Ansible's task output: a line per play until the
first experiment stage starts, then a line as each stage starts and as it ends (its place among the planned stages,
outcome and duration), and every failed task with its host and message.

It is an ansible-runner ``event_handler``: ansible-runner calls it with each job event. The stages come from the
files the experiment writes on the controller, not from task names: the plan (``fragments/experiment/plan.json``)
and one journal entry per stage (``fragments/journal/<stage>.json``, status ``running`` then its outcome). Ansible's
whole output stays in ``artifacts/<ident>/stdout`` of the run directory.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TextIO

# the longest failure message shown; the whole one is in the run directory's output
MESSAGE_MAX = 300
# the journal is read at most this often (events come by the thousand)
JOURNAL_POLL_S = 0.5


class Progress:
    """Call it with each ansible-runner event (it returns True: the event is kept in the artifacts)."""

    def __init__(self, run_dir: Path, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.run_dir = Path(run_dir)
        self.stream = stream
        self.clock = clock
        self.read_at = None
        self.seen: dict[str, str] = {}  # stage -> the last status shown
        self.planned: list[str] = []  # read once the plan is written (before the first stage)
        self.staged = False

    def __call__(self, event: dict) -> bool:
        kind = event.get("event")
        data = event.get("event_data") or {}
        self.read_journal(force=kind in ("playbook_on_play_start", "playbook_on_stats"))
        if kind == "playbook_on_play_start" and not self.staged:
            self.say(f"play: {data.get('play') or data.get('name') or '(unnamed)'}")
        elif kind in ("runner_on_failed", "runner_item_on_failed") and not data.get("ignore_errors"):
            first, *more = message_lines(data)
            self.say(f"failed on {host_of(data)}: {data.get('task') or '(unnamed task)'}: {first}")
            for line in more:
                self.say(f"  {line}")
        elif kind == "runner_on_unreachable":
            self.say(f"unreachable: {host_of(data)}: {message_of(data)}")
        return True

    def say(self, line: str) -> None:
        print(f"inferlab: {line}", file=self.stream or sys.stderr, flush=True)

    def read_journal(self, force: bool = False) -> None:
        now = self.clock()
        if not force and self.read_at is not None and now - self.read_at < JOURNAL_POLL_S:
            return
        self.read_at = now
        entries = journal_entries(self.run_dir)
        if not entries:
            return
        self.staged = True
        self.planned = self.planned or planned_stages(self.run_dir)
        for entry in sorted(entries, key=lambda e: (e.get("index") or 0, e.get("started") or "")):
            stage, status = str(entry.get("stage")), str(entry.get("status"))
            if self.seen.get(stage) == status:
                continue
            if stage not in self.seen and status != "running":
                self.say(f"{place(stage, self.planned)}: started")  # it began and ended between two reads
            self.seen[stage] = status
            if status == "running":
                self.say(f"{place(stage, self.planned)}: started")
            else:
                self.say(f"{place(stage, self.planned)}: {status}, {duration(entry)}{note_of(entry)}")


def journal_entries(run_dir: Path) -> list[dict]:
    """The stage journal's entries; a file being written (or not JSON) is skipped, to be read at the next poll."""
    entries = []
    for path in sorted(Path(run_dir, "fragments", "journal").glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("stage"):
            entries.append(entry)
    return entries


def planned_stages(run_dir: Path) -> list[str]:
    """The stages that run, in order: the plan's stage table's selected rows (the ones asked for and the ones that
    always run, the restore among them), else its list of the stages asked for; empty without a readable plan."""
    try:
        plan = json.loads(Path(run_dir, "fragments", "experiment", "plan.json").read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(plan, dict):
        return []
    rows = plan.get("stages")
    if isinstance(rows, list) and all(isinstance(r, dict) and "stage" in r for r in rows):
        chosen = sorted((r for r in rows if r.get("selected")), key=lambda r: r.get("index") or 0)
        return [str(r["stage"]) for r in chosen]
    selected = plan.get("selected")
    return [str(s) for s in selected] if isinstance(selected, list) else []


def place(stage: str, planned: list[str]) -> str:
    if stage in planned:
        return f"stage {planned.index(stage) + 1}/{len(planned)} {stage}"
    return f"stage {stage}"


def duration(entry: dict) -> str:
    try:
        started = datetime.fromisoformat(str(entry["started"]).replace("Z", "+00:00"))
        finished = datetime.fromisoformat(str(entry["finished"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return "duration unknown"
    return f"{(finished - started).total_seconds():.0f} s"


def note_of(entry: dict) -> str:
    note = str(entry.get("note") or "").strip()
    return f" ({truncate(note)})" if note else ""


def host_of(data: dict) -> str:
    host = data.get("host") or "?"
    delegated = (data.get("res") or {}).get("_ansible_delegated_vars", {}).get("ansible_host")
    return f"{host} -> {delegated}" if delegated and delegated != host else host


def message_of(data: dict) -> str:
    """The failure's message on one line, cut at MESSAGE_MAX (a list's items joined with "; ")."""
    lines = message_lines(data)
    return truncate("; ".join(lines))


def message_lines(data: dict) -> list[str]:
    """The failure's message as the lines to show: a message that is a list (a site dry run's problems, each a whole
    sentence) one item a line, each whole; any other message one line, cut at MESSAGE_MAX."""
    res = data.get("res") or {}
    if res.get("censored"):
        return ["(output hidden: no_log)"]
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or ""
    label = ""
    if data.get("item") is not None or res.get("item") is not None:
        label = f"[{res.get('_ansible_item_label') or res.get('item') or data.get('item')}] "
    if isinstance(msg, list) and len(msg) > 1:
        items = [" ".join(str(m).split()) for m in msg]
        return [label + items[0]] + items[1:]
    if isinstance(msg, list):
        msg = " ".join(str(m) for m in msg)
    return [truncate(" ".join(f"{label}{msg}".split())) or "(no message)"]


def truncate(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX - 3] + "..."

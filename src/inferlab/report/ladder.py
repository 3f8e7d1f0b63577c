"""The report's elimination ladder for a suspect host (roles/link_test, tasks_from: suspect): each step's runs as
a table of Mbit/s, its verdict, and what it does not show, in the step's own words, then the ladder's theory.
Observed and characterized, never a cause.

A record holds the ladder under `stages.<stage>.<suspect>` (stage `suspect_ladder` by default); anything there that
is not a ladder is left out, never a failure of the report.
"""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt

STEP_TITLES = {"flows": "Per flow or per host", "window": "The window", "nagle": "Nagle",
               "message_sizes": "Message sizes", "control": "A control host", "loopback": "Loopback"}
PATH_WORDS = {"suspect": "suspect -> server", "receive": "server -> suspect", "control": "control -> server",
              "loopback": "suspect -> itself (loopback)"}


def ladders(record: dict) -> list[tuple[str, dict]]:
    """Every ladder in the record, labelled `stage (suspect)`."""
    return record_view.stage_fragments(
        record, lambda f: isinstance((f.get("ladder") or {}).get("steps"), dict) and isinstance(f.get("hosts"), dict)
        and isinstance(f.get("runs"), list))


def _mbit(bps) -> str:
    number = record_view.number(bps)
    return "—" if number is None else f"{number / 1e6:.1f}"


def _runs_table(fragment: dict) -> list[str]:
    rows = []
    for run in fragment["runs"]:
        if not isinstance(run, dict):
            continue
        path, args = run.get("path"), run.get("args")
        rows.append([fmt.cell(run.get("name")), PATH_WORDS.get(path, fmt.cell(path)) if isinstance(path, str)
                     else fmt.cell(path), fmt.cell(" ".join(str(a) for a in args) if isinstance(args, list) else args),
                     _mbit(run.get("bps")),
                     fmt.value(run.get("retransmits")), fmt.cell(run.get("error"))])
    return fmt.table(["run", "path", "iperf3 arguments", "Mbit/s", "retransmits", "error"], rows)


def section(record: dict) -> list[str]:
    """`## The elimination ladder` for each ladder in the record; nothing when there is none."""
    lines: list[str] = []
    for label, fragment in ladders(record):
        hosts, ladder = fragment["hosts"], fragment["ladder"]
        settings = fragment.get("settings") or {}
        lines += [f"## The elimination ladder: {label}", "",
                  f"Suspect {fmt.value(hosts.get('suspect'))}, server {fmt.value(hosts.get('server'))}, control host "
                  f"{fmt.value(hosts.get('control'))}; each run one iperf3 test of "
                  f"{fmt.value(settings.get('duration_s'))} s alone, receiver-side rates; an effect is a ratio of "
                  f"{fmt.value(ladder.get('threshold'))} or more.", ""]
        lines += _runs_table(fragment)
        lines.append("")
        steps = ladder["steps"]
        for name in ladder.get("order") or sorted(steps):
            step = steps.get(name)
            if not isinstance(step, dict):
                continue
            lines.append(f"- **{STEP_TITLES.get(name, name)}**: {fmt.value(step.get('text'))}")
            unseen = step.get("does_not_show")
            lines += [f"  - does not show: {fmt.value(item)}" for item in (unseen if isinstance(unseen, list) else [])]
        lines += ["", f"{fmt.value(ladder.get('theory'))}.", ""]
    return lines


def shows(record: dict) -> list[str]:
    """One line per ladder for `What this run shows`."""
    return [f"The elimination ladder on {fmt.value(fragment['hosts'].get('suspect'))} ({label}): "
            f"{fmt.value(fragment['ladder'].get('theory'))}." for label, fragment in ladders(record)]


def limits(record: dict) -> list[str]:
    """What a ladder does not show, once for the record."""
    if not ladders(record):
        return []
    return ["The ladder is one run of each test: it characterizes a path (per flow, the window, Nagle, a control "
            "host), it does not find what causes it, and a theory drawn from it needs a test that could show it "
            "wrong (the same install on other hardware, or other software on this hardware)."]

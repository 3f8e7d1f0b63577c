"""The report's leave-one-out (roles/leave_one_out): the cluster's figure per configuration (the whole ring, then
each member left out), every whole run's value beside the median, and each member's verdict in its own words: named
only when every run without it beat every run with it. Observed, never a cause.

A record holds it under `stages.<stage>.<head>` (stage `leave_one_out` by default); anything there that is not a
leave-one-out verdict is left out, never a failure of the report.
"""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt


def results(record: dict) -> list[tuple[str, dict]]:
    """Every leave-one-out in the record, labelled `stage (head)`."""
    return record_view.stage_fragments(
        record, lambda f: isinstance((f.get("verdict") or {}).get("configurations"), dict)
        and isinstance(f["verdict"].get("hosts"), dict))


def section(record: dict) -> list[str]:
    """`## Leave-one-out` for each result in the record; nothing when there is none."""
    lines: list[str] = []
    for label, fragment in results(record):
        verdict = fragment["verdict"]
        rounds, figure, threshold = (fmt.value(verdict.get(k)) for k in ("rounds", "figure", "threshold"))
        lines += [f"## Leave-one-out: {label}", "",
                  f"Whole runs of the serving cluster, each configuration once per round, {rounds} round(s); the "
                  f"figure is `{figure}` (the median of each run's trials); a member is named only when every run "
                  f"without it beat every run with it, by {threshold}x or more of the median.", ""]
        rows = [[fmt.cell(name), *fmt.spread_cells(spread)]
                for name, spread in verdict["configurations"].items() if isinstance(spread, dict)]
        lines += fmt.table(["configuration", "runs measured", "each run", "median"], rows)
        lines.append("")
        for host, judged in sorted(verdict["hosts"].items()):
            if isinstance(judged, dict):
                lines.append(f"- {host}: {fmt.value(judged.get('verdict'))}: {fmt.value(judged.get('text'))}")
        runs = fragment.get("runs") if isinstance(fragment.get("runs"), list) else []
        failed = [run for run in runs if isinstance(run, dict) and run.get("error")]
        lines += [f"- failed run ({fmt.value(run.get('label'))}, round {fmt.value(run.get('round'))}): "
                  f"{fmt.value(run.get('error'))}" for run in failed]
        lines += ["", f"Verdict: {fmt.value(verdict.get('text'))}.", ""]
    return lines


def shows(record: dict) -> list[str]:
    """One line per leave-one-out for `What this run shows`."""
    return [f"Leave-one-out ({label}, {fmt.value(fragment['verdict'].get('rounds'))} round(s)): "
            f"{fmt.value(fragment['verdict'].get('text'))}." for label, fragment in results(record)]

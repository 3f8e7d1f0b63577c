"""The compatibility matrix (`inferlab matrix`, analysis/matrix.py) as markdown and as CSV."""

from __future__ import annotations

import csv
import io

from inferlab.analysis import matrix
from inferlab.report import text as fmt


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def candidate_text(candidate: matrix.Candidate | None) -> str:
    if candidate is None:
        return "not measured (no run served nextn and nextn_candidate with trials)"
    if candidate.difference is None:
        return f"{candidate.verdict}: {candidate.reason}"
    interval = (f", 95 % interval {candidate.interval[0]:+.1f} to {candidate.interval[1]:+.1f}"
                if candidate.interval else ", no 95 % interval at this n")
    runs_text = f"{candidate.runs} runs, one value per run" if candidate.runs > 1 else "1 run, its trials"
    return (f"{_number(candidate.stock)} -> {_number(candidate.candidate)} tok/s ({candidate.difference:+.1f}"
            f"{interval}; {runs_text}): {candidate.verdict}")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return fmt.table(header, [[fmt.cell(c) for c in row] for row in rows])


def render_markdown(table: matrix.Matrix) -> str:
    names = matrix.shown_fields(table)
    lines = ["# Compatibility matrix", "",
             "One row per combination of what the ring hosts ran on (read at verification, through sysfs); a value "
             "that differs between the hosts reads `one / other`.", ""]
    identities = [[r.label, str(len(r.runs)), *(r.identity.get(n, matrix.NOT_APPLICABLE) for n in names)]
                  for r in table.rows]
    lines += _table(["", "runs", *names], identities)
    lines += ["", "## Outcomes", ""]
    lines += _table(["", "link test", "candidate against stock, aggregate output tok/s"],
                    [[r.label, r.link, candidate_text(r.candidate)] for r in table.rows])
    if table.stages:
        lines += ["", "## Stages", ""]
        lines += _table(["", *table.stages], [[r.label, *(r.stages[s] for s in table.stages)] for r in table.rows])
    lines += ["", "## Runs", ""]
    lines += [f"- {r.label}: {', '.join(r.runs)}" for r in table.rows]
    if table.apart:
        lines += ["", "## Runs in no row", ""]
        lines += [f"- {run}: {why}" for run, why in table.apart]
    return "\n".join(lines) + "\n"


def render_csv(table: matrix.Matrix) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names = matrix.shown_fields(table)
    writer.writerow(["combination", "runs", *names, "link test", "stock tok/s", "candidate tok/s", "difference",
                     "interval low", "interval high", "verdict", *(f"stage {s}" for s in table.stages), "run ids"])
    for r in table.rows:
        c = r.candidate
        low, high = c.interval if c and c.interval else (None, None)
        figures = (c.stock, c.candidate, c.difference, low, high) if c else (None,) * 5
        writer.writerow([r.label, len(r.runs), *(r.identity.get(n, matrix.NOT_APPLICABLE) for n in names), r.link,
                         *("" if v is None else v for v in figures), c.verdict if c else "not measured",
                         *(r.stages[s] for s in table.stages), " ".join(r.runs)])
    return out.getvalue()

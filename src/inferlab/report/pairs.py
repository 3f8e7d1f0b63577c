"""The report's day-one matrix: every ordered pair of the ring's hosts, one flow each (roles/link_test, tasks_from:
pairs), as a sender-by-receiver table of Mbit/s, and the verdict per host that the pair_host_verdicts filter gave
(a transmit or receive path weak against every peer, or one weak pair), in its own words: observed, never a cause.

A record holds the matrix under `stages.<stage>.<first ring host>` (stage `link_pairs` by default); anything there
that is not a matrix is left out, never a failure of the report.
"""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt


def matrices(record: dict) -> list[tuple[str, dict]]:
    return record_view.stage_fragments(
        record, lambda f: isinstance(f.get("tests"), list) and isinstance(f.get("verdicts"), dict))


def _mbit(bps) -> str:
    number = record_view.number(bps)
    return "—" if number is None else f"{number / 1e6:.1f}"


def _table(matrix: dict) -> list[str]:
    hosts = [h for h in matrix.get("hosts") or [] if isinstance(h, str)]
    rates = {(t["from"], t["to"]): t.get("bps") for t in matrix["tests"]
             if isinstance(t, dict) and isinstance(t.get("from"), str) and isinstance(t.get("to"), str)}
    rows = [[f"**{sender}**", *("·" if sender == receiver else _mbit(rates.get((sender, receiver)))
                                for receiver in hosts)] for sender in hosts]
    return fmt.table(["sender \\ receiver (Mbit/s)", *hosts], rows)


def section(record: dict) -> list[str]:
    """`## The day-one matrix` for each matrix in the record; nothing when there is none."""
    lines: list[str] = []
    for label, matrix in matrices(record):
        verdicts = matrix["verdicts"]
        lines += [f"## The day-one matrix: {label}", "",
                  f"Every ordered pair, one flow for {fmt.value(matrix.get('duration_s'))} s, each direction alone, "
                  f"in {len(matrix.get('rounds') or [])} rounds (tests that share no host ran together); "
                  "receiver-side rates.", ""]
        lines += _table(matrix)
        lines += ["", f"- verdict: {fmt.value(verdicts.get('text'))}"]
        for host, verdict in sorted((verdicts.get("hosts") or {}).items()):
            if isinstance(verdict, dict):
                lines.append(f"- {host}: {fmt.value(verdict.get('verdict'))}")
        lines.append("")
    return lines


def shows(record: dict) -> list[str]:
    """One line per matrix for `What this run shows`: its verdict in its own words."""
    return [f"The day-one matrix ({label}, {len(matrix.get('hosts') or [])} hosts): "
            f"{fmt.value((matrix['verdicts']).get('text'))}." for label, matrix in matrices(record)]

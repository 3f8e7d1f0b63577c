"""The report's engine talking to itself (roles/llamacpp_rpc with llamacpp_rpc_loopback_member): one host's
llama-server with its layers on its own ggml-rpc-server over loopback, no NIC in the path: the
application talking to itself on the suspect. Observed figures of that one host, never a cause.

A record holds it under `stages.<stage>.<mode>` (stage `engine_loopback` in playbooks/isolate_suspect.yml), found by
its layer `rpc: loopback`; anything else there is left out.
"""

from __future__ import annotations

from inferlab.record import view as record_view
from inferlab.report import text as fmt

FIGURE = "single_stream_decode_tok_s"


def results(record: dict) -> list[tuple[str, dict]]:
    """Every loopback run in the record, labelled `stage (mode)`."""
    return record_view.stage_fragments(
        record, lambda f: isinstance(f.get("layers"), dict) and f["layers"].get("rpc") == "loopback")


def _host(fragment: dict) -> str:
    ranks = fragment.get("ranks")
    return ", ".join(sorted(ranks)) if isinstance(ranks, dict) and ranks else "—"


def _figures(fragment: dict) -> dict:
    trials = fragment.get("trials")
    figures = trials.get("figures") if isinstance(trials, dict) else None
    return figures if isinstance(figures, dict) else {}


def _passed(fragment: dict) -> str:
    acceptance = fragment.get("acceptance")
    return "passed" if isinstance(acceptance, dict) and acceptance.get("passed") else "FAILED"


def section(record: dict) -> list[str]:
    """`## The engine talking to itself` for each loopback run; nothing when there is none."""
    lines: list[str] = []
    for label, fragment in results(record):
        lines += [f"## The engine talking to itself: {label}", "",
                  f"{_host(fragment)}'s llama-server with its layers on its own ggml-rpc-server over loopback (no NIC "
                  f"in the path); acceptance ladder {_passed(fragment)}. Each figure is over the measured trials.", ""]
        rows = [[fmt.cell(name), *fmt.spread_cells(spread)]
                for name, spread in sorted(_figures(fragment).items()) if isinstance(spread, dict)]
        if rows:
            lines += fmt.table(["figure", "trials", "each trial", "median"], rows)
            lines.append("")
    return lines


def shows(record: dict) -> list[str]:
    """One line per loopback run for `What this run shows`."""
    found = []
    for label, fragment in results(record):
        spread = _figures(fragment).get(FIGURE)
        figure = (f"single-stream decode {fmt.tenths(spread.get('median'))} tok/s, the median of "
                  f"{fmt.value(spread.get('n'))} trial(s)") if isinstance(spread, dict) else "no trial figure"
        found.append(f"The engine on {_host(fragment)} talking to itself over loopback ({label}, no NIC in the "
                     f"path): {figure}; acceptance ladder {_passed(fragment)}.")
    return found

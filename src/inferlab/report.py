"""Render report.md from a validated record: run summary, per-host verification, restore."""

from __future__ import annotations

from pathlib import Path


def _value(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _verification(host: str, state: dict) -> list[str]:
    link = state.get("link", {})
    lines = [
        f"### {host}: {'passed' if state.get('ok') else 'FAILED'}",
        "",
        f"- kernel {_value(state.get('kernel_release'))}; layers: "
        + ", ".join(f"{k}={_value(v)}" for k, v in sorted(state.get("layers", {}).items())),
        f"- link {link.get('interface')} {link.get('address')} -> {link.get('peer_address')}: "
        f"{_value(link.get('operstate'))}, MTU {_value(link.get('mtu'))}, "
        f"{_value(link.get('rx_speed_gbps'))}/{_value(link.get('tx_speed_gbps'))} Gb/s per lane (rx/tx), "
        f"lanes {_value(link.get('rx_lanes'))}/{_value(link.get('tx_lanes'))}",
        f"- GPUs ({_value(state.get('nvml_source'))}): "
        + ("; ".join(f"{g['index']}: {g['name']}, {g['memory_free_bytes'] // 2**20} MiB free" for g in state["gpus"])
           or "none"),
        "",
        "| check | ok | expected | found | variable |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in state.get("checks", []):
        lines.append(
            f"| {check['name']} | {'ok' if check['ok'] else '**FAIL**'} | {_value(check['expected'])} "
            f"| {_value(check['found'])} | `{check['variable']}` |"
        )
    lines.append("")
    return lines


def render(record: dict) -> str:
    run = record["run"]
    lines = [
        f"# inferlab run {run['id']}",
        "",
        f"- playbook `{run['playbook']}`, inventory `{run['inventory']}`",
        f"- {run['started']} to {run['finished']}; ansible-runner status `{run['status']}`; "
        f"exit {run['exit_code']} ({run['exit_meaning']})",
        f"- controller {run['controller']['hostname']}: ansible-core {run['controller']['ansible_core']}, "
        f"inferlab {run['controller']['inferlab']}",
        "",
    ]
    if record["verification"]:
        lines += ["## Verification (known-good snapshot)", ""]
        for host, state in sorted(record["verification"].items()):
            lines += _verification(host, state)
    if record["restore"]:
        lines += ["## Restore", "", "| host | verified | undone | differences from known-good |",
                  "| --- | --- | --- | --- |"]
        for host, restore in sorted(record["restore"].items()):
            undone = len(restore["undo"].get("undone", []))
            diffs = "; ".join(restore["differences"]) or "none"
            lines.append(f"| {host} | {_value(restore['verified'])} | {undone} | {diffs} |")
        lines.append("")
    return "\n".join(lines)


def summary(record: dict) -> list[str]:
    """One line per verified or restored host, for the terminal."""
    lines = []
    for host, state in sorted(record["verification"].items()):
        failed = [c["name"] for c in state["checks"] if not c["ok"]]
        verdict = "passed" if state["ok"] else "FAILED: " + ", ".join(failed)
        lines.append(f"{host}: verification {verdict} ({len(state['checks']) - len(failed)}/{len(state['checks'])} "
                     "checks)")
    for host, restore in sorted(record["restore"].items()):
        verdict = "verified" if restore["verified"] else "NOT verified: " + "; ".join(restore["differences"])
        lines.append(f"{host}: restore {verdict}")
    return lines


def write(run_dir: Path, record: dict) -> Path:
    target = run_dir / "report.md"
    target.write_text(render(record))
    return target

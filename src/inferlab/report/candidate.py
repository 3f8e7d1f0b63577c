"""report.md's candidate driver sections: its build, its load and the link and services after it, and
the restore of the stock driver."""

from __future__ import annotations

import json
from pathlib import Path

from inferlab.report import text as fmt


def link_back(back: dict | None) -> str:
    """How the direct link came back after a reload: seconds, carrier, what was re-established."""
    if not back:
        return "not watched"
    text = f"{fmt.value(back.get('seconds'))} s"
    if back.get("carrier_s") is not None:
        text += f" (carrier at {fmt.value(back.get('carrier_s'))} s)"
    if back.get("actions"):
        text += "; " + fmt.cell("; ".join(back["actions"]))
    return text


def services_back(services: list | None) -> str:
    """Each original service after the undo: serving or not, after how long and how many requests."""
    if not services:
        return "-"
    parts = []
    for service in services:
        wait = service.get("wait") or {}
        said = "serves" if service.get("ok") else "**does not serve**"
        if wait.get("ready_timeout_s"):
            said += f" after {fmt.value(wait.get('waited_s'))} s ({wait.get('attempts')} requests, " \
                    f"of {fmt.value(wait['ready_timeout_s'])} s)"
        parts.append(f"{service.get('name')} {said}")
    return fmt.cell("; ".join(parts))


def _module_facts(module: dict) -> str:
    if not isinstance(module, dict) or not module:
        return "—"
    if module.get("loaded") is False:
        return "not loaded"
    parameters = module.get("parameters") or {}
    params = ", ".join(f"{k}={v}" for k, v in sorted(parameters.items())) or "no parameters"
    taint = module.get("taint")
    return f"`{fmt.value(module.get('srcversion'))}` ({params}; module taint {fmt.cell(taint or 'none')})"


def _build_lines(entry: dict) -> list[str]:
    build = entry.get("build") or {}
    module = build.get("module") or {}
    if build.get("emulated") or entry.get("driver_layer") == "emulated":
        return [
            f"- emulated driver layer: {fmt.value(build.get('note'))}",
            f"- stand-in srcversion `{fmt.value(module.get('srcversion'))}`",
        ]
    source = build.get("source") or {}
    gates = build.get("gates") or {}
    lines = [
        f"- built on {fmt.value(entry.get('build_host'))} for {fmt.value(build.get('target_kernel_release'))} from the "
        f"{fmt.value(source.get('source_kind'))} `{fmt.value(source.get('path'))}`: source version "
        f"{fmt.value(source.get('source_version'))}, headers {fmt.value(source.get('headers_version'))}, running "
        f"{fmt.value(source.get('running_version'))}",
        f"- layout `{fmt.value(source.get('layout'))}`, TX E2E history `{fmt.value(source.get('history'))}`, driver "
        f"`{fmt.value(source.get('driver'))}`",
    ]
    for patch in source.get("patches") or []:
        lines.append(f"- patch `{Path(str(patch.get('path'))).name}` sha256 `{fmt.value(patch.get('sha256'))}`")
    for gate in gates.get("patches") or []:
        lines.append(
            f"- gates for `{Path(str(gate.get('patch'))).name}`: git apply --check "
            f"{fmt.value(gate.get('git_apply_check'))}; checkpatch --strict: `{fmt.value(gate.get('checkpatch'))}`"
        )
    if gates:
        lines.append(f"- git diff --check {fmt.value(gates.get('git_diff_check'))}")
    lines.append(
        f"- module `{Path(str(module.get('module_path'))).name}`: sha256 `{fmt.value(module.get('sha256'))}`, "
        "srcversion "
        f"`{fmt.value(module.get('srcversion'))}`, vermagic `{fmt.value(module.get('vermagic'))}`, signed "
        f"{fmt.value(module.get('signed'))}, compiler warnings {fmt.value(module.get('compiler_warnings'))}"
    )
    return lines


def candidate(candidates: dict) -> list[str]:
    entries = [(host, entry) for host, entry in sorted(candidates.items()) if isinstance(entry, dict)]
    lines = [
        "## Candidate driver",
        "",
        "A reload removes the direct link's interface with its addresses, on both hosts. \"Link back\" is the time "
        "from the load until the link carried a ping again (the interface back, its address re-established, carrier, "
        "speed and lanes), observed by the host's link watchdog.",
        "",
    ]
    if any(entry.get("driver_layer") == "emulated" for _host, entry in entries):
        lines += [
            "On the emulated driver layer nothing is built or loaded: a link profile on the veth stands in for the "
            "candidate, and the module facts are the fixture root's. This is not a driver result.",
            "",
        ]
    rows = []
    for host, entry in entries:
        taint = entry.get("kernel_taint") or {}
        watchdog = entry.get("watchdog")
        rows.append(
            [
                fmt.cell(host),
                fmt.cell(entry.get("driver_layer")),
                fmt.cell(entry.get("kernel_release")),
                fmt.value(entry.get("tx_e2e")),
                fmt.value(entry.get("peer_e2e")),
                "**yes**" if entry.get("peer_override") else fmt.value(entry.get("peer_override")),
                _module_facts(entry.get("module_before") or {}),
                _module_facts(entry.get("module_after") or {}),
                f"{fmt.value(taint.get('before'))} -> {fmt.value(taint.get('after'))}",
                (f"pid {fmt.value(watchdog.get('pid'))}, {fmt.value(watchdog.get('deadline_s'))} s" if watchdog
                 else "none"),
                link_back(entry.get("link_back")),
            ]
        )
    lines += fmt.table(
        [
            "host",
            "driver layer",
            "kernel",
            "tx_e2e",
            "peer E2E",
            "peer override",
            "module before",
            "module after",
            "kernel taint",
            "watchdog",
            "link back after the load",
        ],
        rows,
    )
    lines.append("")
    # one build section per distinct build (both hosts usually load the same one)
    builds: dict[str, list[str]] = {}
    for host, entry in entries:
        emulated = entry.get("driver_layer") == "emulated"
        key = json.dumps([None if emulated else entry.get("build_host"), entry.get("build")], sort_keys=True)
        builds.setdefault(key, []).append(host)
    by_host = dict(entries)
    for hosts in builds.values():
        lines += [f"### Build for {fmt.join(hosts)}", "", *_build_lines(by_host[hosts[0]])]
        for host in hosts:
            message = by_host[host].get("message")
            if message:
                lines.append(f"- load on {host}: {fmt.value(message)}")
            if by_host[host].get("link_profile"):
                lines.append(f"- link profile standing in on {host}: `{by_host[host]['link_profile']}`")
        lines.append("")
    return lines


def restore_driver(restores: dict) -> list[str]:
    drivers = [(host, r["driver"]) for host, r in sorted(restores.items()) if isinstance(r.get("driver"), dict)]
    if not drivers:
        return []
    rows = []
    for host, driver in drivers:
        persistence = driver.get("persistence") or {}
        taint = persistence.get("taint") or {}
        rows.append(
            [
                fmt.cell(host),
                fmt.value(driver.get("compared")),
                "; ".join(fmt.cell(d) for d in driver.get("differences") or []) or "none",
                _module_facts(driver.get("module") or {}),
                "; ".join(fmt.cell(d) for d in persistence.get("differences") or []) or "none",
                "; ".join(fmt.cell(p) for p in persistence.get("problems") or []) or "none",
                f"{fmt.value(taint.get('before'))} -> {fmt.value(taint.get('after'))}",
                ", ".join(f"`{fmt.cell(d)}`" for d in driver.get("private_dirs") or []) or "none",
            ]
        )
    lines = [
        "",
        "The driver after the restore: compared with the candidate's known-good snapshot; persistence: what the "
        "candidate could have left for the next boot (module files, options, initramfs).",
        "",
        *fmt.table(
            [
                "host",
                "compared",
                "differences",
                "module now",
                "persistence differences",
                "persistence problems",
                "kernel taint",
                "private build dirs checked",
            ],
            rows,
        ),
    ]
    notes = [(host, ((d.get("persistence") or {}).get("taint") or {}).get("note")) for host, d in drivers]
    notes = [f"- {host}: {note}" for host, note in notes if note]
    return lines + ([""] + notes if notes else [])

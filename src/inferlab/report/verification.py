"""report.md's verification section: each host's state as verification read it."""

from __future__ import annotations

from inferlab.report import text as fmt


def gpu_holders(state: dict | None) -> str:
    """What holds each GPU of a verification state: its processes as NVML listed them, with their memory (a state
    recorded before processes were kept shows its free memory only)."""
    cards = []
    for gpu in (state or {}).get("gpus") or []:
        text = f"{gpu['index']}: {gpu['name']}, {gpu['memory_free_bytes'] // 2**20} MiB free"
        if "compute_processes" in gpu:
            held = ", ".join(f"{p['name']} (pid {p['pid']}, {(p.get('used_memory_bytes') or 0) // 2**20} MiB)"
                             for p in gpu["compute_processes"])
            text += f", held by {held or 'no process'}"
        cards.append(text)
    return "; ".join(cards) or "none"


def _link_training(link: dict) -> str:
    """How the link trained: an Ethernet NIC's negotiated speed, duplex and driver, or a Thunderbolt peer's speed
    per lane and lanes."""
    if link.get("kind") == "ethernet":
        return (f"Ethernet {fmt.value(link.get('speed_mbps'))} Mb/s {fmt.value(link.get('duplex'))} duplex, "
                f"driver {fmt.value(link.get('driver'))}, firmware {fmt.value(link.get('firmware_version'))}")
    return (f"{fmt.value(link.get('rx_speed_gbps'))}/{fmt.value(link.get('tx_speed_gbps'))} Gb/s per lane (rx/tx), "
            f"lanes {fmt.value(link.get('rx_lanes'))}/{fmt.value(link.get('tx_lanes'))}")


def verification(host: str, state: dict) -> list[str]:
    link = state.get("link", {})
    lines = [
        f"### {host}: {'passed' if state.get('ok') else 'FAILED'}",
        "",
        f"- kernel {fmt.value(state.get('kernel_release'))}; layers: "
        + ", ".join(f"{k}={fmt.value(v)}" for k, v in sorted(state.get("layers", {}).items())),
        f"- link {link.get('interface')} {link.get('address')} -> {link.get('peer_address')}: "
        f"{fmt.value(link.get('operstate'))}, MTU {fmt.value(link.get('mtu'))}, {_link_training(link)}",
        f"- GPUs ({fmt.value(state.get('nvml_source'))}): {gpu_holders(state)}",
        "",
        "| check | ok | expected | found | variable |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in state.get("checks", []):
        lines.append(
            f"| {check['name']} | {'ok' if check['ok'] else '**FAIL**'} | {fmt.value(check['expected'])} "
            f"| {fmt.value(check['found'])} | `{check['variable']}` |"
        )
    lines.append("")
    return lines

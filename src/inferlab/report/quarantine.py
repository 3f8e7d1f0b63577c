"""The report's quarantine (playbooks/topology.yml, roles/topology): who left the ring, each solo endpoint with its
own requests, the ring that stayed served again and accepted (llama.cpp's RPC backend), and what the public route
answered for every role. Observed: a quarantine is an operating decision, never a finding about the host.

A record holds it under `stages.topology` (`plan`, `public`), `stages.topology_solo.<host>`,
`stages.topology_ring.<mode>` and `stages.topology_gateway.<gateway host>`; a record without a plan has no section.
"""

from __future__ import annotations

from inferlab.report import text as fmt

RING_STAGE = "topology_ring"


def _stage(record: dict, name: str) -> dict:
    found = (record.get("stages") or {}).get(name)
    return found if isinstance(found, dict) else {}


def _plan(record: dict) -> dict | None:
    plan = _stage(record, "topology").get("plan")
    return plan if isinstance(plan, dict) and isinstance(plan.get("solo"), list) else None


def _hosts(items) -> str:
    return ", ".join(str(item) for item in items) if isinstance(items, list) and items else "none"


def _median(batch: dict, figure: str) -> str:
    spread = batch.get(figure)
    return fmt.tenths(spread.get("median") if isinstance(spread, dict) else None)


def _ring_lines(record: dict) -> list[str]:
    lines = []
    for mode, result in sorted(_stage(record, RING_STAGE).items()):
        if not isinstance(result, dict) or not isinstance(result.get("acceptance"), dict):
            continue
        ranks = result.get("ranks") if isinstance(result.get("ranks"), dict) else {}
        acceptance = result["acceptance"]
        lines += [f"The ring that stayed ({_hosts(sorted(ranks))}), served again without the solo hosts, mode "
                  f"{mode}: acceptance ladder {'passed' if acceptance.get('passed') else 'FAILED'}.", ""]
        rows = []
        for step in acceptance.get("steps") or []:
            batch = step.get("batch") if isinstance(step, dict) else None
            if isinstance(batch, dict):
                rows.append([fmt.cell(step.get("step")), "ok" if step.get("passed") else "**FAIL**",
                             f"{fmt.value(batch.get('ok'))}/{fmt.value(batch.get('requests'))}",
                             fmt.cache(batch), _median(batch, "decode_tok_s"),
                             _median(batch, "ttft_s")])
        if rows:
            lines += fmt.table(["step", "passed", "ok", "cache", "decode tok/s median", "TTFT s median"], rows)
            lines.append("")
    return lines


def section(record: dict) -> list[str]:
    """`## The quarantine`; nothing when the record has no topology plan."""
    plan = _plan(record)
    if plan is None:
        return []
    lines = ["## The quarantine", "",
             f"Engine {fmt.value(plan.get('engine') or 'sglang')}. Left the ring: {_hosts(plan.get('quarantined'))}; "
             f"serving solo: {_hosts(plan.get('solo'))}; the ring that stays: {_hosts(plan.get('ring'))}.", ""]
    for host, solo in sorted(_stage(record, "topology_solo").items()):
        if not isinstance(solo, dict):
            continue
        direct = solo.get("direct") if isinstance(solo.get("direct"), dict) else {}
        argv = solo.get("argv") if isinstance(solo.get("argv"), list) else []
        program = str(argv[0]).rsplit("/", 1)[-1] if argv else "—"
        lines.append(f"- solo endpoint {host}: {program} at {fmt.value(solo.get('url'))}, "
                     f"{fmt.value(direct.get('ok'))} of {fmt.value(direct.get('requests'))} requests straight to it "
                     "answered")
    lines.append("")
    lines += _ring_lines(record)
    public = _stage(record, "topology").get("public")
    roles = public.get("roles") if isinstance(public, dict) and isinstance(public.get("roles"), dict) else {}
    if roles:
        lines += [f"Through the public route {fmt.value(public.get('public_url'))}:", ""]
        rows = [[fmt.cell(name), "ok" if judged.get("passed") else "**FAIL**",
                 f"{fmt.value(judged.get('ok'))}/{fmt.value(judged.get('requests'))}",
                 fmt.cell(", ".join(judged.get("served_by") or []) or "—"),
                 fmt.cell(judged.get("expected_backend") or "any")]
                for name, judged in sorted(roles.items()) if isinstance(judged, dict)]
        lines += fmt.table(["role", "passed", "ok", "served by", "expected backend"], rows)
        lines.append("")
    restored = bool(record.get("restore"))
    lines += [("The run restored every host afterwards (see the restore section)." if restored else
               "The quarantine stays until a restore with this run's known-good state "
               "(`inferlab run restore -e restore_known_good_dir=<this run>/known_good`)."), ""]
    return lines


def shows(record: dict) -> list[str]:
    """One line for `What this run shows`."""
    plan = _plan(record)
    if plan is None:
        return []
    solo = _stage(record, "topology_solo")
    answered = [f"{host} {fmt.value((entry.get('direct') or {}).get('ok'))}/"
                f"{fmt.value((entry.get('direct') or {}).get('requests'))}"
                for host, entry in sorted(solo.items()) if isinstance(entry, dict)]
    ring = [result for result in _stage(record, RING_STAGE).values()
            if isinstance(result, dict) and isinstance(result.get("acceptance"), dict)]
    text = (f"Quarantine: {_hosts(plan.get('quarantined'))} left the ring and served solo behind the gateway "
            f"(requests straight to each: {', '.join(answered) or 'none recorded'})")
    if ring:
        passed = all(result["acceptance"].get("passed") for result in ring)
        text += (f"; the ring {_hosts(plan.get('ring'))} served without it and "
                 f"{'passed' if passed else 'FAILED'} the acceptance ladder")
    return [text + "."]

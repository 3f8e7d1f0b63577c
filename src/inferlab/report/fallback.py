"""report.md's fallback section: who served the requests while the primary was away, and its return."""

from __future__ import annotations

from inferlab.report import text as fmt


def served_by(counts: dict) -> str:
    return ", ".join(f"{backend} {count}" for backend, count in sorted(counts.items())) or "none"


def _primary_again(step: dict) -> str:
    return f"{step['primary_again']['served_by']} (try {step['primary_again']['attempts']})"


def fallback(fallback: dict) -> list[str]:
    """The fallback route: what was added, what each proof observed, and whether the config came back."""
    lines = [
        "## Fallback route",
        "",
        "Real requests through the exact public route (the gateway URL, the public role, the clients' key); "
        "`x-litellm-model-api-base` names the backend that served each one.",
        "",
        "| step | requests | ok | failed | served by | primary serves again |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    negative = fallback.get("negative_proof")
    if negative:
        verdict = "reproduced" if negative["reproduced"] else "**not reproduced**"
        ok = negative["requests"] - negative["failed"]
        lines.append(
            f"| without the fallback, primaries paused (expected to fail: {verdict}) | {negative['requests']} "
            f"| {ok} | {negative['failed']} | — | {_primary_again(negative)} |"
        )
    prove = fallback.get("prove")
    if prove:
        lines.append(
            f"| with the fallback, primaries paused | {prove['requests']} | {prove['ok']} | {prove['failed']} "
            f"| {served_by(prove['served_by'])} | {_primary_again(prove)} |"
        )
    lines.append("")
    add, remove = fallback.get("add"), fallback.get("remove")
    if add:
        steps = add.get("steps", [])
        applied = ", ".join(
            f"{s['instance']} {'drained' if s['drained'] else 'not drained'} {fmt.value(s['seconds'])} s" for s in steps
        )
        lines.append(
            f"- added `fallbacks: [{{{add['public_model']}: [{add['target_model']}]}}]` to `{add['config']}` "
            f"on {add['gateway_host']} (original sha256 `{add['original_sha256'][:16]}…`), applied through "
            f"{add['front']}: {applied or 'already added'}"
        )
    if remove:
        verdict = "byte-identical" if remove["byte_identical"] else "**NOT the original**"
        lines.append(
            f"- removed: the config is {verdict} (sha256 `{remove['config_sha256'][:16]}…`), "
            f"primary serving again: {_primary_again(remove)}"
        )
    if negative and negative["errors"]:
        lines.append(f"- the failure without the fallback: {negative['errors'][0]}")
    lines.append("")
    return lines

"""The report's engine part: what an engine that counts itself (llama.cpp's llama-server) said of each served mode.

What a mode's `engine` holds (roles/llamacpp_rpc): the engine's name and version, its slots, `window` (its /metrics
counted across the ladder's counter window: prompt and decode rates in the server's definitions, speculative
counters), `agreement` (the workload client against the server's own timings, judged per mode) and
`link_bytes_per_token` (the link's bytes in the same window over the tokens the engine counted).
"""

from __future__ import annotations

from inferlab.report.collectives import text_of


def _engines(serving: dict) -> dict[str, dict]:
    return {mode: result["engine"] for mode, result in serving.items() if isinstance(result.get("engine"), dict)}


def _version(engine: dict) -> str:
    """`llama.cpp 0.5.0-dev (build 1, commit 0c1e570)` from the engine's parsed `--version`."""
    version = engine.get("version")
    if isinstance(version, dict):
        version = f"{version.get('version')} (build {version.get('build')}, commit {version.get('commit')})"
    return f"{engine.get('name')} {version}" if version else str(engine.get("name"))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ratio(value) -> str:
    return f"{value:.3f}" if _number(value) else text_of(value)


def _share(value) -> str:
    return f"{100 * value:g} %" if _number(value) else text_of(value)


def _part(container: dict, key: str) -> dict:
    """A nested object of the engine block, or {} when a record holds something else there."""
    value = container.get(key)
    return value if isinstance(value, dict) else {}


def _rates(window: dict) -> str:
    if not isinstance(window, dict):
        return "its /metrics were not read"
    text = (f"prompt {text_of(window.get('prompt_tokens_per_s'))} tok/s, decode "
            f"{text_of(window.get('decode_tokens_per_s'))} tok/s (its /metrics across the window, all generated "
            f"tokens over the time spent generating)")
    speculative = _part(window, "speculative")
    if speculative.get("drafts"):
        text += (f"; speculative: {text_of(speculative.get('drafts'))} drafts, acceptance rate "
                 f"{text_of(speculative.get('acceptance_rate'))} (accepted / draft tokens), mean acceptance length "
                 f"{text_of(speculative.get('mean_acceptance_length'))} (1 + accepted / drafts)")
    problems = window.get("problems")
    return text + "".join(f"; **{problem}**" for problem in (problems if isinstance(problems, list) else []))


def agreement_text(agreement: dict | None) -> str:
    """The client against the server in one line, both numbers and the verdict."""
    if not isinstance(agreement, dict):
        return "client against server: not judged"
    if not agreement.get("requests"):
        problems = agreement.get("problems")
        return f"client against server: **not checked** ({'; '.join(map(str, problems or [])) or 'no request'})"
    ratio, decode, prompt = _part(agreement, "latency_ratio"), _part(agreement, "decode"), _part(agreement, "prompt")
    verdict = "agrees" if agreement.get("passed") is True else "**disagrees**"
    return (f"client against server over {text_of(agreement['requests'])} single-stream requests: latency "
            f"{text_of(agreement.get('client_latency_s'))} s against the server's "
            f"{text_of(agreement.get('server_latency_s'))} s (median ratio {_ratio(ratio.get('median'))}, "
            f"{_ratio(ratio.get('min'))}-{_ratio(ratio.get('max'))}; within "
            f"{_share(agreement.get('tolerance'))} of 1: {verdict}); the split, not judged: decode "
            f"{text_of(decode.get('client_tok_s'))} against "
            f"{text_of(decode.get('server_tok_s'))} tok/s in one definition, TTFT "
            f"{text_of(prompt.get('client_ttft_s'))} s against a prompt time of "
            f"{text_of(prompt.get('server_prompt_s'))} s")


def link_text(link: dict | None) -> str:
    if not isinstance(link, dict):
        return "link bytes per token: not counted"
    if link.get("problem"):
        return f"link bytes per token: not counted ({link['problem']})"
    return (f"{link.get('link_interface')} carried {text_of(link.get('bytes'))} B (every host's tx): "
            f"{text_of(link.get('per_generated_token'))} B per generated token "
            f"({text_of(link.get('generated_tokens'))} generated), {text_of(link.get('per_processed_token'))} B per "
            f"processed token ({text_of(link.get('processed_tokens'))}: uncached prompt + generated), observed")


def section(serving: dict) -> list[str]:
    """`## The engine's own figures`: per mode, what the engine counted, the client against it, the link per token."""
    engines = _engines(serving)
    if not engines:
        return []
    lines = [
        "## The engine's own figures",
        "",
        "What the engine counted in each mode's ladder window, the workload client checked against the engine's own "
        "timing of the same requests (the client's latency over the server's prompt + generation time, per "
        "single-stream request: the whole is judged, the split is shown), and the link's bytes per token.",
        "",
    ]
    for mode, engine in engines.items():
        slots = (f"{engine.get('slots')} slots of {text_of(engine.get('slot_context_tokens'))} tokens"
                 if engine.get("slots") else "slots not read")
        lines += [f"- **{mode}** ({_version(engine)}, {slots}): {_rates(engine.get('window'))}.",
                  f"  - {agreement_text(engine.get('agreement'))}.",
                  f"  - {link_text(engine.get('link_bytes_per_token'))}."]
    lines.append("")
    return lines


def shows(serving: dict) -> list[str]:
    """One line per mode with an engine block for "What this run shows"."""
    found = []
    for mode, engine in _engines(serving).items():
        link = _part(engine, "link_bytes_per_token")
        per_token = (f"; {text_of(link.get('per_generated_token'))} link bytes per generated token"
                     if link.get("per_generated_token") is not None else "")
        found.append(f"{_version(engine)}, {mode}: {agreement_text(engine.get('agreement'))}{per_token}.")
    return found

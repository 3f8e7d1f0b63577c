"""The report's NCCL part: each served mode's collectives in its counter window and its wire overhead.

What a mode's `collectives` holds (roles/sglang_tp, `sglang_tp_nccl_collectives`): by ring host, the nccl_collectives
module's count of what NCCL logged (COLL lines, or NCCL Inspector's JSON) in the ladder's window, and the wire
overhead: each host's link bytes sent over what the TP all-reduces of the window's batches must move in theory. The
ratio is an observation against a theory; its inputs are printed so that a reader can redo it.
"""

from __future__ import annotations

# What the lab's ratio means: the lab server sends one all-reduce of a fixed size per step (a batch of 8 sequences,
# src/inferlab/lab/server), not one per layer and token as a model does.
LAB_NOTE = ("lab: the lab server all-reduces one batch-8-sized payload per step, so its ratio describes the lab, "
            "not a model")


def text_of(value) -> str:
    """A figure as the report prints it: thousands separated, three significant digits below 1,000, a dash for none."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _traced(serving: dict) -> dict[str, dict]:
    return {mode: result["collectives"] for mode, result in serving.items()
            if isinstance(result.get("collectives"), dict)}


def _kinds(found: dict) -> str:
    """Each kind's calls and bytes, and where the source is timed, the median and p99 time of one call."""
    kinds = found.get("collectives") or {}
    cells = []
    for kind, k in sorted(kinds.items()):
        timed = (f", median {text_of(k['time_us_median'])} us, p99 {text_of(k['time_us_p99'])} us"
                 if k.get("time_us_median") is not None else "")
        cells.append(f"{kind} {text_of(k.get('count'))} ({text_of(k.get('bytes'))} B{timed})")
    return ", ".join(cells) or "none"


def _time_share(found: dict) -> str:
    """The share of the window each rank spent in collectives, where the source is timed."""
    shares = {}
    for kind in (found.get("collectives") or {}).values():
        for rank, figures in (kind.get("per_rank") or {}).items():
            if figures.get("time_share") is not None:
                shares[rank] = shares.get(rank, 0.0) + figures["time_share"]
    return ", ".join(f"{100 * shares[rank]:.1f} %" for rank in sorted(shares)) or "not timed"


def _overhead_line(overhead: dict) -> str:
    if overhead.get("problem"):
        return f"wire overhead not computed: {overhead['problem']}"
    theory = overhead["theory"]
    inputs = theory["inputs"]
    per_host = "; ".join(f"{host} {text_of(h.get('observed_bytes_sent'))} B sent, ratio {text_of(h.get('ratio'))}"
                         for host, h in sorted(overhead["hosts"].items()))
    speculation = (f", {text_of(inputs['verify_steps'])} verify steps x {inputs['verify_width']} tokens"
                   if inputs.get("verify_width") else "")
    return (f"theory {text_of(theory['theory_bytes_sent_per_rank'])} B per rank from "
            f"{text_of(theory['tokens_processed'])} tokens ({text_of(inputs['prompt_tokens'])} uncached prompt, "
            f"{text_of(inputs['generated_tokens'])} generated{speculation}; hidden {inputs['hidden_size']}, "
            f"{inputs['num_layers']} layers, {inputs['dtype_bytes']} B, {inputs['allreduces_per_layer']} all-reduces "
            f"a layer, TP {inputs['tp_size']}, ring factor {text_of(theory['ring_send_factor'])}); observed: "
            f"{per_host}")


def section(serving: dict, emulated: bool) -> list[str]:
    """`## NCCL collectives`: a table of every traced mode's hosts, and each mode's wire overhead with its inputs."""
    traced = _traced(serving)
    if not traced:
        return []
    lines = [
        "## NCCL collectives and the wire overhead",
        "",
        "What NCCL logged in each mode's ladder window (COLL lines: one per call, no duration; NCCL Inspector: "
        "timed, with the share of the window a rank spent in collectives), counted on the host that wrote it. The "
        "wire overhead is the link's bytes sent in the window over the TP all-reduces' theory (tokens x hidden x "
        "dtype x all-reduces a layer x layers x 2(n-1)/n).",
        "",
        "| mode | host | source | in window | outside | untimed | by kind (calls, bytes) | window in collectives "
        "| unreadable lines |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, collectives in traced.items():
        for host, found in sorted((collectives.get("hosts") or {}).items()):
            if not found:
                lines.append(f"| {mode} | {host} | not read | — | — | — | — | — | — |")
                continue
            lines.append(f"| {mode} | {host} | {found.get('source')} | {text_of(found.get('records'))} "
                         f"| {text_of(found.get('outside'))} | {text_of(found.get('untimed'))} | {_kinds(found)} "
                         f"| {_time_share(found)} | {text_of(found.get('problem_count'))} |")
    lines.append("")
    for mode, collectives in traced.items():
        overhead = collectives.get("wire_overhead") or {}
        lines.append(f"- {mode}, over {collectives.get('link_interface')}: {_overhead_line(overhead)}.")
        lines += [f"  - {host}: its traces could not be read: {error}"
                  for host, error in sorted((collectives.get("errors") or {}).items())]
        lines += [f"  - note: {note}" for note in overhead.get("notes") or []]
    if emulated:
        lines.append(f"- {LAB_NOTE}.")
    lines.append("")
    return lines


def shows(serving: dict, emulated: bool) -> list[str]:
    """One line per traced mode for "What this run shows"."""
    found = []
    for mode, collectives in _traced(serving).items():
        hosts = collectives.get("hosts") or {}
        calls = ", ".join(f"{host} {text_of((h or {}).get('records'))}" for host, h in sorted(hosts.items()))
        overhead = collectives.get("wire_overhead") or {}
        if overhead.get("problem"):
            ratio = f"no wire overhead ({overhead['problem']})"
        else:
            ratio = "wire overhead (link bytes sent / TP all-reduce theory) " + ", ".join(
                f"{host} {text_of(h.get('ratio'))}" for host, h in sorted((overhead.get("hosts") or {}).items()))
        found.append(f"NCCL collectives of {mode} in its window (observed): {calls}; {ratio}"
                     + (f" ({LAB_NOTE})." if emulated else "."))
    return found

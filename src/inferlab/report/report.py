"""Render report.md from a validated record.

Sections, each only when the record has its data: what this run shows and what it does not show (generated from the
record: report_findings), the stage journal, a throughput summary with one table per kind of figure, verification,
the candidate driver, link tests, counter deltas per window and host, the serving ladders with their cold/warm prefix
trials (report_prefix), the engine's own figures (report_engine) and NCCL collectives (report_collectives), the link
A/B, the fallback route, continuity, the restore, the re-verifications, and the plots (drawn or left out, and why).
Each section is a module of this package; this one orders them, and text.py prints the values.

Wording: observed, theory, supported. A figure is observed; a cause is a theory until a one-layer change that
reproduces from a fresh start supports it. tests/package/test_report_sections.py scans every rendered fixture for words
that claim more.
"""

from __future__ import annotations

from pathlib import Path

from inferlab.analysis import reverify
from inferlab.plots import plots
from inferlab.record import view as record_view
from inferlab.report import candidate as report_candidate
from inferlab.report import collectives as report_collectives
from inferlab.report import counters as report_counters
from inferlab.report import engine as report_engine
from inferlab.report import engine_loopback as report_engine_loopback
from inferlab.report import fallback as report_fallback
from inferlab.report import findings as report_findings
from inferlab.report import journal as report_journal
from inferlab.report import ladder as report_ladder
from inferlab.report import leave_one_out as report_leave_one_out
from inferlab.report import link_tests as report_link_tests
from inferlab.report import pairs as report_pairs
from inferlab.report import prefix as report_prefix
from inferlab.report import quarantine as report_quarantine
from inferlab.report import serving as report_serving
from inferlab.report import sweep as report_sweep
from inferlab.report import text as fmt
from inferlab.report import verification as report_verification
from inferlab.system.private_files import write_private

# --- plots --------------------------------------------------------------------------------------------------------


def _plots(planned: list[plots.Plot]) -> list[str]:
    """Each drawn plot shown in place (a Markdown image of its file under plots/, its title as the alt text and
    caption), then those left out and why."""
    lines = ["## Plots", ""]
    if not planned:
        return [*lines, "No plots: the record has no serving batches, counter windows or link tests.", ""]
    for plot in planned:
        if plot.skipped is None:
            lines += [f"![{plot.title}](plots/{plot.name})", "", f"*{plot.name}: {plot.title}*", ""]
    left_out = [f"- {plot.name} not drawn: {plot.skipped}" for plot in planned if plot.skipped is not None]
    return [*lines, *left_out, *([""] if left_out else [])]


findings = report_findings.findings


def render(record: dict, planned: list[plots.Plot] | None = None, reverifications: list[dict] | None = None,
           run_dir: Path | None = None) -> str:
    """report.md of a record. `planned`: the plots drawn and left out (plots.plan); by default the record's own plan,
    taking the sampler files it names to be present. `reverifications`: what `inferlab reverify` found when it ran
    this run's configuration again (reverify.read_kept), shown before the plots. `run_dir`: where the sampler series
    are, for what needs them beyond the record (the link's bytes by level under a concurrency sweep)."""
    run = record["run"]
    controller = run.get("controller") or {}
    lines = [
        f"# inferlab run {run['id']}",
        "",
        f"- playbook `{run['playbook']}`, inventory `{run['inventory']}`",
        f"- {run['started']} to {run['finished']}; ansible-runner status `{run['status']}`; "
        f"exit {run['exit_code']} ({run['exit_meaning']})",
        f"- controller {controller.get('hostname')}: ansible-core {controller.get('ansible_core')}, "
        f"inferlab {controller.get('inferlab')}",
        "",
    ]
    shows, limits = findings(record)
    lines += [
        "## What this run shows",
        "",
        *(f"- {line}" for line in shows or ["Nothing measured: no stage of this run wrote a result to the record."]),
        "",
    ]
    lines += ["## What it does not show", "", *(f"- {line}" for line in limits), ""]
    entries = record_view.journal_entries(record)
    if entries:
        lines += report_journal.journal(entries)
    batches = record_view.serving_batches(record)
    if batches:
        lines += report_serving.throughput_summary(batches)
    trials = record_view.serving_trials(record)
    if trials:
        lines += report_serving.measured_trials(trials)
    if record.get("verification"):
        lines += ["## Verification (known-good snapshot)", ""]
        for host, state in sorted(record["verification"].items()):
            lines += report_verification.verification(host, state)
    if record.get("candidate"):
        lines += report_candidate.candidate(record["candidate"])
    if record.get("link_tests"):
        lines += [
            "## Link tests",
            "",
            "Throughput is iperf3's receiver-side rate. Each test ran inside its own counter window; the "
            "counter columns are that window's deltas per host.",
            "",
        ]
        for host, result in sorted(record["link_tests"].items()):
            lines += report_link_tests.link_tests(host, result)
    windows = record_view.counter_windows(record)
    if windows:
        lines += report_counters.counter_deltas(windows, record_view.is_emulated(record))
    if record.get("serving"):
        lines += [
            "## Serving",
            "",
            "Each mode was deployed, then accepted by the ladder (one response, repeated, concurrent, a repeated "
            "long prefix, a long context) inside one counter window. Per-request rates and batch aggregates "
            "are different figures and are never mixed. The throughput summary above has one table per kind; "
            "here is each mode's ladder step by step.",
            "",
        ]
        for mode, result in record["serving"].items():
            lines += report_serving.serving(mode, result)
        definitions = next(
            (b.batch["definitions"] for b in batches if isinstance(b.batch.get("definitions"), dict)), {}
        )
        if definitions:
            lines += ["Definitions of the workload figures (llm_workload):", ""]
            lines += [f"- `{name}`: {fmt.value(text)}" for name, text in sorted(definitions.items())]
            lines.append("")
        lines += report_prefix.section(record["serving"])
        lines += report_engine.section(record["serving"])
        lines += report_collectives.section(record["serving"], record_view.is_emulated(record))
    lines += report_sweep.section(record, run_dir)
    lines += report_pairs.section(record)
    lines += report_ladder.section(record)
    lines += report_engine_loopback.section(record)
    lines += report_leave_one_out.section(record)
    lines += report_quarantine.section(record)
    if (record.get("stages") or {}).get("link_ab"):
        lines += ["## Link A/B comparison", ""]
        for host, ab in sorted(record["stages"]["link_ab"].items()):
            lines += report_link_tests.link_ab(host, ab)
    if record.get("fallback"):
        lines += report_fallback.fallback(record["fallback"])
    if record.get("continuity"):
        lines += [
            "## Continuity of the public route",
            "",
            "| prober | url | model | requests | failed | budget | worst gap s | served by |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for label, result in sorted(record["continuity"].items()):
            served = report_fallback.served_by(result["by_backend"])
            verdict = "within" if result["within_budget"] else "**OVER**"
            lines.append(
                f"| {label} | {result['url']} | {result['model']} | {result['total']} | {result['failed']} "
                f"| {result['budget']} ({verdict}) | {fmt.value(result['worst_gap_s'])} | {served} |"
            )
        lines.append("")
    if record.get("restore"):
        lines += [
            "## Restore",
            "",
            "| host | verified | compared with | undone | direct link back | services serving again "
            "| GPUs after the restore | differences from known-good |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        checked = (record.get("stages") or {}).get("restore_check") or {}
        for host, restore in sorted(record["restore"].items()):
            undone_list = (restore.get("undo") or {}).get("undone", [])
            undone = len(undone_list) if isinstance(undone_list, list) else fmt.value(undone_list)
            diffs = "; ".join(fmt.cell(d) for d in restore["differences"]) or "none"
            compared = fmt.cell(restore.get("compared_with", "known_good").replace("_", " "))
            link = report_candidate.link_back(restore.get("link_back"))
            gpus = fmt.cell(report_verification.gpu_holders(checked.get(host))) if host in checked else "-"
            serving = report_candidate.services_back(restore.get("services"))
            lines.append(f"| {host} | {fmt.value(restore['verified'])} | {compared} | {undone} | {link} | {serving} "
                         f"| {gpus} | {diffs} |")
        lines += report_candidate.restore_driver(record["restore"])
        lines.append("")
    if reverifications:
        lines += _reverifications(reverifications)
    lines += _plots(plots.plan(record) if planned is None else planned)
    return "\n".join(lines)


def _reverifications(kept: list[dict]) -> list[str]:
    lines = ["## Re-verification", "",
             "`inferlab reverify` ran this run's configuration again, as later runs from a fresh start, and compared "
             "them with the same control; each time is kept, the latest last, a verdict that did not hold included.",
             ""]
    for document in kept:
        if "unreadable" in document:
            lines += [f"The kept re-verifications cannot be read: {document['unreadable']}", ""]
            continue
        lines += [f"### {document.get('time', 'time not recorded')}", "", *reverify.render_lines(document), ""]
    return lines


def summary(record: dict) -> list[str]:
    """One line per verified or restored host, for the terminal."""
    lines = []
    for host, state in sorted(record["verification"].items()):
        failed = [c["name"] for c in state["checks"] if not c["ok"]]
        verdict = "passed" if state["ok"] else "FAILED: " + ", ".join(failed)
        lines.append(
            f"{host}: verification {verdict} ({len(state['checks']) - len(failed)}/{len(state['checks'])} checks)"
        )
    for host, restore in sorted(record["restore"].items()):
        verdict = "verified" if restore["verified"] else "NOT verified: " + "; ".join(restore["differences"])
        lines.append(f"{host}: restore {verdict}")
    for label, result in sorted(record.get("continuity", {}).items()):
        verdict = "within" if result["within_budget"] else "OVER"
        lines.append(
            f"continuity {label}: {result['failed']} of {result['total']} public-route requests failed "
            f"(budget {result['budget']}: {verdict})"
        )
    fallback = record.get("fallback", {})
    if "prove" in fallback:
        prove = fallback["prove"]
        lines.append(
            f"fallback: {prove['ok']} of {prove['requests']} public-route requests served with the primaries "
            f"paused, by {report_fallback.served_by(prove['served_by'])}"
        )
    if "remove" in fallback:
        verdict = "byte-identical" if fallback["remove"]["byte_identical"] else "NOT the original"
        lines.append(f"fallback removed: gateway config {verdict}")
    for mode, result in record.get("serving", {}).items():
        acceptance = result["acceptance"]
        passed = sum(1 for step in acceptance["steps"] if step["passed"])
        verdict = "accepted" if acceptance["passed"] else "NOT accepted: " + "; ".join(acceptance["problems"])
        lines.append(f"serving {mode}: {verdict} ({passed}/{len(acceptance['steps'])} ladder steps)")
    return lines


def write(run_dir: Path, record: dict) -> Path:
    """report.md in the run directory; its plot list checks the sampler files in `run_dir` (plots.render draws
    them first)."""
    target = run_dir / "report.md"
    try:
        kept = reverify.read_kept(run_dir)
    except reverify.ReverifyError as exc:
        kept = [{"unreadable": str(exc)}]
    write_private(target, render(record, plots.plan(record, run_dir), kept, run_dir))
    return target

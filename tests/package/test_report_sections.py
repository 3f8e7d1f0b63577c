"""report.md rendered from fixed records: golden files, the wording rule, and the sections' own rules.

The records in tests/unit/fixtures/report/ are real lab run records (runs/*/record.json), trimmed: window NVML
snapshots down to their source, `tcp_ext` down to three counters, per-request records down to their figures:

- lab_up: a run that measured nothing;
- verify_failed: a verification that failed (an older record, from before link tests and serving existed);
- serve: TP2 and TP2+NEXTN on the lab inference server, with their counter windows;
- serve_trials: the same with the measured trials (three per mode), from a later run of playbooks/serve.yml, its
  trial batches' definitions left out too (the ladder's carry them), and each mode's cold/warm prefix trials, NCCL
  collectives (NCCL Inspector's records, as the lab writes them) and wire overhead from a molecule serve run of
  2026-12-04 (the same lab and request shapes);
- serve_engine: the real engine (llama.cpp's RPC backend, the lab's model) in baseline and draft modes, from a
  molecule engine run of 2026-12-06 (its killed-member test left out), with the client against the server and the
  link's bytes per token in each mode's `engine`;
- link_test, link_ab: the link test suite, and the stock/candidate A/B (its per-repetition stages left out);
- link_pairs: the day-one matrix of a four-host cluster lab with a suspect (hosts-cluster.yml, 2026-12-06): every
  ordered pair, the suspect's transmit path named;
- suspect_ladder: playbooks/day_one.yml on the same lab (2026-12-07): the matrix, then the elimination ladder on the
  suspect it named;
- leave_one_out: playbooks/leave_one_out.yml on the same lab with the real engine (2026-12-06, beside a make test),
  the whole ring and the ring without the suspect, two rounds, judged again by today's filter (three rounds to name
  a member: "not claimed"); each whole run's serving result cut down to its layers and ranks (the report reads the
  verdict);
- quarantine: playbooks/topology.yml on the same lab with the real engine (2026-12-07, beside a make test): lab-c a
  solo llama-server behind its gateway role, the ring lab-a, lab-b, lab-d served again without it and accepted, the
  quarantine kept (no restore in the run); its router stage left out;
- fallback: the fallback route with its continuity prober;
- candidate_emulated: the candidate on the emulated driver layer;
- restore_driver: the restore after it, with the driver and persistence proof;
- experiment_kernel: synthetic, the only one: serve's nextn mode on two hosts renamed ws-a/ws-b, with the
  kernel-layer candidate in tbnet_build's RETURN shape, receiver errors in its window, a stage journal, and the
  restore's driver proof with the taint a candidate leaves.

Each `<name>.json` renders to `<name>.md` beside it. After a deliberate change to the report, regenerate them and
read the diff:

    INFERLAB_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/package/test_report_sections.py
"""

from __future__ import annotations

import copy
import json
import os
import re

import jsonschema
import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab.plots import plots
from inferlab.record import record
from inferlab.record import view as record_view
from inferlab.report import prefix as report_prefix
from inferlab.report import report
from inferlab.report import text as report_text

FIXTURES = FIXTURE_ROOT / "report"
RECORDS = sorted(FIXTURES.glob("*.json"))
UPDATE = os.environ.get("INFERLAB_UPDATE_GOLDEN") == "1"
# Claims a report must never make: a fix is not a fix until it re-verifies cold, and elimination yields a theory.
OVERCLAIMS = re.compile(r"\b(fixed|diagnosed|diagnosis)\b", re.IGNORECASE)
# The generated findings do not say "proves" either (record text elsewhere may: "proves it by pausing ...").
PROOF = re.compile(r"\b(proves?|proven)\b", re.IGNORECASE)


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table after `heading`, header included."""
    lines = text.splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip() for c in cells])
        elif rows:
            break
    return [rows[0], *rows[2:]] if rows else []


def section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    lines = text.splitlines()
    start = lines.index(heading)
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("#") and len(line.split(" ")[0]) <= len(level):
            break
        body.append(line)
    return "\n".join(body)


def test_the_fixture_set_is_what_the_docstring_says():
    assert [p.stem for p in RECORDS] == [
        "candidate_emulated", "experiment_kernel", "fallback", "lab_up", "leave_one_out", "link_ab", "link_pairs",
        "link_test", "quarantine", "restore_driver", "serve", "serve_engine", "serve_trials", "suspect_ladder",
        "verify_failed",
    ]


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_fixtures_are_records_the_schema_accepts(path):
    """Each fixture is whole, as record.write makes it (every section present, empty where the run had none of it):
    nothing is filled in before it is validated."""
    jsonschema.Draft202012Validator(record.load_schema()).validate(json.loads(path.read_text()))


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_report_matches_its_golden_file(path):
    text = report.render(json.loads(path.read_text()))
    golden = path.with_suffix(".md")
    if UPDATE:
        # CI compares with the committed golden files; rewriting them there would make the test pass by definition
        assert not os.environ.get("CI"), "INFERLAB_UPDATE_GOLDEN=1 is refused under CI: regenerate and review locally"
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}: run with INFERLAB_UPDATE_GOLDEN=1 to write it"
    assert text == golden.read_text(), f"{golden.name} differs: review, then regenerate with INFERLAB_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_no_report_claims_a_fix_or_a_diagnosis(path):
    data = json.loads(path.read_text())
    assert OVERCLAIMS.findall(report.render(data)) == []
    shows, limits = report.findings(data)
    assert PROOF.findall("\n".join(shows + limits)) == []


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_every_report_says_what_it_shows_and_what_it_does_not(path):
    text = report.render(json.loads(path.read_text()))
    shows = section(text, "## What this run shows")
    limits = section(text, "## What it does not show")
    assert shows.strip().startswith("- ") and limits.strip().startswith("- ")


def test_an_emulated_run_says_its_driver_layer_and_receiver_columns_are_not_results():
    for name in ("link_test", "link_ab", "serve"):
        limits = section(report.render(load(name)), "## What it does not show")
        assert "The driver layer was emulated" in limits
        assert "No figure here is a driver result" in limits
        assert "0 by construction: a veth never counts them" in limits
    text = report.render(load("candidate_emulated"))
    assert "nothing is built or loaded: a link profile on the veth stands in for the candidate" in text
    assert "- emulated driver layer: nothing was built: the netns lab cannot load modules" in text
    # both hosts loaded the same stand-in: one build section
    assert text.count("### Build for") == 1 and "### Build for lab-a and lab-b" in text


def test_the_lab_server_is_named_and_inferred_emulated_when_no_layer_is_declared():
    limits = section(report.render(load("serve")), "## What it does not show")
    assert "(inferred: the lab inference server ran and no driver layer is declared)" in limits
    assert "`inferlab.lab.server`" in limits and "not a model's speed" in limits


@pytest.mark.parametrize("module", ["inferlab.lab.server", "inferlab.labserver"])  # its name since 0.2.0, and before
def test_a_rank_of_the_lab_server_is_found_under_either_name(module):
    record = {"serving": {"tp2": {"ranks": {"0": {"argv": ["/usr/bin/python3", "-m", module, "--tp-size", "2"]}}}}}
    assert record_view.lab_server(record)
    record["serving"]["tp2"]["ranks"]["0"]["argv"] = ["python3", "-m", "sglang.launch_server", "--tp-size", "2"]
    assert not record_view.lab_server(record)


def test_a_cached_long_prompt_is_not_a_cold_prefill_result():
    limits = section(report.render(load("experiment_kernel")), "## What it does not show")
    assert ("The long_context step reused a cached prefix (nextn: 119808 cached prompt tokens), so its TTFT and "
            "rates are not a cold-prefill result.") in limits


def test_nextn_without_a_tp2_control_leaves_its_share_unknown():
    limits = section(report.render(load("experiment_kernel")), "## What it does not show")
    assert ("No control without speculative decoding on the same runtime (runtime=sglang_tp2; served: nextn): "
            "NEXTN's share of any speed-up is unknown.") in limits
    # with the control in the same run: one observation each, not a statistic
    limits = section(report.render(load("serve")), "## What it does not show")
    assert "NEXTN's share" not in limits
    assert "baseline and nextn ran once each, one after the other in this run (not interleaved)" in limits


def test_fewer_than_three_trials_is_not_a_statistic():
    limits = section(report.render(load("serve")), "## What it does not show")
    assert ("A ladder step with fewer than 3 requests is not a statistic: first_response (n=1) of baseline and "
            "nextn; repeated_prefix (n=2) of baseline and nextn; long_context (n=1) of baseline and nextn.") in limits
    assert "No measured trials: the serving figures come from single ladder batches" in limits
    assert "repeated (n=3)" not in limits
    limits = section(report.render(load("link_ab")), "## What it does not show")
    assert "The link A/B from lab-a ran 2 repetition(s) per condition: fewer than 3 is not a statistic." in limits


def test_measured_trials_have_a_table_per_figure_with_their_spread():
    data = load("serve_trials")
    text = report.render(data)
    rows = table(text, "### " + record_view.TRIAL_FIGURES[0][1])
    assert rows[0] == ["mode", "layers", "trials", "per trial", "min", "median", "max"]
    assert [r[0] for r in rows[1:]] == list(data["serving"])
    figure = data["serving"]["baseline"]["trials"]["figures"]["single_stream_output_tok_s"]
    assert rows[1][2] == "3" and rows[1][3] == ", ".join(report_text.value(v) for v in figure["values"])
    assert rows[1][5] == report_text.value(figure["median"])
    for _key, title in record_view.TRIAL_FIGURES:
        assert f"### {title}" in section(text, "## Measured trials")
    shows = section(text, "## What this run shows")
    assert "Mode nextn: observed over 3 measured trials: single-stream output tok/s (TTFT included) median" in shows
    limits = section(text, "## What it does not show")
    assert "Each mode's trials ran in one block in one deployment" in limits
    assert "No measured trials" not in limits and "Fewer than 3 measured trials" not in limits


def test_fewer_than_three_measured_trials_is_not_a_statistic_and_failures_are_listed():
    data = load("serve_trials")
    trials = data["serving"]["nextn"]["trials"]
    trials["count"], trials["passed"], trials["problems"] = 2, False, ["trial 2 concurrent: 1 of 6 requests failed"]
    text = report.render(data)
    assert "Fewer than 3 measured trials is not a statistic: nextn (2)." in section(text, "## What it does not show")
    assert "- trial problem, nextn: trial 2 concurrent: 1 of 6 requests failed" in section(text, "## Measured trials")


def test_receiver_errors_are_observed_and_only_a_theory():
    text = report.render(load("experiment_kernel"))
    shows, limits = section(text, "## What this run shows"), section(text, "## What it does not show")
    assert ("Receiver errors observed on thunderbolt0 of ws-a in window serve_nextn: CRC 41, missed 68, length 0, "
            "overrun 0 (total 109).") in shows
    assert "are a theory for a slowdown, not its established cause" in limits
    assert "would support it" in limits


def test_a_kernel_candidate_states_its_build_gates_and_load():
    text = report.render(load("experiment_kernel"))
    candidate = section(text, "## Candidate driver")
    assert "This is not a driver result" not in candidate
    assert "layout `single`, TX E2E history `rx_only`" in candidate
    assert "checkpatch --strict: `total: 0 errors, 0 warnings, 0 checks, 58 lines checked`" in candidate
    assert "sha256 `3f9a1c7d2e5b8f0a4c6d9e1b3a5c7e9f0b2d4f6a8c0e2a4c6e8a0c2e4a6c8e0a`" in candidate
    assert "srcversion `3C1D8F0A5E6B7C2D9A4F1E0`" in candidate
    rows = table(text, "## Candidate driver")
    assert rows[0][:6] == ["host", "driver layer", "kernel", "tx_e2e", "peer E2E", "peer override"]
    assert rows[1][:6] == ["ws-a", "kernel", "6.1.0-57-amd64", "yes", "yes", "no"]
    assert rows[1][8] == "0 -> 12288"
    limits = section(text, "## What it does not show")
    assert "nothing here shows that tx_e2e is safe on other USB4 controllers or firmware" in limits
    assert "The kernel on ws-a stays tainted (12288) until a reboot" in limits


def test_the_stage_journal_is_a_table_in_index_order_and_escapes_pipes():
    text = report.render(load("experiment_kernel"))
    rows = table(text, "## Stage journal")
    assert rows[0] == ["#", "stage", "status", "measured against", "layer change", "started", "took", "changes",
                       "note"]
    assert [r[1] for r in rows[1:]] == [
        "verify", "known_good", "control", "prober", "fallback", "pause", "tp2_nextn", "candidate_build",
        "tp2_nextn_candidate", "restore", "prober_stop"]
    by_stage = {r[1]: r for r in rows[1:]}
    assert by_stage["tp2_nextn"][2:5] == ["ok", "tp2_baseline", "speculation none -> nextn"]
    assert by_stage["tp2_nextn_candidate"][2:5] == ["**failed**", "tp2_nextn", "driver stock -> candidate"]
    assert by_stage["control"][3] == "— (the control)" and by_stage["verify"][3] == "—"
    assert by_stage["prober_stop"][2] == "**running**" and by_stage["prober_stop"][6] == "—"
    assert by_stage["tp2_nextn"][6] == "10.3 min" and by_stage["verify"][6] == "65 s"
    # a pipe in a note cannot end its cell
    assert "ws-b: rank 1 exited during CUDA graph capture \\| see logs/ws-b/" in text
    assert all(len(r) == len(rows[0]) for r in rows)
    shows = section(text, "## What this run shows")
    assert ("The stage journal records 11 stages: 9 ok, 1 failed, 1 running. Measured stages, each one declared "
            "layer from its control: tp2_nextn against tp2_baseline (speculation none -> nextn); tp2_nextn_candidate "
            "against tp2_nextn (driver stock -> candidate).") in shows
    limits = section(text, "## What it does not show")
    assert ("Stage tp2_nextn was measured against tp2_baseline, which did not run: its change (speculation none -> "
            "nextn) has no control in this run.") in limits
    assert "Stages that failed or were skipped left no complete result here: tp2_nextn_candidate (failed)." in limits
    assert "Stage prober_stop never finished (journaled as running)" in limits


def test_journal_changes_may_be_a_list():
    data = load("experiment_kernel")
    data["journal"]["pause"]["changes"] = ["pauses original-a", "pauses original-b"]
    rows = table(report.render(data), "## Stage journal")
    assert {r[1]: r for r in rows[1:]}["pause"][7] == "pauses original-a; pauses original-b"


@pytest.mark.parametrize("journal", [None, {}], ids=["absent", "empty"])
def test_an_older_record_without_a_journal_has_no_journal_section(journal):
    data = load("experiment_kernel")
    if journal is None:
        del data["journal"]
    else:
        data["journal"] = journal
    text = report.render(data)
    assert "## Stage journal" not in text and "stage journal" not in section(text, "## What this run shows")


def test_throughput_kinds_are_never_mixed_in_one_table():
    text = report.render(load("serve"))
    single = table(text, "### Single-stream output tok/s")
    assert single[0] == ["mode", "step", "cache", "cached prompt tokens", "n", "min", "median", "p90", "p99", "max"]
    assert {r[1] for r in single[1:]} == {"first_response", "repeated", "repeated_prefix", "long_context"}
    # a record from before p90 was measured shows — there; p99 it had
    repeated = next(r for r in single if r[:2] == ["baseline", "repeated"])
    assert repeated[:8] == ["baseline", "repeated", "warm", "135", "3", "211.5", "222.6", "—"]
    assert repeated[9] == "223.3" and repeated[8] != "—"
    decode = table(text, "### Decode tok/s")
    assert "concurrent" not in {r[1] for r in decode[1:]}
    under = table(text, "### Per-request output tok/s under concurrency")
    assert {r[1] for r in under[1:]} == {"concurrent"}
    aggregate = table(text, "### Aggregate output tok/s")
    assert aggregate[0][-4:] == ["aggregate tok/s", "req/s", "total tok/s", "goodput"]
    assert ["baseline", "concurrent", "warm", "399", "6", "6/6", "768", "0.5718", "1343", "—", "—", "—"] in aggregate
    ttft = table(text, "### TTFT ms")
    assert ["nextn", "first_response", "cold (flushed)", "0", "1", "1", "7.787", "7.787", "—", "7.787",
            "7.787"] in ttft
    # every table carries its definition right under its heading
    for heading in ("### Single-stream output tok/s", "### Decode tok/s", "### TTFT ms", "### Aggregate output tok/s",
                    "### Per-request output tok/s under concurrency"):
        assert section(text, heading).strip().startswith("Definition: ")


def test_counter_deltas_per_window_and_host():
    text = report.render(load("experiment_kernel"))
    rows = table(text, "## Counter deltas per window and host")
    assert rows[0] == ["window", "host", "interface", "seconds", "rx CRC", "rx missed", "rx length", "rx overrun",
                       "rx errors (total)", "TCP retrans segs", "received", "sent", "sampler samples"]
    assert rows[1] == ["serve_nextn", "ws-a", "thunderbolt0", "12.1", "41", "68", "0", "0", "109", "239", "293 MiB",
                       "294 MiB", "19"]
    assert rows[2][:2] == ["serve_nextn", "ws-b"] and rows[2][9] == "1787"
    assert "0 by construction here" not in section(text, "## Counter deltas per window and host")
    text = report.render(load("link_test"))
    rows = table(text, "## Counter deltas per window and host")
    # by opening time, then host
    assert [(r[0], r[1]) for r in rows[1:3]] == [("asymmetry", "lab-a"), ("asymmetry", "lab-b")]
    assert [r[0] for r in rows[1::2]] == ["asymmetry", "flow_sweep", "window", "probes", "loaded_probes"]
    assert "0 by construction here" in section(text, "## Counter deltas per window and host")


def test_window_notes_resets_and_a_retrained_link_are_listed():
    data = load("experiment_kernel")
    window = data["stages"]["window_serve_nextn"]["ws-b"]
    window.update(link_retrained=True, resets=["tcp.RetransSegs went backwards: 10 -> 2"],
                  link_after=dict(window["link_after"], rx_speed_gbps=10.0))
    window["tcp"]["RetransSegs"] = None
    text = report.render(data)
    deltas = section(text, "## Counter deltas per window and host")
    assert "- serve_nextn on ws-b: the link changed during the window: 20/20 Gb/s -> 10/20 Gb/s per lane" in deltas
    assert "- serve_nextn on ws-b: counter reset: tcp.RetransSegs went backwards: 10 -> 2" in deltas
    assert table(text, "## Counter deltas per window and host")[2][9] == "—"
    assert "The link changed speed or lanes during window serve_nextn on ws-b." in text
    assert "Window serve_nextn on ws-b: a counter went backwards, so that delta is unknown." in text


def test_window_notes_list_the_links_flaps_with_their_times():
    data = load("experiment_kernel")
    data["stages"]["window_serve_nextn"]["ws-a"]["link_events"] = [
        {"kind": "carrier", "interface": "thunderbolt0", "at": "2026-12-01T09:20:05.250000Z", "t_wall": 0,
         "since_s": 1.0, "changes": 2, "up": 1, "down": 1},
        {"kind": "gone", "interface": "thunderbolt0", "at": "2026-12-01T09:20:07.250000Z", "t_wall": 2, "since_s": 1.0},
        {"kind": "unreadable_sample", "interface": "thunderbolt0", "index": 9, "message": "not JSON"},
    ]
    text = report.render(data)
    deltas = section(text, "## Counter deltas per window and host")
    assert ("- serve_nextn on ws-a: the link's events during the window: carrier changed 2 time(s) at 09:20:05.25; "
            "interface gone at 09:20:07.25; a sample could not be read") in deltas
    assert ("The link's carrier dropped or the interface went away during window serve_nextn on ws-a: 2 event(s), "
            "listed under the window's counter deltas.") in text


def test_the_restore_shows_the_driver_and_its_persistence_proof():
    text = report.render(load("restore_driver"))
    rows = table(text, "## Restore")
    link_back = "3.507 s (carrier at 3.5 s); set thunderbolt0 up at 3.2s; re-added 169.254.10.1/30 at 3.2s"
    assert rows[1] == ["lab-a", "yes", "inventory expectations", "0", link_back, "-",
                       "0: NVIDIA GeForce RTX 5090, 32132 MiB free", "none"]
    restore = section(text, "## Restore")
    assert "lib/modules/6.18.44-fc-v509: no such directory (before and after)" in restore
    assert "- lab-a: kernel taint 0, unchanged (not tainted)" in restore
    limits = section(text, "## What it does not show")
    assert "The restore on lab-a was checked against the inventory's expectations" in limits


def test_the_restore_says_how_long_each_service_took_to_serve_again():
    data = load("restore_driver")
    data["restore"]["lab-a"]["services"] = [
        {"name": "original-a", "ok": True, "wait": {"ready_timeout_s": 900.0, "waited_s": 41.3, "attempts": 7}},
        {"name": "original-b", "ok": False, "wait": {"ready_timeout_s": 60.0, "waited_s": 60.2, "attempts": 9}}]
    rows = table(report.render(data), "## Restore")
    assert rows[1][5] == ("original-a serves after 41.3 s (7 requests, of 900 s); "
                          "original-b **does not serve** after 60.2 s (9 requests, of 60 s)")


def test_a_restore_that_is_not_verified_says_a_person_must_look():
    data = load("restore_driver")
    data["restore"]["lab-b"].update(verified=False, differences=["thunderbolt_net srcversion X, expected Y"])
    shows = section(report.render(data), "## What this run shows")
    assert "Restore NOT verified on lab-b (thunderbolt_net srcversion X, expected Y): a person must look." in shows


def test_a_run_that_measured_nothing_says_so():
    text = report.render(load("lab_up"))
    assert "Nothing measured" in section(text, "## What this run shows")
    assert "it shows no performance result" in section(text, "## What it does not show")
    assert "No plots: the record has no serving batches, counter windows or link tests." in text


def test_the_plot_list_says_which_plots_were_left_out_and_why(tmp_path):
    data = load("serve")
    for by_host in data["stages"].values():
        for window in by_host.values():
            window["samples"].update(path=None, count=0)
    text = report.render(data)
    plot_list = section(text, "## Plots")
    assert "![tok/s per mode (layers) and ladder step, spread over the requests](plots/serving_tok_s.png)" in plot_list
    assert ("- timeline_lab-a.png not drawn: the record has no sampler series for lab-a (no window recorded samples)"
            in plot_list)
    assert "No sampler series in the record" in section(text, "## What it does not show")
    # write() checks the run directory: a series the record names but the directory lacks is left out, and said so
    target = report.write(tmp_path, load("serve"))
    assert ("- timeline_lab-b.png not drawn: the sampler series the record names are missing from the run directory: "
            "windows/serve_baseline/samples/lab-b.jsonl, windows/serve_nextn/samples/lab-b.jsonl") in target.read_text()


def test_findings_read_only_the_record():
    data = load("experiment_kernel")
    before = copy.deepcopy(data)
    shows, limits = report.findings(data)
    assert data == before
    assert shows and limits
    assert plots.plan(data) == plots.plan(before)


def test_the_gpus_show_who_holds_them_at_verify_and_after_the_restore():
    record = load("restore_driver")
    held = {"index": 0, "name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-1", "memory_total_bytes": 34190917632,
            "memory_free_bytes": 3814 * 2**20,
            "compute_processes": [{"pid": 4100, "name": "sglang::schedul", "used_memory_bytes": 27656 * 2**20}]}
    record["stages"]["restore_check"]["lab-a"]["gpus"] = [held]
    record.setdefault("verification", {})["lab-a"] = {**record["stages"]["restore_check"]["lab-a"], "gpus": [held]}
    text = report.render(record)
    holders = "0: NVIDIA GeForce RTX 5090, 3814 MiB free, held by sglang::schedul (pid 4100, 27656 MiB)"
    assert table(text, "## Restore")[1][6] == holders
    assert f"- GPUs (snapshot): {holders}" in section(text, "## Verification (known-good snapshot)")


def test_the_engine_section_judges_the_client_against_the_server_per_mode():
    text = report.render(load("serve_engine"))
    body = section(text, "## The engine's own figures")
    assert "- **baseline** (llama.cpp 0.5.0-dev (build 1, commit 0c1e570), 4 slots of 4,096 tokens)" in body
    assert body.count("within 25 % of 1: agrees") == 2
    assert "acceptance rate 0.124 (accepted / draft tokens)" in body and "78,601 B per generated token" in body
    assert "## The engine's own figures" not in report.render(load("serve_trials"))  # SGLang counts no window


def test_an_engine_disagreement_and_missing_counters_are_shown_not_hidden():
    broken = load("serve_engine")
    engine = broken["serving"]["draft"]["engine"]
    engine["agreement"].update(passed=False, latency_ratio={"median": 1.4, "min": 1.3, "max": 1.5, "n": 15})
    engine["link_bytes_per_token"] = {"problem": "host lab-b has no tx_bytes for thunderbolt0 in the window"}
    body = section(report.render(broken), "## The engine's own figures")
    assert "(median ratio 1.400, 1.300-1.500; within 25 % of 1: **disagrees**)" in body
    assert "link bytes per token: not counted (host lab-b has no tx_bytes for thunderbolt0 in the window)" in body


def test_nccl_collectives_a_table_per_host_and_the_overhead_with_its_inputs():
    text = report.render(load("serve_trials"))
    rows = table(text, "## NCCL collectives and the wire overhead")
    assert rows[0][:4] == ["mode", "host", "source", "in window"]
    assert [(r[0], r[1], r[2]) for r in rows[1:]] == [
        ("baseline", "lab-a", "inspector"), ("baseline", "lab-b", "inspector"), ("nextn", "lab-a", "inspector"),
        ("nextn", "lab-b", "inspector")]
    assert all(re.fullmatch(r"[0-9.]+ %", r[7]) for r in rows[1:]) and "p99" in rows[1][6]
    body = section(text, "## NCCL collectives and the wire overhead")
    assert "verify steps x 4 tokens" in body and "ratio 0." in body
    assert "its ratio describes the lab, not a model" in body


def test_nccl_collectives_from_coll_lines_are_not_timed():
    record = load("serve_trials")
    for found in record["serving"]["nextn"]["collectives"]["hosts"].values():
        found["source"] = "coll"
        for kind in found["collectives"].values():
            for key in ("time_us_total", "time_us_median", "time_us_p99", "algobw_gbs_median", "busbw_gbs_median"):
                kind.pop(key)
            for rank in kind["per_rank"].values():
                for key in list(rank):
                    if key not in ("count", "bytes"):
                        rank.pop(key)
    rows = table(report.render(record), "## NCCL collectives and the wire overhead")
    nextn = [r for r in rows[1:] if r[0] == "nextn"]
    assert [(r[2], r[7]) for r in nextn] == [("coll", "not timed"), ("coll", "not timed")]
    assert "p99" not in nextn[0][6]


def test_nccl_collectives_without_a_trace_or_an_overhead():
    record = load("serve_trials")
    record["serving"]["baseline"]["collectives"] = None
    nextn = record["serving"]["nextn"]["collectives"]
    nextn["hosts"]["lab-b"] = None
    nextn["errors"] = {"lab-b": "Cannot read the NCCL traces: [Errno 13] Permission denied: '/var/lib/x.log'"}
    nextn["wire_overhead"] = {"theory": None, "hosts": {}, "notes": [],
                              "problem": "a speculative batch (concurrent) has no spec_accept_length"}
    text = report.render(record)
    body = section(text, "## NCCL collectives and the wire overhead")
    assert "| baseline |" not in body and "| nextn | lab-b | not read |" in body
    assert "- nextn, over thunderbolt0: wire overhead not computed: a speculative batch (concurrent) has no" in body
    assert "  - lab-b: its traces could not be read: Cannot read the NCCL traces: [Errno 13] Permission denied" in body
    shows = section(text, "## What this run shows")
    assert re.search(r"NCCL collectives of nextn in its window \(observed\): lab-a [0-9,]+, lab-b —; no wire overhead",
                     shows)
    assert "NCCL collectives of baseline" not in shows


def test_cold_against_warm_prefix_by_label_with_the_shift_and_its_statistics():
    # the fixture's run sent 8,192-token prompts (8,196 with the chat template), the default before it became 60 %
    # of the context length
    text = report.render(load("serve_trials"))
    rows = table(text, "### baseline: 3 pairs, prompt 8,196 tokens (every label confirmed)")
    assert [r[:2] for r in rows] == [["label", "confirmed trials"], ["cold", "3"], ["warm", "3"]]
    body = section(text, "## Cold against warm prefix")
    assert "- warm minus cold, TTFT ms: no verdict possible: " in body and "no 95 % interval at 3 vs 3 trials" in body
    assert "rank-sum p 0.1, at least 0.1" in body  # nextn's TTFT: every warm trial below every cold one
    shows = section(text, "## What this run shows")
    assert "Mode nextn, cold against warm prefix (3 pairs, observed): median TTFT cold" in shows
    assert "each label confirmed by the server's cached tokens" in shows


def test_an_unproven_prefix_label_is_said():
    record = load("serve_trials")
    prefix = record["serving"]["nextn"]["prefix_trials"]
    prefix["passed"], prefix["problems"] = False, ["pair 2 cold: cached_tokens 4096 after the flush (expected 0)"]
    text = report.render(record)
    assert "### nextn: 3 pairs, prompt 8,196 tokens (NOT every label confirmed)" in text
    assert "NOT every label confirmed: pair 2 cold: cached_tokens 4096 after the flush (expected 0)" in text


@pytest.mark.parametrize("cold, warm, reading", [
    ([50.0, 52.0, 55.0, 57.0], [14.0, 15.0, 16.0, 17.0], "warm better: "),   # TTFT: lower is better
    ([14.0, 15.0, 16.0, 17.0], [50.0, 52.0, 55.0, 57.0], "warm worse: "),
    ([50.0, 15.0, 55.0, 17.0], [14.0, 52.0, 16.0, 57.0], "no clear difference: "),
    ([50.0, 52.0, 55.0], [14.0, 15.0, 16.0], "no verdict possible: "),
])
def test_the_cold_warm_shift_is_read_as_compare_reads_a_metric(cold, warm, reading):
    assert report_prefix.shift({"values": cold}, {"values": warm}, "lower").startswith(reading)


def test_the_aggregate_table_shows_request_and_total_throughput_and_goodput():
    data = load("serve")
    batch = next(step["batch"] for step in data["serving"]["baseline"]["acceptance"]["steps"]
                 if step["batch"]["kind"] == "concurrent")
    batch.update(request_throughput_req_s=10.49, total_token_throughput_tok_s=2857.0,
                 goodput={"ttft_s": 0.5, "tpot_s": None, "requests": 5, "share": 5 / 6, "req_s": 8.7})
    rows = table(report.render(data), "### Aggregate output tok/s")
    row = next(r for r in rows if r[:2] == ["baseline", "concurrent"])
    assert row[-3:] == ["10.49", "2857", "5 (83 %) within TTFT <= 0.5 s"]


def test_itl_per_token_has_a_table_only_where_the_stream_counted_each_chunks_tokens():
    data = load("serve")
    assert "### ITL ms per token" not in report.render(data) and "### ITL ms per chunk" in report.render(data)
    batch = data["serving"]["nextn"]["acceptance"]["steps"][0]["batch"]
    batch["itl_per_token_s"] = {"n": 4, "mean": 0.002, "median": 0.002, "p90": 0.003, "p99": 0.003, "min": 0.001,
                                "max": 0.003}
    rows = table(report.render(data), "### ITL ms per token")
    assert rows[1][:2] == ["nextn", "first_response"] and rows[1][-5:] == ["1", "2", "3", "3", "3"]

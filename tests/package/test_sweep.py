"""The concurrency sweep of a record (sweep.py, report_sweep.py, plots_sweep.py): each side's figures by level,
each level's verdict read at a Bonferroni level over the levels, the crossover of the medians, a side that was not
run, the report's section and the plot. The records are built from points as sweep_points writes them."""

import json

import jsonschema
import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab import cli, exit_codes
from inferlab.analysis import sweep
from inferlab.plots import plots
from inferlab.record import record
from inferlab.record import view as record_view
from inferlab.report import report
from inferlab.report import sweep as report_sweep

SERVE_RECORD = FIXTURE_ROOT / "report" / "serve_trials.json"


def point(trial, level, tok_s, ttft_s=0.2, failed=0):
    return {"trial": trial, "level": level, "started": f"2026-12-05T03:00:{trial:02d}Z", "error": None,
            "batch": {"kind": "concurrent", "cache": "warm", "error": None, "wall_s": 2.0, "ok": 2 * level - failed,
                      "failed": failed, "aggregate_output_tok_s": tok_s,
                      "ttft_s": {"n": 2, "mean": ttft_s, "median": ttft_s, "p99": ttft_s * 2, "min": ttft_s,
                                 "max": ttft_s * 2},
                      "itl_s": {"n": 9, "mean": 0.01, "median": 0.01, "p99": 0.03, "min": 0.01, "max": 0.03},
                      "output_tok_s": {"n": 2, "mean": 40.0, "median": 40.0, "p99": 41.0, "min": 39.0, "max": 41.0},
                      "latency_s": None}}


def side(topology, rates, rounds, **extra):
    """rates: {level: base tok/s}; round r adds r, so the rounds spread."""
    levels = sorted(rates)
    return {"topology": topology, "levels": levels, "trials": rounds, "requests_per_slot": 2, "prompt_tokens": 128,
            "output_tokens": 64, "seed": 3000,
            "points": [point(r, level, rates[level] + r) for r in range(1, rounds + 1) for level in levels], **extra}


def sweep_record(tp2_rates, replica_rates, rounds, replicas_extra=None):
    return {
        "serving": {"baseline": {"mode": "baseline", "layers": {"runtime": "sglang_tp2", "speculation": "none"},
                                 "window": "serving_baseline", "sweep": side("tp2", tp2_rates, rounds)}},
        "stages": {"sweep": {"replicas": side("replicas", replica_rates, rounds,
                                              **{"route": "router", "layers": {"runtime": "originals"},
                                                 **(replicas_extra or {})})}},
    }


RUN = {"id": "20261205T030000Z-experiment", "playbook": "playbooks/experiment.yml", "inventory": "inventory/lab",
       "started": "2026-12-05T03:00:00Z", "finished": "2026-12-05T03:09:00Z", "status": "successful",
       "exit_code": 0, "exit_meaning": "success"}
# TP2 slower than the replicas at concurrency 1, faster at 4 (the link costs at low load, the pooled memory pays)
TP2 = {1: 50.0, 2: 100.0, 4: 400.0}
REPLICAS = {1: 90.0, 2: 100.0, 4: 200.0}


def test_the_figures_of_each_side_and_level():
    found = sweep.build(sweep_record(TP2, REPLICAS, 3))
    assert found.levels == (1, 2, 4)
    figures = found.figures[("tp2", 4)]
    assert figures.aggregate_tok_s == (401.0, 402.0, 403.0) and figures.rounds == 3
    assert (figures.ttft_ms, figures.ttft_p99_ms, figures.itl_p99_ms) == (200.0, 400.0, 30.0)
    assert (figures.per_request_tok_s, figures.failed, figures.requests) == (40.0, 0, 24)


def test_three_rounds_a_side_give_no_reading_and_say_why():
    found = sweep.build(sweep_record(TP2, REPLICAS, 3))
    assert [r.reading for r in found.readings] == ["no reading"] * 3
    assert "no verdict possible at n=3 vs 3: the smallest exact p is 0.1 (read at 0.0167)" in found.readings[0].reason


def test_five_rounds_a_side_give_each_level_an_observed_reading_never_a_verdict():
    # one deployment a side: what differs between the two blocks moves every level alike, so the rounds' tests are
    # observations (the calibration simulates why)
    found = sweep.build(sweep_record(TP2, REPLICAS, 5))
    assert [r.reading for r in found.readings] == ["observed: replicas higher", "no clear difference",
                                                   "observed: TP2 higher"]
    assert found.readings[0].reason == "TP2 lower, p within 0.0167"
    assert found.readings[1].reason == "p above 0.0167"  # the same rates: an equal pool
    assert found.readings[2].row.interval.estimate == 200.0
    assert found.crossover.startswith("observed crossover: from concurrency 1 to 2 the higher median goes from the "
                                      "replicas to neither (equal); from concurrency 2 to 4")


def test_a_side_that_could_not_be_swept_is_named_with_its_reason():
    not_run = "no router (inferlab_router_url): the original replicas are not one deployment a load can be sent to"
    not_swept = {"points": [], "levels": [1, 2, 4], "not_run": not_run, "route": None}
    found = sweep.build(sweep_record(TP2, {}, 3, not_swept))
    assert found.not_run == (f"replicas: not run, {not_run}",)
    assert [r.reason for r in found.readings] == ["a topology has no aggregate figure at this level"] * 3
    assert found.crossover == "no level has figures on both topologies"
    assert sweep.build({"serving": {"baseline": {"mode": "baseline"}}}) is None


def test_failed_and_unsent_batches_count_every_request_they_held():
    data = sweep_record({2: 100.0}, {2: 90.0}, 2)
    data["serving"]["baseline"]["sweep"]["points"][0]["batch"].update(ok=3, failed=1)
    data["serving"]["baseline"]["sweep"]["points"][1] = {"trial": 2, "level": 2, "started": None,
                                                         "error": "connection refused", "batch": None}
    figures = sweep.build(data).figures[("tp2", 2)]
    assert (figures.failed, figures.requests, figures.aggregate_tok_s) == (5, 8, (101.0,))


@pytest.mark.parametrize("where", ["tp2", "replicas"])
def test_the_sweeps_match_the_record_schema(where):
    data = sweep_record(TP2, REPLICAS, 3)
    schema = record.load_schema()
    found = data["serving"]["baseline"]["sweep"] if where == "tp2" else data["stages"]["sweep"]["replicas"]
    jsonschema.validate(found, {"$defs": schema["$defs"], "$ref": "#/$defs/sweep"})
    found["points"][0]["level"] = 0
    with pytest.raises(jsonschema.ValidationError, match="0 is less than the minimum of 1"):
        jsonschema.validate(found, {"$defs": schema["$defs"], "$ref": "#/$defs/sweep"})


def test_the_report_section_and_the_plot(tmp_path):
    data = sweep_record(TP2, REPLICAS, 5)
    text = "\n".join(report_sweep.section(data))
    assert "## Concurrency sweep" in report.render({"run": RUN, "stages": data["stages"]})  # one side, no serving
    assert "## Concurrency sweep: TP2 against the routed replicas" in text
    assert "| 4 | TP2 (baseline: runtime=sglang_tp2, speculation=none) | 5 | 403 (401–405, n=5) |" in text
    assert "| 1 | replicas (through the router) | 5 | 93 (91–95, n=5) |" in text
    assert "| observed: TP2 higher |" in text and "| observed: replicas higher |" in text
    assert "observed, not a verdict: each topology's rounds ran on one deployment" in text
    assert "verdict |" not in text and "faster" not in text
    assert "- The link under TP2's sweep: read from the run directory's sampler series, not given here." in text
    assert report_sweep.shows(data)[0].startswith(
        "Concurrency sweep, TP2 against the routed replicas (aggregate tok/s by level, observed in one run, not a "
        "verdict): 1: replicas higher, 2: no clear difference, 4: TP2 higher")
    planned = {p.name: p for p in plots.plan(data, tmp_path)}
    target = planned["sweep_concurrency.png"].draw(tmp_path / "sweep_concurrency.png")
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sweep_sent_at_a_rate_says_how_its_requests_arrived():
    arrival = {"request_rate": 4.0, "burstiness": 1.0}
    data = sweep_record(TP2, REPLICAS, 5, replicas_extra=arrival)
    data["serving"]["baseline"]["sweep"].update(arrival)
    schema = {"$defs": record.load_schema()["$defs"], "$ref": "#/$defs/sweep"}
    jsonschema.validate(data["stages"]["sweep"]["replicas"], schema)
    text = "\n".join(report_sweep.section(data))
    assert ("- replicas (through the router): the requests of a batch arrived at 4 a second (gamma gaps of shape 1, "
            "a Poisson process), at most the level in flight, not all at once.") in text
    assert "- TP2 (baseline: runtime=sglang_tp2, speculation=none): the requests of a batch arrived at 4" in text
    assert "arrived at" not in "\n".join(report_sweep.section(sweep_record(TP2, REPLICAS, 5)))  # all at once
    data["stages"]["sweep"]["replicas"]["request_rate"] = 0
    with pytest.raises(jsonschema.ValidationError, match="less than or equal to the minimum of 0"):
        jsonschema.validate(data["stages"]["sweep"]["replicas"], schema)


def with_sampler_series(tmp_path, data, rate_bytes_per_s=1000.0):
    """data's TP2 window, with a sampler series per ring host in tmp_path: a sample a second from T0, each host
    sending rate_bytes_per_s on thunderbolt0."""
    for host in ("lab-a", "lab-b"):
        path = tmp_path / "samples" / f"serving_baseline-{host}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(json.dumps({"t_wall": T0 + s, "interfaces": {"thunderbolt0": {
            "tx_bytes": int(rate_bytes_per_s * s)}}}) + "\n" for s in range(0, 60)) + "{cut short\n")
        data.setdefault("stages", {}).setdefault("window_serving_baseline", {})[host] = {
            "opened_at": "2026-12-05T03:00:00Z", "closed_at": "2026-12-05T03:01:00Z",
            "link_before": {"interface": "thunderbolt0"},
            "samples": {"path": str(path.relative_to(tmp_path)), "count": 60}}
    return data


T0 = record_view.epoch("2026-12-05T03:00:00Z")


def test_the_link_bytes_per_output_token_by_level_from_the_sampler_series(tmp_path):
    data = sweep_record({1: 100.0, 2: 200.0}, {1: 90.0, 2: 95.0}, 1)
    points = data["serving"]["baseline"]["sweep"]["points"]
    for index, found in enumerate(points):  # each batch starts 0.2 s after a sample and lasts 1.5 s
        found["started"] = f"2026-12-05T03:00:{10 * (index + 1):02d}.200000Z"
        found["batch"].update(wall_s=1.5, aggregate_output_tok_s=100.0)
    with_sampler_series(tmp_path, data)
    found = sweep.build(data)
    levels, reason = sweep.link_by_level(data, found, tmp_path)
    assert reason is None
    # the samples at or before the start and at or after the end are 2 s apart: 2 x 1000 bytes a host, 2 hosts,
    # over 150 output tokens
    assert [(link.level, link.bytes_per_token) for link in levels] == [(1, (4000 / 150,)), (2, (4000 / 150,))]
    assert levels[0].implied_gbps == pytest.approx(4000 / 150 * 100.0 * 8 / 1e9)
    text = "\n".join(report_sweep.section(data, tmp_path))
    assert "| 1 | 0.026 (0.026–0.026, n=1) | 2.13e-05 |" in text


def test_the_link_by_level_says_why_it_is_missing(tmp_path):
    data = with_sampler_series(tmp_path, sweep_record(TP2, REPLICAS, 1))
    (tmp_path / "samples" / "serving_baseline-lab-b.jsonl").unlink()
    text = "\n".join(report_sweep.section(data, tmp_path))
    assert ("- The link under TP2's sweep: not measured by level: the sampler series of TP2's window "
            "serving_baseline are not all in the run directory.") in text
    assert "not given here" in "\n".join(report_sweep.section(data))


def runs_of(count, tp2_rates, replica_rates, drift=0.0):
    """`count` runs' records, each with its own level (run i scales both sides by 1 + drift * i)."""
    return [sweep_record({lv: r * (1 + drift * i) for lv, r in tp2_rates.items()},
                         {lv: r * (1 + drift * i) for lv, r in replica_rates.items()}, 5) for i in range(count)]


def test_several_runs_sweeps_give_each_level_a_verdict_paired_by_run():
    # each run at its own level (0 to 35 % above the first): the pairing takes the run's level out
    levels, verdicts = sweep.across_runs(runs_of(8, TP2, REPLICAS, drift=0.05))
    assert levels == [1, 2, 4]
    assert [v.verdict for v in verdicts] == ["replicas faster", "inconclusive", "TP2 faster"]
    assert verdicts[0].row.test.method == "signed-rank"
    assert verdicts[0].reason.startswith("signed-rank test over 8 pairs")
    assert verdicts[1].reason == "no clear difference at 0.0167"


def test_fewer_runs_use_the_rank_sum_test_and_three_cannot_reach_a_verdict():
    _levels, verdicts = sweep.across_runs(runs_of(5, TP2, REPLICAS))
    assert verdicts[0].verdict == "replicas faster" and verdicts[0].row.test.method == "rank-sum"
    _levels, verdicts = sweep.across_runs(runs_of(3, TP2, REPLICAS))
    assert [v.verdict for v in verdicts] == ["inconclusive"] * 3
    assert verdicts[0].reason.startswith("no verdict possible at n=3 vs 3")
    _levels, verdicts = sweep.across_runs(runs_of(2, TP2, REPLICAS))
    assert verdicts[0].reason == "fewer than 3 runs swept both topologies at this level"


def test_inferlab_sweep_prints_each_levels_verdict_over_the_runs(tmp_path, capsys):
    dirs = []
    for i, data in enumerate(runs_of(5, TP2, REPLICAS)):
        whole = json.loads(SERVE_RECORD.read_text())  # a whole record, as the run wrote it, with this sweep
        whole["run"]["id"] = f"run-{i}"
        whole["serving"]["baseline"]["sweep"] = data["serving"]["baseline"]["sweep"]
        whole["stages"]["sweep"] = data["stages"]["sweep"]
        run_dir = tmp_path / f"run-{i}"
        run_dir.mkdir()
        (run_dir / "record.json").write_text(json.dumps(whole))
        dirs.append(str(run_dir))
    assert cli.main(["sweep", ",".join(dirs)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# inferlab sweep: 5 runs (run-0, run-1, run-2, run-3, run-4)")
    rows = [line for line in text.splitlines() if line.startswith("| 4 |")]
    assert rows and rows[0].rstrip().endswith("| TP2 faster |")
    assert cli.main(["sweep", str(tmp_path / "nowhere")]) == exit_codes.USAGE
    assert "is " + str(tmp_path / "nowhere") + " a run directory?" in capsys.readouterr().err

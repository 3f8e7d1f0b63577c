"""inferlab compare: medians, the exact rank-sum test and the Hodges-Lehmann interval on hand-worked cases, one
declared layer at a time, verdicts in the words observed / theory / supported (withheld for one run a side and for an
A/A pair), and malformed records refused by name."""

import copy
import json
import re

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab import cli, exit_codes
from inferlab.analysis import compare, metric_rows, record_input, run_layers, stats, verdict_policy
from inferlab.record import record
from inferlab.report import compare_output

FIXTURES = FIXTURE_ROOT / "compare"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


# --- statistics, by hand ------------------------------------------------------------------------------------------


def metric(samples, better="higher", role=metric_rows.SPEED, name="tok/s") -> metric_rows.Metric:
    return metric_rows.Metric("s", name, better, role, tuple(samples))


def test_a_metric_row_has_the_medians_the_exact_test_and_the_shift():
    row = verdict_policy.compare_metric(metric([10, 11, 12, 13, 14]), metric([15, 16, 17, 18, 19]))
    assert (row.a.median, row.a.min, row.a.max, row.a.n) == (12, 10, 14, 5)
    assert row.difference == 5
    assert row.test.p_two_sided == pytest.approx(2 / 252)  # complete separation, 1 split of 252 each way
    assert row.interval.estimate == 5 and (row.interval.low, row.interval.high) == (2, 8)  # D(3), D(23) of 1..9
    assert row.observed == verdict_policy.B_BETTER


@pytest.mark.parametrize(
    ("a", "b", "better", "expected"),
    [
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "higher", verdict_policy.B_BETTER),
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "lower", verdict_policy.B_WORSE),
        ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], "lower", verdict_policy.B_BETTER),
        ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], "higher", verdict_policy.B_WORSE),
        ([1, 3, 5, 7, 9], [2, 4, 6, 8, 10], "higher", verdict_policy.NO_CLEAR),
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], None, verdict_policy.NO_DIRECTION),
        ([1, 2, 3], [6, 7, 8], "higher", verdict_policy.UNATTAINABLE),  # 3 vs 3: p >= 0.1, whatever the samples
    ],
)
def test_observed_follows_the_better_direction(a, b, better, expected):
    assert verdict_policy.compare_metric(metric(a, better), metric(b, better)).observed == expected


def test_three_against_three_says_no_verdict_is_possible_and_why():
    """The issue's A/A case: every B trial beat every A trial. The old bootstrap called that B better at any
    confidence; the exact test gives p = 0.05 one-sided, 0.1 two-sided, the smallest 3 vs 3 can give."""
    row = verdict_policy.compare_metric(metric([196.6, 200.1, 203.5]), metric([203.9, 206.0, 209.2]))
    assert (row.test.p_b_higher, row.test.p_two_sided) == (0.05, 0.1)
    assert row.observed == verdict_policy.UNATTAINABLE
    unattainable = "no verdict possible at n=3 vs 3: the smallest exact p is 0.1"
    assert verdict_policy.no_verdict_possible(row.test) == unattainable
    assert row.interval.low is None and row.interval.confidence_pct == pytest.approx(90)
    rows = verdict_policy.with_family_alpha([row], metric_rows.SPEED)
    verdict = verdict_policy.claim_verdict("B is faster", rows, metric_rows.SPEED)
    assert verdict.verdict == verdict_policy.INCONCLUSIVE
    assert verdict.reason == ("no verdict possible at n=3 vs 3: the smallest exact p is 0.1, above the 0.05 each of "
                              "1 speed metric(s) needs; at least 4 samples a side can reach it")


def test_too_few_samples_gives_no_test():
    row = verdict_policy.compare_metric(metric([1.0, 2.0]), metric([5.0, 6.0, 7.0]))
    assert row.test is None and row.interval is None
    assert row.observed == verdict_policy.TOO_FEW
    assert row.difference == 6.0 - 1.5


def row(observed: str, role: str = metric_rows.SPEED) -> metric_rows.Row:
    """A row that reads `observed` (its test's figures are not read again)."""
    spread = metric_rows.Spread(1, 1, 1, 5)
    test = stats.RankSumTest(5, 5, 25, 1 / 252, 1.0, 2 / 252, 2 / 252, True)
    return metric_rows.Row("s", observed, "higher", role, spread, spread, 0, test, None, observed)


@pytest.mark.parametrize(
    ("observed", "verdict"),
    [
        ([verdict_policy.B_BETTER, verdict_policy.NO_CLEAR], verdict_policy.SUPPORTED),
        ([verdict_policy.B_WORSE, verdict_policy.NO_CLEAR], verdict_policy.NOT_SUPPORTED),
        ([verdict_policy.B_BETTER, verdict_policy.B_WORSE], verdict_policy.INCONCLUSIVE),
        ([verdict_policy.NO_CLEAR, verdict_policy.NO_CLEAR], verdict_policy.INCONCLUSIVE),
        ([verdict_policy.UNATTAINABLE, verdict_policy.NO_CLEAR], verdict_policy.INCONCLUSIVE),
        ([], verdict_policy.INCONCLUSIVE),
    ],
)
def test_claim_verdicts(observed, verdict):
    rows = [row(o) for o in observed] + [row(verdict_policy.B_WORSE, role=metric_rows.INFO)]  # info rows never count
    assert verdict_policy.claim_verdict("B is faster", rows, metric_rows.SPEED).verdict == verdict


def test_family_alpha_is_bonferroni():
    assert verdict_policy.family_alpha(1) == 0.05
    assert verdict_policy.family_alpha(8) == 0.00625
    assert stats.samples_needed(verdict_policy.family_alpha(8)) == 6  # 2/924 at 6 a side; 2/252 at 5 is above 0.00625


def test_one_metric_off_zero_among_eight_does_not_carry_the_claim():
    """6 vs 6 with two A samples one place above a B sample: U = 34 of 36, P(U >= 34) = 4/924, two-sided 8/924 =
    0.0087. Alone (at 0.05) that carries "B is faster"; among eight speed metrics (0.00625 each) it does not."""
    a, b = [1, 2, 3, 4, 5, 8], [6, 7, 9, 10, 11, 12]
    lone = verdict_policy.compare_metric(metric(a, name="m0"), metric(b, name="m0"))
    assert lone.test.u == 34 and lone.test.p_two_sided == pytest.approx(8 / 924)
    flat = [verdict_policy.compare_metric(metric(a, name=f"m{i}"), metric(a, name=f"m{i}")) for i in range(1, 8)]

    rows = verdict_policy.with_family_alpha([lone, *flat], metric_rows.SPEED)
    assert rows[0].family_alpha == 0.00625 and rows[0].family_observed == verdict_policy.NO_CLEAR
    verdict = verdict_policy.claim_verdict("B is faster", rows, metric_rows.SPEED)
    assert verdict.verdict == verdict_policy.INCONCLUSIVE and "0.00625 each (0.05 / 8, Bonferroni)" in verdict.reason

    alone = verdict_policy.with_family_alpha([lone], metric_rows.SPEED)
    assert alone[0].family_alpha == 0.05 and alone[0].family_observed == verdict_policy.B_BETTER
    assert verdict_policy.claim_verdict("B is faster", alone, metric_rows.SPEED).verdict == verdict_policy.SUPPORTED


# --- layers and verdicts from records -----------------------------------------------------------------------------


def test_one_layer_apart_one_run_a_side_shows_the_tests_but_withholds_the_verdict():
    result = compare.compare(load("serve_tp2.json"), load("serve_tp2_nextn.json"))
    assert result.changed_layer == "speculation"
    assert result.layers["speculation"] == ("none", "nextn")
    assert result.layers["driver_layer"] == ("emulated", "emulated")
    rows = {(r.section, r.name): r for r in result.rows}
    concurrent = rows[
        ("serving baseline -> nextn: concurrent (concurrent, warm cache)", "output tok/s per request (TTFT included)")
    ]
    assert concurrent.a.n == concurrent.b.n == 4
    assert concurrent.a.median == pytest.approx((214.2 + 214.3) / 2)
    assert concurrent.b.median == pytest.approx((417.3 + 422.7) / 2)
    # 4 vs 4, every B request above every A one: two-sided p = 2/70, under 0.05
    assert concurrent.test.p_two_sided == pytest.approx(2 / 70) and concurrent.observed == verdict_policy.B_BETTER
    repeated = rows[
        ("serving baseline -> nextn: repeated (single_stream, warm cache)", "output tok/s per request (TTFT included)")
    ]
    assert repeated.observed == verdict_policy.TOO_FEW  # two requests each
    verdicts = {v.claim.split(" (")[0]: v for v in result.verdicts}
    assert result.design == compare.ONE_RUN
    for verdict in verdicts.values():
        assert verdict.verdict == verdict_policy.INCONCLUSIVE
        assert verdict.reason.startswith("one run a side: each side's samples share one deployment, so no test here "
                                         "covers the spread between whole runs. For a verdict, repeat whole runs")
    assert "Within the runs the test read supported" in verdicts["B is faster"].reason
    assert verdicts["B is faster"].re_verified is None


def with_trials(data: dict, mode: str, single: list, aggregate: list) -> dict:
    """`data` with measured trials on `mode`, one value per trial (the fields compare reads; the record test below
    checks the shape against the schema)."""
    def figure(values, definition):
        return {"values": values, "definition": definition, "median": None, "min": None, "max": None, "n": 0}

    data["serving"][mode]["trials"] = {
        "count": len(single), "passed": True, "problems": [], "trials": [],
        "figures": {
            "single_stream_output_tok_s": figure(single, "median output tok/s per request, TTFT included"),
            "aggregate_output_tok_s": figure(aggregate, "aggregate output tok/s of the concurrent batch"),
        },
    }
    return data


TRIALS_SECTION = "serving baseline -> nextn: measured trials"
SINGLE_TRIALS = "median output tok/s per request, TTFT included (one value per trial)"


def test_measured_trials_are_the_samples_of_the_speed_claim():
    a = with_trials(load("serve_tp2.json"), "baseline", [40.0, 41.0, 39.0, 40.5, 40.2], [200, 205, 198, 201, 199])
    b = with_trials(load("serve_tp2_nextn.json"), "nextn", [52.0, 50.5, 51.0, 53.0, 51.5], [240, 250, 238, 245, 244])
    result = compare.compare(a, b)
    rows = {(r.section, r.name): r for r in result.rows}
    single = rows[(TRIALS_SECTION, SINGLE_TRIALS)]
    assert single.role == metric_rows.SPEED and single.a.n == single.b.n == 5
    assert (single.a.median, single.b.median, single.difference) == (40.2, 51.5, pytest.approx(11.3))
    # every B trial beats every A trial: 1 split of 252 each way, two-sided p = 2/252, under 0.05 / 2
    assert single.test.p_two_sided == pytest.approx(2 / 252) and single.observed == verdict_policy.B_BETTER
    assert single.family_alpha == 0.025 and single.family_observed == verdict_policy.B_BETTER
    aggregate = rows[(TRIALS_SECTION, "aggregate output tok/s of the concurrent batch (one value per trial)")]
    assert aggregate.observed == verdict_policy.B_BETTER
    ladder = rows[
        ("serving baseline -> nextn: concurrent (concurrent, warm cache)", "output tok/s per request (TTFT included)")
    ]
    assert ladder.role == metric_rows.INFO  # the requests of one batch are not repetitions
    speed = [r for r in result.rows if r.role == metric_rows.SPEED]
    assert {r.section for r in speed} == {TRIALS_SECTION}
    faster = [v for v in result.verdicts if v.claim == "B is faster"][0]
    assert faster.verdict == verdict_policy.INCONCLUSIVE and faster.reason.startswith("one run a side")
    assert "at least 5 a side for 2 speed metric(s)" in faster.reason
    assert "Within the runs the test read supported: observed: B better on 2 of 2 speed metric(s)" in faster.reason


def test_trials_that_overlap_are_inconclusive():
    a = with_trials(load("serve_tp2.json"), "baseline", [40.0, 52.0, 39.0], [200, 250, 198])
    b = with_trials(load("serve_tp2_nextn.json"), "nextn", [41.0, 38.0, 51.0], [201, 197, 249])
    result = compare.compare(a, b)
    faster = [v for v in result.verdicts if v.claim == "B is faster"][0]
    assert faster.verdict == verdict_policy.INCONCLUSIVE
    assert "read inconclusive: no verdict possible at n=3 vs 3" in faster.reason


def test_trials_in_one_run_only_are_not_compared_and_the_ladder_counts_for_nothing():
    a = load("serve_tp2.json")
    b = with_trials(load("serve_tp2_nextn.json"), "nextn", [52.0, 50.5, 51.0], [240, 250, 238])
    result = compare.compare(a, b)
    assert not any(r.section == TRIALS_SECTION for r in result.rows)
    assert any("only in B" in note and "measured trials" in note for note in result.notes)
    assert not [r for r in result.rows if r.role == metric_rows.SPEED]
    assert [v for v in result.verdicts if v.claim == "B is faster"][0].verdict == verdict_policy.INCONCLUSIVE


def test_an_a_a_pair_gets_no_verdict_and_is_called_the_noise_floor():
    """The issue's report: two runs of one configuration, three trials each, every B trial above every A trial
    (A 196.6-203.5, B 203.9-209.2), read "B is faster: supported". Nothing declared differs, so no verdict."""
    a = with_trials(load("serve_tp2.json"), "baseline", [196.6, 200.1, 203.5], [1130, 1135, 1140])
    b = with_trials(load("serve_tp2.json"), "baseline", [203.9, 206.0, 209.2], [1150, 1155, 1160])
    b["run"]["id"] = "20261201T120000Z-serve"
    result = compare.compare(a, b)
    assert result.changed_layer is None
    assert [v.verdict for v in result.verdicts] == [verdict_policy.NO_VERDICT, verdict_policy.NO_VERDICT]
    for verdict in result.verdicts:
        assert verdict.reason == ("A/A pair: no declared layer differs, so the differences measure the noise floor "
                                  "between runs of one configuration, not an effect")
    assert any(note.startswith("A/A pair: no declared layer differs") and "noise floor" in note
               for note in result.notes)
    text = compare_output.render_text(result)
    assert "- B is faster: **no verdict** (A/A pair" in text and "supported" not in text.split("## Verdicts")[1]
    assert compare_output.as_json(result)["aa_pair"] is True


def test_a_a_whole_runs_get_no_verdict_either():
    group_a = repeated("serve_tp2.json", "baseline", RUNS_A5, "a")
    group_b = repeated("serve_tp2.json", "baseline", RUNS_B5, "b")  # far apart, but nothing declared differs
    result = compare.compare(group_a, group_b)
    assert result.design == compare.WHOLE_RUNS and result.changed_layer is None
    assert {v.verdict for v in result.verdicts} == {verdict_policy.NO_VERDICT}


def test_two_layers_apart_is_refused_naming_both():
    with pytest.raises(run_layers.LayersDiffer) as refused:
        compare.compare(load("serve_tp2.json"), load("serve_tp2_nextn_kernel.json"))
    assert set(refused.value.layers) == {"driver_layer", "speculation"}
    message = str(refused.value)
    assert "driver_layer (emulated -> kernel)" in message
    assert "speculation (none -> nextn)" in message


def test_two_layers_apart_cli_exits_13_and_names_them(capsys):
    code = cli.main(["compare", str(FIXTURES / "serve_tp2.json"), str(FIXTURES / "serve_tp2_nextn_kernel.json")])
    assert code == exit_codes.USAGE
    err = capsys.readouterr().err
    assert "differ in 2 declared layers" in err
    assert "driver_layer" in err and "speculation" in err


def test_a_layer_declared_as_an_extra_var_counts():
    lossy, clean = load("link_lossy.json"), load("link_clean_fresh.json")
    result = compare.compare(lossy, clean)
    assert result.changed_layer == "link_profile"
    clean["run"]["extravars"]["inferlab_layer_mtu"] = "9000"
    lossy["run"]["extravars"]["inferlab_layer_mtu"] = "1500"
    with pytest.raises(run_layers.LayersDiffer, match="link_profile .*mtu|mtu .*link_profile"):
        compare.compare(lossy, clean)


def test_a_layer_recorded_in_one_run_only_is_named_not_counted():
    a, b = load("serve_tp2.json"), load("serve_tp2_nextn.json")
    a["hosts"] = {}
    result = compare.compare(a, b)
    assert result.changed_layer == "speculation"
    assert any("recorded in one run only" in note and "driver_layer" in note for note in result.notes)


def test_emulated_transport_errors_are_retransmissions_and_labelled():
    result = compare.compare(load("link_lossy.json"), load("link_clean_fresh.json"))
    assert result.transport_label == "emulated"
    transport = [v for v in result.verdicts if v.claim.startswith("B has fewer transport errors")][0]
    assert "emulated" in transport.claim
    assert transport.verdict == verdict_policy.INCONCLUSIVE and transport.reason.startswith("one run a side")
    rows = {(r.section, r.name): r for r in result.rows}
    retrans = rows[("counter window asymmetry", "lab-a: TCP retransmitted segments")]
    assert retrans.role == metric_rows.TRANSPORT and retrans.a.n == retrans.b.n == 3  # window_asymmetry_1..3
    assert (retrans.a.median, retrans.b.median) == (30110, 1433)
    rx = rows[("counter window asymmetry", "lab-a: receiver errors on thunderbolt0 (crc+over+missed+length)")]
    assert rx.role == metric_rows.INFO  # a veth never counts them
    speed = rows[("link test lab-a <-> lab-b", "lab-a -> lab-b Gb/s per 1 s interval (bidirectional test)")]
    assert speed.a.n == 5  # the omitted interval is left out
    assert speed.a.median == pytest.approx(5.3)


def test_kernel_transport_errors_are_receiver_errors():
    a, b = load("link_lossy.json"), load("link_clean_fresh.json")
    for data in (a, b):
        data["link_tests"]["lab-a"]["transport_label"] = data["link_tests"]["lab-a"]["driver_layer"] = "kernel"
    result = compare.compare(a, b)
    assert result.transport_label == "kernel"
    roles = {r.name: r.role for r in result.rows if r.section == "counter window asymmetry"}
    assert roles["lab-a: TCP retransmitted segments"] == metric_rows.INFO
    assert roles["lab-a: receiver errors on thunderbolt0 (crc+over+missed+length)"] == metric_rows.TRANSPORT


def copies(name: str, runs: int, stem: str) -> list[dict]:
    """`runs` whole runs of the fixture under new run ids (the same figures in each)."""
    group = [load(name) for _run in range(runs)]
    for i, data in enumerate(group, start=1):
        data["run"]["id"] = f"{stem}-{i}"
    return group


def test_require_fresh_re_verifies_only_a_fresh_b():
    lossy, clean = copies("link_lossy.json", 5, "lossy"), copies("link_clean_fresh.json", 5, "clean")
    result = compare.compare(lossy, clean, require_fresh=True)
    supported = verdict_policy.SUPPORTED
    assert [v.verdict for v in result.verdicts] == [supported, supported]  # 5 whole runs a side
    assert result.fresh_b[0] is True
    assert [v.re_verified for v in result.verdicts] == [True, True]
    assert "re-verified: yes" in compare_output.render_text(result)

    del clean[4]["stages"]["fresh_start"]
    result = compare.compare(lossy, clean, require_fresh=True)
    assert result.fresh_b == (False, f"clean-5 {run_layers.fresh_start(clean[4])[1]}")
    assert "has no stages.fresh_start" in result.fresh_b[1]
    assert [v.re_verified for v in result.verdicts] == [False, False]
    text = compare_output.render_text(result)
    assert "re-verified: no" in text and "counts as not fresh" in text

    one_run_a_side = compare.compare(load("link_lossy.json"), load("link_clean_fresh.json"), require_fresh=True)
    assert [v.re_verified for v in one_run_a_side.verdicts] == [False, False]  # nothing supported to re-verify
    assert "re-verified: not applicable (not supported here)" in compare_output.render_text(one_run_a_side)


def test_a_b_that_is_not_later_than_a_re_verifies_nothing():
    """A re-verification is a separate run after the original: a B run that started before an A run ended (the
    fixtures' B runs start at 11:00, A's end at 10:02) does not count, fresh start or not."""
    lossy, clean = copies("link_lossy.json", 5, "lossy"), copies("link_clean_fresh.json", 5, "clean")
    lossy[2]["run"]["finished"] = "2026-12-01T11:30:00Z"
    clean[3]["run"]["started"] = "2026-12-01T11:29:59Z"
    result = compare.compare(lossy, clean, require_fresh=True)
    assert [v.verdict for v in result.verdicts] == [verdict_policy.SUPPORTED, verdict_policy.SUPPORTED]
    assert [v.re_verified for v in result.verdicts] == [False, False]
    assert result.fresh_b == (False, "is not a later run: clean-1 started 2026-12-01T11:00:00Z, clean-2 started "
                              "2026-12-01T11:00:00Z, clean-3 started 2026-12-01T11:00:00Z, clean-4 started "
                              "2026-12-01T11:29:59Z, clean-5 started 2026-12-01T11:00:00Z, before lossy-3 ended "
                              "(2026-12-01T11:30:00Z); a re-verification is a separate run after the original")

    lossy[2]["run"]["finished"] = "2026-12-01T10:59:00Z"  # every B run after every A run: only clean-4 was early
    clean[3]["run"]["started"] = "2026-12-01T11:00:00"  # no zone: the record's times are UTC
    assert compare.compare(lossy, clean, require_fresh=True).fresh_b[0] is True

    del lossy[0]["run"]["finished"]
    assert compare.compare(lossy, clean, require_fresh=True).fresh_b == (
        False, "A's end is not recorded (lossy-1), so B cannot be shown to be later")


def test_a_mode_of_a_run_keeps_the_runs_fresh_start():
    """RUN:MODE holds the run's stages.fresh_start (it lost it once, so that no mode comparison could re-verify: found
    by the lab's re-verification bench, whose later runs started fresh and read "not fresh")."""
    data = with_trials(load("serve_tp2_nextn.json"), "nextn", [50.0, 51.0, 52.0], [240, 241, 242])
    data["stages"]["fresh_start"] = copy.deepcopy(load("link_clean_fresh.json")["stages"]["fresh_start"])
    view = record_input.mode_view(data, "nextn")
    assert view["stages"]["fresh_start"] == data["stages"]["fresh_start"]
    assert run_layers.fresh_start(view) == run_layers.fresh_start(data) and run_layers.fresh_start(view)[0] is True


def test_two_modes_of_one_run_never_re_verify_each_other():
    data = load("link_clean_fresh.json")
    assert compare._not_later([data], [data]).startswith("is not a later run: ")


def test_a_first_run_on_an_untouched_host_re_verifies_nothing():
    data = load("link_clean_fresh.json")
    data["stages"]["fresh_start"]["lab-a"]["from"] = "untouched"
    fresh, why = run_layers.fresh_start(data)
    assert not fresh
    assert why == ("stages.fresh_start does not show a verified fresh start (lab_up or restore) for lab-a (untouched: "
                   "a first run on a host inferlab never changed restarted nothing)")


def test_a_fresh_start_says_its_kind_and_time_on_every_host():
    data = load("link_clean_fresh.json")
    data["stages"]["fresh_start"]["lab-a"]["time"] = "2026-12-01T10:58:00Z"
    assert run_layers.fresh_start(data) == (True, "started from a verified fresh start: lab-a from a restore at "
                                            "2026-12-01T10:58:00Z, lab-b from a restore at an unrecorded time")


def test_fresh_start_needs_every_host_verified():
    data = load("link_clean_fresh.json")
    data["stages"]["fresh_start"]["lab-b"]["verified"] = False
    fresh, why = run_layers.fresh_start(data)
    assert not fresh and "lab-b" in why


def test_wording_observed_theory_supported_never_fixed_or_diagnosed():
    for a, b in (("serve_tp2.json", "serve_tp2_nextn.json"), ("link_lossy.json", "link_clean_fresh.json")):
        result = compare.compare(load(a), load(b), require_fresh=True)
        text = compare_output.render_text(result) + json.dumps(compare_output.as_json(result))
        assert "observed" in text and "theory" in text and "supported" in text
        assert not re.search(r"\b(fix|fixed|fixes|diagnos\w*)\b", text, re.IGNORECASE)


def test_json_output_carries_the_methods_and_each_rows_test(capsys):
    code = cli.main(["compare", str(FIXTURES / "link_lossy.json"), str(FIXTURES / "link_clean_fresh.json"), "--json"])
    assert code == exit_codes.SUCCESS
    data = json.loads(capsys.readouterr().out)
    assert data["statistics"] == {
        "difference": "median(B) - median(A)",
        "test": "Wilcoxon-Mann-Whitney rank-sum, two-sided, midranks for ties",
        "exact_up_to_pooled_samples": stats.EXACT_MAX_POOLED,
        "shift": "Hodges-Lehmann: median of all b - a, with its distribution-free interval (with ties: the shifts "
                 "the test does not reject)",
        "confidence_pct": 95,
        "alpha": 0.05,
        "family": "Bonferroni: alpha / k for each of a claim's k metrics",
        "min_samples": verdict_policy.MIN_SAMPLES,
    }
    assert data["changed_layer"] == "link_profile" and data["aa_pair"] is False
    assert data["design"] == "one run a side"
    assert {v["verdict"] for v in data["verdicts"]} == {"inconclusive"}
    retrans = next(r for r in data["rows"] if r["name"] == "lab-a: TCP retransmitted segments")
    assert set(retrans["test"]) == {"m", "n", "u", "p_b_higher", "p_b_lower", "p_two_sided", "smallest_p", "exact",
                                    "method"}
    assert retrans["test"]["method"] == "rank-sum"
    assert retrans["test"]["p_two_sided"] == 0.1 and retrans["observed"] == verdict_policy.UNATTAINABLE
    assert retrans["interval"] == {"estimate": retrans["interval"]["estimate"], "low": None, "high": None,
                                   "confidence_pct": pytest.approx(90), "exact": True, "low_open": False,
                                   "high_open": False}
    assert retrans["family_alpha"] == 0.05  # the only transport metric with a test (the others: one window a run)


def test_same_run_twice_is_refused():
    data = load("serve_tp2.json")
    with pytest.raises(record_input.CompareError, match="same run"):
        compare.compare(data, copy.deepcopy(data))


def test_fixtures_are_schema_valid_records():
    for name in (
        "serve_tp2.json",
        "serve_tp2_nextn.json",
        "serve_tp2_nextn_kernel.json",
        "link_lossy.json",
        "link_clean_fresh.json",
    ):
        record.validate(load(name))


# --- malformed input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("malformed_not_json.json", "is not valid JSON"),
        ("malformed_list.json", "holds a JSON list, not a record"),
        ("malformed_no_run.json", "'run' is a required property"),
        ("no_such_record.json", "cannot read it"),
    ],
)
def test_unreadable_records_are_refused(name, message):
    with pytest.raises(record_input.RecordInputError, match=message):
        record_input.load_record(FIXTURES / name)


def test_a_malformed_value_is_refused_with_its_run_and_path(capsys):
    with pytest.raises(record_input.RecordInputError) as refused:
        compare.compare(load("serve_tp2.json"), load("malformed_rate.json"))
    assert str(refused.value) == (
        "RUN_B 20261201T093000Z-serve: serving.nextn.acceptance.steps[1].batch.records[0]"
        ".output_tok_s must be a number or null, found 'fast'"
    )
    code = cli.main(["compare", str(FIXTURES / "serve_tp2.json"), str(FIXTURES / "malformed_rate.json")])
    assert code == exit_codes.USAGE
    assert "found 'fast'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema_version=2), "schema_version 2, expected 1"),
        (lambda d: d.update(serving=[]), "serving must be an object, found list"),
        (lambda d: d["serving"]["baseline"]["acceptance"].update(steps={}), "acceptance.steps must be a list"),
        (
            lambda d: d["stages"]["window_serve_baseline"]["lab-a"]["tcp"].update(RetransSegs=True),
            "RetransSegs must be a number or null, found True",
        ),
    ],
)
def test_malformed_structures_are_refused(mutate, message):
    data = load("serve_tp2.json")
    mutate(data)
    with pytest.raises(record_input.RecordInputError, match=re.escape(message)):
        compare.compare(data, load("serve_tp2_nextn.json"))


def test_cli_reads_a_run_directory(tmp_path, capsys):
    for name in ("link_lossy.json", "link_clean_fresh.json"):
        run_dir = tmp_path / name.removesuffix(".json")
        run_dir.mkdir()
        (run_dir / "record.json").write_text((FIXTURES / name).read_text())
    assert cli.main(["compare", str(tmp_path / "link_lossy"), str(tmp_path / "link_clean_fresh")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# inferlab compare: A 20261201T100000Z-link_test vs B 20261201T110000Z-link_test")
    assert "- B is faster: **inconclusive** (one run a side: " in out
    assert cli.main(["compare", str(tmp_path / "link_lossy"), str(tmp_path / "nowhere")]) == exit_codes.USAGE
    assert "is " + str(tmp_path / "nowhere") + " a run directory?" in capsys.readouterr().err


# --- repeated whole runs ------------------------------------------------------------------------------------------


def repeated(name: str, mode: str, runs: list[tuple[list, list]], stem: str) -> list[dict]:
    """Whole runs of one configuration: the fixture under new run ids, each with its own measured trials."""
    group = []
    for i, (single, aggregate) in enumerate(runs, start=1):
        data = with_trials(load(name), mode, single, aggregate)
        data["run"]["id"] = f"{stem}-{i}"
        group.append(data)
    return group


RUNS_A = [([40, 41, 39], [200, 202, 198]), ([42, 43, 41], [204, 206, 203]), ([38, 40, 39], [197, 199, 196])]
RUNS_B = [([50, 52, 51], [240, 238, 242]), ([49, 50, 48], [236, 239, 235]), ([53, 51, 52], [245, 243, 244])]
RUNS_A5 = RUNS_A + [([41, 40, 42], [201, 203, 200]), ([37, 38, 39], [195, 197, 196])]  # medians 40, 42, 39, 41, 38
RUNS_B5 = RUNS_B + [([50, 51, 49], [237, 241, 240]), ([54, 53, 52], [246, 244, 248])]  # 51, 49, 52, 50, 53


def test_repeated_runs_give_one_sample_per_run_its_median():
    group_a = repeated("serve_tp2.json", "baseline", RUNS_A, "a")
    group_b = repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b")
    result = compare.compare(group_a, group_b)
    assert result.changed_layer == "speculation"
    rows = {(r.section, r.name): r for r in result.rows}
    single = rows[(TRIALS_SECTION, SINGLE_TRIALS)]
    # per-run medians: A 40, 42, 39 and B 51, 49, 52, by hand
    assert (single.a.n, single.a.median, single.a.min, single.a.max) == (3, 40, 39, 42)
    assert (single.b.n, single.b.median, single.b.min, single.b.max) == (3, 51, 49, 52)
    # every run of B beats every run of A, but 3 runs a side cannot reach 0.05: the smallest two-sided p is 0.1
    assert single.observed == verdict_policy.UNATTAINABLE
    faster = next(v for v in result.verdicts if v.claim == "B is faster")
    assert faster.verdict == verdict_policy.INCONCLUSIVE and faster.reason.startswith(
        "no verdict possible at n=3 vs 3: the smallest exact p is 0.1, above the 0.025 each of 2 speed metric(s) "
        "needs; at least 5 samples a side can reach it")
    assert result.run_a["runs"] == ["a-1", "a-2", "a-3"] and result.run_a["id"] == "a-1, a-2, a-3"
    assert any(n.startswith("each sample is one whole run's median (3 runs in A, 3 in B)") for n in result.notes)
    assert not any(n.startswith("samples come from within each run") for n in result.notes)
    assert "A a-1, a-2, a-3 vs B b-1, b-2, b-3" in compare_output.render_text(result)


def test_five_whole_runs_a_side_carry_a_speed_verdict():
    result = compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"),
                             repeated("serve_tp2_nextn.json", "nextn", RUNS_B5, "b"))
    assert result.design == compare.WHOLE_RUNS
    single = {(r.section, r.name): r for r in result.rows}[(TRIALS_SECTION, SINGLE_TRIALS)]
    assert (single.a.median, single.b.median) == (40, 51)
    assert single.test.p_two_sided == pytest.approx(2 / 252)  # run medians completely separated, 5 vs 5
    assert single.family_alpha == 0.025 and single.family_observed == verdict_policy.B_BETTER
    faster = next(v for v in result.verdicts if v.claim == "B is faster")
    assert faster.verdict == verdict_policy.SUPPORTED
    assert faster.reason == ("observed: B better on 2 of 2 speed metric(s), exact rank-sum test at two-sided "
                             "p <= 0.025 each (0.05 / 2, Bonferroni), worse on none")


def test_several_runs_against_one_is_refused():
    group_a = repeated("serve_tp2.json", "baseline", RUNS_A, "a")
    with pytest.raises(record_input.CompareError,
                       match="several runs on both sides or one on each .found 3 for A and 1"):
        compare.compare(group_a, load("serve_tp2_nextn.json"))


def test_the_runs_of_a_side_must_repeat_one_configuration():
    group_b = repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b")
    group_b[2]["run"]["extravars"]["inferlab_layer_link_profile"] = "lossy"
    with pytest.raises(record_input.CompareError, match="the runs of B must repeat one configuration, but they "
                                                        "differ in layer link_profile .b-1: None, b-3: lossy."):
        compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A, "a"), group_b)


def test_a_run_given_twice_is_refused():
    group_a = repeated("serve_tp2.json", "baseline", RUNS_A, "a")
    group_a[2]["run"]["id"] = "a-1"
    with pytest.raises(record_input.CompareError, match=r"a run is given twice \(a-1\)"):
        compare.compare(group_a, repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b"))


def test_require_fresh_needs_every_run_of_b_fresh():
    group_b = repeated("serve_tp2_nextn.json", "nextn", RUNS_B5, "b")
    for data in group_b[:4]:
        data["stages"]["fresh_start"] = {"lab-a": {"from": "lab_up", "verified": True}}
    result = compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"), group_b, require_fresh=True)
    assert result.fresh_b[0] is False and result.fresh_b[1].startswith("b-5 has no stages.fresh_start")
    group_b[4]["stages"]["fresh_start"] = {"lab-a": {"from": "restore", "verified": True}}
    result = compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A5, "a"), group_b, require_fresh=True)
    assert result.fresh_b == (True, "every one of its 5 runs started from a verified fresh lab or restore")
    assert [v.re_verified for v in result.verdicts if v.claim == "B is faster"] == [True]


def test_cli_takes_comma_separated_runs(tmp_path, capsys):
    names = {}
    for which, group in (("a", repeated("serve_tp2.json", "baseline", RUNS_A, "a")),
                         ("b", repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b"))):
        for data in group:
            run_dir = tmp_path / data["run"]["id"]
            run_dir.mkdir()
            (run_dir / "record.json").write_text(json.dumps(data))
        names[which] = ",".join(str(tmp_path / data["run"]["id"]) for data in group)
    assert cli.main(["compare", names["a"], names["b"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run_a"]["runs"] == ["a-1", "a-2", "a-3"] and out["run_b"]["runs"] == ["b-1", "b-2", "b-3"]
    assert cli.main(["compare", names["a"], str(tmp_path / "b-1")]) == exit_codes.USAGE
    assert "several runs on both sides or one on each" in capsys.readouterr().err


# --- two served modes of one run (RUN:MODE) -----------------------------------------------------------------------

TWO_MODES = FIXTURE_ROOT / "report" / "serve_trials.json"


@pytest.mark.parametrize("value, expected", [
    ("runs/20261201T100000Z-serve:nextn", ("runs/20261201T100000Z-serve", "nextn")),
    ("20261201T100000Z-serve:nextn_candidate", ("20261201T100000Z-serve", "nextn_candidate")),
    ("runs/20261201T100000Z-serve", ("runs/20261201T100000Z-serve", None)),
    ("/mnt/a:b/run", ("/mnt/a:b/run", None)),  # a colon inside a path is not a mode
    ("run:", ("run:", None)),
])
def test_split_mode(value, expected):
    assert record_input.split_mode(value) == expected


def test_a_mode_view_keeps_the_mode_and_its_own_windows_only():
    data = json.loads(TWO_MODES.read_text())
    data["stages"]["window_serving_nextn_2"] = data["stages"]["window_serving_nextn"]  # a trial window of the mode
    view = record_input.mode_view(data, "nextn")
    assert list(view["serving"]) == ["nextn"]
    assert sorted(view["stages"]) == ["window_serving_nextn", "window_serving_nextn_2"]
    assert view["link_tests"] == {}
    assert {k: v for k, v in view.items() if k not in ("run", "serving", "stages", "link_tests")} == {
        k: v for k, v in data.items() if k not in ("run", "serving", "stages", "link_tests")}
    assert view["run"]["id"] == data["run"]["id"] + ":nextn"
    assert list(data["serving"]) == ["baseline", "nextn"]  # the record itself is left as it was


def modes_of_runs(runs: int, shift: float, order=None) -> tuple[list[dict], list[dict]]:
    """`runs` runs of the two-mode fixture, each at its own level (100 to 170 tok/s) with nextn `shift` faster in
    every run but the last (half that), as mode views: A every run's baseline, B its nextn (in `order`)."""
    group_a, group_b = [], []
    for i in range(runs):
        data = json.loads(TWO_MODES.read_text())
        data["run"]["id"] = f"run-{i}"
        level = 100 + 10 * ((3 * i) % runs)
        step = shift if i < runs - 1 else shift / 2
        with_trials(data, "baseline", [level] * 3, [4 * level] * 3)
        with_trials(data, "nextn", [level + step] * 3, [4 * (level + step)] * 3)
        group_a.append(record_input.mode_view(data, "baseline"))
        group_b.append(record_input.mode_view(data, "nextn"))
    return group_a, [group_b[i] for i in (order or range(runs))]


def test_two_modes_of_eight_runs_pair_by_run():
    # each run's level (100 to 170) moves both modes; nextn is 2 tok/s faster in every run: the rank-sum test sees
    # the levels' spread and nothing else, the signed-rank test of the per-run differences sees the shift
    group_a, group_b = modes_of_runs(8, 2.0, order=[3, 1, 0, 2, 7, 6, 5, 4])  # B given in another order
    result = compare.compare(group_a, group_b)
    assert result.design == compare.PAIRED_RUNS
    single = {(r.section, r.name): r for r in result.rows}[(TRIALS_SECTION, SINGLE_TRIALS)]
    assert single.test.method == stats.SIGNED_RANK and single.test.p_two_sided == 2 / 256
    assert single.interval.estimate == 2 and single.interval.excludes(0)
    faster = next(v for v in result.verdicts if v.claim == "B is faster")
    assert faster.verdict == verdict_policy.SUPPORTED and "exact signed-rank test" in faster.reason
    assert any(n.startswith("each sample is one whole run's median, and each of the 8 runs measured both sides")
               for n in result.notes)
    assert "Wilcoxon signed-rank" in compare_output.as_json(result)["statistics"]["test"]
    assert "Wilcoxon signed-rank" in compare_output.render_text(result)
    unpaired = compare.compare(group_a, [group_b[0]] + [dict(g, run={**g["run"], "id": "other-" + g["run"]["id"]})
                                                        for g in group_b[1:]])
    assert unpaired.design == compare.WHOLE_RUNS
    assert next(v for v in unpaired.verdicts if v.claim == "B is faster").verdict == verdict_policy.INCONCLUSIVE


def test_two_modes_of_fewer_than_eight_runs_stay_with_the_rank_sum_test():
    # at 5 runs the signed-rank test's smallest p (0.0625) could never reach 0.05: chosen by the count, not the data
    result = compare.compare(*modes_of_runs(5, 2.0))
    assert result.design == compare.WHOLE_RUNS
    assert {r.test.method for r in result.rows if r.test} == {stats.RANK_SUM}


def test_two_modes_of_one_run_compare_one_layer_apart(tmp_path, capsys):
    run_dir = tmp_path / "serve"
    run_dir.mkdir()
    (run_dir / "record.json").write_text(TWO_MODES.read_text())
    assert cli.main(["compare", f"{run_dir}:baseline", f"{run_dir}:nextn"]) == 0
    out = capsys.readouterr().out
    run_id = json.loads(TWO_MODES.read_text())["run"]["id"]
    assert out.startswith(f"# inferlab compare: A {run_id}:baseline vs B {run_id}:nextn")
    # the fixture's NEXTN trials, about twice the baseline's tok/s: shown, but no verdict from one run a side
    assert "- B is faster: **inconclusive** (one run a side: " in out
    assert ("inferlab compare RUN1:baseline,...,RUN5:baseline RUN1:nextn,...,RUN5:nextn" in out)
    assert "no verdict possible at n=3 vs 3: the smallest exact p is 0.1" in out
    assert "A and B are two served modes of one run (RUN:MODE)" in out
    comparison = compare.compare(record_input.mode_view(json.loads(TWO_MODES.read_text()), "baseline"),
                                 record_input.mode_view(json.loads(TWO_MODES.read_text()), "nextn"))
    assert comparison.changed_layer == "speculation"


def test_a_mode_the_run_did_not_serve_is_refused_naming_the_served_ones(tmp_path, capsys):
    run_dir = tmp_path / "serve"
    run_dir.mkdir()
    (run_dir / "record.json").write_text(TWO_MODES.read_text())
    assert cli.main(["compare", f"{run_dir}:baseline", f"{run_dir}:nextn_candidate"]) == exit_codes.USAGE
    assert "served no mode 'nextn_candidate' (served: baseline, nextn)" in capsys.readouterr().err


def test_a_batchs_request_and_total_throughput_are_information_one_value_a_batch():
    a, b = load("serve_tp2.json"), load("serve_tp2_nextn.json")
    for data, rate in ((a, 4.0), (b, 6.0)):
        for mode in data["serving"].values():
            for step in mode["acceptance"]["steps"]:
                step["batch"].update(request_throughput_req_s=rate, total_token_throughput_tok_s=100 * rate)
    rows = [r for r in compare.compare(a, b).rows if r.name.startswith(("requests/s of the batch", "total tok/s"))]
    assert rows and {r.role for r in rows} == {metric_rows.INFO} and all(r.a.n == 1 and r.test is None for r in rows)
    assert {r.difference for r in rows if r.name.startswith("requests/s")} == {2.0}
    # records from before these figures: no row
    assert not [r for r in compare.compare(load("serve_tp2.json"), load("serve_tp2_nextn.json")).rows
                if r.name.startswith("requests/s of the batch")]

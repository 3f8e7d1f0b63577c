"""inferlab compare: medians and bootstrap CIs checked against hand-computed cases, one declared layer at a time,
verdicts in the words observed / theory / supported, and malformed records refused by name."""

import copy
import json
import re
from pathlib import Path

import pytest

from inferlab import cli, compare, exit_codes, record

FIXTURES = Path(__file__).parent / "fixtures" / "compare"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


# --- statistics, by hand ------------------------------------------------------------------------------------------


def test_ci_indices_are_the_2_5_and_97_5_percentiles():
    # 100 sorted differences 0..99: the 95% CI is [d[2], d[97]]; 10,000: [d[250], d[9749]]
    assert compare.ci_indices(100) == (2, 97)
    assert compare.ci_indices(10_000) == (250, 9749)
    assert compare.ci_indices(1000, confidence_pct=90) == (50, 949)


def test_bootstrap_ci_hand_computed_two_valued_case():
    # A is constant, so each resampled difference is median(B*) - 10. A resample of B = [12, 12, 13] has median 13
    # only when at least two of its three draws are 13: 3 * (1/3)^2 * (2/3) + (1/3)^3 = 7/27 (26%), else 12. So
    # about 74% of the differences are 2 and 26% are 3: the 2.5th percentile is 2, the 97.5th is 3.
    assert compare.bootstrap_ci([10, 10, 10], [12, 12, 13]) == (2, 3)
    row = compare.compare_metric(
        compare.Metric("s", "tok/s", "higher", compare.SPEED, (10, 10, 10)),
        compare.Metric("s", "tok/s", "higher", compare.SPEED, (12, 12, 13)),
    )
    assert (row.a.median, row.a.min, row.a.max, row.a.n) == (10, 10, 10, 3)
    assert (row.b.median, row.b.min, row.b.max, row.b.n) == (12, 12, 13, 3)
    assert row.difference == 2
    assert row.ci == (2, 3)
    assert row.observed == compare.B_BETTER


def test_bootstrap_ci_hand_computed_straddling_case():
    # B = [0, 1, 2]: a resample's median is 0 or 2 with probability 7/27 each, 1 with 13/27. Both ends are far more
    # likely than 2.5%, so the CI is [0 - 0, 2 - 0] = [0, 2]: it includes 0, so no clear difference.
    assert compare.bootstrap_ci([0, 0, 0], [0, 1, 2]) == (0, 2)
    assert compare.observed((0, 2), "higher") == compare.NO_CLEAR


def test_bootstrap_is_deterministic_with_its_seed():
    a, b = [5.3, 4.6, 5.6, 4.7, 6.7], [5.0, 5.9, 6.1, 4.9, 6.6]
    assert compare.bootstrap_ci(a, b) == compare.bootstrap_ci(a, b)
    assert compare.bootstrap_ci(a, b, resamples=200) == compare.bootstrap_ci(a, b, resamples=200, seed=8)


@pytest.mark.parametrize(
    ("ci", "better", "expected"),
    [
        ((1, 2), "higher", compare.B_BETTER),
        ((1, 2), "lower", compare.B_WORSE),
        ((-2, -1), "lower", compare.B_BETTER),
        ((-2, -1), "higher", compare.B_WORSE),
        ((-1, 1), "higher", compare.NO_CLEAR),
        ((0, 0), "lower", compare.NO_CLEAR),
        ((1, 2), None, compare.NO_DIRECTION),
    ],
)
def test_observed_follows_the_better_direction(ci, better, expected):
    assert compare.observed(ci, better) == expected


def test_too_few_samples_gives_no_ci():
    a = compare.Metric("s", "x", "higher", compare.SPEED, (1.0, 2.0))
    b = compare.Metric("s", "x", "higher", compare.SPEED, (5.0, 6.0, 7.0))
    row = compare.compare_metric(a, b)
    assert row.ci is None
    assert row.observed == compare.TOO_FEW
    assert row.difference == 6.0 - 1.5


def row(observed: str, role: str = compare.SPEED) -> compare.Row:
    spread = compare.Spread(1, 1, 1, 3)
    return compare.Row("s", observed, "higher", role, spread, spread, 0, (0, 0), observed)


@pytest.mark.parametrize(
    ("observed", "verdict"),
    [
        ([compare.B_BETTER, compare.NO_CLEAR], compare.SUPPORTED),
        ([compare.B_WORSE, compare.NO_CLEAR], compare.NOT_SUPPORTED),
        ([compare.B_BETTER, compare.B_WORSE], compare.INCONCLUSIVE),
        ([compare.NO_CLEAR, compare.NO_CLEAR], compare.INCONCLUSIVE),
        ([compare.TOO_FEW], compare.INCONCLUSIVE),
        ([], compare.INCONCLUSIVE),
    ],
)
def test_claim_verdicts(observed, verdict):
    rows = [row(o) for o in observed] + [row(compare.B_WORSE, role=compare.INFO)]  # info rows never count
    assert compare.claim_verdict("B is faster", rows, compare.SPEED).verdict == verdict


def test_family_confidence_is_bonferroni():
    assert compare.family_confidence_pct(1) == 95
    assert compare.family_confidence_pct(8) == 99.375
    assert compare.ci_indices(10_000, compare.family_confidence_pct(8)) == (31, 9968)


def test_one_metric_off_zero_among_eight_does_not_carry_the_claim():
    """B better than A at 95% on one metric: (0.3, 2.9). Among eight speed metrics its family CI (99.375%) is
    (-0.2, 3.4), which includes 0, so "B is faster" is inconclusive; alone, the same metric carries it."""
    a, b = [10, 11, 12, 10.5, 11.5], [11.8, 12.6, 13, 12.2, 13.4]
    metric_a = compare.Metric("s", "m0", "higher", compare.SPEED, a)
    metric_b = compare.Metric("s", "m0", "higher", compare.SPEED, b)
    lone = compare.compare_metric(metric_a, metric_b)
    assert lone.ci == pytest.approx((0.3, 2.9)) and lone.observed == compare.B_BETTER
    flat = [compare.Row("s", f"m{i}", "higher", compare.SPEED, lone.a, lone.a, 0, (-1, 1), compare.NO_CLEAR)
            for i in range(1, 8)]
    samples = {("s", "m0"): (a, b), **{("s", f"m{i}"): (a, a) for i in range(1, 8)}}

    rows = compare.with_family_cis([lone, *flat], samples, compare.SPEED)
    assert rows[0].family_ci == pytest.approx((-0.2, 3.4)) and rows[0].family_observed == compare.NO_CLEAR
    verdict = compare.claim_verdict("B is faster", rows, compare.SPEED)
    assert verdict.verdict == compare.INCONCLUSIVE and "99.38% (Bonferroni)" in verdict.reason

    alone = compare.with_family_cis([lone], samples, compare.SPEED)
    assert alone[0].family_ci == lone.ci
    assert compare.claim_verdict("B is faster", alone, compare.SPEED).verdict == compare.SUPPORTED


# --- layers and verdicts from records -----------------------------------------------------------------------------


def test_one_layer_apart_gives_a_verdict_with_cis():
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
    assert concurrent.ci[0] > 0 and concurrent.observed == compare.B_BETTER
    repeated = rows[
        ("serving baseline -> nextn: repeated (single_stream, warm cache)", "output tok/s per request (TTFT included)")
    ]
    assert repeated.observed == compare.TOO_FEW  # two requests each
    verdicts = {v.claim.split(" (")[0]: v for v in result.verdicts}
    assert verdicts["B is faster"].verdict == compare.SUPPORTED
    assert verdicts["B has fewer transport errors"].verdict == compare.INCONCLUSIVE  # one window per run
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
    assert single.role == compare.SPEED and single.a.n == single.b.n == 5
    assert (single.a.median, single.b.median, single.difference) == (40.2, 51.5, pytest.approx(11.3))
    # every B trial beats every A trial: every resampled difference of medians is positive
    assert single.ci[0] > 0 and single.observed == compare.B_BETTER
    aggregate = rows[(TRIALS_SECTION, "aggregate output tok/s of the concurrent batch (one value per trial)")]
    assert aggregate.observed == compare.B_BETTER
    ladder = rows[
        ("serving baseline -> nextn: concurrent (concurrent, warm cache)", "output tok/s per request (TTFT included)")
    ]
    assert ladder.role == compare.INFO  # the requests of one batch are not repetitions
    speed = [r for r in result.rows if r.role == compare.SPEED]
    assert {r.section for r in speed} == {TRIALS_SECTION}
    faster = [v for v in result.verdicts if v.claim == "B is faster"][0]
    assert faster.verdict == compare.SUPPORTED and "of 2 speed metrics" in faster.reason


def test_trials_that_overlap_are_inconclusive():
    a = with_trials(load("serve_tp2.json"), "baseline", [40.0, 52.0, 39.0], [200, 250, 198])
    b = with_trials(load("serve_tp2_nextn.json"), "nextn", [41.0, 38.0, 51.0], [201, 197, 249])
    result = compare.compare(a, b)
    faster = [v for v in result.verdicts if v.claim == "B is faster"][0]
    assert faster.verdict == compare.INCONCLUSIVE and "every CI includes 0" in faster.reason


def test_trials_in_one_run_only_are_not_compared_and_the_ladder_counts_for_nothing():
    a = load("serve_tp2.json")
    b = with_trials(load("serve_tp2_nextn.json"), "nextn", [52.0, 50.5, 51.0], [240, 250, 238])
    result = compare.compare(a, b)
    assert not any(r.section == TRIALS_SECTION for r in result.rows)
    assert any("only in B" in note and "measured trials" in note for note in result.notes)
    assert not [r for r in result.rows if r.role == compare.SPEED]
    assert [v for v in result.verdicts if v.claim == "B is faster"][0].verdict == compare.INCONCLUSIVE


def test_two_layers_apart_is_refused_naming_both():
    with pytest.raises(compare.LayersDiffer) as refused:
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
    with pytest.raises(compare.LayersDiffer, match="link_profile .*mtu|mtu .*link_profile"):
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
    assert transport.verdict == compare.SUPPORTED
    rows = {(r.section, r.name): r for r in result.rows}
    retrans = rows[("counter window asymmetry", "lab-a: TCP retransmitted segments")]
    assert retrans.role == compare.TRANSPORT and retrans.a.n == retrans.b.n == 3  # window_asymmetry_1..3
    assert (retrans.a.median, retrans.b.median) == (30110, 1433)
    rx = rows[("counter window asymmetry", "lab-a: receiver errors on thunderbolt0 (crc+over+missed+length)")]
    assert rx.role == compare.INFO  # a veth never counts them
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
    assert roles["lab-a: TCP retransmitted segments"] == compare.INFO
    assert roles["lab-a: receiver errors on thunderbolt0 (crc+over+missed+length)"] == compare.TRANSPORT


def test_require_fresh_re_verifies_only_a_fresh_b():
    lossy, clean = load("link_lossy.json"), load("link_clean_fresh.json")
    result = compare.compare(lossy, clean, require_fresh=True)
    assert result.fresh_b[0] is True
    assert [v.re_verified for v in result.verdicts] == [True, True]
    assert "re-verified: yes" in compare.render_text(result)

    del clean["stages"]["fresh_start"]
    result = compare.compare(lossy, clean, require_fresh=True)
    assert result.fresh_b == (False, compare.fresh_start(clean)[1])
    assert "has no stages.fresh_start" in result.fresh_b[1]
    assert [v.re_verified for v in result.verdicts] == [False, False]
    text = compare.render_text(result)
    assert "re-verified: no" in text and "counts as not fresh" in text


def test_fresh_start_needs_every_host_verified():
    data = load("link_clean_fresh.json")
    data["stages"]["fresh_start"]["lab-b"]["verified"] = False
    fresh, why = compare.fresh_start(data)
    assert not fresh and "lab-b" in why


def test_wording_observed_theory_supported_never_fixed_or_diagnosed():
    for a, b in (("serve_tp2.json", "serve_tp2_nextn.json"), ("link_lossy.json", "link_clean_fresh.json")):
        result = compare.compare(load(a), load(b), require_fresh=True)
        text = compare.render_text(result) + json.dumps(compare.as_json(result))
        assert "observed" in text and "theory" in text and "supported" in text
        assert not re.search(r"\b(fix|fixed|fixes|diagnos\w*)\b", text, re.IGNORECASE)


def test_json_output_carries_the_bootstrap_parameters(capsys):
    code = cli.main(["compare", str(FIXTURES / "link_lossy.json"), str(FIXTURES / "link_clean_fresh.json"), "--json"])
    assert code == exit_codes.SUCCESS
    data = json.loads(capsys.readouterr().out)
    assert data["bootstrap"] == {
        "resamples": compare.BOOTSTRAP_RESAMPLES,
        "seed": compare.BOOTSTRAP_SEED,
        "confidence_pct": 95,
        "min_samples": compare.MIN_SAMPLES,
        "statistic": "median(B) - median(A)",
    }
    assert data["changed_layer"] == "link_profile"
    assert {v["verdict"] for v in data["verdicts"]} == {"supported"}


def test_same_run_twice_is_refused():
    data = load("serve_tp2.json")
    with pytest.raises(compare.CompareError, match="same run"):
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
        ("malformed_list.json", "expected a JSON object, found list"),
        ("malformed_no_run.json", "no run.id, so not an inferlab record"),
        ("no_such_record.json", "cannot read it"),
    ],
)
def test_unreadable_records_are_refused(name, message):
    with pytest.raises(compare.RecordInputError, match=message):
        compare.load_record(FIXTURES / name)


def test_a_malformed_value_is_refused_with_its_run_and_path(capsys):
    with pytest.raises(compare.RecordInputError) as refused:
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
    with pytest.raises(compare.RecordInputError, match=re.escape(message)):
        compare.compare(data, load("serve_tp2_nextn.json"))


def test_cli_reads_a_run_directory(tmp_path, capsys):
    for name in ("link_lossy.json", "link_clean_fresh.json"):
        run_dir = tmp_path / name.removesuffix(".json")
        run_dir.mkdir()
        (run_dir / "record.json").write_text((FIXTURES / name).read_text())
    assert cli.main(["compare", str(tmp_path / "link_lossy"), str(tmp_path / "link_clean_fresh")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# inferlab compare: A 20261201T100000Z-link_test vs B 20261201T110000Z-link_test")
    assert "- B is faster: **supported**" in out
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
    assert single.observed == compare.B_BETTER  # every run of B beats every run of A
    assert result.run_a["runs"] == ["a-1", "a-2", "a-3"] and result.run_a["id"] == "a-1, a-2, a-3"
    assert any(n.startswith("each sample is one whole run's median (3 runs in A, 3 in B)") for n in result.notes)
    assert not any(n.startswith("samples come from within each run") for n in result.notes)
    assert "A a-1, a-2, a-3 vs B b-1, b-2, b-3" in compare.render_text(result)


def test_several_runs_against_one_is_refused():
    group_a = repeated("serve_tp2.json", "baseline", RUNS_A, "a")
    with pytest.raises(compare.CompareError, match="several runs on both sides or one on each .found 3 for A and 1"):
        compare.compare(group_a, load("serve_tp2_nextn.json"))


def test_the_runs_of_a_side_must_repeat_one_configuration():
    group_b = repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b")
    group_b[2]["run"]["extravars"]["inferlab_layer_link_profile"] = "lossy"
    with pytest.raises(compare.CompareError, match="the runs of B must repeat one configuration, but they differ in "
                                                   "layer link_profile .b-1: None, b-3: lossy."):
        compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A, "a"), group_b)


def test_a_run_given_twice_is_refused():
    group_a = repeated("serve_tp2.json", "baseline", RUNS_A, "a")
    group_a[2]["run"]["id"] = "a-1"
    with pytest.raises(compare.CompareError, match=r"a run is given twice \(a-1\)"):
        compare.compare(group_a, repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b"))


def test_require_fresh_needs_every_run_of_b_fresh():
    group_b = repeated("serve_tp2_nextn.json", "nextn", RUNS_B, "b")
    for data in group_b[:2]:
        data["stages"]["fresh_start"] = {"lab-a": {"from": "lab_up", "verified": True}}
    result = compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A, "a"), group_b, require_fresh=True)
    assert result.fresh_b[0] is False and result.fresh_b[1].startswith("b-3 has no stages.fresh_start")
    group_b[2]["stages"]["fresh_start"] = {"lab-a": {"from": "restore", "verified": True}}
    result = compare.compare(repeated("serve_tp2.json", "baseline", RUNS_A, "a"), group_b, require_fresh=True)
    assert result.fresh_b == (True, "every one of its 3 runs started from a verified fresh lab or restore")
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

TWO_MODES = Path(__file__).parent / "fixtures" / "report" / "serve_trials.json"


@pytest.mark.parametrize("value, expected", [
    ("runs/20261201T100000Z-serve:nextn", ("runs/20261201T100000Z-serve", "nextn")),
    ("20261201T100000Z-serve:nextn_candidate", ("20261201T100000Z-serve", "nextn_candidate")),
    ("runs/20261201T100000Z-serve", ("runs/20261201T100000Z-serve", None)),
    ("/mnt/a:b/run", ("/mnt/a:b/run", None)),  # a colon inside a path is not a mode
    ("run:", ("run:", None)),
])
def test_split_mode(value, expected):
    assert compare.split_mode(value) == expected


def test_a_mode_view_keeps_the_mode_and_its_own_windows_only():
    data = json.loads(TWO_MODES.read_text())
    data["stages"]["window_serving_nextn_2"] = data["stages"]["window_serving_nextn"]  # a trial window of the mode
    view = compare.mode_view(data, "nextn")
    assert list(view["serving"]) == ["nextn"]
    assert sorted(view["stages"]) == ["window_serving_nextn", "window_serving_nextn_2"]
    assert view["link_tests"] == {}
    assert {k: v for k, v in view.items() if k not in ("run", "serving", "stages", "link_tests")} == {
        k: v for k, v in data.items() if k not in ("run", "serving", "stages", "link_tests")}
    assert view["run"]["id"] == data["run"]["id"] + ":nextn"
    assert list(data["serving"]) == ["baseline", "nextn"]  # the record itself is left as it was


def test_two_modes_of_one_run_compare_one_layer_apart(tmp_path, capsys):
    run_dir = tmp_path / "serve"
    run_dir.mkdir()
    (run_dir / "record.json").write_text(TWO_MODES.read_text())
    assert cli.main(["compare", f"{run_dir}:baseline", f"{run_dir}:nextn"]) == 0
    out = capsys.readouterr().out
    run_id = json.loads(TWO_MODES.read_text())["run"]["id"]
    assert out.startswith(f"# inferlab compare: A {run_id}:baseline vs B {run_id}:nextn")
    assert "- B is faster: **supported**" in out  # the fixture's NEXTN trials: about twice the baseline's tok/s
    assert "A and B are two served modes of one run (RUN:MODE)" in out
    comparison = compare.compare(compare.mode_view(json.loads(TWO_MODES.read_text()), "baseline"),
                                 compare.mode_view(json.loads(TWO_MODES.read_text()), "nextn"))
    assert comparison.changed_layer == "speculation"


def test_a_mode_the_run_did_not_serve_is_refused_naming_the_served_ones(tmp_path, capsys):
    run_dir = tmp_path / "serve"
    run_dir.mkdir()
    (run_dir / "record.json").write_text(TWO_MODES.read_text())
    assert cli.main(["compare", f"{run_dir}:baseline", f"{run_dir}:nextn_candidate"]) == exit_codes.USAGE
    assert "served no mode 'nextn_candidate' (served: baseline, nextn)" in capsys.readouterr().err

"""report.md says, beside the candidate driver's serving results, whether the network-only A/B measured the driver's
effect on the link before them (integrity before speed), or why the plan left it out."""

from inferlab.report import findings as report_findings


def record(journal=None, opt_out=None, driver="candidate"):
    return {
        "serving": {"nextn_candidate": {"layers": {"runtime": "sglang_tp2", "driver": driver}}},
        "journal": journal or {},
        "stages": {"experiment": {"plan": {"link_ab_opt_out": opt_out}}},
    }


def test_the_ab_before_the_candidate_is_said():
    shows = report_findings._link_ab_first_shows(record({"link_ab": {"index": 12, "status": "ok"}}))
    assert shows == ["The candidate driver's serving (nextn_candidate) came after the network-only A/B (stage "
                     "link_ab), which measured the driver's effect on the link alone."]


def test_the_plans_reason_to_leave_it_out_is_said():
    shows = report_findings._link_ab_first_shows(record(opt_out="molecule link runs the network-only A/B."))
    assert shows == ["The candidate driver's serving (nextn_candidate) ran without the network-only A/B before it: "
                     "the plan left link_ab out because molecule link runs the network-only A/B."]


def test_a_failed_ab_and_a_run_without_one_are_said_too():
    failed = report_findings._link_ab_first_shows(record({"link_ab": {"index": 12, "status": "failed"}}))
    assert failed == ["The candidate driver's serving (nextn_candidate) ran after a network-only A/B that did not "
                      "pass (stage link_ab failed)."]
    assert report_findings._link_ab_first_shows(record()) == [
        "The candidate driver's serving (nextn_candidate) ran without the network-only A/B before it in this run."]


def test_no_candidate_serving_says_nothing():
    assert report_findings._link_ab_first_shows(record(driver="stock")) == []

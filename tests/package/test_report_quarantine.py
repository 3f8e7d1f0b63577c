"""report_quarantine: the quarantine section from its stages, and what it does with partial or malformed ones (the
whole record renders through tests/package/test_report_sections.py's isolate_suspect fixture)."""

from __future__ import annotations

import copy

import pytest

from inferlab.report import quarantine as report_quarantine

PLAN = {"changed": True, "engine": "llamacpp", "quarantined": ["lab-c"], "ring": ["lab-a", "lab-b", "lab-d"],
        "ring_of_one": None, "solo": ["lab-c"],
        "roles": [{"api_base": "http://169.254.81.10:30100/v1", "model": "m", "name": "solo-lab-c"}]}
SOLO = {"host": "lab-c", "url": "http://169.254.81.10:30100", "engine": "llamacpp",
        "argv": ["/opt/llama/bin/llama-server", "--model", "/m.gguf"], "direct": {"ok": 3, "requests": 3}}
STEP = {"step": "repeated", "passed": True,
        "batch": {"ok": 3, "requests": 3, "cache": "warm", "cache_flushed": False,
                  "decode_tok_s": {"median": 70.21}, "ttft_s": {"median": 0.33}}}
RING = {"acceptance": {"passed": True, "steps": [STEP]},
        "ranks": {"lab-a": {"program": "llama-server"}, "lab-b": {}, "lab-d": {}}}
PUBLIC = {"public_url": "http://169.254.81.1:4000", "roles": {
    "solo-lab-c": {"passed": True, "ok": 3, "requests": 3, "served_by": ["http://169.254.81.10:30100/v1"],
                   "expected_backend": "http://169.254.81.10:30100/v1"}}}


def record(**stages) -> dict:
    base = {"topology": {"plan": PLAN, "public": PUBLIC}, "topology_solo": {"lab-c": SOLO},
            "topology_ring": {"baseline": RING}}
    base.update(stages)
    return {"stages": copy.deepcopy(base), "restore": {}}


def test_the_section_names_the_solo_endpoint_the_ring_and_the_public_route():
    text = "\n".join(report_quarantine.section(record()))
    assert ("Engine llamacpp. Left the ring: lab-c; serving solo: lab-c; the ring that stays: lab-a, lab-b, "
            "lab-d.") in text
    assert ("- solo endpoint lab-c: llama-server at http://169.254.81.10:30100, 3 of 3 requests straight to it "
            "answered") in text
    assert "mode baseline: acceptance ladder passed." in text
    assert "| repeated | ok | 3/3 | warm | 70.2 | 0.3 |" in text
    assert "| solo-lab-c | ok | 3/3 | http://169.254.81.10:30100/v1 | http://169.254.81.10:30100/v1 |" in text
    assert "The quarantine stays until a restore" in text


def test_a_restore_in_the_same_run_is_said():
    data = record()
    data["restore"] = {"lab-a": {"ok": True}}
    assert "The run restored every host afterwards" in "\n".join(report_quarantine.section(data))


def test_the_finding_says_who_left_and_whether_the_ring_passed():
    [line] = report_quarantine.shows(record())
    assert line == ("Quarantine: lab-c left the ring and served solo behind the gateway (requests straight to each: "
                    "lab-c 3/3); the ring lab-a, lab-b, lab-d served without it and passed the acceptance ladder.")
    failed = record()
    failed["stages"]["topology_ring"]["baseline"]["acceptance"]["passed"] = False
    assert report_quarantine.shows(failed)[0].endswith("and FAILED the acceptance ladder.")


def test_an_sglang_quarantine_without_a_ring_says_no_ring():
    data = record(topology_ring={})
    data["stages"]["topology"]["plan"].update(engine="sglang", ring=[])
    text = "\n".join(report_quarantine.section(data))
    assert "the ring that stays: none" in text and "acceptance ladder" not in text
    assert report_quarantine.shows(data)[0].endswith("(requests straight to each: lab-c 3/3).")


@pytest.mark.parametrize("plan", [None, "text", {"solo": "lab-c"}, {}])
def test_no_plan_or_a_malformed_one_gives_no_section(plan):
    data = record()
    data["stages"]["topology"]["plan"] = plan
    assert report_quarantine.section(data) == [] and report_quarantine.shows(data) == []


def test_malformed_parts_are_left_out_never_a_failure():
    data = record(topology_solo={"lab-c": "text"}, topology_ring={"baseline": {"acceptance": "x"}, "other": 3})
    data["stages"]["topology"]["public"] = {"roles": "none"}
    text = "\n".join(report_quarantine.section(data))
    assert "Left the ring: lab-c" in text and "acceptance ladder" not in text and "| role |" not in text

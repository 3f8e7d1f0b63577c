"""report_engine_loopback: the engine talking to itself on one host, found by its layer `rpc: loopback`, and what it
does with partial or malformed fragments."""

from __future__ import annotations

import copy

import pytest

from inferlab.report import engine_loopback as report_engine_loopback

RUN = {"layers": {"runtime": "llamacpp_rpc1", "speculation": "none", "rpc": "loopback"},
       "ranks": {"lab-c": {"program": "llama-server"}},
       "acceptance": {"passed": True, "steps": []},
       "trials": {"figures": {
           "single_stream_decode_tok_s": {"n": 3, "values": [51.04, 49.5, 55.25], "median": 51.04},
           "single_stream_ttft_ms": {"n": 3, "values": [120.0, 131.0, 118.0], "median": 120.0}}}}


def record(fragment=None, **more) -> dict:
    stages = {"engine_loopback": {"baseline": copy.deepcopy(RUN if fragment is None else fragment)}}
    stages.update(more)
    return {"stages": stages}


def test_the_finding_names_the_host_the_figure_and_the_ladder():
    assert report_engine_loopback.shows(record()) == [
        "The engine on lab-c talking to itself over loopback (engine_loopback (baseline), no NIC in the path): "
        "single-stream decode 51.0 tok/s, the median of 3 trial(s); acceptance ladder passed."]


def test_the_section_lists_each_figure_with_every_trial():
    text = "\n".join(report_engine_loopback.section(record()))
    assert text.startswith("## The engine talking to itself: engine_loopback (baseline)")
    assert "lab-c's llama-server with its layers on its own ggml-rpc-server over loopback" in text
    assert "| single_stream_decode_tok_s | 3 | 51.0, 49.5, 55.2 | 51.0 |" in text
    assert "| single_stream_ttft_ms | 3 | 120.0, 131.0, 118.0 | 120.0 |" in text


def test_a_failed_ladder_and_no_trials_are_said():
    run = copy.deepcopy(RUN)
    run["acceptance"]["passed"] = False
    run["trials"] = {"count": 0}
    [line] = report_engine_loopback.shows(record(run))
    assert line.endswith("no trial figure; acceptance ladder FAILED.")
    assert "| figure |" not in "\n".join(report_engine_loopback.section(record(run)))


@pytest.mark.parametrize("layers", [None, {}, {"rpc": "link"}, "loopback"])
def test_a_run_over_the_link_or_without_layers_is_not_one(layers):
    run = copy.deepcopy(RUN)
    run["layers"] = layers
    assert report_engine_loopback.results(record(run)) == []
    assert report_engine_loopback.section(record(run)) == [] and report_engine_loopback.shows(record(run)) == []


def test_malformed_parts_are_left_out_never_a_failure():
    run = {"layers": {"rpc": "loopback"}, "ranks": "lab-c", "trials": {"figures": {"x": "fast"}}}
    [line] = report_engine_loopback.shows(record(run))
    assert line.startswith("The engine on — talking to itself") and "no trial figure" in line
    assert "| x |" not in "\n".join(report_engine_loopback.section(record(run)))

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_llamacpp: /metrics and timings read from a real llama-server's output (tests/unit/fixtures/llamacpp/README.md),
window deltas, the two speculative definitions, and malformed or foreign text."""

import json
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import (
    MetricsError,
    help_flags,
    metrics_delta,
    parse_metrics,
    parse_version,
    response_timings,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "llamacpp"


def fresh(parsed):
    """A scrape of the same server just after its start: every counter at 0."""
    return {"values": dict.fromkeys(parsed["values"], 0.0), "per_position": {}}


def metrics(name):
    return parse_metrics((FIXTURES / name).read_text())


def test_the_draft_servers_metrics_are_read_with_every_position():
    parsed = metrics("metrics_draft.txt")
    assert parsed["values"]["spec_decode_num_drafts_total"] == 55
    assert parsed["values"]["spec_decode_num_draft_tokens_total"] == 213
    assert parsed["values"]["spec_decode_num_accepted_tokens_total"] == 30
    assert parsed["values"]["tokens_predicted_total"] == 88  # 64 + 24
    assert parsed["per_position"] == {0: 22.0, 1: 8.0, 2: 0.0, 3: 0.0}


def test_a_windows_delta_from_the_servers_start_gives_both_speculative_definitions():
    after = metrics("metrics_draft.txt")
    delta = metrics_delta(fresh(after), after)
    speculative = delta["speculative"]
    assert speculative["acceptance_rate"] == pytest.approx(30 / 213)
    assert speculative["mean_acceptance_length"] == pytest.approx(1 + 30 / 55)
    assert sum(delta["accepted_per_position"].values()) == speculative["accepted_tokens"]
    assert delta["problems"] == []


def test_the_baseline_counts_cached_prompt_tokens_apart_from_processed_ones():
    after = metrics("metrics_baseline.txt")
    delta = metrics_delta(fresh(after), after)
    first = json.loads((FIXTURES / "completion_1.json").read_text())
    second = json.loads((FIXTURES / "completion_2.json").read_text())
    prompt = first["usage"]["prompt_tokens"]
    # processed: the cold prompt and the warm one's last token; cached: the rest of the warm one
    assert delta["counters"]["prompt_tokens_total"] == prompt + second["timings"]["prompt_n"]
    assert delta["counters"]["prompt_tokens_cached_total"] == second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert delta["cached_prompt_share"] == pytest.approx(1990 / (2 * prompt))
    assert delta["decode_tokens_per_s"] == pytest.approx(64 / 0.723861)
    assert delta["speculative"]["acceptance_rate"] is None  # no drafts: not a rate of 0
    assert delta["speculative"]["mean_acceptance_length"] is None


def test_a_counter_that_went_down_is_a_restart_not_a_negative_figure():
    after = metrics("metrics_baseline.txt")
    delta = metrics_delta(metrics("metrics_draft.txt"), after)
    assert delta["counters"]["tokens_predicted_total"] is None
    assert "tokens_predicted_total went down from 88 to 64: the server restarted inside the window" in delta["problems"]


def test_the_streams_last_chunk_and_a_completion_carry_timings():
    last = [line[6:] for line in (FIXTURES / "chat_stream_draft.sse").read_text().splitlines()
            if line.startswith("data: {")][-1]
    timings = response_timings(json.loads(last))
    assert (timings["predicted_n"], timings["draft_n"], timings["draft_n_accepted"]) == (24, 46, 10)
    warm = response_timings(json.loads((FIXTURES / "completion_2.json").read_text()))
    assert (warm["cache_n"], warm["prompt_n"], warm["draft_n"]) == (1990, 1, None)


@pytest.mark.parametrize("body", [{}, {"timings": "fast"}, [], None])
def test_a_body_without_timings_gives_none(body):
    assert response_timings(body) is None


def test_a_non_number_timing_is_none():
    assert response_timings({"timings": {"prompt_n": "12", "predicted_n": True, "prompt_ms": 3.5}})["prompt_n"] is None


@pytest.mark.parametrize("text, message", [
    ("<html>not found</html>", "line 1 is not a Prometheus sample: '<html>not found</html>'"),
    ("llamacpp:prompt_tokens_total many", "line 1: llamacpp:prompt_tokens_total has the value 'many', not a number"),
    ("# HELP x\nprocess_cpu_seconds_total 3\n",
     "no llamacpp: sample in the text (is --metrics on, and is this llama-server?)"),
    ('llamacpp:spec_decode_num_accepted_tokens_per_pos_total{slot="1"} 3',
     "line 1: spec_decode_num_accepted_tokens_per_pos_total without a numeric position label"),
])
def test_text_that_is_not_llama_servers_metrics_is_refused_with_the_line(text, message):
    with pytest.raises(MetricsError) as error:
        parse_metrics(text)
    assert str(error.value) == message


def test_the_real_help_gives_every_name_of_an_option_and_no_word_of_a_description():
    flags = help_flags((FIXTURES / "llama-server_help.txt").read_text())
    assert {"-h", "--help", "--usage", "-c", "--ctx-size", "--spec-draft-model", "-md", "--model-draft", "--rpc",
            "--spec-type", "-ngl"} <= flags
    assert {"-Cr", "--cpu-range"} <= flags  # "-Cr,   --cpu-range lo-hi": the argument is not a flag
    assert "lo-hi" not in flags
    assert not [flag for flag in flags if not flag.startswith("-") or flag.endswith(",")]


def test_a_help_line_that_is_a_description_adds_nothing():
    text = "                     when set without -c/--ctx-size, the pool\n(env: X)\n-1 means all\n"
    assert help_flags(text) == set()


def test_the_real_version_is_read_and_another_shape_is_none():
    assert parse_version((FIXTURES / "llama-server_version.txt").read_text()) == {
        "version": "0.5.0-dev", "build": 1, "commit": "0c1e570"}
    assert parse_version("llama.cpp b4000\n") is None
    assert parse_version("") is None

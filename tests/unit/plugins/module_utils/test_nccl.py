# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_nccl: the COLL-line and Inspector parsers on hand-written fixtures (tests/unit/fixtures/nccl/README.md), the
window summary, and the all-reduce theory against a hand-worked example."""

from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._nccl import (
    MEGATRON_ALLREDUCES_PER_LAYER,
    NcclInputError,
    allreduce_theory,
    batches_wire_overhead,
    parse_coll_log,
    parse_inspector_log,
    parse_timestamp,
    ring_allreduce_send_factor,
    summarize,
    window_collectives,
    wire_overhead,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"
NOON = 1772366400  # 2026-03-01 12:00:00 UTC


def coll(name):
    return parse_coll_log((FIXTURES / name).read_text(), utc_offset_s=0)


def inspector(name):
    return parse_inspector_log((FIXTURES / name).read_text())


# --- COLL lines ---------------------------------------------------------------------------------------------------

def test_coll_lines_with_timestamps_are_read_and_other_lines_skipped():
    parsed = coll("coll_2.27_timestamps.log")
    assert parsed["problems"] == [] and parsed["lines"] == 16
    records = parsed["records"]
    assert [(r["line"], r["op"], r["opcount"]) for r in records] == [
        (7, "AllReduce", 0), (8, "AllReduce", 1), (9, "AllGather", 2), (12, "AllReduce", 3), (13, "AllReduce", 4),
        (14, "Broadcast", 5), (15, "AllReduce", 6)]
    first = records[0]
    assert first == {
        "line": 7, "op": "AllReduce", "opcount": 0, "count": 409600, "datatype": 9, "datatype_name": "ncclBfloat16",
        "element_size": 2, "bytes": 819200, "reduction": "sum", "root": 0, "nranks": 2, "comm": "0x55d0c8a4b2f0",
        "host": "gpu-a", "pid": 4242, "tid": 4242, "device": 0, "rank_key": "gpu-a:4242", "timestamp": NOON + 2,
        "time_us": None}
    assert (records[2]["datatype_name"], records[2]["bytes"]) == ("ncclFloat32", 4096 * 4)
    assert (records[5]["datatype_name"], records[5]["bytes"]) == ("ncclInt32", 1024 * 4)


def test_coll_timestamps_with_sub_seconds():
    records = coll("coll_2.27_subseconds.log")["records"]
    assert [r["timestamp"] for r in records] == pytest.approx([NOON + 2.25, NOON + 2.75, NOON + 4.000001,
                                                               NOON + 4.999999])
    assert {r["rank_key"] for r in records} == {"gpu-b:5151"}


def test_timestamps_are_local_time_of_the_writer():
    assert parse_timestamp("2026-03-01 13:00:00", utc_offset_s=3600) == NOON
    assert parse_timestamp("2026-03-01 12:00:00.5", utc_offset_s=0) == NOON + 0.5
    assert parse_timestamp("12:00:00", utc_offset_s=0) is None
    assert parse_timestamp("2026-02-30 12:00:00", utc_offset_s=0) is None


def test_coll_lines_before_2_26_are_untimed_and_ranks_apart():
    parsed = coll("coll_2.21_untimed.log")
    assert parsed["problems"] == []
    records = parsed["records"]
    assert all(r["timestamp"] is None for r in records)
    assert [(r["rank_key"], r["op"], r["device"]) for r in records] == [
        ("node1:3001", "AllReduce", 0), ("node1:3002", "AllReduce", 1), ("node1:3001", "Send", 0),
        ("node1:3002", "Recv", 1), ("node1:3001", "ReduceScatter", 0), ("node1:3002", "ReduceScatter", 1)]
    send = records[2]
    assert (send["root"], send["bytes"], send["datatype_name"]) == (1, 4096, "ncclFloat32")
    assert records[4]["reduction"] == "avg" and records[0]["datatype_name"] == "ncclFloat16"


def test_malformed_coll_lines_are_problems_with_their_line_numbers():
    parsed = coll("coll_malformed.log")
    assert [r["line"] for r in parsed["records"]] == [1, 5, 8]
    assert parsed["records"][1]["timestamp"] is None                # kept, but untimed
    problems = parsed["problems"]
    assert [p.split(":", 1)[0] for p in problems] == ["line 2", "line 3", "line 4", "line 5", "line 6", "line 9"]
    assert problems[0].startswith('line 2: not a complete COLL line ("<Op>: opCount <hex> ... [nranks=<n>] stream '
                                  '<ptr>"; truncated?): ')
    assert problems[1].startswith("line 3: datatype 12 is not one of ncclDataType_t 0-11: ")
    assert problems[2].startswith("line 4: a COLL message without NCCL's \"host:pid:tid [dev] NCCL INFO \" prefix: "
                                  "'INFO:sglang: gpu-a")
    assert problems[3].startswith('line 5: timestamp [12:00:05] is not in the format "[%F %T] " (read as untimed)')
    assert problems[4].startswith("line 6: not a complete COLL line")   # count -1
    assert problems[5].endswith("'gpu-a:4242:4242 [0] NCCL INFO AllReduce: opCo'")


@pytest.mark.parametrize("text", ["", None, "\n\n", "gpu-a:1:1 [0] NCCL INFO Init COMPLETE\n",
                                  "INFO 12:00 Prefill batch, #new-seq: 1\n"])
def test_coll_log_without_coll_lines(text):
    assert parse_coll_log(text)["records"] == [] and parse_coll_log(text)["problems"] == []


# --- Inspector ----------------------------------------------------------------------------------------------------

def test_inspector_records_and_a_truncated_last_line():
    parsed = inspector("inspector_v4.log")
    assert [r["sn"] for r in parsed["records"]] == [10, 11, 14, 15, 16]
    assert parsed["problems"] == ["line 6: not a JSON object (truncated?): "
                                  + repr((FIXTURES / "inspector_v4.log").read_text().splitlines()[5][:160])]
    first = parsed["records"][0]
    assert first == {
        "line": 1, "op": "AllReduce", "sn": 10, "bytes": 819200, "time_us": 400, "timing_source": "kernel_gpu",
        "algobw_gbs": 2.048, "busbw_gbs": 2.048, "rank": 0, "nranks": 2, "comm": "0x7f8c496ae9f661",
        "host": "gpu-a", "pid": 4242, "rank_key": "gpu-a:4242", "format_version": "v4.0",
        "timestamp": (NOON * 10 ** 6 + 2000100) / 1e6, "timestamp_source": "dump_timestamp_us"}
    assert parsed["records"][4]["timing_source"] == "collective_cpu"


def test_inspector_verbose_records_are_timed_by_their_start():
    parsed = inspector("inspector_v4_verbose.log")
    assert parsed["problems"] == [] and parsed["lines"] == 4
    assert [r["timestamp_source"] for r in parsed["records"]] == ["coll_start_ts"] * 3
    assert [r["timestamp"] for r in parsed["records"]] == pytest.approx([NOON + 2.25, NOON + 2.75, NOON + 4.000001])


def test_malformed_inspector_lines_are_problems():
    parsed = inspector("inspector_malformed.log")
    assert [r["line"] for r in parsed["records"]] == [1]
    assert [p.split(": '", 1)[0] for p in parsed["problems"]] == [
        "line 2: coll_perf.coll_exec_time_us is missing or not int",
        "line 3: coll_perf.coll_msg_size_bytes is missing or not int",
        "line 4: header.rank is missing or not int",
        "line 5: not a JSON object",
        "line 6: not a JSON object (truncated?)",
        "line 7: coll_perf.coll is missing or not str"]


# --- summary over a window ----------------------------------------------------------------------------------------

def test_summary_of_both_ranks_coll_lines_in_a_window():
    records = coll("coll_2.27_timestamps.log")["records"] + coll("coll_2.27_subseconds.log")["records"]
    summary = summarize(records, start=NOON + 2, end=NOON + 6)
    assert (summary["records"], summary["untimed"], summary["outside"]) == (10, 0, 1)
    allreduce = summary["collectives"]["AllReduce"]
    assert (allreduce["count"], allreduce["bytes"]) == (8, 2 * (2 * 819200 + 2 * 65536))
    assert allreduce["per_rank"] == {"gpu-a:4242": {"count": 4, "bytes": 1769472},
                                     "gpu-b:5151": {"count": 4, "bytes": 1769472}}
    assert "time_us_total" not in allreduce                       # COLL lines carry no duration
    assert sorted(summary["collectives"]) == ["AllGather", "AllReduce", "Broadcast"]


def test_untimed_lines_count_only_when_the_whole_log_is_the_window():
    records = coll("coll_2.21_untimed.log")["records"]
    cut = summarize(records, start=NOON, end=NOON + 10)
    assert (cut["records"], cut["untimed"], cut["collectives"]) == (0, 6, {})
    whole = summarize(records, whole_log=True)
    assert (whole["records"], whole["untimed"]) == (6, 0)
    assert whole["collectives"]["Send"] == {"count": 1, "bytes": 4096, "per_rank": {"node1:3001": {
        "count": 1, "bytes": 4096}}}


def test_summary_of_inspector_records_has_times_bandwidths_and_sequence_numbers():
    records = inspector("inspector_v4.log")["records"] + inspector("inspector_v4_verbose.log")["records"]
    summary = summarize(records, start=NOON + 2, end=NOON + 6)
    assert (summary["records"], summary["outside"]) == (7, 1)
    allreduce = summary["collectives"]["AllReduce"]
    assert (allreduce["time_us_total"], allreduce["time_us_median"], allreduce["time_us_p99"]) == (1831, 400, 420)
    assert allreduce["busbw_gbs_median"] == 1.950476
    gpu_a = allreduce["per_rank"]["gpu-a:4242"]
    assert (gpu_a["count"], gpu_a["sn_first"], gpu_a["sn_last"]) == (4, 10, 15)    # 4 records of 6 collectives
    assert (gpu_a["time_us_total"], gpu_a["time_us_median"]) == (944, 232.0)
    assert gpu_a["time_share"] == pytest.approx(944e-6 / 4)


@pytest.mark.parametrize("kwargs, message", [
    ({}, "a window needs start and end (epoch seconds), or whole_log=True"),
    ({"start": NOON}, "a window needs start and end (epoch seconds), or whole_log=True"),
    ({"start": NOON, "end": NOON}, "the window ends (1772366400) before it starts (1772366400)"),
])
def test_summary_window_errors(kwargs, message):
    with pytest.raises(NcclInputError) as error:
        summarize([], **kwargs)
    assert str(error.value) == message


# --- the theory and the wire overhead -----------------------------------------------------------------------------

def test_hand_worked_overhead():
    """hidden 4096, 32 layers, bf16 (2 bytes), TP n = 2, 1000 tokens (600 prompt + 400 generated), 2 all-reduces a
    layer (Megatron: attention output, MLP output):

    - one all-reduce of one token: 4096 x 2 = 8192 bytes;
    - one token through the model: 8192 x 2 all-reduces x 32 layers = 524,288 bytes;
    - 1000 tokens: 524,288,000 bytes all-reduced;
    - ring factor 2(n-1)/n = 2 x 1 / 2 = 1: each rank sends 524,288,000 bytes;
    - the link carried 550,502,400 bytes out of a rank's host in the window: 550,502,400 / 524,288,000 = 1.05.
    """
    theory = allreduce_theory(hidden_size=4096, num_layers=32, dtype_bytes=2, tp_size=2, prompt_tokens=600,
                              generated_tokens=400, allreduces_per_layer=MEGATRON_ALLREDUCES_PER_LAYER)
    assert theory["tokens_processed"] == 1000
    assert theory["allreduce_bytes_per_token"] == 524288
    assert theory["allreduce_bytes"] == 524288000
    assert theory["ring_send_factor"] == 1.0
    assert theory["theory_bytes_sent_per_rank"] == 524288000
    assert theory["inputs"] == {"hidden_size": 4096, "num_layers": 32, "dtype_bytes": 2, "tp_size": 2,
                                "prompt_tokens": 600, "generated_tokens": 400, "allreduces_per_layer": 2,
                                "verify_steps": None, "verify_width": None}
    overhead = wire_overhead(theory, observed_bytes_sent=550502400)
    assert overhead["ratio"] == pytest.approx(1.05)
    assert overhead["theory"] is theory and overhead["observed_bytes_sent"] == 550502400


def test_speculative_decoding_counts_the_verify_width():
    """NEXTN, 100 verify steps of 4 draft tokens: the decode runs 400 token positions through the model, however many
    were accepted (here 250 generated)."""
    theory = allreduce_theory(hidden_size=4096, num_layers=32, dtype_bytes=2, tp_size=2, prompt_tokens=600,
                              generated_tokens=250, allreduces_per_layer=2, verify_steps=100, verify_width=4)
    assert theory["tokens_processed"] == 1000
    assert theory["theory_bytes_sent_per_rank"] == 524288000


def test_ring_factor():
    assert [ring_allreduce_send_factor(n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]
    theory = allreduce_theory(hidden_size=1024, num_layers=1, dtype_bytes=2, tp_size=4, prompt_tokens=1,
                              generated_tokens=0, allreduces_per_layer=1)
    assert theory["theory_bytes_sent_per_rank"] == 2048 * 1.5


BASE = {"hidden_size": 4096, "num_layers": 32, "dtype_bytes": 2, "tp_size": 2, "prompt_tokens": 600,
        "generated_tokens": 400, "allreduces_per_layer": 2}


@pytest.mark.parametrize("change, message", [
    ({"tp_size": 1}, "tp_size must be an integer >= 2, got 1"),
    ({"hidden_size": 0}, "hidden_size must be an integer >= 1, got 0"),
    ({"dtype_bytes": 2.0}, "dtype_bytes must be an integer >= 1, got 2.0"),
    ({"num_layers": True}, "num_layers must be an integer >= 1, got True"),
    ({"prompt_tokens": -1}, "prompt_tokens must be an integer >= 0, got -1"),
    ({"verify_steps": 10}, "verify_steps and verify_width go together (speculative decoding), got 10 and None"),
    ({"verify_steps": 10, "verify_width": 0}, "verify_width must be an integer >= 1, got 0"),
])
def test_theory_input_errors(change, message):
    with pytest.raises(NcclInputError) as error:
        allreduce_theory(**dict(BASE, **change))
    assert str(error.value) == message


def test_overhead_input_error():
    with pytest.raises(NcclInputError) as error:
        wire_overhead(allreduce_theory(**BASE), observed_bytes_sent=-5)
    assert str(error.value) == "observed_bytes_sent must be an integer >= 0, got -5"


# --- one rank host's window, as the nccl_collectives module reads it ---------------------------------------------

def test_window_prefers_the_inspector_when_it_has_records():
    text = (FIXTURES / "coll_2.27_timestamps.log").read_text()
    found = window_collectives(NOON + 2, NOON + 6, coll_text=text, utc_offset_s=0,
                               inspector_texts=[(FIXTURES / "inspector_v4.log").read_text()])
    assert found["source"] == "inspector"
    assert found["collectives"]["AllReduce"]["time_us_total"] > 0
    assert found["problem_count"] == 1 and found["problems"][0].startswith("line 6: not a JSON object")


def test_window_falls_back_to_the_coll_lines_and_keeps_the_inspector_problems():
    found = window_collectives(NOON + 2, NOON + 6, coll_text=(FIXTURES / "coll_2.27_timestamps.log").read_text(),
                               inspector_texts=["{not json\n"], utc_offset_s=0)
    assert found["source"] == "coll"
    assert (found["records"], found["outside"], found["untimed"]) == (6, 1, 0)
    assert found["collectives"]["AllReduce"]["count"] == 4
    assert found["problems"] == ["line 1: not a JSON object (truncated?): '{not json'"]


def test_window_of_an_untimed_log_counts_nothing_in_it_and_says_why():
    found = window_collectives(NOON, NOON + 10, coll_text=(FIXTURES / "coll_2.21_untimed.log").read_text())
    assert (found["source"], found["records"], found["untimed"], found["collectives"]) == ("coll", 0, 6, {})


@pytest.mark.parametrize("text", [None, "", "a log without NCCL lines\n"])
def test_window_without_any_collective(text):
    found = window_collectives(NOON, NOON + 10, coll_text=text)
    assert (found["source"], found["records"], found["problem_count"]) == ("none", 0, 0)


def test_window_keeps_the_first_problems_and_counts_all():
    found = window_collectives(NOON, NOON + 10, coll_text=(FIXTURES / "coll_malformed.log").read_text(),
                               max_problems=2)
    assert found["problem_count"] > 2 and len(found["problems"]) == 2


# --- a served mode's wire overhead from its batches ---------------------------------------------------------------

CONFIG = {"hidden_size": 896, "num_hidden_layers": 24, "torch_dtype": "bfloat16"}


def batch(prompt, cached, output, accept=None, kind="single_stream"):
    return {"kind": kind, "prompt_tokens_total": prompt, "cached_tokens_total": cached,
            "output_tokens_total": output, "spec_accept_length": None if accept is None else {"value": accept}}


def test_wire_overhead_by_hand():
    # tokens: (396 - 135) + (128 - 0) = 389 uncached prompt tokens, + 384 + 128 output tokens = 901
    # bytes per token: 896 x 2 bytes x 2 all-reduces x 24 layers = 86,016; all-reduced 77,500,416; ring factor 1
    found = batches_wire_overhead([batch(396, 135, 384), None, batch(128, 0, 128)], CONFIG, 2,
                                  {"lab-b": 155000832, "lab-a": 77500416})
    assert found["problem"] is None and found["notes"] == []
    assert found["theory"]["tokens_processed"] == 901
    assert found["theory"]["theory_bytes_sent_per_rank"] == 77500416
    assert found["hosts"] == {"lab-a": {"observed_bytes_sent": 77500416, "ratio": 1.0},
                              "lab-b": {"observed_bytes_sent": 155000832, "ratio": 2.0}}


def test_wire_overhead_with_speculation_counts_verify_steps():
    # 384 output tokens at an accept length of 2.4: 160 verify steps of 4 tokens; 120 prompt tokens
    found = batches_wire_overhead([batch(120, 0, 384, accept=2.4)], CONFIG, 2, {"lab-a": 0}, verify_width=4)
    assert found["theory"]["inputs"]["verify_steps"] == 160
    assert found["theory"]["tokens_processed"] == 120 + 640
    assert found["hosts"]["lab-a"] == {"observed_bytes_sent": 0, "ratio": 0.0}


def test_wire_overhead_counts_unreported_cache_and_says_so():
    found = batches_wire_overhead([batch(100, None, 10)], CONFIG, 2, {"lab-a": None})
    assert found["theory"]["tokens_processed"] == 110
    assert found["notes"] == ["the server reported no cached tokens for some batches: all their prompt tokens count",
                              "lab-a: no link bytes sent in the window"]
    assert found["hosts"]["lab-a"] == {"observed_bytes_sent": None, "ratio": None}


@pytest.mark.parametrize("batches, config, verify_width, problem", [
    ([], CONFIG, None, "no workload batch in the window"),
    ([batch(1, 0, 1)], {"hidden_size": 896}, None, "the model config has no num_hidden_layers"),
    ([batch(1, 0, 1)], None, None, "the model config has no hidden_size or num_hidden_layers"),
    ([batch(1, 0, 1)], dict(CONFIG, torch_dtype="int4"), None,
     "the model config's torch_dtype 'int4' is not one of bfloat16, float, float16, float32, half"),
    ([batch(1, 0, 5, kind="concurrent")], CONFIG, 4,
     "a speculative batch (concurrent) has no spec_accept_length to count its verify steps"),
])
def test_wire_overhead_without_its_inputs_names_what_is_missing(batches, config, verify_width, problem):
    found = batches_wire_overhead(batches, config, 2, {"lab-a": 1}, verify_width=verify_width)
    assert found == {"theory": None, "hosts": {}, "notes": [], "problem": problem}

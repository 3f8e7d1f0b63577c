# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's NCCL Inspector records of real TP exchanges, read back with the collection's Inspector parser: the
plugin's switches, its dump directory and file name, the minimum size, and CPU timing dropped by default as NCCL
2.30 drops it."""

from __future__ import annotations

import os
import socket
import time

import pytest
from labservers import exchange_steps

from ansible_collections.inferlab.distributed.plugins.module_utils._nccl import parse_inspector_log, summarize
from inferlab.lab.server.inspector import dump_dir

INSPECTOR_ENV = {"NCCL_PROFILER_PLUGIN": "/usr/lib/libnccl-profiler-inspector.so", "NCCL_INSPECTOR_ENABLE": "1",
                 "NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING": "0"}


def dumped(directory):
    return directory / f"{socket.gethostname()}-pid{os.getpid()}.log"


def test_every_exchange_of_both_ranks_is_a_timed_record(tmp_path):
    before = time.time()
    exchange_steps(dict(INSPECTOR_ENV, NCCL_INSPECTOR_DUMP_DIR=str(tmp_path / "dump")), [65536, 1001, 131072])
    after = time.time()
    parsed = parse_inspector_log(dumped(tmp_path / "dump").read_text())
    assert parsed["problems"] == []
    records = parsed["records"]
    # both ranks live in this process, so one file; 1001 bytes is under the default 8192-byte minimum
    assert sorted((r["rank"], r["sn"], r["bytes"]) for r in records) == [
        (0, 0, 65536), (0, 2, 131072), (1, 0, 65536), (1, 2, 131072)]
    assert {(r["op"], r["nranks"], r["timing_source"], r["format_version"]) for r in records} == {
        ("AllReduce", 2, "collective_cpu", "v4.0")}
    assert all(before <= r["timestamp"] <= after + 1e-3 and r["time_us"] >= 1 for r in records)
    assert all(r["busbw_gbs"] == r["algobw_gbs"] > 0 for r in records)  # 2 ranks: busbw = algbw x 2(n-1)/n
    summary = summarize(records, start=before, end=after + 1)
    assert summary["collectives"]["AllReduce"]["count"] == 4 and summary["collectives"]["AllReduce"]["time_us_total"]


def test_verbose_records_carry_the_collective_start(tmp_path):
    exchange_steps(dict(INSPECTOR_ENV, NCCL_INSPECTOR_DUMP_DIR=str(tmp_path / "d"), NCCL_INSPECTOR_DUMP_VERBOSE="1",
                        NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES="0"), [1001, 1001])
    records = parse_inspector_log(dumped(tmp_path / "d").read_text())["records"]
    assert len(records) == 4 and {r["timestamp_source"] for r in records} == {"coll_start_ts"}


@pytest.mark.parametrize("change", [
    {"NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING": None},     # NCCL 2.30's default drops CPU-timed events: the lab has no GPU
    {"NCCL_INSPECTOR_ENABLE": "0"},
    {"NCCL_PROFILER_PLUGIN": ""},
])
def test_nothing_is_recorded_without_every_switch(tmp_path, change):
    env = dict(INSPECTOR_ENV, NCCL_INSPECTOR_DUMP_DIR=str(tmp_path / "d"), **change)
    exchange_steps({k: v for k, v in env.items() if v is not None}, [65536])
    assert not dumped(tmp_path / "d").exists()


def test_a_dump_dir_that_is_a_file_records_nothing(tmp_path):
    (tmp_path / "taken").write_text("")
    exchange_steps(dict(INSPECTOR_ENV, NCCL_INSPECTOR_DUMP_DIR=str(tmp_path / "taken")), [65536])
    assert (tmp_path / "taken").read_text() == ""


@pytest.mark.parametrize("env, expected", [
    ({"NCCL_INSPECTOR_DUMP_DIR": "/x/y"}, "/x/y"),
    ({"SLURM_JOBID": "4242"}, "nccl-inspector-4242"),
    ({"SLURM_JOBID": "abc"}, "nccl-inspector-unknown-jobid"),
    ({}, "nccl-inspector-unknown-jobid"),
])
def test_dump_dir_as_the_plugin_names_it(env, expected):
    assert dump_dir(env) == expected

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nccl_collectives on the hand-written NCCL traces (tests/unit/fixtures/nccl/README.md), copied where a rank
would leave them."""

from __future__ import annotations

import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.modules import nccl_collectives
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, run_module

NOON = 1772366400  # 2026-03-01 12:00:00 UTC: the fixtures' times


@pytest.mark.parametrize("check_mode", [False, True])
def test_coll_lines_of_a_rank_log_in_the_window(tmp_path, check_mode):
    log = tmp_path / "rank0.log"
    shutil.copy(FIXTURES / "nccl" / "coll_2.27_timestamps.log", log)
    failed, result = run_module(nccl_collectives.main, {
        "log_path": str(log), "window_start": NOON + 2, "window_end": NOON + 6, "log_utc_offset_s": 0,
        "_ansible_check_mode": check_mode})
    assert not failed and result["changed"] is False
    found = result["collectives"]
    assert (found["source"], found["records"], found["outside"]) == ("coll", 6, 1)
    assert found["collectives"]["AllReduce"]["per_rank"] == {"gpu-a:4242": {"count": 4, "bytes": 1769472}}


def test_inspector_dir_with_every_log_file_in_it(tmp_path):
    dump = tmp_path / "inspector"
    dump.mkdir()
    shutil.copy(FIXTURES / "nccl" / "inspector_v4.log", dump / "gpu-a-pid4242.log")
    shutil.copy(FIXTURES / "nccl" / "inspector_v4_verbose.log", dump / "gpu-b-pid5151.log")
    (dump / "notes.txt").write_text("not read\n")
    failed, result = run_module(nccl_collectives.main, {
        "inspector_dir": str(dump), "log_path": str(tmp_path / "no-such.log"),
        "window_start": NOON + 2, "window_end": NOON + 6})
    assert not failed
    found = result["collectives"]
    assert found["source"] == "inspector" and found["records"] == 7
    assert sorted(found["collectives"]["AllReduce"]["per_rank"]) == ["gpu-a:4242", "gpu-b:5151"]


def test_missing_traces_are_no_collectives(tmp_path):
    failed, result = run_module(nccl_collectives.main, {
        "log_path": str(tmp_path / "none.log"), "inspector_dir": str(tmp_path / "none"),
        "window_start": NOON, "window_end": NOON + 1})
    assert not failed and result["collectives"]["source"] == "none" and result["collectives"]["lines"] == 0


def test_a_window_that_ends_before_it_starts_fails_and_says_so(tmp_path):
    failed, result = run_module(nccl_collectives.main, {
        "log_path": str(tmp_path / "none.log"), "window_start": NOON + 5, "window_end": NOON})
    assert failed
    assert result["msg"] == (f"Cannot read the NCCL traces: the window ends ({float(NOON)}) before it starts "
                             f"({float(NOON + 5)})")


def test_one_trace_is_required():
    failed, result = run_module(nccl_collectives.main, {"window_start": NOON, "window_end": NOON + 1})
    assert failed and "one of the following is required: log_path, inspector_dir" in result["msg"]

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's NCCL log lines in process: the COLL line of every TP exchange (read back with the collection's NCCL
parser), NCCL_DEBUG_SUBSYS and the timestamp settings."""

from __future__ import annotations

import io
import time

import pytest
from labservers import exchange_steps

from ansible_collections.inferlab.distributed.plugins.module_utils._nccl import parse_coll_log
from inferlab.lab.server.tp import NcclLog, nccl_flag_on, nccl_flags

COLL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,COLL", "NCCL_DEBUG_TIMESTAMP_LEVELS": "INFO"}


def test_every_exchange_logs_one_allreduce_coll_line_on_both_ranks():
    before = time.time()
    texts = exchange_steps(dict(COLL_ENV, NCCL_DEBUG_TIMESTAMP_FORMAT="[%F_%T.%6f] "), [65536, 1001, 65536])
    after = time.time()
    for rank, text in enumerate(texts):
        parsed = parse_coll_log(text)                     # the lab writes local time, read here as local time
        assert parsed["problems"] == []
        records = parsed["records"]
        assert [(r["op"], r["opcount"], r["nranks"], r["device"], r["reduction"]) for r in records] == [
            ("AllReduce", step, 2, rank, "sum") for step in range(3)]
        assert [(r["datatype_name"], r["count"], r["bytes"]) for r in records] == [
            ("ncclBfloat16", 32768, 65536), ("ncclInt8", 1001, 1001), ("ncclBfloat16", 32768, 65536)]
        assert all(before - 1e-6 <= r["timestamp"] <= after + 1e-6 for r in records)
        assert len({r["rank_key"] for r in records}) == 1 and records[0]["comm"].startswith("0x")
        assert text.count("\n") == 3 and " NCCL INFO AllReduce: opCount 2 " in text and text.startswith("[")


def test_coll_lines_need_info_and_the_coll_subsystem():
    for env in ({"NCCL_DEBUG": "INFO"}, {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "COLL"},
                {"NCCL_DEBUG_SUBSYS": "ALL"}, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^COLL"}):
        assert exchange_steps(env, [4096]) == ("", "")
    texts = exchange_steps({"NCCL_DEBUG": "info", "NCCL_DEBUG_SUBSYS": "all"}, [4096])
    assert all(parse_coll_log(text)["records"][0]["timestamp"] is None for text in texts)   # INFO: no timestamp


def test_timestamps_follow_nccl_debug_timestamp_levels():
    out = io.StringIO()
    log = NcclLog(0, {"NCCL_DEBUG": "INFO"}, stream=out)
    log.info("Connected all rings")
    log.warn("NET/Socket : peer gone")
    info, warn = out.getvalue().splitlines()
    assert " [0] NCCL INFO Connected all rings" in info and not info.startswith("[")
    assert warn.startswith("[") and warn.index("] ") == len("[2026-03-01 12:00:00")    # NCCL's default: WARN only
    out = io.StringIO()
    NcclLog(0, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_TIMESTAMP_LEVELS": "^WARN,INFO"}, stream=out).warn("x")
    assert not out.getvalue().startswith("[")


@pytest.mark.parametrize("value, name, on", [
    (None, "INIT", True), (None, "COLL", False), ("COLL", "INIT", False), ("coll,init", "COLL", True),
    ("^COLL", "INIT", True), ("^COLL", "COLL", False), ("ALL", "NET", True), ("^ALL", "INIT", False),
])
def test_nccl_debug_subsys(value, name, on):
    assert nccl_flag_on(nccl_flags(value, "INIT,BOOTSTRAP,ENV"), name) is on

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sweep_points: the registered results of a sweep loop (items [trial, level]) as the record keeps them, a point a
batch with its summary figures and no per-request records; malformed items fail, naming the result."""

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter.serving import FilterModule
from ansible_collections.inferlab.distributed.plugins.plugin_utils._sweep import POINT_FIGURES

sweep_points = FilterModule().filters()["sweep_points"]


def batch(level, failed=0):
    return {
        "kind": "concurrent", "cache": "warm", "error": None, "wall_s": 2.5, "ok": 2 * level - failed,
        "failed": failed, "aggregate_output_tok_s": 100.0 * level,
        "ttft_s": {"n": 2, "mean": 0.2, "median": 0.2, "p99": 0.3, "min": 0.1, "max": 0.3},
        "itl_s": {"n": 40, "mean": 0.01, "median": 0.01, "p99": 0.02, "min": 0.005, "max": 0.02},
        "output_tok_s": {"n": 2, "mean": 50.0, "median": 50.0, "p99": 55.0, "min": 45.0, "max": 55.0},
        "latency_s": {"n": 2, "mean": 2.0, "median": 2.0, "p99": 2.4, "min": 1.8, "max": 2.4},
        "definitions": {"aggregate_output_tok_s": "..."},
        "records": [{"index": i, "start": {"wall": f"2026-12-05T03:00:0{i}.000000Z", "offset_s": 0.0}}
                    for i in range(2 * level)],
    }


def test_each_batch_is_a_point_with_its_figures_and_first_start_but_no_records():
    results = [{"item": [1, 1], "batch": batch(1)}, {"item": [1, 4], "batch": batch(4, failed=1)},
               {"item": [2, 1], "batch": batch(1)}]
    points = sweep_points(results)
    assert [(p["trial"], p["level"]) for p in points] == [(1, 1), (1, 4), (2, 1)]
    assert set(points[1]["batch"]) == set(POINT_FIGURES)
    assert points[1]["batch"]["failed"] == 1 and points[1]["batch"]["aggregate_output_tok_s"] == 400.0
    assert points[0]["started"] == "2026-12-05T03:00:00.000000Z" and points[0]["error"] is None


def test_a_batch_never_sent_is_a_point_without_figures_saying_why():
    [point] = sweep_points([{"item": ["2", "8"], "failed": True, "msg": "connection refused"}])
    assert point == {"trial": 2, "level": 8, "started": None, "error": "connection refused", "batch": None}


@pytest.mark.parametrize("results, message", [
    ({"item": [1, 1]}, "expects the registered results of the sweep loop (a list), found dict"),
    ([{"batch": {}}], "result 0: expects its loop item to be [trial, level], found None"),
    ([{"item": [1, 2, 3]}], "result 0: expects its loop item to be [trial, level], found [1, 2, 3]"),
    ([{"item": [1, 0]}], "expects result 0's concurrency level of at least 1, found 0"),
    ([{"item": [1, "four"]}], "expects result 0's concurrency level to be a whole number, found 'four'"),
    ([{"item": [True, 2]}], "expects result 0's trial to be a whole number, found True"),
])
def test_malformed_results_fail_naming_the_result(results, message):
    with pytest.raises(AnsibleFilterError, match="sweep_points: " + re.escape(message)):
        sweep_points(results)

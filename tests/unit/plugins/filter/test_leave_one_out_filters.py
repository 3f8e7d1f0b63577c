# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The leave-one-out filters: registered, documented in their sidecar files, their errors an AnsibleFilterError
that names the filter (the logic's own tests: tests/unit/plugins/module_utils/test_leave_one_out.py)."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import leave_one_out

FILTERS = Path(__file__).resolve().parents[4] / "plugins" / "filter"
NAMES = ["leave_one_out_plan", "leave_one_out_verdict"]


def test_registered_and_documented():
    filters = leave_one_out.FilterModule().filters()
    assert sorted(filters) == NAMES
    for name in NAMES:
        assert filters[name] is getattr(leave_one_out, name)
        doc = yaml.safe_load((FILTERS / f"{name}.yml").read_text())
        assert doc["DOCUMENTATION"]["name"] == name and doc["RETURN"]["_value"]["description"]
    assert not hasattr(leave_one_out, "DOCUMENTATION")


def test_errors_name_the_filter():
    with pytest.raises(AnsibleFilterError, match="leave_one_out_plan: the head lab-a cannot be left out"):
        leave_one_out.leave_one_out_plan(["lab-a", "lab-b", "lab-c"], ["lab-a"], 2)
    with pytest.raises(AnsibleFilterError, match="leave_one_out_verdict: runs has no run of the whole ring"):
        leave_one_out.leave_one_out_verdict([{"left_out": "lab-c", "figures": {"x": 1.0}}], "x", 1.1)
    plan = leave_one_out.leave_one_out_plan(["lab-a", "lab-b", "lab-c"], ["lab-c"], 1)
    assert [p["label"] for p in plan] == ["whole ring", "without lab-c"]

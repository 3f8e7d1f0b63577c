# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the modules that change a gateway's config for a run (gateway_fallback, gateway_models) do alike, through
their shared code (plugins/module_utils/_gateway_change.py), tested on each through main(): check mode, the
refusals before any change, and ``removed`` with nothing to remove."""

import pytest

from ansible_collections.inferlab.distributed.plugins.modules import gateway_fallback, gateway_models
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.gateway_change_helpers import (
    HOST,
    fallback_added_args,
    models_added_args,
    removed_args,
    sha256,
    two_instance_gateway,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

# each module: its main, its arguments for `added`, and what check mode says it would add
MODULES = [
    pytest.param(gateway_fallback.main, fallback_added_args, "the fallback", id="gateway_fallback"),
    pytest.param(gateway_models.main, models_added_args, "the roles solo-lab-b", id="gateway_models"),
]


@pytest.mark.parametrize(("main", "added_args", "named"), MODULES)
def test_added_in_check_mode_writes_nothing(gateway, main, added_args, named):
    original = two_instance_gateway(gateway)
    before = gateway.pids()
    failed, result = run_module(main, dict(added_args(gateway, original), _ansible_check_mode=True))
    assert not failed, result.get("msg", result)
    assert result["changed"] is True
    assert result["original_sha256"] == result["config_sha256"] == sha256(original)
    assert result["message"] == f"would add {named} and restart 2 instances"
    assert gateway.config_path.read_bytes() == original
    assert not gateway.ledger_dir.exists() and not (gateway.ledger_dir.parent / "backup").exists()
    assert gateway.pids() == before and gateway.reloads() == []
    assert gateway.fallbacks() == {"litellm-a": [], "litellm-b": []}


@pytest.mark.parametrize(("main", "added_args", "named"), MODULES)
def test_added_refuses_two_instances_without_a_front(gateway, main, added_args, named):
    original = gateway.write_config()
    gateway.add_instance("litellm-a", start=False)
    gateway.add_instance("litellm-b", start=False)
    failed, result = run_module(main, added_args(gateway, original, front={}))
    assert failed
    assert result["msg"] == ("Nothing was changed: 2 gateway instances but no front: a rolling restart needs the front "
                             "that drains them (inferlab_gateway_front)")
    assert gateway.config_path.read_bytes() == original
    assert not gateway.ledger_dir.exists()


@pytest.mark.parametrize(("main", "added_args", "named"), MODULES)
def test_added_refuses_the_original_as_content(gateway, main, added_args, named):
    original = two_instance_gateway(gateway)
    failed, result = run_module(main, added_args(gateway, original, content=original.decode()))
    assert failed
    assert result["msg"] == "the new config is the original config: nothing to add"
    assert not gateway.ledger_dir.exists()


@pytest.mark.parametrize("main", [gateway_fallback.main, gateway_models.main],
                         ids=["gateway_fallback", "gateway_models"])
def test_removed_with_an_empty_ledger(gateway, main):
    gateway.write_config()
    failed, result = run_module(main, removed_args(gateway))
    assert failed
    assert result["msg"] == (f"the ledger of {HOST} in {gateway.ledger_dir} has no gateway_config entry for "
                             f"{gateway.config_path}: nothing to remove")
    assert not gateway.ledger_dir.exists()

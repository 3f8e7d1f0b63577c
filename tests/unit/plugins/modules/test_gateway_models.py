# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the gateway_models module through main(), on the real loopback gateway of gateway_fakes (fake LiteLLM
instances that read their YAML config at start, a fake nginx front): ``added`` really restarts the instances one at
a time and ``removed`` really puts the original bytes back and restarts whatever still serves the added role."""

import json

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as gs
from ansible_collections.inferlab.distributed.plugins.modules import gateway_models
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.gateway_change_helpers import (
    added_and_checked,
    ledger_lines,
    models_added_args,
    removed_args,
    two_instance_gateway,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module


def models(gateway):
    return {i["name"]: gs.listed_models(i["url"], gateway.key) for i in gateway.instances}


ORIGINAL = {"litellm-a": ["small", "large"], "litellm-b": ["small", "large"]}
WITH_SOLO = {"litellm-a": ["small", "large", "solo-lab-b"], "litellm-b": ["small", "large", "solo-lab-b"]}


def test_added_then_removed(gateway):
    original, args, result = added_and_checked(gateway, gateway_models.main, models_added_args)
    params = ledger_lines(gateway)[0]["params"]
    assert params["original_models"] == ["small", "large"]
    assert result["models"] == WITH_SOLO == models(gateway)
    assert result["message"] == "added the roles solo-lab-b and restarted 2 instances one at a time"
    after = gateway.pids()

    # idempotent: the open entry and the instances listing the role
    failed, again = run_module(gateway_models.main, args)
    assert not failed, again
    assert again["changed"] is False and again["entry_id"] == result["entry_id"]
    assert again["message"] == f"the roles are already added (ledger entry {result['entry_id']})"
    assert len(ledger_lines(gateway)) == 2 and gateway.pids() == after

    failed, removed = run_module(gateway_models.main, removed_args(gateway))

    assert not failed, removed
    assert removed["changed"] is True and removed["undone"] == [result["entry_id"]]
    assert removed["byte_identical"] is True and gateway.config_path.read_bytes() == original
    assert removed["models"] == ORIGINAL == models(gateway)
    assert removed["message"].endswith("restarted litellm-a, litellm-b with it")
    assert [line["state"] for line in ledger_lines(gateway)] == ["pending", "applied", "undone"]

    failed, again = run_module(gateway_models.main, removed_args(gateway))
    assert not failed, again
    assert again["changed"] is False and again["undone"] == []
    assert again["message"] == f"no open gateway_config entry for {gateway.config_path}: nothing to undo"


def test_added_takes_the_old_option_name_roles(gateway):
    """``roles``, the option's name before the module was gateway_models, is an alias of ``models``."""
    original = two_instance_gateway(gateway)
    args = models_added_args(gateway, original)
    args["roles"] = args.pop("models")
    failed, result = run_module(gateway_models.main, dict(args, _ansible_check_mode=True))
    assert not failed, result.get("msg", result)
    assert result["message"] == "would add the roles solo-lab-b and restart 2 instances"


def test_added_refuses_a_role_the_gateway_serves_already(gateway):
    original = two_instance_gateway(gateway)
    before = gateway.pids()
    args = models_added_args(gateway, original, models=["large", "solo-lab-b"])
    failed, result = run_module(gateway_models.main, args)
    assert failed
    assert result["msg"] == ("Nothing was changed: the gateway already serves large (its roles: small, large); "
                             "those roles belong to the operator")
    assert not gateway.ledger_dir.exists() and gateway.config_path.read_bytes() == original
    assert gateway.pids() == before


def test_added_refuses_instances_that_serve_different_configs(gateway):
    """One instance started with another config: a rolling restart would mix two configs."""
    original = two_instance_gateway(gateway)
    gateway.write_config(fallback=True)
    first = gateway.instances[0]
    gs.stop_instance(first, 5)
    gs.start_instance(first)
    gs.wait_ready(first["url"], 10, poll_s=0.02)
    gateway.config_path.write_bytes(original)
    failed, result = run_module(gateway_models.main, models_added_args(gateway, original))
    assert failed
    assert result["msg"].startswith("Nothing was changed: the instances do not serve the same config")
    assert not gateway.ledger_dir.exists()


def test_added_needs_its_inputs(gateway):
    original = two_instance_gateway(gateway)
    failed, result = run_module(gateway_models.main, models_added_args(gateway, original, models=[], public_model=None))
    assert failed
    assert result["msg"] == "state=added needs models, public_model"


def test_diff_mode_shows_the_config_before_and_after_with_its_secrets_masked(gateway):
    """--diff shows what the change writes and what the undo puts back; a provider key in the config, a database
    URL's password and the master key (unless it names an environment variable) read <redacted>."""
    original = two_instance_gateway(gateway)
    secret = "sk-provider-8f1d"
    text = original.decode().replace("api_key: none", f"api_key: {secret}", 1)
    text += "litellm_settings:\n  database_url: postgres://litellm:pw-7c2e@127.0.0.1/db\n"
    gateway.config_path.write_text(text)
    args = dict(models_added_args(gateway, text.encode()), _ansible_diff=True)

    failed, checked = run_module(gateway_models.main, dict(args, _ansible_check_mode=True))
    assert not failed, checked.get("msg", checked)
    failed, result = run_module(gateway_models.main, args)
    assert not failed, result.get("msg", result)
    for diff in (checked["diff"], result["diff"]):
        assert diff["before_header"] == diff["after_header"] == str(gateway.config_path)
        assert "solo-lab-b" in diff["after"] and "solo-lab-b" not in diff["before"]
        assert "api_key: <redacted>" in diff["before"]
        assert "postgres://litellm:<redacted>@127.0.0.1/db" in diff["before"]
        assert "master_key: os.environ/LITELLM_MASTER_KEY" in diff["before"]
    assert secret not in json.dumps([checked, result]) and "pw-7c2e" not in json.dumps([checked, result])

    failed, removed = run_module(gateway_models.main, dict(removed_args(gateway), _ansible_diff=True))
    assert not failed, removed
    assert "solo-lab-b" in removed["diff"]["before"] and "solo-lab-b" not in removed["diff"]["after"]
    assert secret not in json.dumps(removed)
    failed, again = run_module(gateway_models.main, dict(removed_args(gateway), _ansible_diff=True))
    assert not failed and "diff" not in again  # nothing undone, nothing to show

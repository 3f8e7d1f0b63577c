# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the gateway_models module through main(), on the real loopback gateway of gateway_fakes (fake LiteLLM
instances that read their YAML config at start, a fake nginx front): ``added`` really restarts the instances one at
a time and ``removed`` really puts the original bytes back and restarts whatever still serves the added role."""

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as gs
from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.plugins.modules import gateway_models
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _litellm_config
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.gateway_fakes import (
    Gateway,
    Processes,
    alive,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

HOST = "lab-gw"


@pytest.fixture
def gateway(tmp_path):
    made = Gateway(tmp_path, Processes(tmp_path))
    yield made
    made.close()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def ledger_lines(gateway):
    path = Path(_ledger_core.ledger_path(str(gateway.ledger_dir), HOST))
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def two_instance_gateway(gateway):
    """The lab's layout: two instances behind a front, the original config."""
    original = gateway.write_config()
    gateway.add_instance("litellm-a")
    gateway.add_instance("litellm-b")
    gateway.add_front()
    return original


def models(gateway):
    return {i["name"]: gs.listed_models(i["url"], gateway.key) for i in gateway.instances}


def added_args(gateway, original, **change):
    solo = [{"name": "solo-lab-b", "model": "small-model", "api_base": gateway.backends["small"].api_base}]
    args = dict(state="added", config_path=str(gateway.config_path),
                content=_litellm_config.with_roles(original.decode(), solo), models=["solo-lab-b"],
                instances=gateway.instances, front=gateway.front, admin_key_file=str(gateway.key_file),
                public_model="small", ready_timeout_s=30, drain_timeout_s=15, ledger_dir=str(gateway.ledger_dir),
                ledger_host=HOST, run_id="run1")
    args.update(change)
    return args


def removed_args(gateway):
    return dict(state="removed", config_path=str(gateway.config_path), ledger_dir=str(gateway.ledger_dir),
                ledger_host=HOST)


ORIGINAL = {"litellm-a": ["small", "large"], "litellm-b": ["small", "large"]}
WITH_SOLO = {"litellm-a": ["small", "large", "solo-lab-b"], "litellm-b": ["small", "large", "solo-lab-b"]}


def test_added_then_removed(gateway):
    original = two_instance_gateway(gateway)
    upstream = Path(gateway.front["upstream_file"]).read_bytes()
    args = added_args(gateway, original)
    content = args["content"].encode()
    before = gateway.pids()

    failed, result = run_module(gateway_models.main, args)

    assert not failed, result.get("msg", result)
    assert result["changed"] is True
    assert gateway.config_path.read_bytes() == content
    assert stat.S_IMODE(gateway.config_path.stat().st_mode) == 0o640
    assert (result["original_sha256"], result["config_sha256"]) == (sha256(original), sha256(content))
    lines = ledger_lines(gateway)
    assert [(line["state"], line["kind"], line["run_id"]) for line in lines] == [
        ("pending", "gateway_config", "run1"), ("applied", "gateway_config", "run1")]
    params = lines[0]["params"]
    assert (params["original_models"], params["original_fallbacks"], params["public_model"]) == (
        ["small", "large"], [], "small")
    for backup, data in ((params["backup_path"], original), (params["front_backup_path"], upstream)):
        assert Path(backup).read_bytes() == data
        assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    assert Path(gateway.front["upstream_file"]).read_bytes() == upstream
    assert [s["instance"] for s in result["steps"]] == ["litellm-a", "litellm-b"]
    assert all(step["drained"] and step["warmup_status"] == 200 for step in result["steps"])
    assert result["models"] == WITH_SOLO == models(gateway)
    after = gateway.pids()
    assert all(after[name] != before[name] and alive(after[name]) for name in after)
    assert result["message"] == "added the roles solo-lab-b and restarted 2 instances one at a time"
    assert gateway.key not in json.dumps(result)

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


def test_added_in_check_mode_writes_nothing(gateway):
    original = two_instance_gateway(gateway)
    before = gateway.pids()
    failed, result = run_module(gateway_models.main, dict(added_args(gateway, original), _ansible_check_mode=True))
    assert not failed, result.get("msg", result)
    assert result["changed"] is True
    assert result["message"] == "would add the roles solo-lab-b and restart 2 instances"
    assert gateway.config_path.read_bytes() == original
    assert not gateway.ledger_dir.exists() and not (gateway.ledger_dir.parent / "backup").exists()
    assert gateway.pids() == before and gateway.reloads() == []


def test_added_takes_the_old_option_name_roles(gateway):
    """``roles``, the option's name before the module was gateway_models, is an alias of ``models``."""
    original = two_instance_gateway(gateway)
    args = added_args(gateway, original)
    args["roles"] = args.pop("models")
    failed, result = run_module(gateway_models.main, dict(args, _ansible_check_mode=True))
    assert not failed, result.get("msg", result)
    assert result["message"] == "would add the roles solo-lab-b and restart 2 instances"


def test_added_refuses_a_role_the_gateway_serves_already(gateway):
    original = two_instance_gateway(gateway)
    before = gateway.pids()
    failed, result = run_module(gateway_models.main, added_args(gateway, original, models=["large", "solo-lab-b"]))
    assert failed
    assert result["msg"] == ("Nothing was changed: the gateway already serves large (its roles: small, large); "
                             "those roles belong to the operator")
    assert not gateway.ledger_dir.exists() and gateway.config_path.read_bytes() == original
    assert gateway.pids() == before


def test_added_refuses_two_instances_without_a_front(gateway):
    original = gateway.write_config()
    gateway.add_instance("litellm-a", start=False)
    gateway.add_instance("litellm-b", start=False)
    failed, result = run_module(gateway_models.main, added_args(gateway, original, front={}))
    assert failed
    assert result["msg"].startswith("Nothing was changed: 2 gateway instances but no front")
    assert not gateway.ledger_dir.exists()


def test_added_refuses_instances_that_serve_different_configs(gateway):
    """One instance started with another config: a rolling restart would mix two configs."""
    original = two_instance_gateway(gateway)
    gateway.write_config(fallback=True)
    first = gateway.instances[0]
    gs.stop_instance(first, 5)
    gs.start_instance(first)
    gs.wait_ready(first["url"], 10, poll_s=0.02)
    gateway.config_path.write_bytes(original)
    failed, result = run_module(gateway_models.main, added_args(gateway, original))
    assert failed
    assert result["msg"].startswith("Nothing was changed: the instances do not serve the same config")
    assert not gateway.ledger_dir.exists()


def test_added_with_the_original_as_content(gateway):
    original = two_instance_gateway(gateway)
    failed, result = run_module(gateway_models.main, added_args(gateway, original, content=original.decode()))
    assert failed
    assert result["msg"] == "the new config is the original config: nothing to add"
    assert not gateway.ledger_dir.exists()


def test_added_needs_its_inputs(gateway):
    original = two_instance_gateway(gateway)
    failed, result = run_module(gateway_models.main, added_args(gateway, original, models=[], public_model=None))
    assert failed
    assert result["msg"] == "state=added needs models, public_model"


def test_removed_with_an_empty_ledger(gateway):
    gateway.write_config()
    failed, result = run_module(gateway_models.main, removed_args(gateway))
    assert failed
    assert result["msg"] == (f"the ledger of {HOST} in {gateway.ledger_dir} has no gateway_config entry for "
                             f"{gateway.config_path}: nothing to remove")


def test_diff_mode_shows_the_config_before_and_after_with_its_secrets_masked(gateway):
    """--diff shows what the change writes and what the undo puts back; a provider key in the config, a database
    URL's password and the master key (unless it names an environment variable) read <redacted>."""
    original = two_instance_gateway(gateway)
    secret = "sk-provider-8f1d"
    text = original.decode().replace("api_key: none", f"api_key: {secret}", 1)
    text += "litellm_settings:\n  database_url: postgres://litellm:pw-7c2e@127.0.0.1/db\n"
    gateway.config_path.write_text(text)
    args = dict(added_args(gateway, text.encode()), _ansible_diff=True)

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

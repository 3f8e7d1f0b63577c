# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the tests of the modules that change a gateway's config for a run (gateway_fallback, gateway_models) share,
on the loopback gateway of the ``gateway`` fixture (conftest.py): the lab's layout, the gateway host's ledger read
back, each module's arguments, and what every ``added`` leaves behind."""

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.plugins.plugin_utils import _litellm_config
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.gateway_fakes import alive
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

HOST = "lab-gw"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def ledger_lines(gateway):
    """The gateway host's ledger, one dict a line ([] when there is none)."""
    path = Path(_ledger_core.ledger_path(str(gateway.ledger_dir), HOST))
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def two_instance_gateway(gateway):
    """The lab's layout: two instances behind a front, the original config (no general fallback); its bytes."""
    original = gateway.write_config()
    gateway.add_instance("litellm-a")
    gateway.add_instance("litellm-b")
    gateway.add_front()
    assert gateway.fallbacks() == {"litellm-a": [], "litellm-b": []}
    return original


def added_args(gateway, content, **module_args):
    """``state: added`` with ``content``, the arguments both modules take and ``module_args``, the module's own."""
    return dict(state="added", config_path=str(gateway.config_path), content=content, instances=gateway.instances,
                front=gateway.front, admin_key_file=str(gateway.key_file), public_model="small", ready_timeout_s=30,
                drain_timeout_s=15, ledger_dir=str(gateway.ledger_dir), ledger_host=HOST, run_id="run1", **module_args)


def fallback_added_args(gateway, original, **change):
    """gateway_fallback's ``added``: the general fallback small -> large; ``change`` replaces any argument."""
    content = _litellm_config.with_fallback(original.decode(), "small", "large")
    return dict(added_args(gateway, content, target_model="large"), **change)


def models_added_args(gateway, original, **change):
    """gateway_models' ``added``: the model solo-lab-b on the small backend; ``change`` replaces any argument."""
    solo = [{"name": "solo-lab-b", "model": "small-model", "api_base": gateway.backends["small"].api_base}]
    content = _litellm_config.with_roles(original.decode(), solo)
    return dict(added_args(gateway, content, models=["solo-lab-b"]), **change)


def removed_args(gateway):
    return dict(state="removed", config_path=str(gateway.config_path), ledger_dir=str(gateway.ledger_dir),
                ledger_host=HOST)


def added_and_checked(gateway, main, added_args):
    """Run a module's ``added`` on the lab's layout and check what every ``added`` leaves: the config replaced by
    the content, its mode kept; the ledger entry, ``pending`` before the change, then ``applied``, with the
    original's sha256 and its backups, 0600 and byte-identical to the originals; the front's upstream file the
    original again, after one drain per instance; each instance restarted in turn, drained and warmed up; no key in
    the result. Returns the original config's bytes, the arguments and the result."""
    original = two_instance_gateway(gateway)
    upstream = Path(gateway.front["upstream_file"]).read_bytes()
    args = added_args(gateway, original)
    content = args["content"].encode()
    before = gateway.pids()

    failed, result = run_module(main, args)

    assert not failed, result.get("msg", result)
    assert result["changed"] is True
    assert gateway.config_path.read_bytes() == content
    assert stat.S_IMODE(gateway.config_path.stat().st_mode) == 0o640
    assert (result["original_sha256"], result["config_sha256"]) == (sha256(original), sha256(content))
    lines = ledger_lines(gateway)
    assert [(line["id"], line["state"], line["kind"], line["run_id"]) for line in lines] == [
        (result["entry_id"], "pending", "gateway_config", "run1"), (result["entry_id"], "applied", "gateway_config",
                                                                    "run1")]
    params = lines[0]["params"]
    assert lines[1]["params"] == params
    assert (params["original_sha256"], params["front_original_sha256"]) == (sha256(original), sha256(upstream))
    assert params["backup_path"] == result["backup_path"]
    backup_dir = gateway.ledger_dir.parent / "backup"
    assert Path(params["backup_path"]).parent == backup_dir == Path(params["front_backup_path"]).parent
    assert (params["config_path"], params["admin_key_file"], params["public_model"], params["original_fallbacks"]) \
        == (str(gateway.config_path), str(gateway.key_file), "small", [])
    assert [i["name"] for i in params["instances"]] == ["litellm-a", "litellm-b"]
    assert params["front"] == gateway.front
    for backup, data in ((params["backup_path"], original), (params["front_backup_path"], upstream)):
        assert Path(backup).read_bytes() == data
        assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    assert Path(gateway.front["upstream_file"]).read_bytes() == upstream
    assert len(gateway.reloads()) == 4 and gateway.reloads()[-1] == upstream.decode()
    assert [s["instance"] for s in result["steps"]] == ["litellm-a", "litellm-b"]
    assert all(step["drained"] and step["warmup_status"] == 200 for step in result["steps"])
    assert result["seconds"] == pytest.approx(sum(s["seconds"] for s in result["steps"]), abs=0.01)
    after = gateway.pids()
    assert all(after[name] != before[name] and alive(after[name]) for name in after)
    assert gateway.key not in json.dumps(result)
    return original, args, result

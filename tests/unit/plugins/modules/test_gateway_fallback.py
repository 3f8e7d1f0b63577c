# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the gateway_fallback module through main(), on a real loopback gateway (gateway_fakes.Gateway): fake
LiteLLM 1.108.7 instances that read their YAML config at start and forward each chat request to a real backend
server on 127.0.0.1, and a fake nginx master in front of them. ``added`` really restarts the instances one at a time
and ``removed`` really puts the original bytes back; every process a test starts is killed by its pid at its end."""

import json
import stat
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.plugins.modules import gateway_fallback
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.gateway_fakes import alive, free_port
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.gateway_change_helpers import (
    HOST,
    added_and_checked,
    fallback_added_args,
    ledger_lines,
    removed_args,
    sha256,
    two_instance_gateway,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

# --- checked ------------------------------------------------------------------------------------------------------


def checked_args(gateway, instance, **change):
    args = dict(state="checked", public_url=instance["url"] + "/", public_model="small", target_model="large",
                api_key_file=str(gateway.key_file), public_backends=[gateway.backends["small"].api_base],
                target_backends=[gateway.backends["large"].api_base], request_timeout_s=5)
    args.update(change)
    return args


def test_checked_reports_the_route(gateway):
    gateway.write_config()
    instance = gateway.add_instance("litellm-a")
    failed, result = run_module(gateway_fallback.main, checked_args(gateway, instance))
    assert not failed, result.get("msg", result)
    assert result["changed"] is False
    route = result["route"]
    assert set(route) == {"ready_s", "models", "target_reply", "public_reply"}
    assert 0 <= route["ready_s"] < 5
    assert route["models"] == ["small", "large"]
    for name, role in (("target_reply", "large"), ("public_reply", "small")):
        reply = route[name]
        assert set(reply) == {"status", "api_base", "model_group", "elapsed_s"}
        assert (reply["status"], reply["api_base"], reply["model_group"]) == (
            200, gateway.backends[role].api_base, role)
        assert 0 < reply["elapsed_s"] < 5
    # real requests went through the gateway to each role's own backend
    assert [r["model"] for r in gateway.backends["large"].requests] == ["large-model"]
    assert [r["model"] for r in gateway.backends["small"].requests] == ["small-model"]
    assert result["message"] == (f"the public route {instance['url']} is ready, accepts the key, and serves small "
                                 "and large from their own backends")
    assert gateway.key not in json.dumps(result)


def test_checked_public_url_that_does_not_answer(gateway):
    url = f"http://127.0.0.1:{free_port()}"
    failed, result = run_module(gateway_fallback.main, checked_args(gateway, {"url": url}, request_timeout_s=0.3))
    assert failed
    assert result["msg"].startswith(f"Nothing was changed: the public route {url} does not answer (")
    assert "Connection refused" in result["msg"]
    assert result["msg"].endswith("Expected its /health/readiness to answer 200: is the gateway running, and is "
                                  "inferlab_public_url right?")


@pytest.mark.parametrize(("database", "status", "said"), [
    pytest.param(False, 400, '{"error": {"message": "No connected db.", "type": "no_db_connection", "param": null, '
                             '"code": "400"}}', id="no_db_400"),
    pytest.param(True, 401, '{"error": {"message": "Authentication Error, Invalid proxy server token passed. '
                            'Received API Key = <key>", "type": "auth_error", "param": "None", "code": "401"}}',
                 id="db_401"),
])
def test_checked_refuses_a_wrong_key(gateway, tmp_path, database, status, said):
    gateway.write_config(database=database)
    instance = gateway.add_instance("litellm-a")
    wrong = tmp_path / "client.key"
    wrong.write_text("sk-client-wrong-9876\n")
    failed, result = run_module(gateway_fallback.main, checked_args(gateway, instance, api_key_file=str(wrong)))
    assert failed
    assert result["msg"] == (f"Nothing was changed: the gateway refused the client key from {wrong}: GET "
                             f"{instance['url']}/v1/models answered HTTP {status}: {said}. Expected a key the gateway "
                             "accepts; set inferlab_public_api_key_file to the clients' key file.")
    assert "sk-client-wrong-9876" not in json.dumps(result)
    assert gateway.key not in json.dumps(result)


def test_checked_key_file_that_is_missing(gateway, tmp_path):
    gateway.write_config()
    instance = gateway.add_instance("litellm-a")
    failed, result = run_module(gateway_fallback.main,
                                checked_args(gateway, instance, api_key_file=str(tmp_path / "absent.key")))
    assert failed
    assert result["msg"] == (f"Nothing was changed: cannot read the API key file {tmp_path / 'absent.key'}: No such "
                             "file or directory (inferlab_public_api_key_file)")


@pytest.mark.parametrize(("change", "role", "variable"), [
    pytest.param({"public_model": "medium"}, "medium", "inferlab_public_model", id="public"),
    pytest.param({"target_model": "huge"}, "huge", "inferlab_fallback_target_model", id="target"),
])
def test_checked_role_missing_from_the_model_list(gateway, change, role, variable):
    gateway.write_config()
    instance = gateway.add_instance("litellm-a")
    failed, result = run_module(gateway_fallback.main, checked_args(gateway, instance, **change))
    assert failed
    assert result["msg"] == (f"Nothing was changed: the gateway at {instance['url']} lists the roles small, large "
                             f"for this key, not {role!r}; set {variable}.")
    assert gateway.backends["small"].requests == [] and gateway.backends["large"].requests == []


def test_checked_target_request_that_fails(gateway):
    gateway.write_config()
    instance = gateway.add_instance("litellm-a")
    gateway.backends["large"].stop()
    failed, result = run_module(gateway_fallback.main, checked_args(gateway, instance))
    assert failed
    assert result["msg"].startswith(f"Nothing was changed: a real request for the fallback target 'large' through "
                                    f"the gateway at {instance['url']} answered HTTP 500: ")
    assert "Connection error.. Received Model Group=large" in result["msg"]
    reply = result["route"]["target_reply"]
    assert (reply["status"], reply["api_base"], reply["model_group"]) == (500, None, None)
    assert "public_reply" not in result["route"]
    assert gateway.key not in json.dumps(result)


def test_checked_public_reply_from_another_role_backend(gateway):
    """The public role's backend is down and the gateway already has a general fallback: the reply comes from the
    fallback target's backend, so the route is not healthy enough to start an experiment."""
    gateway.write_config(fallback=True)
    instance = gateway.add_instance("litellm-a")
    gateway.backends["small"].stop()
    failed, result = run_module(gateway_fallback.main, checked_args(gateway, instance))
    assert failed
    large, small = gateway.backends["large"].api_base, gateway.backends["small"].api_base
    assert result["msg"] == (f"Nothing was changed: the request for the public role 'small' was served by {large}, "
                             f"expected one of its own backends {small} (x-litellm-model-api-base); the route must "
                             "be healthy before an experiment.")
    reply = result["route"]["public_reply"]
    assert (reply["status"], reply["api_base"], reply["model_group"]) == (200, large, "large")
    assert result["route"]["target_reply"]["api_base"] == large
    assert [r["model"] for r in gateway.backends["large"].requests] == ["large-model", "large-model"]
    assert gateway.key not in json.dumps(result)


# --- added --------------------------------------------------------------------------------------------------------


def test_added(gateway):
    original, args, result = added_and_checked(gateway, gateway_fallback.main, fallback_added_args)
    # each instance restarted reporting the fallback
    assert [step["fallbacks"] for step in result["steps"]] == [["large"], ["large"]]
    assert result["fallbacks"] == {"litellm-a": ["large"], "litellm-b": ["large"]}
    assert gateway.fallbacks() == result["fallbacks"]
    assert result["message"] == "added the fallback small -> large and restarted 2 instances one at a time"
    after = gateway.pids()

    # a second `added` finds the entry and the instances carrying the fallback: nothing to do
    failed, again = run_module(gateway_fallback.main, args)
    assert not failed, again
    assert again["changed"] is False
    assert (again["entry_id"], again["backup_path"]) == (result["entry_id"], result["backup_path"])
    assert (again["original_sha256"], again["config_sha256"]) == (sha256(original), sha256(args["content"].encode()))
    assert again["fallbacks"] == {"litellm-a": ["large"], "litellm-b": ["large"]}
    assert again["message"] == f"the fallback is already added (ledger entry {result['entry_id']})"
    assert len(ledger_lines(gateway)) == 2
    assert gateway.pids() == after


def test_added_fails_before_any_change_without_the_admin_key(gateway, tmp_path):
    original = two_instance_gateway(gateway)
    before = gateway.pids()
    missing = tmp_path / "no-such.key"
    args = fallback_added_args(gateway, original, admin_key_file=str(missing))
    failed, result = run_module(gateway_fallback.main, args)
    assert failed
    assert result["msg"] == f"Nothing was changed: cannot read the API key file {missing}: No such file or directory"
    assert ledger_lines(gateway) == [] and not gateway.ledger_dir.exists()
    assert not (gateway.ledger_dir.parent / "backup").exists()
    assert gateway.config_path.read_bytes() == original
    assert gateway.pids() == before and gateway.reloads() == []


def test_added_that_fails_midway_then_removed(gateway):
    """Both backends down: the first instance comes back with the fallback but its warm-up answers 500, so the
    module fails with the entry applied and the front restored. Once the backends are back, `removed` restarts only
    the instance that carries the fallback."""
    original = two_instance_gateway(gateway)
    upstream = Path(gateway.front["upstream_file"]).read_bytes()
    before = gateway.pids()
    for backend in gateway.backends.values():
        backend.stop()
    # the warm-up repeats a server error until the ready timeout: 5 s of them, not the other tests' 30
    failed, result = run_module(gateway_fallback.main, fallback_added_args(gateway, original, ready_timeout_s=5))
    assert failed
    assert result["msg"].startswith(f"the config with the fallback is written (ledger entry {result['entry_id']}), "
                                    "but applying it failed: instance litellm-a: the warm-up request for small "
                                    "answered HTTP 500: ")
    assert result["msg"].endswith("The restore (playbooks/restore.yml) puts the original back.")
    assert [line["state"] for line in ledger_lines(gateway)] == ["pending", "applied"]
    assert Path(gateway.front["upstream_file"]).read_bytes() == upstream
    assert gateway.reloads()[-1] == upstream.decode()
    midway = gateway.pids()
    assert midway["litellm-a"] != before["litellm-a"] and midway["litellm-b"] == before["litellm-b"]
    assert gateway.fallbacks() == {"litellm-a": ["large"], "litellm-b": []}

    for backend in gateway.backends.values():
        backend.start()
    failed, removed = run_module(gateway_fallback.main, removed_args(gateway))
    assert not failed, removed
    assert removed["undone"] == [result["entry_id"]] and removed["byte_identical"] is True
    assert removed["message"].endswith("; restarted litellm-a with it")
    after = gateway.pids()
    assert after["litellm-a"] != midway["litellm-a"] and after["litellm-b"] == before["litellm-b"]
    assert gateway.fallbacks() == {"litellm-a": [], "litellm-b": []}
    assert gateway.config_path.read_bytes() == original


# --- removed ------------------------------------------------------------------------------------------------------


def test_removed_after_added(gateway):
    original = two_instance_gateway(gateway)
    upstream = Path(gateway.front["upstream_file"]).read_bytes()
    failed, added = run_module(gateway_fallback.main, fallback_added_args(gateway, original))
    assert not failed, added
    with_fallback = gateway.pids()

    failed, result = run_module(gateway_fallback.main, removed_args(gateway))

    assert not failed, result.get("msg", result)
    assert result["changed"] is True
    assert result["undone"] == [added["entry_id"]]
    assert result["byte_identical"] is True
    assert result["config_sha256"] == result["original_sha256"] == sha256(original)
    assert gateway.config_path.read_bytes() == original
    assert stat.S_IMODE(gateway.config_path.stat().st_mode) == 0o640
    assert Path(gateway.front["upstream_file"]).read_bytes() == upstream
    assert result["fallbacks"] == {"litellm-a": [], "litellm-b": []}
    assert gateway.fallbacks() == result["fallbacks"]
    after = gateway.pids()
    assert all(after[name] != with_fallback[name] and alive(after[name]) for name in after)
    assert result["message"] == (f"the config {gateway.config_path} restored from {added['backup_path']}; the "
                                 f"upstream file {gateway.front['upstream_file']} is the original; restarted "
                                 "litellm-a, litellm-b with it")
    lines = ledger_lines(gateway)
    assert [line["state"] for line in lines] == ["pending", "applied", "undone"]
    assert lines[-1]["id"] == added["entry_id"] and "error" not in lines[-1]
    # the backups stay, as evidence
    assert Path(added["backup_path"]).read_bytes() == original

    failed, again = run_module(gateway_fallback.main, removed_args(gateway))
    assert not failed, again
    assert again["changed"] is False and again["undone"] == []
    assert again["byte_identical"] is True and again["config_sha256"] == sha256(original)
    assert again["message"] == f"no open gateway_config entry for {gateway.config_path}: nothing to undo"
    assert again["fallbacks"] == {"litellm-a": [], "litellm-b": []}
    assert len(ledger_lines(gateway)) == 3
    assert gateway.pids() == after


def test_removed_leaves_the_other_config_entries_alone(gateway, tmp_path):
    """Only this config's entries count: an entry of another config path in the same ledger is not undone."""
    gateway.write_config()
    other = dict(kind="litellm", config_path=str(tmp_path / "other.yaml"), original_sha256="0" * 64,
                 backup_path=str(tmp_path / "backup" / "other.yaml.1"), instances=[gateway.add_instance(
                     "litellm-a", start=False)], front={}, admin_key_file=str(gateway.key_file), public_model="small")
    _ledger_core.record(str(gateway.ledger_dir), HOST, "gateway_config", other)
    failed, result = run_module(gateway_fallback.main, removed_args(gateway))
    assert failed and result["msg"].endswith(f"has no gateway_config entry for {gateway.config_path}: nothing to "
                                             "remove")
    assert [line["state"] for line in ledger_lines(gateway)] == ["pending"]


# --- a config file that is missing ----------------------------------------------------------------------------


def test_added_with_a_config_that_does_not_exist_fails_cleanly(gateway):
    original = gateway.write_config()
    gateway.add_instance("litellm-a", start=False)
    missing = gateway.dir / "no-such.yaml"
    failed, result = run_module(gateway_fallback.main, fallback_added_args(gateway, original, config_path=str(missing)))
    assert failed and str(missing) in result["msg"] and result["msg"].startswith("Nothing was changed")
    assert not gateway.ledger_dir.exists()


def test_removed_with_a_config_that_is_gone_fails_cleanly(gateway):
    gateway.write_config()
    instance = gateway.add_instance("litellm-a", start=False)
    params = dict(kind="litellm", config_path=str(gateway.config_path),
                  original_sha256=sha256(gateway.config_path.read_bytes()),
                  backup_path=str(gateway.dir / "state" / "backup" / "litellm.yaml.1"), instances=[instance], front={},
                  admin_key_file=str(gateway.key_file), public_model="small")
    entry = _ledger_core.record(str(gateway.ledger_dir), HOST, "gateway_config", params)
    _ledger_core.mark(str(gateway.ledger_dir), HOST, entry["id"], "undone")
    gateway.config_path.unlink()
    failed, result = run_module(gateway_fallback.main, removed_args(gateway))
    assert failed and str(gateway.config_path) in result["msg"] and "No such file" in result["msg"]


def test_added_refuses_an_upstream_file_that_cannot_drain_an_instance_before_any_change(gateway):
    original = gateway.write_config()
    gateway.add_instance("litellm-a", start=False)
    gateway.add_instance("litellm-b", start=False)
    front = gateway.add_front()
    Path(front["upstream_file"]).write_text("server 127.0.0.1:1 max_fails=0;\n")  # neither instance is listed
    failed, result = run_module(gateway_fallback.main, fallback_added_args(gateway, original))
    assert failed and result["msg"].startswith("Nothing was changed: instance litellm-a")
    assert not gateway.ledger_dir.exists()
    assert gateway.config_path.read_bytes() == original

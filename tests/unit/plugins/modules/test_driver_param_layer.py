# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""driver_param_layer through main(), on a copy of the development VM's /sys/module for virtio_net and tcp_cubic
(tests/unit/fixtures/sys-module, its read-only modes set as sysfs shows them): each write recorded before it is
made, undone exactly, idempotent, check mode, and the refusals (a load-time parameter, a driver not loaded, a
parameter it does not have, a value someone else set since)."""

import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.plugins.modules import driver_param_layer
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, run_module

READ_ONLY = ("virtio_net/parameters/csum", "virtio_net/parameters/gso", "virtio_net/parameters/napi_weight",
             "tcp_cubic/parameters/bic_scale")


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / "sys"
    shutil.copytree(FIXTURES / "sys-module", root)
    (root / "README.md").unlink()
    for path in READ_ONLY:
        (root / "module" / path).chmod(0o444)
    return root


def args(root, tmp_path, **extra):
    return {"sysfs_root": str(root), "ledger_dir": str(tmp_path / "ledger"), "ledger_host": "lab-a",
            "run_id": "run-1", **extra}


def ledger(tmp_path):
    return _ledger_core.entries(str(tmp_path / "ledger"), "lab-a")


def test_a_parameter_recorded_first_then_undone_exactly(sysfs, tmp_path):
    napi_tx = sysfs / "module/virtio_net/parameters/napi_tx"
    failed, result = run_module(driver_param_layer.main, args(sysfs, tmp_path, driver="virtio_net",
                                                              settings={"napi_tx": "N"}))
    assert not failed, result
    item = result["parameters"]["napi_tx"]
    assert (item["previous"], item["value"], item["changed"]) == ("Y", "N", True)
    [entry] = ledger(tmp_path)
    assert (entry["kind"], entry["state"], entry["id"]) == ("driver_param", "applied", item["entry_id"])
    assert entry["params"] == {"driver": "virtio_net", "name": "napi_tx", "path": str(napi_tx), "previous": "Y",
                               "value": "N"}
    assert napi_tx.read_text() == "N\n"
    failed, again = run_module(driver_param_layer.main, args(sysfs, tmp_path, driver="virtio_net",
                                                             settings={"napi_tx": "N"}))
    assert not failed and again["changed"] is False and len(ledger(tmp_path)) == 1

    failed, result = run_module(driver_param_layer.main, args(sysfs, tmp_path, state="undone"))
    assert not failed, result
    assert [d["result"] for d in result["undone"]] == ["undone"] and napi_tx.read_text() == "Y\n"
    assert "virtio_net's parameter napi_tx back to 'Y' (from 'N')" in result["undone"][0]["message"]


def test_check_mode_reads_and_changes_nothing(sysfs, tmp_path):
    failed, result = run_module(driver_param_layer.main, args(sysfs, tmp_path, driver="tcp_cubic",
                                                              settings={"hystart": 0}, _ansible_check_mode=True))
    assert not failed and result["changed"] is True and result["parameters"]["hystart"]["entry_id"] is None
    assert ledger(tmp_path) == [] and (sysfs / "module/tcp_cubic/parameters/hystart").read_text() == "1\n"


@pytest.mark.parametrize("driver, name, expected", [
    ("virtio_net", "gso", "virtio_net's parameter gso is read-only while it is loaded (mode 0444): it is set when "
                          "the driver loads, so changing it is a reload with the parameter, not a write"),
    ("virtio_net", "no_such", "virtio_net has no parameter no_such"),
    ("ixgbe", "allow_unsupported_sfp", "ixgbe is not loaded here"),
    ("virtio_net", "../../tcp_cubic/parameters/beta", "is not a parameter name"),
])
def test_a_parameter_it_cannot_set_changes_nothing_and_says_why(sysfs, tmp_path, driver, name, expected):
    failed, result = run_module(driver_param_layer.main, args(sysfs, tmp_path, driver=driver,
                                                              settings={name: "1"}))
    assert failed and expected in result["msg"] and "Nothing was changed" in result["msg"]
    assert ledger(tmp_path) == []


def test_a_value_someone_else_set_since_is_left_alone_with_an_error(sysfs, tmp_path):
    beta = sysfs / "module/tcp_cubic/parameters/beta"
    run_module(driver_param_layer.main, args(sysfs, tmp_path, driver="tcp_cubic", settings={"beta": 512}))
    beta.write_text("600\n")  # another operator's change
    failed, result = run_module(driver_param_layer.main, args(sysfs, tmp_path, state="undone"))
    assert failed
    assert "tcp_cubic's parameter beta is '600' now, neither the '512' inferlab wrote nor the '717' it found" in \
        result["msg"]
    assert beta.read_text() == "600\n" and [e["state"] for e in ledger(tmp_path)] == ["undo_failed"]


def test_applied_needs_the_driver(sysfs, tmp_path):
    failed, result = run_module(driver_param_layer.main, args(sysfs, tmp_path, settings={"beta": 1}))
    assert failed and "state is applied but all of the following are missing: driver" in result["msg"]


@pytest.mark.parametrize("params, expected", [
    ({"driver": "virtio_net", "name": "napi_tx", "path": "/sys/module/virtio_net/parameters/gso", "previous": "Y",
      "value": "N"}, "must be the absolute path of the parameter (ending /module/virtio_net/parameters/napi_tx)"),
    ({"driver": "virtio net", "name": "napi_tx", "path": "/sys/module/x/parameters/napi_tx", "previous": "Y",
      "value": "N"}, "'virtio net' is not a driver name"),
    ({"driver": "virtio_net", "name": "napi_tx", "path": "/sys/module/virtio_net/parameters/napi_tx",
      "previous": True, "value": "N"}, '"previous" of a driver_param entry must be the value as text'),
])
def test_the_kinds_check_refuses_malformed_params(params, expected):
    with pytest.raises(_ledger_core.LedgerError) as raised:
        _ledger_core.check_kind("driver_param", params)
    assert expected in str(raised.value)

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sysctl_layer through main(), on a copy of the development VM's /proc/sys/net (tests/unit/fixtures/proc-sys): each
write recorded before it is made, undone exactly, idempotent, check mode, and the refusals (a name outside the
transport, a sysctl this kernel does not have, a value someone else set since)."""

import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_settings, _ledger_undo
from ansible_collections.inferlab.distributed.plugins.modules import sysctl_layer
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES, run_module

WMEM = "net.ipv4.tcp_wmem"


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "proc-sys"
    shutil.copytree(FIXTURES / "proc-sys", root)
    (root / "README.md").unlink()
    return root


def args(tree, tmp_path, **extra):
    return {"proc_sys_root": str(tree), "ledger_dir": str(tmp_path / "ledger"), "ledger_host": "lab-a",
            "run_id": "run-1", **extra}


def ledger(tmp_path):
    return _ledger_core.entries(str(tmp_path / "ledger"), "lab-a")


def test_a_write_is_recorded_first_then_undone_exactly(tree, tmp_path):
    original = (tree / "net/ipv4/tcp_wmem").read_text()
    assert original == "4096\t16384\t4194304\n"  # the kernel's own format, tabs and all
    failed, result = run_module(sysctl_layer.main, args(tree, tmp_path, settings={WMEM: "4096 16384 8388608"}))
    assert not failed, result
    assert result["changed"] is True
    item = result["sysctls"][WMEM]
    assert (item["previous"], item["value"], item["changed"]) == ("4096 16384 4194304", "4096 16384 8388608", True)
    [entry] = ledger(tmp_path)
    assert (entry["kind"], entry["state"], entry["id"]) == ("sysctl", "applied", item["entry_id"])
    assert entry["params"] == {"name": WMEM, "path": str(tree / "net/ipv4/tcp_wmem"),
                               "previous": "4096 16384 4194304", "value": "4096 16384 8388608"}
    assert (tree / "net/ipv4/tcp_wmem").read_text() == "4096 16384 8388608\n"

    failed, result = run_module(sysctl_layer.main, args(tree, tmp_path, state="undone"))
    assert not failed, result
    assert result["changed"] is True and [d["result"] for d in result["undone"]] == ["undone"]
    assert _ledger_settings.sysctl_text((tree / "net/ipv4/tcp_wmem").read_text()) == "4096 16384 4194304"
    assert [e["state"] for e in ledger(tmp_path)] == ["undone"]


def test_a_second_run_changes_nothing_and_two_layers_unwind_newest_first(tree, tmp_path):
    first = args(tree, tmp_path, settings={WMEM: "4096 16384 8388608"})
    assert run_module(sysctl_layer.main, first)[1]["changed"] is True
    failed, again = run_module(sysctl_layer.main, first)
    assert not failed and again["changed"] is False and len(ledger(tmp_path)) == 1
    # whitespace is folded before comparing: the kernel's tabs equal the caller's spaces
    assert run_module(sysctl_layer.main, args(tree, tmp_path, settings={WMEM: "4096\t16384  8388608"}))[1][
        "changed"] is False
    run_module(sysctl_layer.main, args(tree, tmp_path, settings={WMEM: "4096 16384 65536"}))
    assert [e["params"]["previous"] for e in ledger(tmp_path)] == ["4096 16384 4194304", "4096 16384 8388608"]
    failed, result = run_module(sysctl_layer.main, args(tree, tmp_path, state="undone"))
    assert not failed, result
    assert _ledger_settings.sysctl_text((tree / "net/ipv4/tcp_wmem").read_text()) == "4096 16384 4194304"


def test_check_mode_reads_and_changes_nothing(tree, tmp_path):
    failed, result = run_module(sysctl_layer.main, args(tree, tmp_path, settings={WMEM: "1 2 3"},
                                                        _ansible_check_mode=True))
    assert not failed and result["changed"] is True and result["sysctls"][WMEM]["entry_id"] is None
    assert ledger(tmp_path) == [] and (tree / "net/ipv4/tcp_wmem").read_text() == "4096\t16384\t4194304\n"


@pytest.mark.parametrize("name, expected", [
    ("kernel.panic", "'kernel.panic' is not a transport sysctl: expected a name under net.core, net.ipv4 or "
                     "net.ipv6, for example net.ipv4.tcp_wmem. Nothing was changed"),
    ("net.ipv4..tcp_wmem", "'net.ipv4..tcp_wmem' is not a transport sysctl"),
    ("net.ipv4.tcp_no_such_thing", "net.ipv4.tcp_no_such_thing does not exist here"),
])
def test_a_name_it_cannot_take_changes_nothing_and_says_why(tree, tmp_path, name, expected):
    failed, result = run_module(sysctl_layer.main, args(tree, tmp_path, settings={WMEM: "1 2 3", name: "1"}))
    assert failed and expected in result["msg"]
    assert ledger(tmp_path) == [] and (tree / "net/ipv4/tcp_wmem").read_text() == "4096\t16384\t4194304\n"


def test_a_value_someone_else_set_since_is_left_alone_with_an_error(tree, tmp_path):
    run_module(sysctl_layer.main, args(tree, tmp_path, settings={"net.core.wmem_max": "8388608"}))
    (tree / "net/core/wmem_max").write_text("1048576\n")  # another operator's change
    failed, result = run_module(sysctl_layer.main, args(tree, tmp_path, state="undone"))
    assert failed
    assert "net.core.wmem_max is '1048576' now, neither the '8388608' inferlab wrote nor the '4194304' it found" in \
        result["msg"]
    assert (tree / "net/core/wmem_max").read_text() == "1048576\n"
    assert [e["state"] for e in ledger(tmp_path)] == ["undo_failed"]


def test_a_pending_entry_whose_write_never_happened_undoes_as_a_no_op(tree, tmp_path):
    path = str(tree / "net/ipv4/tcp_autocorking")
    _ledger_core.record(str(tmp_path / "ledger"), "lab-a", "sysctl",
                        {"name": "net.ipv4.tcp_autocorking", "path": path, "previous": "1", "value": "0"})
    result = _ledger_undo.undo(str(tmp_path / "ledger"), "lab-a")
    assert result["failed"] == [] and "is '1' already: nothing to put back" in result["details"][0]["message"]


@pytest.mark.parametrize("params, expected", [
    ({"name": "vm.swappiness", "path": "/proc/sys/vm/swappiness", "previous": "60", "value": "1"},
     "must be a transport sysctl under net.core, net.ipv4 or net.ipv6"),
    ({"name": WMEM, "path": "/proc/sys/net/ipv4/tcp_rmem", "previous": "1", "value": "2"},
     "must be the absolute path of net.ipv4.tcp_wmem (ending /net/ipv4/tcp_wmem)"),
    ({"name": WMEM, "path": "/proc/sys/net/ipv4/tcp_wmem", "previous": None, "value": "2"},
     '"previous" of a sysctl entry must be the value as text'),
    ({"name": WMEM, "path": "/proc/sys/net/ipv4/tcp_wmem", "previous": "1", "value": "2", "extra": 1},
     "unknown params for a sysctl entry: extra"),
])
def test_the_kinds_check_refuses_malformed_params(params, expected):
    with pytest.raises(_ledger_core.LedgerError) as raised:
        _ledger_core.check_kind("sysctl", params)
    assert expected in str(raised.value)

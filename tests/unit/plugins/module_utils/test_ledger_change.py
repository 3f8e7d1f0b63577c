"""Tests of the ledger's write-ahead protocol of one change (``_ledger_undo.change``) on file entries."""

import json
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_undo

HOST = "lab-a"


def states(ledger_dir):
    lines = Path(_ledger_core.ledger_path(ledger_dir, HOST)).read_text().splitlines()
    return [json.loads(line)["state"] for line in lines]


def test_pending_is_on_disk_before_the_body_and_applied_after_it(tmp_path):
    ledger_dir, target = str(tmp_path / "ledger"), tmp_path / "made"
    with _ledger_undo.change(ledger_dir, HOST, "file", {"path": str(target), "existed": False}, run_id="r1") as entry:
        assert states(ledger_dir) == ["pending"]
        target.write_text("x")
    assert states(ledger_dir) == ["pending", "applied"] and entry.undone is None
    last = _ledger_core.entries(ledger_dir, HOST)[-1]
    assert last["id"] == entry.id == entry.line["id"] and last["run_id"] == "r1"


def test_what_the_change_learned_is_merged_into_the_applied_mark(tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    with _ledger_undo.change(ledger_dir, HOST, "sampler", {"pidfile": str(tmp_path / "p"), "cmdline": ["x"]}) as entry:
        entry.update(pid=4242, start_time=7)
    params = _ledger_core.entries(ledger_dir, HOST)[-1]["params"]
    assert (params["pid"], params["start_time"], params["pidfile"]) == (4242, 7, str(tmp_path / "p"))


@pytest.mark.parametrize("error", [OSError("disk"), KeyboardInterrupt()])
def test_an_error_undoes_the_change_and_goes_on(tmp_path, error):
    ledger_dir, target = str(tmp_path / "ledger"), tmp_path / "made"
    with pytest.raises(type(error)):
        with _ledger_undo.change(ledger_dir, HOST, "file", {"path": str(target), "existed": False}) as entry:
            target.write_text("x")
            raise error
    assert not target.exists() and states(ledger_dir) == ["pending", "undone"]
    assert entry.undone["undone"] == [entry.id]


def test_without_undo_on_error_an_error_leaves_the_entry_pending(tmp_path):
    ledger_dir, target = str(tmp_path / "ledger"), tmp_path / "made"
    with pytest.raises(OSError):
        with _ledger_undo.change(ledger_dir, HOST, "file", {"path": str(target), "existed": False},
                                 undo_on_error=False) as entry:
            target.write_text("x")
            raise OSError("disk")
    assert target.exists() and states(ledger_dir) == ["pending"] and entry.undone is None


def test_a_mark_that_fails_undoes_the_change(tmp_path, monkeypatch):
    ledger_dir, target = str(tmp_path / "ledger"), tmp_path / "made"

    def refuse(*_args, **_kwargs):
        raise _ledger_core.LedgerError("no mark")

    with pytest.raises(_ledger_core.LedgerError, match="no mark"):
        with _ledger_undo.change(ledger_dir, HOST, "file", {"path": str(target), "existed": False}):
            target.write_text("x")
            monkeypatch.setattr(_ledger_core, "mark", refuse)
    assert not target.exists() and states(ledger_dir) == ["pending", "undone"]


def test_a_refused_record_runs_nothing(tmp_path):
    with pytest.raises(_ledger_core.LedgerError, match="unknown ledger kind"):
        with _ledger_undo.change(str(tmp_path / "ledger"), HOST, "nope", {}):
            raise AssertionError("the body ran")

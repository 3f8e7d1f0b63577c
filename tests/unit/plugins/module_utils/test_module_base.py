# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the stateful modules' shared base on a stand-in for AnsibleModule: the dispatch to the state's method,
what every result carries, the commands and the ledger's open entries."""

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_undo, _module_base

HOST = "lab-a"


class Exited(Exception):
    pass


class Failed(Exception):
    pass


class FakeModule:
    """What the base uses of AnsibleModule; each command answers with the next of ``answers``."""

    def __init__(self, params, check_mode=False, answers=()):
        self.params, self.check_mode, self.answers, self.calls = params, check_mode, list(answers), []

    def exit_json(self, **result):
        raise Exited(result)

    def fail_json(self, **result):
        raise Failed(result)

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Thing(_module_base.StateModule):
    expected_errors = (_ledger_core.LedgerError, ValueError)

    def __init__(self, module):
        super().__init__(module)
        self.result_extras["mode"] = "lab"
        self.prepared = False

    def prepare(self):
        self.prepared = True

    def state_present(self):
        return {"changed": self.prepared}

    def state_broken(self):
        raise ValueError("no such thing")


def params(ledger_dir, state="present"):
    return {"state": state, "ledger_dir": ledger_dir, "ledger_host": HOST}


def test_run_dispatches_to_the_states_method_and_adds_the_extras(tmp_path):
    with pytest.raises(Exited) as done:
        Thing(FakeModule(params(str(tmp_path)))).run()
    assert done.value.args[0] == {"mode": "lab", "changed": True}


def test_an_expected_error_fails_with_its_message(tmp_path):
    with pytest.raises(Failed) as done:
        Thing(FakeModule(params(str(tmp_path), "broken"))).run()
    assert done.value.args[0] == {"msg": "no such thing", "mode": "lab"}


def test_commands_run_in_the_c_locale_unexpanded(tmp_path):
    module = FakeModule(params(str(tmp_path)), answers=[(0, "out\n", ""), (2, "", "bad\n"), OSError("gone")])
    thing = Thing(module)
    assert thing.checked_command(["show", "$HOME"], "cannot show") == "out\n"
    assert module.calls[0] == (["show", "$HOME"], {"cwd": None, "environ_update": {"LC_ALL": "C"},
                                                   "expand_user_and_vars": False})
    with pytest.raises(Failed) as done:
        thing.checked_command(["show", "secret"], "cannot show", shown=["show", "***"], entry_id="e1")
    assert done.value.args[0] == {"msg": "cannot show: show *** exited 2: bad", "mode": "lab", "rc": 2, "stdout": "",
                                  "stderr": "bad\n", "cmd": ["show", "***"], "entry_id": "e1"}
    with pytest.raises(_ledger_core.UndoError, match="^stop x could not run: gone$"):
        thing.undo_command(["stop", "x"], 30)
    assert module.calls[2][1]["handle_exceptions"] is False


def test_open_entries_and_their_undo(tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    made = [tmp_path / name for name in ("a", "b", "c")]
    ids = []
    for path in made:
        path.write_text("x")
        line = _ledger_core.record(ledger_dir, HOST, "file", {"path": str(path), "existed": False})
        ids.append(line["id"])
    _ledger_core.mark(ledger_dir, HOST, ids[0], "undone")
    thing = Thing(FakeModule(params(ledger_dir)))
    found = thing.open_entries(lambda e: e["params"]["path"] != str(made[2]))
    assert [e["id"] for e in found] == [ids[1]]
    result = thing.undo([ids[1]], _ledger_undo.UndoContext())
    assert result["undone"] == [ids[1]] and not made[1].exists() and made[2].exists()


def test_the_ledger_options_come_with_the_modules_own():
    spec = _module_base.ledger_argument_spec(name=dict(type="str"))
    assert spec == {"name": {"type": "str"}, "ledger_dir": {"type": "path", "required": True},
                    "ledger_host": {"type": "str", "required": True}, "run_id": {"type": "str"}}

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's default state directory: /var/lib/inferlab for root, the user's XDG state directory for anyone
else, and what every play that reads the controller's state gets through the lookup."""

import os

import pytest

from ansible_collections.inferlab.distributed.plugins.lookup import controller_state_dir
from ansible_collections.inferlab.distributed.plugins.lookup.controller_state_dir import default_state_dir


@pytest.mark.parametrize(("euid", "environ", "expected"), [
    (0, {"HOME": "/root", "XDG_STATE_HOME": "/root/.state"}, "/var/lib/inferlab"),
    (1000, {"HOME": "/home/op"}, "/home/op/.local/state/inferlab"),
    (1000, {"HOME": "/home/op", "XDG_STATE_HOME": "/srv/op-state"}, "/srv/op-state/inferlab"),
    (1000, {"HOME": "/home/op", "XDG_STATE_HOME": "relative/state"}, "/home/op/.local/state/inferlab"),
    (1000, {"HOME": "/home/op", "XDG_STATE_HOME": ""}, "/home/op/.local/state/inferlab"),
])
def test_root_keeps_var_lib_and_a_user_gets_their_state_directory(euid, environ, expected):
    assert default_state_dir(euid, environ) == expected


def test_the_lookup_answers_for_the_user_running_the_controller(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("HOME", "/home/op")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    lookup = controller_state_dir.LookupModule()
    assert lookup.run([], variables={}) == ["/home/op/.local/state/inferlab"]

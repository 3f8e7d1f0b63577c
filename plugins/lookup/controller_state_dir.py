# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: controller_state_dir
short_description: The controller's default state directory, for root and for any other user
version_added: 0.1.0
description:
  - Returns the directory the controller keeps its own state and ledger in when the inventory sets no
    C(inferlab_controller_state_dir) - V(/var/lib/inferlab) for root, else the user's state directory,
    C($XDG_STATE_HOME/inferlab) or C(~/.local/state/inferlab) (the XDG Base Directory rule) - so that a controller
    that is not root runs without writing under C(/var/lib).
  - Runs on the controller, where every play that reads the controller's state evaluates it.
author:
  - inferlab developers (@inferlab)
"""

EXAMPLES = r"""
- name: Show where the controller keeps its state
  ansible.builtin.debug:
    msg: "{{ inferlab_controller_state_dir | default(lookup('inferlab.distributed.controller_state_dir')) }}"
"""

RETURN = r"""
_raw:
  description: One absolute path.
  type: list
  elements: path
"""

import os

from ansible.plugins.lookup import LookupBase

ROOT_STATE_DIR = '/var/lib/inferlab'


def default_state_dir(euid, environ):
    """``/var/lib/inferlab`` for root; else ``$XDG_STATE_HOME/inferlab`` (an absolute one; a relative value is
    ignored, as the XDG rule says) or ``$HOME/.local/state/inferlab``."""
    if euid == 0:
        return ROOT_STATE_DIR
    state_home = environ.get('XDG_STATE_HOME', '')
    if not os.path.isabs(state_home):
        state_home = os.path.join(environ.get('HOME') or os.path.expanduser('~'), '.local', 'state')
    return os.path.join(state_home, 'inferlab')


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [default_state_dir(os.geteuid(), os.environ)]

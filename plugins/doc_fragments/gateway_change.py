# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The options of the modules that change a gateway's config for a run (gateway_fallback, gateway_models) through
    plugins/module_utils/_gateway_change.py: the gateway, its front, the restart's timeouts and procfs (the ledger
    and the run: the ledger fragment); and their diff mode, which the shared code makes (each module says what its
    check mode does)."""

    DOCUMENTATION = r"""
attributes:
  diff_mode:
    support: full
    details: The config before and after (V(added)) or before and after the undo (V(removed)), with the value of
      every key that names a key, token, secret or password, and a URL's password, shown as C(<redacted>).
options:
  kind:
    description:
      - The gateway kind.
    type: str
    choices: [litellm]
    default: litellm
  instances:
    description:
      - The gateway's instances, each C({name, url, manager, pidfile, start_argv, log, match}) for the V(process)
        manager or C({name, url, manager, unit}) for V(systemd) (inventory C(inferlab_gateway_instances)).
        Required for V(added).
    type: list
    elements: dict
  front:
    description:
      - The front, C({kind, upstream_file, pidfile}) (nginx), or C({}) for a single instance without one, whose
        restart is a brief outage.
    type: dict
    default: {}
  admin_key_file:
    description:
      - The key the gateway host uses for the warm-up requests, C(GET /v1/models) and C(GET /fallback/<role>), on
        the first line of this file on the gateway host. Required for V(added); recorded (the path only) in the
        ledger entry for the undo.
    type: path
  ready_timeout_s:
    description:
      - Seconds a restarted instance gets to answer C(/health/readiness).
    type: float
    default: 90
  drain_timeout_s:
    description:
      - Seconds the front's old workers get to finish their requests after a reload.
    type: float
    default: 30
  procfs_root:
    description:
      - Where procfs is mounted (the front's workers and the instances' pids are read below it).
    type: path
    default: /proc
notes:
  - The backups live in C(<ledger_dir>/../backup/), mode C(0600), and stay after the undo, as evidence.
"""

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of inferlab.distributed.heartbeat_check: reads the heartbeat's status file on the controller, in
this process (no module to ship, no fork: it runs at every stage's start). The judgement is
``_ledger_heartbeat.judge``, beside the heartbeat that writes the file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.plugins.action import ActionBase

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_heartbeat

# how often a waiting check reads the status file again
POLL_S = 0.2


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True  # it only reads
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars or {})
        args = self.validate_argument_spec(argument_spec={
            'status_file': {'type': 'path', 'required': True},
            'run_id': {'type': 'str'},
            'within_s': {'type': 'float', 'required': True},
            'wait_s': {'type': 'float', 'default': 0.0},
        })[1]
        deadline = time.monotonic() + args['wait_s']
        while True:
            try:
                status = _ledger_heartbeat.read_status(args['status_file'])
            except (OSError, ValueError) as exc:
                return dict(result, failed=True, msg=f"cannot read the heartbeat's status: {exc}")
            failed, waiting = _ledger_heartbeat.judge(status, time.time(), args['within_s'], run_id=args['run_id'])
            if failed or not waiting or args['wait_s'] <= 0:
                break
            if time.monotonic() >= deadline:
                failed = [f'{line} after {args["wait_s"]:g}s' for line in waiting]
                break
            time.sleep(POLL_S)
        hosts = (status or {}).get('hosts', {})
        if failed:
            return dict(result, failed=True, hosts=hosts, problems=failed,
                        msg=f"the dead man's switches are not all renewed (each host must renew within "
                            f"{args['within_s']:g}s, or its switch fires and undoes the run's changes): "
                            + '; '.join(failed))
        return dict(result, changed=False, hosts=hosts, problems=[],
                    msg=f'every switch renewed within {args["within_s"]:g}s' + (
                        f' ({len(waiting)} not due yet)' if waiting else ''))

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The renew processes of the experiment's heartbeat (plugins/module_utils/_ledger_heartbeat.py), one per host whose
dead man's switch is armed: the ledger script's ``renew`` on that host, reached the way Ansible reaches it.

A host the controller reaches locally (``ansible_connection: local``) gets the script itself; any other host gets
``ssh`` with the inventory's own connection settings (address, port, user, key, common and extra arguments), with
batch mode (no prompt can hang it) and keep-alives (a dead network ends the connection, so the renewals stop), and
``sudo -n`` in front when the host is reached with ``become`` (the renew file belongs to the user that armed the
switch)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

# ssh options of every renew connection: never prompt; end a connection that stops answering (3 x 10 s); its own
# connection, not a shared master whose life is another process's.
SSH_OPTIONS = ('-o', 'BatchMode=yes', '-o', 'ServerAliveInterval=10', '-o', 'ServerAliveCountMax=3',
               '-o', 'ControlMaster=no', '-o', 'ControlPath=none')


def renew_argv(host):
    """The renew command on ``host`` (``{python, script, renew_file, become}``)."""
    argv = [host['python'], host['script'], 'renew', '--renew-file', host['renew_file']]
    return (['sudo', '-n'] if host.get('become') else []) + argv


def child(host):
    """``{name, argv}`` of the renew process for one host (see the module docstring for the keys of ``host``)."""
    if host.get('connection') == 'local':
        return {'name': host['name'], 'argv': renew_argv(host)}
    argv = ['ssh'] + list(SSH_OPTIONS)
    if host.get('port'):
        argv += ['-p', str(host['port'])]
    if host.get('key_file'):
        argv += ['-i', host['key_file']]
    argv += shlex.split(host.get('ssh_common_args') or '') + shlex.split(host.get('ssh_extra_args') or '')
    if host.get('user'):
        argv += ['-l', host['user']]
    argv += [host.get('address') or host['name'], ' '.join(shlex.quote(a) for a in renew_argv(host))]
    return {'name': host['name'], 'argv': argv}


def children(hosts):
    return [child(host) for host in hosts]

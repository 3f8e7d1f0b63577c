# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The renew command of one host for the heartbeat of the dead man's switches
(plugins/module_utils/_ledger_heartbeat.py), from the connection Ansible resolved for that host (the
``renew_command`` action reads it from the connection plugin and its become plugin).

A host reached locally gets the ledger script's ``renew`` itself; a host reached over SSH gets the ssh command
Ansible would build (its executable, ``ssh_args``, host key checking, port, key file, user, ConnectTimeout, common and
extra arguments, address, in Ansible's order), led by options of the heartbeat's own that win over any later one:
batch mode (no prompt can hang it), keep-alives (a dead network ends the connection, so the renewals stop) and a
connection of its own (not a shared master whose life is another process's). Become puts a non-interactive
``sudo -n`` or ``doas -n`` in front of ``renew`` (the renew file belongs to the user that armed the switch). What a
heartbeat cannot do without a person (a password, a key given by content, a become method that prompts) and any
other connection plugin are refused, naming the setting and the fix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shlex

# ssh options of every renew connection, first so that they win (ssh keeps the first value it is given)
HEARTBEAT_SSH_OPTIONS = ('-o', 'BatchMode=yes', '-o', 'ServerAliveInterval=10', '-o', 'ServerAliveCountMax=3',
                         '-o', 'ControlMaster=no', '-o', 'ControlPath=none')
# what Ansible adds when it has no password to give (ansible.builtin.ssh)
NO_PASSWORD_OPTIONS = ('-o', 'KbdInteractiveAuthentication=no',
                       '-o', 'PreferredAuthentications=gssapi-with-mic,gssapi-keyex,hostbased,publickey',
                       '-o', 'PasswordAuthentication=no')
# the connection plugins the heartbeat can follow, by their transport
CONNECTIONS = ('ssh', 'local')
# the ssh plugin's settings a non-interactive heartbeat cannot use: (option, its variable, the fix)
REFUSED_SSH_OPTIONS = (
    ('password', 'ansible_password',
     'give the heartbeat a key: ansible_ssh_private_key_file, or a key in the ssh agent'),
    ('private_key', 'ansible_private_key',
     'give the key as a file (ansible_ssh_private_key_file) or put it in the ssh agent'),
    ('pkcs11_provider', 'ansible_ssh_pkcs11_provider', 'its PIN is a password: use a key file or the ssh agent'),
)


class RenewCommandError(Exception):
    """A host the heartbeat cannot renew non-interactively, with the setting to change."""


def _non_interactive(exe, become):
    """``exe`` with the become plugin's flags, never reading a password from the renew lines (no ``-S``) and never
    prompting (``-n``), as ``become_user``."""
    flags = [flag for flag in shlex.split(become.get('flags') or '') if flag not in ('-S', '--stdin')]
    user = ['-u', become['user']] if become.get('user') else []
    return [become.get('exe') or exe] + flags + ([] if '-n' in flags else ['-n']) + user


def _sudo(become):
    return _non_interactive('sudo', become)


def _doas(become):
    return _non_interactive('doas', become)


# become methods that run a plain command without a prompt, by their plugin's name: the argv put in front of renew
BECOME_METHODS = {'ansible.builtin.sudo': _sudo, 'community.general.doas': _doas}


def become_method(name):
    """The fully qualified name of a become plugin (``sudo`` is ``ansible.builtin.sudo``)."""
    if name.startswith('ansible.legacy.'):
        name = name[len('ansible.legacy.'):]
    return name if '.' in name else f'ansible.builtin.{name}'


def become_prefix(host, become):
    """The argv in front of ``renew`` on ``host`` for ``become`` (``{method, user, exe, flags, password}``, None
    without become)."""
    if not become:
        return []
    method = become_method(become['method'])
    if method not in BECOME_METHODS:
        raise RenewCommandError(
            f"{host}: the heartbeat cannot renew its switch through the become method {become['method']!r} "
            f'(ansible_become_method): it must run a plain command without a prompt, as '
            f'{" or ".join(sorted(BECOME_METHODS))} do; use one of them for this host, or connect as the user that '
            'owns the state directory without become')
    if become.get('password'):
        raise RenewCommandError(
            f'{host}: the heartbeat cannot type a become password (ansible_become_password, or --ask-become-pass): '
            f'allow the user to run the ledger script without one ({method} NOPASSWD) and drop the password')
    return BECOME_METHODS[method](become)


def renew_argv(renew):
    """The ledger script's ``renew`` (``{python, script, renew_file}``)."""
    return [renew['python'], renew['script'], 'renew', '--renew-file', renew['renew_file']]


def ssh_argv(host, ssh, remote_argv):
    """The ssh command that runs ``remote_argv`` on ``host`` as Ansible's ssh plugin would reach it, from that
    plugin's resolved options ``ssh`` (``host``, ``port``, ``remote_user``, ``private_key_file``, ``ssh_args``,
    ``ssh_common_args``, ``ssh_extra_args``, ``ssh_executable``, ``timeout``, ``host_key_checking``, and the refused
    ones of REFUSED_SSH_OPTIONS)."""
    for option, variable, fix in REFUSED_SSH_OPTIONS:
        if ssh.get(option):
            raise RenewCommandError(f'{host}: the heartbeat cannot use {variable} (it renews the switch without a '
                                    f'person, every minute of the run): {fix}')
    argv = [ssh.get('ssh_executable') or 'ssh'] + list(HEARTBEAT_SSH_OPTIONS)
    argv += shlex.split(ssh.get('ssh_args') or '')
    if ssh.get('host_key_checking') is False:
        argv += ['-o', 'StrictHostKeyChecking=no']
    if ssh.get('port') is not None:
        argv += ['-o', f'Port={ssh["port"]}']
    if ssh.get('private_key_file'):
        argv += ['-o', f'IdentityFile="{os.path.expanduser(ssh["private_key_file"])}"']
    argv += list(NO_PASSWORD_OPTIONS)
    if ssh.get('remote_user'):
        argv += ['-o', f'User="{ssh["remote_user"]}"']
    if ssh.get('timeout') is not None:
        argv += ['-o', f'ConnectTimeout={ssh["timeout"]}']
    argv += shlex.split(ssh.get('ssh_common_args') or '') + shlex.split(ssh.get('ssh_extra_args') or '')
    return argv + [ssh.get('host') or host, ' '.join(shlex.quote(arg) for arg in remote_argv)]


def renew_command(host, connection, ssh, become, renew):
    """``{name, argv}`` of the renew process of ``host``, reached through the connection plugin ``connection``
    (``{name, transport}``) with its options ``ssh`` (see ``ssh_argv``; ignored for a local one) and ``become`` (see
    ``become_prefix``), running ``renew`` (see ``renew_argv``)."""
    if connection['transport'] not in CONNECTIONS:
        raise RenewCommandError(
            f"{host}: the heartbeat cannot renew its switch through the connection plugin {connection['name']!r} "
            '(ansible_connection): it follows ssh and local only; reach this host with ansible.builtin.ssh')
    remote_argv = become_prefix(host, become) + renew_argv(renew)
    if connection['transport'] == 'local':
        return {'name': host, 'argv': remote_argv}
    return {'name': host, 'argv': ssh_argv(host, ssh, remote_argv)}

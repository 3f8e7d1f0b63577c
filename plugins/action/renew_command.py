# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of inferlab.distributed.renew_command: the heartbeat's renew command of the task's host (its
delegate), built from what Ansible resolved for it: the connection plugin's options and its become plugin, read here
on the controller; nothing reaches the host. The command itself: plugins/plugin_utils/_renew_command.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _renew_command

SSH_OPTIONS = ('host', 'port', 'remote_user', 'private_key_file', 'ssh_args', 'ssh_common_args', 'ssh_extra_args',
               'ssh_executable', 'timeout', 'host_key_checking') + tuple(
                   option for option, _variable, _fix in _renew_command.REFUSED_SSH_OPTIONS)


def _option(plugin, name):
    try:
        return plugin.get_option(name)
    except KeyError:  # a plugin without that option
        return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True  # it only reads Ansible's own settings

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec={
            'python': {'type': 'str', 'required': True},
            'script': {'type': 'str', 'required': True},
            'renew_file': {'type': 'str', 'required': True},
        })[1]
        host = self._task.delegate_to or task_vars['inventory_hostname']
        connection = self._connection
        ssh = {name: _option(connection, name) for name in SSH_OPTIONS}
        if ssh['password'] is None:
            ssh['password'] = self._play_context.password  # --ask-pass
        become = None
        if connection.become is not None:
            become = {'method': connection.become._load_name, 'user': _option(connection.become, 'become_user'),
                      'exe': _option(connection.become, 'become_exe'),
                      'flags': _option(connection.become, 'become_flags'),
                      'password': _option(connection.become, 'become_pass') or self._play_context.become_pass}
        try:
            child = _renew_command.renew_command(
                host, {'name': connection._load_name, 'transport': connection.transport}, ssh, become, args)
        except _renew_command.RenewCommandError as exc:
            return dict(result, failed=True, msg=str(exc))
        return dict(result, changed=False, child=child)

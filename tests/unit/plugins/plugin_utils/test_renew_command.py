# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heartbeat's renew command of a host from the options Ansible resolved for it (``_renew_command``): each ssh
setting where Ansible's ssh plugin puts it, behind the heartbeat's own options; local connections; become; and the
refusals of what a heartbeat cannot do without a person. That the action reads those options from Ansible itself:
plugins/test_renew_command_action.py."""

import pytest

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _renew_command as rc

RENEW = {"python": "/usr/bin/python3", "script": "/var/lib/inferlab/bin/inferlab_ledger.py",
         "renew_file": "/var/lib/inferlab/run/deadman.renew"}
REMOTE = ("/usr/bin/python3 /var/lib/inferlab/bin/inferlab_ledger.py renew --renew-file "
          "/var/lib/inferlab/run/deadman.renew")
SSH = {"name": "ansible.builtin.ssh", "transport": "ssh"}
# what the ssh plugin resolves with nothing set (its defaults, ansible.cfg's ssh_args aside)
DEFAULTS = {"host": "gpu-a", "port": None, "remote_user": None, "private_key_file": None, "ssh_args": "",
            "ssh_common_args": "", "ssh_extra_args": "", "ssh_executable": "ssh", "timeout": 10,
            "host_key_checking": True, "password": None, "private_key": None, "pkcs11_provider": ""}
OWN = ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", "-o", "ControlMaster=no",
       "-o", "ControlPath=none"]
NO_PASSWORD = ["-o", "KbdInteractiveAuthentication=no", "-o",
               "PreferredAuthentications=gssapi-with-mic,gssapi-keyex,hostbased,publickey", "-o",
               "PasswordAuthentication=no"]


def argv(become=None, connection=None, **ssh):
    return rc.renew_command("gpu-a", connection or SSH, dict(DEFAULTS, **ssh), become, RENEW)["argv"]


def test_with_nothing_set_the_command_is_ansibles_ssh_behind_the_heartbeats_own_options():
    assert argv() == ["ssh", *OWN, *NO_PASSWORD, "-o", "ConnectTimeout=10", "gpu-a", REMOTE]


@pytest.mark.parametrize("setting, expected", [
    # ansible_host / ansible_ssh_host / delegated vars: the plugin's host option, the last word before the command
    ({"host": "10.0.0.2"}, ["ssh", *OWN, *NO_PASSWORD, "-o", "ConnectTimeout=10", "10.0.0.2", REMOTE]),
    # ansible_port / ansible_ssh_port / remote_port
    ({"port": 2222}, ["ssh", *OWN, "-o", "Port=2222", *NO_PASSWORD, "-o", "ConnectTimeout=10", "gpu-a", REMOTE]),
    # ansible_user / ansible_ssh_user / remote_user in ansible.cfg / ANSIBLE_REMOTE_USER
    ({"remote_user": "ops"},
     ["ssh", *OWN, *NO_PASSWORD, "-o", 'User="ops"', "-o", "ConnectTimeout=10", "gpu-a", REMOTE]),
    # ansible_ssh_private_key_file / ansible_private_key_file / private_key_file in ansible.cfg, ~ expanded
    ({"private_key_file": "/keys/id_ed25519"},
     ["ssh", *OWN, "-o", 'IdentityFile="/keys/id_ed25519"', *NO_PASSWORD, "-o", "ConnectTimeout=10", "gpu-a",
      REMOTE]),
    # ansible_ssh_args / ssh_args in ansible.cfg: after the heartbeat's own (whose ControlMaster=no wins)
    ({"ssh_args": "-C -o ControlMaster=auto -o ControlPersist=60s"},
     ["ssh", *OWN, "-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", *NO_PASSWORD, "-o",
      "ConnectTimeout=10", "gpu-a", REMOTE]),
    # ansible_ssh_common_args and ansible_ssh_extra_args, in that order, last but the address
    ({"ssh_common_args": "-o UserKnownHostsFile='/lab/known hosts'", "ssh_extra_args": "-o ProxyJump=bastion"},
     ["ssh", *OWN, *NO_PASSWORD, "-o", "ConnectTimeout=10", "-o", "UserKnownHostsFile=/lab/known hosts", "-o",
      "ProxyJump=bastion", "gpu-a", REMOTE]),
    # ansible_ssh_executable
    ({"ssh_executable": "/opt/openssh/bin/ssh"},
     ["/opt/openssh/bin/ssh", *OWN, *NO_PASSWORD, "-o", "ConnectTimeout=10", "gpu-a", REMOTE]),
    # Ansible's ConnectTimeout: ansible_ssh_timeout / timeout in ansible.cfg / ANSIBLE_TIMEOUT
    ({"timeout": 33}, ["ssh", *OWN, *NO_PASSWORD, "-o", "ConnectTimeout=33", "gpu-a", REMOTE]),
    # host_key_checking = False (ansible.cfg, ANSIBLE_HOST_KEY_CHECKING, ansible_host_key_checking)
    ({"host_key_checking": False}, ["ssh", *OWN, "-o", "StrictHostKeyChecking=no", *NO_PASSWORD, "-o",
                                    "ConnectTimeout=10", "gpu-a", REMOTE]),
])
def test_each_ssh_setting_lands_where_ansibles_ssh_plugin_puts_it(setting, expected):
    assert argv(**setting) == expected


def test_a_key_file_under_home_is_expanded_as_ansible_does(monkeypatch):
    monkeypatch.setenv("HOME", "/home/ops")
    assert 'IdentityFile="/home/ops/.ssh/lab"' in argv(private_key_file="~/.ssh/lab")


def test_become_puts_a_non_interactive_sudo_or_doas_in_front_of_renew():
    sudo = {"method": "ansible.builtin.sudo", "user": "root", "exe": "sudo", "flags": "-H -S -n", "password": None}
    assert argv(become=sudo)[-1] == f"sudo -H -n -u root {REMOTE}"
    assert argv(become=dict(sudo, method="sudo", exe="/usr/local/bin/sudo", flags="-E", user="svc"))[-1] == (
        f"/usr/local/bin/sudo -E -n -u svc {REMOTE}")
    doas = {"method": "community.general.doas", "user": "root", "exe": None, "flags": "", "password": None}
    assert argv(become=doas)[-1] == f"doas -n -u root {REMOTE}"
    assert argv(become=dict(sudo, user="my user"))[-1] == f"sudo -H -n -u 'my user' {REMOTE}"


def test_a_local_connection_runs_renew_itself_with_become_in_front():
    for name in ("local", "ansible.builtin.local", "ansible.legacy.local", "mitogen_local"):
        local = {"name": name, "transport": "local"}
        assert rc.renew_command("gw", local, {}, None, RENEW) == {"name": "gw", "argv": REMOTE.split()}
    sudo = {"method": "ansible.builtin.sudo", "user": "root", "exe": "sudo", "flags": "-H -S -n", "password": None}
    assert argv(become=sudo, connection={"name": "ansible.builtin.local", "transport": "local"}) == [
        "sudo", "-H", "-n", "-u", "root", *REMOTE.split()]


@pytest.mark.parametrize("setting, message", [
    ({"password": "secret"}, "gpu-a: the heartbeat cannot use ansible_password (it renews the switch without a "
                             "person, every minute of the run): give the heartbeat a key: "
                             "ansible_ssh_private_key_file, or a key in the ssh agent"),
    ({"private_key": "-----BEGIN OPENSSH PRIVATE KEY-----"},
     "gpu-a: the heartbeat cannot use ansible_private_key (it renews the switch without a person, every minute of "
     "the run): give the key as a file (ansible_ssh_private_key_file) or put it in the ssh agent"),
    ({"pkcs11_provider": "/usr/lib/opensc-pkcs11.so"},
     "gpu-a: the heartbeat cannot use ansible_ssh_pkcs11_provider"),
])
def test_what_needs_a_person_is_refused_naming_the_variable_and_the_fix(setting, message):
    with pytest.raises(rc.RenewCommandError) as refused:
        argv(**setting)
    assert str(refused.value).startswith(message)


def test_become_methods_that_prompt_and_become_passwords_are_refused():
    with pytest.raises(rc.RenewCommandError, match=r"^gpu-a: the heartbeat cannot renew its switch through the "
                                                   r"become method 'su' \(ansible_become_method\): it must run a "
                                                   r"plain command without a prompt, as ansible.builtin.sudo or "
                                                   r"community.general.doas do"):
        argv(become={"method": "su", "user": "root", "exe": "su", "flags": "", "password": None})
    with pytest.raises(rc.RenewCommandError, match=r"^gpu-a: the heartbeat cannot type a become password "
                                                   r"\(ansible_become_password, or --ask-become-pass\)"):
        argv(become={"method": "ansible.builtin.sudo", "user": "root", "exe": "sudo", "flags": "", "password": "pw"})


def test_another_connection_plugin_is_refused_naming_it():
    with pytest.raises(rc.RenewCommandError, match=r"^gpu-a: the heartbeat cannot renew its switch through the "
                                                   r"connection plugin 'community.docker.docker' "
                                                   r"\(ansible_connection\): it follows ssh and local only"):
        argv(connection={"name": "community.docker.docker", "transport": "community.docker.docker"})

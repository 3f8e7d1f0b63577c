# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The renew commands the experiment builds for the dead man's switches' heartbeat (``_heartbeat_children``): each
host's ``renew`` reached as Ansible reaches it, locally, over SSH and with become."""

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _heartbeat_children

LAB_HOST = {"name": "lab-a", "connection": "ssh", "address": "169.254.78.2", "port": 22, "user": "root",
            "key_file": "/var/lib/inferlab-lab/imol/ssh/id_ed25519",
            "ssh_common_args": "-o UserKnownHostsFile=/var/lib/inferlab-lab/imol/ssh/known_hosts "
                               "-o StrictHostKeyChecking=yes",
            "ssh_extra_args": "", "become": False, "python": "/usr/bin/python3",
            "script": "/var/lib/inferlab-lab/imol/hosts/a/state/bin/inferlab_ledger.py",
            "renew_file": "/var/lib/inferlab-lab/imol/hosts/a/state/run/deadman.renew"}


def test_the_renew_commands_reach_each_host_as_ansible_does():
    [lab_a, local, become] = _heartbeat_children.children([
        LAB_HOST, {"name": "localhost", "connection": "local", "python": "/venv/bin/python",
                   "script": "/var/lib/inferlab/bin/inferlab_ledger.py", "renew_file": "/var/lib/inferlab/run/r"},
        {**LAB_HOST, "name": "gpu-b", "address": None, "user": "ops", "become": True, "port": None,
         "key_file": None, "ssh_common_args": "", "ssh_extra_args": "-o ProxyJump=bastion",
         "renew_file": "/var/lib/inferlab/run/deadman renew"}])
    assert lab_a == {"name": "lab-a", "argv": [
        "ssh", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
        "-o", "ControlMaster=no", "-o", "ControlPath=none", "-p", "22", "-i", LAB_HOST["key_file"],
        "-o", "UserKnownHostsFile=/var/lib/inferlab-lab/imol/ssh/known_hosts", "-o", "StrictHostKeyChecking=yes",
        "-l", "root", "169.254.78.2",
        f"/usr/bin/python3 {LAB_HOST['script']} renew --renew-file {LAB_HOST['renew_file']}"]}
    assert local == {"name": "localhost", "argv": ["/venv/bin/python", "/var/lib/inferlab/bin/inferlab_ledger.py",
                                                   "renew", "--renew-file", "/var/lib/inferlab/run/r"]}
    assert become["argv"][-6:] == ["-o", "ProxyJump=bastion", "-l", "ops", "gpu-b",
                                   f"sudo -n /usr/bin/python3 {LAB_HOST['script']} renew --renew-file "
                                   "'/var/lib/inferlab/run/deadman renew'"]

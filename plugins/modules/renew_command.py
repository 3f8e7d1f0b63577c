#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: renew_command
short_description: The heartbeat's renew command of a host, reached as Ansible reaches it
version_added: 0.3.0
description:
  - Returns the command that runs the ledger script's C(renew) on the task's host (delegate to each host in turn),
    for the controller's heartbeat of the dead man's switches (C(inferlab_ledger.py heartbeat --child)).
  - Built from what Ansible resolved for that host, read from its connection plugin and become plugin, so every way
    of setting them counts (host and group variables, C(ansible.cfg), C(ANSIBLE_*), the command line, delegation).
    Over C(ssh) it is the ssh command Ansible's ssh plugin would build (C(ssh_executable), C(ssh_args), host key
    checking, port, private key file, user, C(ConnectTimeout), common and extra arguments, the address), led by the
    heartbeat's own options (batch mode, keep-alives, no shared master). A C(local) connection runs C(renew)
    itself. Become puts C(sudo -n) or C(doas -n) in front, with the become plugin's executable, flags and user.
  - Refused, naming the variable and the fix, before the heartbeat starts - a password (C(ansible_password)), a key
    given by content (C(ansible_private_key)), a PKCS#11 provider, a become password, a become method that prompts
    (C(su) and any other than C(sudo) and C(community.general.doas)), a connection plugin other than ssh and local.
  - An action plugin; nothing reaches the host.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  action:
    support: full
    description: It runs in the action plugin, on the controller.
  check_mode:
    support: full
    details: It only reads Ansible's settings.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  python:
    description: The host's Python that runs the ledger script.
    type: str
    required: true
  script:
    description: The ledger script on the host (C(<inferlab_state_dir>/bin/inferlab_ledger.py)).
    type: str
    required: true
  renew_file:
    description: The renew file of the host's switch (C(<inferlab_state_dir>/run/deadman.renew)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The renew command of every host with a switch
  inferlab.distributed.renew_command:
    python: "{{ hostvars[item].ansible_python_interpreter | default('/usr/bin/python3') }}"
    script: /var/lib/inferlab/bin/inferlab_ledger.py
    renew_file: /var/lib/inferlab/run/deadman.renew
  delegate_to: "{{ item }}"
  loop: "{{ groups['ring'] }}"
  run_once: true
  register: renew_commands
"""

RETURN = r"""
child:
  description: C({name, argv}), the host's name and its renew command (a C(--child) of the heartbeat).
  returned: success
  type: dict
  sample: {"name": "gpu-a", "argv": ["ssh", "-o", "BatchMode=yes", "...", "gpu-a.lan",
           "/usr/bin/python3 /var/lib/inferlab/bin/inferlab_ledger.py renew --renew-file /var/lib/run/deadman.renew"]}
"""

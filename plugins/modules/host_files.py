#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: host_files
short_description: Install a set of directories and text files on a host in one step
version_added: 0.3.0
description:
  - Creates each of O(directories) with its mode, then writes each of O(files) whose content or mode differs from
    what is there, atomically (a temporary file in the same directory, then a rename). What already matches is left
    alone.
  - One task and one round trip for a whole manifest, where a loop of M(ansible.builtin.copy) pays several round
    trips a file. The ledger role installs its script and the helpers it imports this way.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads what is there and reports what would change; writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  directories:
    description: The directories to create (with their parents), each with its mode, before any file is written.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: An absolute path.
        type: path
        required: true
      mode:
        description: The directory's mode, an octal string such as V(0755).
        type: str
        required: true
  files:
    description: The files to write.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: An absolute path; its directory must exist (or be one of O(directories)).
        type: path
        required: true
      content:
        description: The file's text, written as UTF-8.
        type: str
        required: true
      mode:
        description: The file's mode, an octal string such as V(0644).
        type: str
        required: true
"""

EXAMPLES = r"""
- name: Install the ledger script and its helpers
  inferlab.distributed.host_files:
    directories:
      - {path: /var/lib/inferlab/bin, mode: '0755'}
    files:
      - dest: /var/lib/inferlab/bin/inferlab_ledger.py
        content: "{{ lookup('ansible.builtin.file', 'plugins/module_utils/_ledger_cli.py', rstrip=false) }}"
        mode: '0644'
"""

RETURN = r"""
written:
  description: The files written (or, in check mode, that would be), in the order given.
  returned: success
  type: list
  elements: str
  sample: [/var/lib/inferlab/bin/inferlab_ledger.py]
created:
  description: The directories created or whose mode was set (or would be, in check mode).
  returned: success
  type: list
  elements: str
  sample: [/var/lib/inferlab/bin]
"""

import os  # noqa: E402
import stat  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils._ledger_base import write_atomic  # noqa: E402


def octal_mode(module, mode, what):
    try:
        value = int(mode, 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o7777:
        module.fail_json(msg='expected an octal mode such as 0644 for %s, found %r' % (what, mode))
    return value


def current_mode(path):
    """The permission bits of ``path``, or None when it does not exist."""
    try:
        return stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def file_matches(path, data, mode):
    if current_mode(path) != mode or not os.path.isfile(path) or os.path.islink(path):
        return False
    with open(path, 'rb') as handle:
        return handle.read() == data


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type='list', elements='dict', default=[], options=dict(
                path=dict(type='path', required=True),
                mode=dict(type='str', required=True),
            )),
            files=dict(type='list', elements='dict', default=[], options=dict(
                dest=dict(type='path', required=True),
                content=dict(type='str', required=True),
                mode=dict(type='str', required=True),
            )),
        ),
        supports_check_mode=True,
    )
    directories = [(item['path'], octal_mode(module, item['mode'], item['path']))
                   for item in module.params['directories']]
    files = [(item['dest'], item['content'].encode('utf-8'), octal_mode(module, item['mode'], item['dest']))
             for item in module.params['files']]
    for path in [path for path, _mode in directories] + [path for path, _data, _mode in files]:
        if not os.path.isabs(path):
            module.fail_json(msg='expected an absolute path, found %r' % path)

    created = [path for path, mode in directories if current_mode(path) != mode or not os.path.isdir(path)]
    written = [path for path, data, mode in files if not file_matches(path, data, mode)]
    if not module.check_mode:
        try:
            for path, mode in directories:
                if path in created:
                    if not os.path.isdir(path):
                        os.makedirs(path)
                    os.chmod(path, mode)
            for path, data, mode in files:
                if path in written:
                    write_atomic(path, data, mode)
        except OSError as error:
            module.fail_json(msg='could not install %s: %s' % (error.filename or 'the files', error.strerror))
    module.exit_json(changed=bool(created or written), created=created, written=written)


if __name__ == '__main__':
    main()

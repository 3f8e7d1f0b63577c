#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_rank_info
short_description: Read what an SGLang TP rank needs from its host, in one call
version_added: 0.3.0
description:
  - Reads, on a ring host, what the P(inferlab.distributed.sglang_tp_problems#filter) filter judges before any rank
    starts - the model directory (whether it is one, its C(config.json), its files with sizes and checksums), the
    interface NCCL must use (C(ip -j link show dev IF)), the TCP listeners on the ports rank 0 needs (C(ss -Hltn)),
    and the versions the ranks run (O(versions_command)).
  - A model, a file, an interface or a version that is missing or unreadable is an observation, for the filter to
    judge with the variable that sets it; the module fails only when C(ip) or C(ss) is missing or C(ss) fails.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It only reads, and runs O(versions_command), in check mode too.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  model_path:
    description:
      - The model directory (a link to one is followed). Its C(config.json) is read, and every regular file below
        it is listed as M(ansible.builtin.find) lists them with O(ansible.builtin.find#module:file_type=file) -
        entries whose name starts with a dot and links are left out.
    type: path
    required: true
  checksum_max_mb:
    description:
      - Files smaller than this many MiB get a sha256 in RV(model.files); larger ones (the weights) only their
        size. V(0) checksums none.
    type: int
    default: 64
  link_interface:
    description:
      - The interface NCCL and Gloo must use, looked up with C(ip -j link show dev IF).
    type: str
    required: true
  ports:
    description:
      - TCP ports whose listeners to list (C(ss -Hltn)); empty lists none (the role asks rank 0's host only).
    type: list
    elements: int
    default: []
  versions_command:
    description:
      - An argv that prints one JSON object of the versions the ranks run (C({sglang, torch, cuda, nccl})). It runs
        in the module's environment, so the task's C(environment) reaches it. Unset, nothing is run.
    type: list
    elements: str
requirements:
  - C(ip) (iproute2); C(ss) (iproute2) when O(ports) is not empty.
seealso:
  - module: inferlab.distributed.host_observe
"""

EXAMPLES = r"""
- name: Read what the ranks need on this host
  inferlab.distributed.sglang_rank_info:
    model_path: /models/qwen
    link_interface: thunderbolt0
    ports: [30000, 50000]
    versions_command: [python3, -c, "import json, sglang; print(json.dumps({'sglang': sglang.__version__}))"]
  environment:
    CUDA_VISIBLE_DEVICES: "0"
  register: rank_host
"""

RETURN = r"""
model:
  description: The model directory.
  returned: always
  type: dict
  contains:
    path:
      description: O(model_path).
      type: str
      returned: always
    exists:
      description: Whether anything is at O(model_path).
      type: bool
      returned: always
    directory:
      description: Whether O(model_path) is a directory (or a link to one).
      type: bool
      returned: always
    files:
      description:
        - 'Every regular file below it, sorted, as C({relative path: {size, sha256}}); C(sha256) is null for a file
          of O(checksum_max_mb) MiB or more, or one that could not be read.'
      type: dict
      returned: always
      sample:
        config.json: {size: 654, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
        model-00001-of-00002.safetensors: {size: 4900000000, sha256: null}
    unreadable:
      description: What could not be read below it, with why (left out of RV(model.files), or with a null sha256).
      type: dict
      returned: always
config:
  description: The model's C(config.json).
  returned: always
  type: dict
  contains:
    path:
      description: Where it was read.
      type: str
      returned: always
    parsed:
      description: The JSON object it holds; null when it could not be read or holds no JSON object.
      type: dict
      returned: always
    error:
      description: Why RV(config.parsed) is null, as M(ansible.builtin.slurp) says it for a missing or unreadable
        file; null when it was read.
      type: str
      returned: always
      sample: "File not found: /models/qwen/config.json"
link:
  description: The interface NCCL must use.
  returned: always
  type: dict
  contains:
    interface:
      description: O(link_interface).
      type: str
      returned: always
    present:
      description: Whether C(ip link show dev IF) found it.
      type: bool
      returned: always
    error:
      description: What C(ip) said when it did not; null when present.
      type: str
      returned: always
      sample: Device "tb9" does not exist.
listeners:
  description: The TCP listeners on O(ports); null when O(ports) is empty.
  returned: always
  type: dict
  contains:
    ports:
      description: O(ports).
      type: list
      elements: int
      returned: always
    lines:
      description: One C(ss -Hltn) line per listener; empty when the ports are free.
      type: list
      elements: str
      returned: always
versions:
  description: What O(versions_command) printed; null when it is unset.
  returned: always
  type: dict
  contains:
    rc:
      description: Its exit status; null when it could not be run.
      type: int
      returned: always
    parsed:
      description: The JSON object it printed; null when it printed none or failed.
      type: dict
      returned: always
      sample: {sglang: 0.5.23, torch: 2.9.0, cuda: "12.8", nccl: 2.27.3}
    error:
      description: Why RV(versions.parsed) is null; null when it was read.
      type: str
      returned: always
"""

import errno  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

MIB = 1024 * 1024
# what an error says of a command's output: its end, where a traceback names the exception
OUTPUT_TAIL_CHARS = 300
# slurp's words for a config.json it cannot read (errno -> message), so that the message reads as it always did
UNREADABLE = {errno.ENOENT: 'File not found: %s', errno.EACCES: 'File is not readable: %s',
              errno.EISDIR: 'Source is a directory and must be a file: %s'}


def _tail(text):
    return ' '.join(text.split())[-OUTPUT_TAIL_CHARS:]


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(MIB), b''):
            digest.update(block)
    return digest.hexdigest()


class SglangRankInfo:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self):
        self.module.exit_json(changed=False, model=self.model(), config=self.config(), link=self.link(),
                              listeners=self.listeners(), versions=self.versions())

    def model(self):
        """The directory and its regular files, as ansible.builtin.find (recurse, file_type file, hidden false,
        follow false) lists them: a name starting with a dot is left out, but the walk goes below it; links are
        not followed (os.walk lists a link to a directory among the directories, and does not enter it)."""
        path = self.params['model_path']
        limit = self.params['checksum_max_mb'] * MIB
        found = {'path': path, 'exists': os.path.lexists(path), 'directory': os.path.isdir(path), 'files': {},
                 'unreadable': {}}
        if not found['directory']:
            return found

        def walk_error(err):
            found['unreadable'][err.filename] = err.strerror or str(err)

        files = {}
        for root, _dirs, names in os.walk(path, onerror=walk_error):
            for name in names:
                full = os.path.normpath(os.path.join(root, name))
                if name.startswith('.'):
                    continue
                try:
                    st = os.lstat(full)
                except OSError as err:
                    found['unreadable'][full] = err.strerror or str(err)
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                entry = {'size': st.st_size, 'sha256': None}
                if st.st_size < limit:
                    try:
                        entry['sha256'] = _sha256(full)
                    except OSError as err:
                        found['unreadable'][full] = err.strerror or str(err)
                files[os.path.relpath(full, path)] = entry
        found['files'] = dict(sorted(files.items()))
        return found

    def config(self):
        path = os.path.join(self.params['model_path'], 'config.json')
        read = {'path': path, 'parsed': None, 'error': None}
        try:
            with open(path, 'rb') as handle:
                text = handle.read().decode('utf-8')
        except OSError as err:
            template = UNREADABLE.get(err.errno)
            read['error'] = template % path if template else 'File could not be read: %s (%s)' % (path, err.strerror)
            return read
        except UnicodeDecodeError:
            read['error'] = 'a file that is not a JSON object (not UTF-8 text)'
            return read
        try:
            parsed = json.loads(text)
        except ValueError as err:
            read['error'] = 'a file that is not a JSON object (%s)' % err
            return read
        if isinstance(parsed, dict):
            read['parsed'] = parsed
        else:
            read['error'] = 'a file that is not a JSON object'
        return read

    def link(self):
        interface = self.params['link_interface']
        ip = self.module.get_bin_path('ip', required=True)
        rc, _out, err = self.module.run_command([ip, '-j', 'link', 'show', 'dev', interface],
                                                environ_update={'LC_ALL': 'C'})
        return {'interface': interface, 'present': rc == 0, 'error': None if rc == 0 else err.strip()}

    def listeners(self):
        ports = self.params['ports']
        if not ports:
            return None
        ss = self.module.get_bin_path('ss', required=True)
        selector = '( %s )' % ' or '.join('sport = :%d' % port for port in ports)
        argv = [ss, '-Hltn', selector]
        rc, out, err = self.module.run_command(argv, environ_update={'LC_ALL': 'C'})
        if rc != 0:
            self.module.fail_json(msg='ss could not list the listeners on ports %s: %s'
                                      % (', '.join(str(port) for port in ports), err.strip() or 'rc %d' % rc),
                                  rc=rc, stdout=out, stderr=err, cmd=argv)
        return {'ports': ports, 'lines': [line.strip() for line in out.splitlines() if line.strip()]}

    def versions(self):
        argv = self.params['versions_command']
        if not argv:
            return None
        read = {'rc': None, 'parsed': None, 'error': None}
        try:
            rc, out, err = self.module.run_command(argv, environ_update={'LC_ALL': 'C'}, handle_exceptions=False)
        except OSError as exc:
            read['error'] = 'could not run %s: %s' % (argv[0], exc.strerror or exc)
            return read
        read['rc'] = rc
        if rc != 0:
            read['error'] = '%s exited %d: %s' % (argv[0], rc, _tail(err or out) or 'no output')
            return read
        try:
            parsed = json.loads(out.strip())
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            read['parsed'] = parsed
        else:
            read['error'] = '%s printed no JSON object: %s' % (argv[0], _tail(out) or 'no output')
        return read


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            model_path=dict(type='path', required=True),
            checksum_max_mb=dict(type='int', default=64),
            link_interface=dict(type='str', required=True),
            ports=dict(type='list', elements='int', default=[]),
            versions_command=dict(type='list', elements='str'),
        ),
        supports_check_mode=True,
    )


def main():
    SglangRankInfo(build_module()).run()


if __name__ == '__main__':
    main()

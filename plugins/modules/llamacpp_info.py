#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: llamacpp_info
short_description: Read a llama.cpp install's version and whether it can serve over RPC
version_added: 0.1.0
description:
  - Runs C(llama-server --version) and C(--help) and C(ggml-rpc-server --help) from O(bin_dir), and reports the
    version, the build number and commit, every flag each program offers, the speculative decoding types, and what
    an RPC ring lacks, C(ggml-rpc-server) itself or C(llama-server)'s C(--rpc) (absent from a build without
    C(GGML_RPC=ON)).
  - Reports problems in RV(problems) and fails only with O(fail_on_problems=true), so that a role can name its own
    variables in the message.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only runs the programs' C(--version) and C(--help).
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  bin_dir:
    description:
      - The directory that holds C(llama-server) and C(ggml-rpc-server).
    type: path
    required: true
  min_build:
    description:
      - Refuse a build whose number (C(build N) in its version line) is lower; 0 accepts any.
    type: int
    default: 0
  timeout_s:
    description:
      - Seconds each program gets to answer.
    type: float
    default: 30
  fail_on_problems:
    description:
      - Fail the task when RV(problems) is not empty.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read the engine on every ring host
  inferlab.distributed.llamacpp_info:
    bin_dir: /opt/llama.cpp/bin
  register: engine
"""

RETURN = r"""
llamacpp:
  description: What the install says of itself.
  returned: always
  type: dict
  contains:
    bin_dir:
      description: The directory read.
      type: str
      returned: always
    version:
      description: C(version), C(build) and C(commit) from C(llama-server --version); null when it gave none.
      type: dict
      returned: always
      sample: {version: 0.5.0-dev, build: 1, commit: 0c1e570}
    rpc:
      description: Whether C(llama-server) offers C(--rpc) and C(ggml-rpc-server) runs.
      type: bool
      returned: always
    server_flags:
      description: Every flag C(llama-server --help) lists.
      type: list
      elements: str
      returned: always
    rpc_server_flags:
      description: Every flag C(ggml-rpc-server --help) lists.
      type: list
      elements: str
      returned: always
    spec_types:
      description: The values C(--spec-type) takes (empty when the build has no such flag).
      type: list
      elements: str
      returned: always
      sample: [none, draft-simple, draft-eagle3, draft-mtp, ngram-simple]
problems:
  description: What stops this install from serving an RPC ring, one sentence each.
  returned: always
  type: list
  elements: str
  sample: ["/opt/llama.cpp/bin/llama-server --help lists no --rpc: the build lacks GGML_RPC=ON"]
"""

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _llamacpp  # noqa: E402

SERVER = 'llama-server'
RPC_SERVER = 'ggml-rpc-server'


def run(module, program, flag):
    """(output, problem): the program's stdout and stderr together (ggml-rpc-server prints its usage on stderr),
    bounded by timeout_s (run_command has no timeout)."""
    path = os.path.join(module.params['bin_dir'], program)
    if not os.access(path, os.X_OK):
        return '', '%s is not there or not executable' % path
    env = dict(os.environ, LC_ALL='C')
    try:
        done = subprocess.run([path, flag], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, timeout=module.params['timeout_s'], check=False)
    except subprocess.TimeoutExpired:
        return '', '%s %s did not answer within %g s' % (path, flag, module.params['timeout_s'])
    except OSError as err:
        return '', '%s %s could not run: %s' % (path, flag, err.strerror or err)
    text = (done.stdout + done.stderr).decode('utf-8', 'replace')
    if done.returncode != 0:
        return text, '%s %s exited %d: %s' % (path, flag, done.returncode, text.strip()[-300:])
    return text, None


def read(module):
    problems = []
    bin_dir = module.params['bin_dir']
    version_text, problem = run(module, SERVER, '--version')
    problems.extend([problem] if problem else [])
    help_text, problem = run(module, SERVER, '--help') if not problem else ('', None)
    problems.extend([problem] if problem else [])
    rpc_text, rpc_problem = run(module, RPC_SERVER, '--help')
    problems.extend([rpc_problem] if rpc_problem else [])
    version = _llamacpp.parse_version(version_text)
    server_flags = sorted(_llamacpp.help_flags(help_text))
    if version_text and version is None:
        problems.append('%s --version printed no "version: V (build N, commit C)" line: %r'
                        % (os.path.join(bin_dir, SERVER), version_text.strip()[:200]))
    if help_text and '--rpc' not in server_flags:
        problems.append('%s --help lists no --rpc: the build lacks GGML_RPC=ON (rebuild with it, or point the role '
                        'at another install)' % os.path.join(bin_dir, SERVER))
    minimum = module.params['min_build']
    if version and minimum and version['build'] < minimum:
        problems.append('%s is build %d, older than the %d required' % (SERVER, version['build'], minimum))
    spec = re.search(r'^--spec-type (\S+)', help_text, re.M)
    return {
        'llamacpp': {
            'bin_dir': bin_dir,
            'version': version,
            'rpc': '--rpc' in server_flags and rpc_problem is None,
            'server_flags': server_flags,
            'rpc_server_flags': sorted(_llamacpp.help_flags(rpc_text)),
            'spec_types': spec.group(1).split(',') if spec else [],
        },
        'problems': problems,
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            bin_dir=dict(type='path', required=True),
            min_build=dict(type='int', default=0),
            timeout_s=dict(type='float', default=30),
            fail_on_problems=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    result = read(module)
    if module.params['fail_on_problems'] and result['problems']:
        module.fail_json(msg='; '.join(result['problems']), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()

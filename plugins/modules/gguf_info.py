#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gguf_info
short_description: Read a GGUF model file's header, and check a draft model's vocabulary against it
version_added: 0.1.0
description:
  - Reads the header of a GGUF file (llama.cpp's model format, versions 2 and 3) without loading the model (its
    architecture, shape, tokenizer and tensor count), and checks that the file is as long as its tensors need, so a
    partial copy or download is found before a server tries to load it.
  - With O(draft_path), reads the draft model too and compares the two vocabularies (tokenizer model, size, BOS and
    EOS ids, and a sha256 of the token list and of the token types), since llama.cpp refuses a draft whose
    vocabulary differs.
  - Reports problems in RV(problems) and fails only with O(fail_on_problems=true), so that a role can name its own
    variables in the message.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads files.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  path:
    description:
      - The model's GGUF file.
    type: path
    required: true
  draft_path:
    description:
      - A draft model's GGUF file, for speculative decoding.
    type: path
  architecture:
    description:
      - The architecture the model must have (C(general.architecture)), for example V(llama); empty accepts any.
    type: str
    default: ''
  fail_on_problems:
    description:
      - Fail the task when RV(problems) is not empty.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Check the model and its draft before a launch
  inferlab.distributed.gguf_info:
    path: /srv/models/target.gguf
    draft_path: /srv/models/draft.gguf
    architecture: llama
  register: model

- name: Stop on a model that cannot serve
  ansible.builtin.assert:
    that: model.problems | length == 0
    fail_msg: "{{ model.problems | join('; ') }} (set llamacpp_rpc_model_path)"
"""

RETURN = r"""
gguf:
  description: The model's header.
  returned: always
  type: dict
  contains:
    path:
      description: The file read.
      type: str
      returned: always
    version:
      description: The GGUF version, null when the file is not GGUF.
      type: int
      returned: always
      sample: 3
    architecture:
      description: C(general.architecture).
      type: str
      returned: always
      sample: llama
    metadata:
      description: The general keys, the tokenizer's ids and the architecture's shape (context length, width, blocks,
        heads).
      type: dict
      returned: always
      sample: {llama.block_count: 8, llama.context_length: 8192, general.name: inferlab-lab-target}
    vocab:
      description: The vocabulary's size, tokenizer model, BOS/EOS ids and fingerprints; null when the file has none.
      type: dict
      returned: always
    tensors:
      description: How many tensors the header lists.
      type: int
      returned: always
    bytes:
      description: The file's size.
      type: int
      returned: always
    data_bytes_expected:
      description: The size the tensors need (null where a tensor type is not known to the reader).
      type: int
      returned: always
draft:
  description: The draft's header (as RV(gguf)), null without O(draft_path).
  returned: always
  type: dict
problems:
  description: Everything that stops these files from serving, one sentence each; empty when none.
  returned: always
  type: list
  elements: str
  sample: ["the draft's vocabulary size is 32000, the target's 259"]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import _gguf  # noqa: E402


def check(params):
    """The headers and their problems, as the module returns them."""
    target = _gguf.read_header(params['path'])
    problems = list(target['problems'])
    if params['architecture'] and target['version'] and target['architecture'] != params['architecture']:
        problems.append('%s has architecture %s, expected %s'
                        % (params['path'], target['architecture'], params['architecture']))
    draft = None
    if params['draft_path']:
        draft = _gguf.read_header(params['draft_path'])
        problems.extend(draft['problems'])
        if not target['problems'] and not draft['problems']:
            problems.extend(_gguf.draft_problems(target, draft))
    return {'gguf': target, 'draft': draft, 'problems': problems}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            draft_path=dict(type='path'),
            architecture=dict(type='str', default=''),
            fail_on_problems=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    result = check(module.params)
    if module.params['fail_on_problems'] and result['problems']:
        module.fail_json(msg='; '.join(result['problems']), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()

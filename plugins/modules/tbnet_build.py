#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: tbnet_build
short_description: Build the candidate thunderbolt_net in a private directory, behind the patch gates
version_added: 0.1.0
description:
  - Checks, before anything is made, the headers of the target's kernel release, the source (its version against the
    headers' and the running kernel's), the patches, checkpatch's C(spelling.txt) and C(const_structs.checkpatch)
    (checkpatch passes silently without C(spelling.txt)), and the signing key when the target refuses unsigned
    modules.
  - Records the private build directory in the host's change ledger (kind V(build_dir)) before making it (mode 0700,
    never under C(/lib/modules)), with a marker file the ledger's undo looks for.
  - Stages only the driver from the source, tells its layout (C(drivers/net/thunderbolt.c) or
    C(drivers/net/thunderbolt/main.c)) and its TX E2E history (V(rx_only) or V(tx_always)), and picks the patch for
    them from O(patch_dir) unless O(patches) are given.
  - Gates, each of which stops the build with its output. C(git apply --check), C(git apply), C(git diff --check),
    C(checkpatch.pl --strict --no-tree).
  - Builds with C(make -C HEADERS M=DIR modules), checks that the vermagic names O(target_kernel_release) and that
    C(tx_e2e) is a bool parameter, signs the module when a key is given, and returns its sha256 and srcversion.
  - A failure after the directory was made removes it again (the ledger's undo), so a refused build leaves nothing.
  - A second run with the same inputs finds the recorded build (C(build.json)) and changes nothing.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: The preconditions run; nothing is made, staged or built.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  source:
    description:
      - The kernel source of the target's kernel. A directory (a kernel tree, or a git checkout of one) or a
        C(linux-source-X.Y.tar.*) tarball (Debian's C(linux-source-X.Y) package installs one under C(/usr/src)).
      - Only the driver, the top-level C(Makefile) and checkpatch's files are read from it.
    type: path
    required: true
  patches:
    description:
      - The patches to apply, in order. Default is the one for the detected layout and history in O(patch_dir).
    type: list
    elements: path
    default: []
  patch_dir:
    description:
      - Where the C(tx_e2e-<layout>-<history>.patch) files are, when O(patches) is empty.
    type: path
  headers_dir:
    description:
      - The kernel headers of O(target_kernel_release) on this host. Default C(/lib/modules/RELEASE/build).
    type: path
  target_kernel_release:
    description:
      - The target's C(uname -r). The built module's vermagic must name it.
    type: str
    required: true
  target_kernel_version:
    description:
      - The target's C(uname -v). Debian's names the kernel's upstream version, and the source must be that version.
      - A kernel that is neither Debian's nor Ubuntu's (per this and O(target_version_signature)) is refused before
        anything is made. Empty, with O(target_version_signature) empty too, compares the source with the headers
        only.
    type: str
    default: ''
  target_version_signature:
    description:
      - The target's C(/proc/version_signature) (Ubuntu's kernels only, for example
        C(Ubuntu 5.15.0-79.86-generic 5.15.111)). Its last field is the upstream version, and the source must be that
        version. Required for an Ubuntu kernel.
    type: str
    default: ''
  build_dir:
    description:
      - The private build directory, made with mode 0700 (its parents as needed). Never under C(/lib/modules).
    type: path
    required: true
  signing_key:
    description:
      - The private key of a Machine Owner Key, to sign the module with C(HEADERS/scripts/sign-file).
    type: path
  signing_cert:
    description:
      - The certificate of O(signing_key) (DER or PEM).
    type: path
  require_signature:
    description:
      - The target refuses unsigned modules (Secure Boot lockdown, or C(module.sig_enforce)); without a key the
        build is refused before it starts.
    type: bool
    default: false
notes:
  - Needs git, make, perl, gcc and modinfo (kmod) on the build host, and pahole (dwarves) for headers that ship
    C(vmlinux) (Kbuild then adds BTF to every module).
  - The build passes C(CONFIG_MODULE_SRCVERSION_ALL=y) so the module has a srcversion to verify after the load.
    It only adds that tag. The code and the vermagic are those of the distribution's config.
seealso:
  - module: inferlab.distributed.tbnet_module
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Build the candidate against the running kernel's headers
  inferlab.distributed.tbnet_build:
    source: /usr/src/linux-source-6.1.tar.xz
    patch_dir: /var/lib/inferlab/build/patches
    target_kernel_release: "{{ ansible_facts.kernel }}"
    build_dir: /var/lib/inferlab/build/tbnet-candidate
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
"""

RETURN = r"""
build:
  description: What was built and how it was checked.
  returned: success
  type: dict
  contains:
    source:
      description: >-
        C({path, source_kind, source_version, headers_version, running_version, layout, history, driver, patches})
        (C(patches) with their sha256).
      type: dict
    gates:
      description: C({git_diff_check, patches}) with the result of every gate per patch (checkpatch's last line).
      type: dict
    module:
      description: C({module_path, sha256, vermagic, srcversion, parm, signed, compiler_warnings}).
      type: dict
  sample:
    source: {source_kind: directory, source_version: 6.1.192, layout: single, history: rx_only}
    module: {module_path: /var/lib/inferlab/build/tbnet-candidate/module/thunderbolt-net.ko,
             vermagic: 6.1.0-57-amd64 SMP preempt mod_unload modversions, srcversion: 3C1D8F0A5E6B7C2D9A4F1E0}
entry_id:
  description: The V(build_dir) ledger entry of the directory.
  returned: changed
  type: str
failed_gate:
  description: The step that refused, when the module fails (V(precondition), V(git apply --check), V(checkpatch), ...).
  returned: failure
  type: str
output:
  description: What the refusing step printed.
  returned: failure
  type: str
"""

import json
import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_core,
    _ledger_settings,
    _ledger_undo,
    _module_base,
)
from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_build as tbnet_build

KIND = 'build_dir'
RECORD_FILE = 'build.json'


def source_fingerprint(source):
    """Size and mtime of a tarball, or of the files a directory source gives the build: a source replaced at the
    same path is a new input."""
    paths = [source] if os.path.isfile(source) else [
        os.path.join(source, rel) for rel in ['Makefile'] + list(tbnet_build.source_rules.LAYOUTS.values())]
    found = {}
    for path in paths:
        try:
            st = os.stat(path)
            found[path] = [st.st_size, int(st.st_mtime)]
        except OSError:
            found[path] = None
    return found


def patch_digests(paths):
    return {path: _ledger_core.sha256_file(path) for path in paths if os.path.isfile(path)}


class TbnetBuild(_module_base.StateModule):
    def __init__(self, module):
        super().__init__(module)
        self.p = dict(module.params)
        if not self.p['headers_dir']:
            self.p['headers_dir'] = '/lib/modules/%s/build' % self.p['target_kernel_release']
        self.p['build_dir'] = os.path.normpath(self.p['build_dir'])

    def fail_at_gate(self, exc, **extra):
        self.fail(str(exc), failed_gate=exc.gate, output=exc.output, **extra)

    def inputs(self):
        """What the build depends on: the same inputs and an intact module mean nothing to do."""
        p = self.p
        patches = p['patches'] or sorted(os.path.join(p['patch_dir'], n) for n in os.listdir(p['patch_dir'])
                                         if n.endswith('.patch'))
        return {'source': p['source'], 'source_fingerprint': source_fingerprint(p['source']),
                'patches': patch_digests(patches), 'headers_dir': p['headers_dir'],
                'headers_version': tbnet_build.tree_version(p['headers_dir']),
                'target_kernel_release': p['target_kernel_release'], 'signing_key': p['signing_key']}

    def recorded(self, inputs):
        try:
            with open(os.path.join(self.p['build_dir'], RECORD_FILE)) as handle:
                record = json.load(handle)
            module = record['build']['module']
            if record['inputs'] == inputs and _ledger_core.sha256_file(module['module_path']) == module['sha256']:
                return record['build']
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def open_entry(self):
        """The open build_dir entry for this directory, or None."""
        found = self.open_entries(lambda e: e['kind'] == KIND and e['params']['path'] == self.p['build_dir'])
        return found[0] if found else None

    def make_build_dir(self):
        """Record, then make (or empty, when it is ours from an earlier build) the private build directory."""
        p = self.p
        path = p['build_dir']
        entry = self.open_entry()
        if os.path.lexists(path):
            if not (entry and os.path.isfile(os.path.join(path, _ledger_settings.BUILD_DIR_MARKER))):
                raise tbnet_build.BuildError('%s exists and is not a build directory this ledger recorded: move it '
                                             'away or set tbnet_candidate_build_dir' % path)
            for name in os.listdir(path):
                if name != _ledger_settings.BUILD_DIR_MARKER:
                    target = os.path.join(path, name)
                    if os.path.isdir(target) and not os.path.islink(target):
                        shutil.rmtree(target)
                    else:
                        os.unlink(target)
            return entry['id']
        params = {'path': path, 'purpose': 'tbnet candidate'}
        with _ledger_undo.change(p['ledger_dir'], p['ledger_host'], KIND, params, run_id=p['run_id'],
                                 undo_on_error=False) as entry:
            os.makedirs(path, mode=0o700)
            os.chmod(path, 0o700)
            with open(os.path.join(path, _ledger_settings.BUILD_DIR_MARKER), 'w') as handle:
                handle.write('made by inferlab tbnet_build; removed by the ledger entry %s\n' % entry.id)
        return entry.id

    def run(self):
        """One state: built (the module has no state option)."""
        self.exit(**self.build())

    def build(self):
        p = self.p
        if not p['patches'] and not p['patch_dir']:
            self.fail('give patches, or patch_dir with the tx_e2e-<layout>-<history>.patch files')
        if not p['patches'] and not os.path.isdir(p['patch_dir']):
            self.fail('Nothing was changed: the patch directory %s does not exist' % p['patch_dir'],
                      failed_gate='precondition', output='')
        build = tbnet_build.Build(p, self.run_command)
        try:
            build.preconditions()
        except tbnet_build.BuildError as exc:
            self.fail_at_gate(tbnet_build.BuildError('Nothing was changed: %s' % exc, exc.gate, exc.output))
        inputs = self.inputs()
        done = self.recorded(inputs)
        if done:
            return dict(changed=False, build=done, message='already built with the same inputs')
        if self.check_mode:
            return dict(changed=True, build=None, message='would build in %s' % p['build_dir'])
        try:
            entry_id = self.make_build_dir()
        except (tbnet_build.BuildError, _ledger_core.LedgerError, OSError) as exc:
            self.fail('Nothing was changed: %s' % exc, failed_gate='build_dir', output='')
        try:
            result = build.run()
        except (tbnet_build.BuildError, OSError) as exc:
            if not isinstance(exc, tbnet_build.BuildError):
                exc = tbnet_build.BuildError(str(exc), gate='build_dir')
            undone = self.undo([entry_id], _ledger_undo.UndoContext())
            self.fail_at_gate(tbnet_build.BuildError('%s (nothing was loaded; the build directory: %s)' % (
                exc, undone['details'][0]['message'] if undone['details'] else undone['message']),
                exc.gate, exc.output))
        path = os.path.join(p['build_dir'], RECORD_FILE)
        with open(path, 'w') as handle:
            json.dump({'inputs': inputs, 'build': result}, handle, indent=1, sort_keys=True)
        os.chmod(path, 0o600)
        return dict(changed=True, build=result, entry_id=entry_id,
                    message='built %s (%s, %s)' % (result['module']['module_path'], result['source']['layout'],
                                                   result['source']['history']))


def build_module():
    return AnsibleModule(
        argument_spec=_module_base.ledger_argument_spec(
            source=dict(type='path', required=True),
            patches=dict(type='list', elements='path', default=[]),
            patch_dir=dict(type='path'),
            headers_dir=dict(type='path'),
            target_kernel_release=dict(type='str', required=True),
            target_kernel_version=dict(type='str', default=''),
            target_version_signature=dict(type='str', default=''),
            build_dir=dict(type='path', required=True),
            signing_key=dict(type='path', no_log=False),
            signing_cert=dict(type='path'),
            require_signature=dict(type='bool', default=False),
        ),
        required_together=[('signing_key', 'signing_cert')],
        supports_check_mode=True,
    )


def main():
    TbnetBuild(build_module()).run()


if __name__ == '__main__':
    main()

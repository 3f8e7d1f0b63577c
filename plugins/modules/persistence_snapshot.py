#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: persistence_snapshot
short_description: Hash every place through which a kernel module change could persist
version_added: 0.1.0
description:
  - inferlab never persists a kernel change. Nothing goes under C(/lib/modules), into the initramfs, C(/etc/modprobe.d)
    or C(/etc/modules-load.d). This module takes the snapshot that proves it. It is taken before and after a
    candidate-driver experiment, and P(inferlab.distributed.persistence_differences#filter) lists every difference,
    which fails the restore verification.
  - The snapshot hashes every file below C(etc/modprobe.d) and C(etc/modules-load.d), the file C(etc/modules) and the
    initramfs images in the boot directory (streaming, so large images are fine).
  - For C(lib/modules/<release>) and the DKMS tree C(var/lib/dkms), it hashes the file list (path, size, mode), not the
    contents. It also names every file under C(updates/) and C(extra/), and every module file that C(modules.dep)
    does not list.
  - It records the kernel taint, which the filter decodes.
  - Symlinks are recorded as C(-> TARGET) and never followed. Symlinks on the way to a directory (C(lib -> usr/lib))
    are resolved inside O(root), so nothing outside it is read.
  - What cannot be read (an unreadable file, a directory where a file is expected, a missing boot or module directory)
    is named in RV(snapshot.problems). A bad file never fails the module.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads files, in check mode as in a normal run.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  root:
    description:
      - Every path is read below this directory.
      - Point it at a fixture tree to read a recorded or made-up system (tests and the embedded lab do).
    type: path
    default: /
  kernel_release:
    description:
      - The kernel whose module tree C(lib/modules/<release>) is listed.
      - Default is the running kernel. It is read from C(sys/kernel/osrelease) below O(procfs_root), or else from
        Python's C(os.uname), which is what C(uname -r) prints.
    type: str
  boot_dir:
    description:
      - The directory, relative to O(root), that holds the initramfs images. A leading C(/) is ignored.
      - Its files that match O(initramfs_globs) are hashed (not recursively). The directory is the key of their group in
        RV(snapshot.files).
    type: str
    default: boot
  initramfs_globs:
    description:
      - File name patterns (C(fnmatch)) of the initramfs images in O(boot_dir).
    type: list
    elements: str
    default: ['initrd.img-*', 'initramfs-*']
  procfs_root:
    description:
      - Where procfs is mounted. The kernel taint is read from C(sys/kernel/tainted) below it.
      - Default is C(proc) below O(root).
    type: path
notes:
  - The taint bits are those of the kernel's C(Documentation/admin-guide/tainted-kernels.rst).
seealso:
  - name: Tainted kernels
    description: The kernel's description of the taint bits.
    link: https://docs.kernel.org/admin-guide/tainted-kernels.html
"""

EXAMPLES = r"""
- name: Hash what a module change could persist through, before the candidate driver is loaded
  inferlab.distributed.persistence_snapshot:
  register: persistence_before

# ... load the candidate, measure, restore the stock driver ...

- name: Hash it again
  inferlab.distributed.persistence_snapshot:
  register: persistence_after

- name: Stop if anything persisted
  vars:
    persisted: >-
      {{ persistence_before.snapshot | inferlab.distributed.persistence_differences(persistence_after.snapshot) }}
  ansible.builtin.assert:
    that:
      - persisted.differences | length == 0
    fail_msg: >-
      expected no kernel module change to persist, found: {{ persisted.differences | join('; ') }};
      {{ persisted.taint.note }}

- name: Read a fixture tree instead of the real system
  inferlab.distributed.persistence_snapshot:
    root: /srv/lab/host-a/root
    kernel_release: 6.1.0-57-amd64
"""

RETURN = r"""
snapshot:
  description: What a kernel module change could persist through, hashed.
  returned: success
  type: dict
  contains:
    format:
      description: The snapshot format.
      returned: success
      type: str
      sample: inferlab.persistence/1
    kernel_release:
      description: The kernel whose module tree was listed.
      returned: success
      type: str
      sample: 6.1.0-57-amd64
    files:
      description:
        - Groups of hashed files. C(etc/modprobe.d), C(etc/modules-load.d) and the boot directory are dicts of path
          (relative to the group) to value. C(etc/modules) is one value, or null when there is no such file.
        - A value is the sha256 of a regular file, C(-> TARGET) for a symlink, or one of the words "(directory)",
          "(fifo)", "(socket)", "(device)", "(special file)" and "(unreadable)", in parentheses, for what cannot be
          hashed (also named in RV(snapshot.problems)).
      returned: success
      type: dict
      sample:
        etc/modprobe.d:
          nvidia-blacklists-nouveau.conf: 2aae490cf4ed66ed6e68400b9a0c0ab0711981bfd757a0e7afd01e59986ff9f7
        etc/modules-load.d: {modules.conf: '-> ../modules'}
        etc/modules: 3cf96140377b898e48b0253522c261de8b473e9aa0ce53317555bda19b4a50bc
        boot: {initrd.img-6.1.0-57-amd64: 25021347b7c8f3df934897cd773187307dff01f7ce7f2902efcca1910e77db22}
    module_tree:
      description:
        - The file list of C(lib/modules/<release>). C(sha256) is the hash of the sorted lines
          C(relpath<TAB>size<TAB>mode) (octal mode with the type bits; C(-> TARGET) as the size of a symlink, C(-) for
          a directory). C(count) counts what is not a directory. Both are 0 and null when the tree is missing.
        - C(extra) lists everything under C(updates/) and C(extra/) and every module file that C(modules.dep) does not
          list.
      returned: success
      type: dict
      sample:
        path: lib/modules/6.1.0-57-amd64
        count: 8
        sha256: 63927e8085bc614281bcdb4b74ecbffb11962e245f637372b83e4b6ee0ac5aae
        extra: []
    dkms:
      description: The file list of C(var/lib/dkms), hashed like RV(snapshot.module_tree).
      returned: success
      type: dict
      sample: {present: false, count: 0, sha256: null}
    taint:
      description: The kernel taint, the integer in C(sys/kernel/tainted); null when it could not be read.
      returned: success
      type: int
      sample: 0
    problems:
      description: What could not be read, each named relative to O(root). A snapshot with problems proves less.
      returned: success
      type: list
      elements: str
      sample: ['boot: no such directory']
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils._persistence import (  # noqa: E402
    DEFAULT_BOOT_DIR,
    DEFAULT_INITRAMFS_GLOBS,
    PersistenceError,
    snapshot,
)


class PersistenceSnapshot:
    def __init__(self, module):
        self.module = module

    def run(self):
        params = self.module.params
        try:
            result = snapshot(root=params['root'], kernel_release=params['kernel_release'],
                              boot_dir=params['boot_dir'], initramfs_globs=params['initramfs_globs'],
                              procfs_root=params['procfs_root'])
        except PersistenceError as err:
            self.module.fail_json(msg=str(err))
        self.module.exit_json(changed=False, snapshot=result)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            root=dict(type='path', default='/'),
            kernel_release=dict(type='str'),
            boot_dir=dict(type='str', default=DEFAULT_BOOT_DIR),
            initramfs_globs=dict(type='list', elements='str', default=list(DEFAULT_INITRAMFS_GLOBS)),
            procfs_root=dict(type='path'),
        ),
        supports_check_mode=True,
    )


def main():
    PersistenceSnapshot(build_module()).run()


if __name__ == '__main__':
    main()

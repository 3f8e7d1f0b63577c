# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The comparison of two persistence snapshots (_persistence_compare): before/after pairs of the fixture roots
under tests/unit/fixtures/persistence/ (conftest.py's ``root`` and ``dkms_root``), one per kind of difference."""

from __future__ import annotations

import copy
import os
import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._persistence import PersistenceError, snapshot
from ansible_collections.inferlab.distributed.plugins.module_utils._persistence_compare import (
    compare,
    taint_flags,
    taint_note,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.test_persistence import (
    INITRD,
    TREE,
    sha,
)


def short(digest):
    return digest[:12] + '\u2026'


def changed_pair(root, change):
    before = snapshot(str(root))
    change(root)
    return before, snapshot(str(root))


def test_config_files_added_removed_changed(root):
    old_blacklist = sha(root / 'etc/modprobe.d/nvidia-blacklists-nouveau.conf')

    def change(root):
        (root / 'etc/modprobe.d/inferlab.conf').write_text('options thunderbolt_net tx_e2e=1\n')
        (root / 'etc/modprobe.d/thunderbolt.conf').unlink()
        (root / 'etc/modprobe.d/nvidia-blacklists-nouveau.conf').write_text('blacklist nouveau\n')
        (root / 'etc/modules-load.d/thunderbolt_net.conf').write_text('thunderbolt_net\n')

    before, after = changed_pair(root, change)
    new_blacklist = sha(root / 'etc/modprobe.d/nvidia-blacklists-nouveau.conf')
    assert compare(before, after)['differences'] == [
        'etc/modprobe.d/inferlab.conf was added',
        f'etc/modprobe.d/nvidia-blacklists-nouveau.conf changed (sha256 {short(old_blacklist)} -> '
        f'{short(new_blacklist)})',
        'etc/modprobe.d/thunderbolt.conf was removed',
        'etc/modules-load.d/thunderbolt_net.conf was added',
    ]


def test_symlink_added_and_retargeted(root):
    def change(root):
        os.symlink('/dev/null', root / 'etc/modprobe.d/blacklist-thunderbolt.conf')
        os.unlink(root / 'etc/modules-load.d/modules.conf')
        os.symlink('/etc/modules.d/thunderbolt', root / 'etc/modules-load.d/modules.conf')

    before, after = changed_pair(root, change)
    assert compare(before, after)['differences'] == [
        'etc/modprobe.d/blacklist-thunderbolt.conf was added (symlink -> /dev/null)',
        'etc/modules-load.d/modules.conf changed (symlink -> ../modules -> symlink -> /etc/modules.d/thunderbolt)',
    ]


@pytest.mark.parametrize('change, expected', [
    (lambda root: (root / 'etc/modules').unlink(), ['etc/modules was removed']),
    (lambda root: (root / 'etc/modules').write_text('thunderbolt_net\n'),
     ['etc/modules changed (sha256 {old} -> {new})']),
])
def test_etc_modules(root, change, expected):
    old = sha(root / 'etc/modules')
    before, after = changed_pair(root, change)
    new = sha(root / 'etc/modules') if (root / 'etc/modules').exists() else None
    assert compare(before, after)['differences'] == [
        line.format(old=short(old), new=short(new) if new else None) for line in expected]


def test_etc_modules_added(root):
    (root / 'etc/modules').unlink()
    before, after = changed_pair(root, lambda root: (root / 'etc/modules').write_text('thunderbolt_net\n'))
    assert compare(before, after)['differences'] == ['etc/modules was added']


def test_initramfs_changed_added_removed(root):
    old = sha(root / INITRD)

    def change(root):
        (root / INITRD).write_bytes(os.urandom(4096))
        (root / 'boot/initrd.img-6.1.0-56-amd64').unlink()
        (root / 'boot/initrd.img-6.1.0-58-amd64').write_bytes(os.urandom(1024))

    before, after = changed_pair(root, change)
    assert compare(before, after)['differences'] == [
        'boot/initrd.img-6.1.0-56-amd64 was removed',
        f'{INITRD} changed (sha256 {short(old)} -> {short(sha(root / INITRD))})',
        'boot/initrd.img-6.1.0-58-amd64 was added',
    ]


def test_module_installed_under_updates(root):
    def change(root):
        (root / TREE / 'updates').mkdir()
        (root / TREE / 'updates/thunderbolt-net.ko').write_bytes(os.urandom(768))

    before, after = changed_pair(root, change)
    assert compare(before, after)['differences'] == [f'{TREE}: 1 file more (updates/thunderbolt-net.ko)']


def test_module_removed_from_updates(dkms_root):
    before, after = changed_pair(dkms_root, lambda root: (root / 'usr' / TREE / 'updates/dkms/nvidia-current.ko')
                                 .unlink())
    assert compare(before, after)['differences'] == [
        f'{TREE}: 1 file fewer (removed updates/dkms/nvidia-current.ko)']


def test_module_replaced_with_another_name(dkms_root):
    def change(root):
        (root / 'usr' / TREE / 'updates/dkms/nvidia-current.ko').rename(root / 'usr' / TREE / 'updates/dkms/n.ko')

    before, after = changed_pair(dkms_root, change)
    assert compare(before, after)['differences'] == [
        f'{TREE}: file list changed, same count (names, sizes or modes) '
        '(added updates/dkms/n.ko; removed updates/dkms/nvidia-current.ko)']


def test_module_overwritten_in_place_with_another_size(root):
    before = snapshot(str(root))
    (root / TREE / 'kernel/drivers/net/thunderbolt-net.ko').write_bytes(os.urandom(999))
    after = snapshot(str(root))
    assert compare(before, after)['differences'] == [
        f'{TREE}: file list changed, same count (names, sizes or modes) '
        f'(sha256 {short(before["module_tree"]["sha256"])} -> {short(after["module_tree"]["sha256"])})']


def test_module_tree_mode_change_and_listed_file_added(root):
    before = snapshot(str(root))
    os.chmod(root / TREE / 'kernel/net/ipv4/tcp_bbr.ko', 0o600)
    assert len(compare(before, snapshot(str(root)))['differences']) == 1
    os.chmod(root / TREE / 'kernel/net/ipv4/tcp_bbr.ko', 0o644)
    (root / TREE / 'modules.softdep').write_text('# Soft dependencies extracted from modules themselves.\n')
    after = snapshot(str(root))
    assert compare(before, after)['differences'] == [
        f'{TREE}: 1 file more (sha256 {short(before["module_tree"]["sha256"])} -> '
        f'{short(after["module_tree"]["sha256"])})']


def test_unlisted_module_added(root):
    before, after = changed_pair(root, lambda root: (root / TREE / 'kernel/drivers/net/tbnet_x.ko')
                                 .write_bytes(b'\x7fELF'))
    assert compare(before, after)['differences'] == [f'{TREE}: 1 file more (kernel/drivers/net/tbnet_x.ko)']


def test_module_tree_created_and_removed(root):
    tree = root / TREE
    shutil.move(str(tree), str(root / 'saved'))
    missing = snapshot(str(root))
    shutil.move(str(root / 'saved'), str(tree))
    present = snapshot(str(root))
    assert compare(missing, present)['differences'] == [f'{TREE} was created (10 files)']
    assert compare(present, missing)['differences'] == [f'{TREE} is gone or unreadable (it held 10 files)']
    assert compare(present, missing)['problems'] == [f'{TREE}: no such directory (after)']


def test_dkms_created_changed_removed(root, dkms_root):
    before = snapshot(str(root))
    (root / 'var/lib/dkms/thunderbolt-net/0.1/source').mkdir(parents=True)
    (root / 'var/lib/dkms/thunderbolt-net/0.1/source/dkms.conf').write_text('PACKAGE_NAME="thunderbolt-net"\n')
    created = snapshot(str(root))
    assert compare(before, created)['differences'] == ['var/lib/dkms was created (1 file)']
    assert compare(created, before)['differences'] == ['var/lib/dkms was removed (it held 1 file)']
    dkms_before = snapshot(str(dkms_root))
    (dkms_root / 'var/lib/dkms/nvidia-current/535.216.01/build').mkdir()
    (dkms_root / 'var/lib/dkms/nvidia-current/535.216.01/build/make.log').write_text('make -j16 modules\n')
    dkms_after = snapshot(str(dkms_root))
    assert compare(dkms_before, dkms_after)['differences'] == [
        f'var/lib/dkms: 1 file more (sha256 {short(dkms_before["dkms"]["sha256"])} -> '
        f'{short(dkms_after["dkms"]["sha256"])})']


def test_file_became_unreadable(root):
    old = sha(root / 'etc/modules')

    def change(root):
        (root / 'etc/modules').unlink()
        (root / 'etc/modules').mkdir()

    before, after = changed_pair(root, change)
    result = compare(before, after)
    assert result['differences'] == [f'etc/modules changed (sha256 {short(old)} -> a directory)']
    assert result['problems'] == ['etc/modules: a directory, not a file (after)']


def test_problems_before_and_after(root):
    shutil.rmtree(root / 'boot')
    before = snapshot(str(root))
    (root / 'proc/sys/kernel/tainted').write_text('x\n')
    after = snapshot(str(root))
    result = compare(before, after)
    assert result['differences'] == []
    assert result['problems'] == ['boot: no such directory (before and after)',
                                  "proc/sys/kernel/tainted: malformed 'x' (expected a decimal integer) (after)"]
    assert result['taint'] == {'before': 0, 'after': None, 'note': 'kernel taint not recorded after (before: 0)'}


def test_different_kernels(root):
    before = snapshot(str(root))
    after = snapshot(str(root), kernel_release='6.1.0-58-amd64')
    assert compare(before, after)['differences'] == [
        'kernel release 6.1.0-57-amd64 -> 6.1.0-58-amd64 (the snapshots describe different kernels)',
        'module tree lib/modules/6.1.0-57-amd64 -> lib/modules/6.1.0-58-amd64 (the snapshots describe different '
        'kernels)',
    ]


def test_boot_group_only_in_one_snapshot(root):
    before = snapshot(str(root))
    after = copy.deepcopy(before)
    after['files']['boot/efi'] = {}
    del after['files']['boot']
    assert compare(before, after)['differences'] == [
        'boot was removed', 'boot/efi was added (a directory of 0 file(s))']


def test_registered_results_are_accepted(root):
    snap = snapshot(str(root))
    assert compare({'changed': False, 'snapshot': snap}, snap)['differences'] == []


@pytest.mark.parametrize('before, message', [
    (None, "the before snapshot must be a dict (persistence_snapshot's snapshot), got NoneType"),
    ({'format': 'inferlab.persistence/0'}, "the before snapshot has format 'inferlab.persistence/0', expected "
                                           "'inferlab.persistence/1'"),
    ({'format': 'inferlab.persistence/1', 'files': [], 'module_tree': {}, 'dkms': {}, 'problems': []},
     "the before snapshot's files must be a dict, got []"),
    ({'format': 'inferlab.persistence/1', 'files': {}, 'module_tree': {}, 'dkms': {}, 'problems': [],
      'taint': True}, "the before snapshot's taint must be a non-negative integer or null, got True"),
])
def test_compare_rejects_what_is_not_a_snapshot(root, before, message):
    with pytest.raises(PersistenceError) as err:
        compare(before, snapshot(str(root)))
    assert str(err.value) == message


# ---------------------------------------------------------------------------------------------------------------
# taint


@pytest.mark.parametrize('value, flags', [
    (0, ''), (1, 'P'), (4097, 'PO'), (12288, 'OE'), (512 | 4096 | 8192, 'WOE'),
    (sum(1 << bit for bit in range(20)), 'PFSRMBUDAWCIOELKXTNJ'), ((1 << 25) | 1, 'P(bit 25)'), (None, None),
])
def test_taint_flags(value, flags):
    assert taint_flags(value) == flags


@pytest.mark.parametrize('before, after, note', [
    (0, 12288, 'kernel taint 0 -> 12288 (OE: an out-of-tree unsigned module was loaded)'),
    (0, 4096, 'kernel taint 0 -> 4096 (O: an out-of-tree module was loaded)'),
    (0, 0, 'kernel taint 0, unchanged (not tainted)'),
    (4097, 4097, 'kernel taint 4097, unchanged (PO: a proprietary module was loaded; an out-of-tree module was '
                 'loaded)'),
    (4097, 4097 | 8192, 'kernel taint 4097 -> 12289 (E added: an unsigned module was loaded)'),
    (4096, 4096 | 8192 | 512, 'kernel taint 4096 -> 12800 (WE added: the kernel issued a warning; an unsigned '
                              'module was loaded)'),
    (12288, 0, 'kernel taint 12288 -> 0 (OE cleared: taint is only cleared by a reboot, so the kernel was restarted '
               'in between)'),
    (0, 1 << 25, "kernel taint 0 -> 33554432 ((bit 25): taint bit 25, not in this decoder's table)"),
    (None, None, 'kernel taint not recorded'),
    (None, 0, 'kernel taint not recorded before (after: 0)'),
])
def test_taint_note(before, after, note):
    assert taint_note(before, after) == note

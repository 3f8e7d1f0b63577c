# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._persistence_compare import compare
from ansible_collections.inferlab.distributed.plugins.modules import persistence_snapshot
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.test_persistence import (
    persistence_root,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module

RELEASE = '6.1.0-57-amd64'
TREE = 'lib/modules/' + RELEASE


@pytest.mark.parametrize('check_mode', [False, True])
def test_snapshot_of_a_fixture_root(tmp_path, check_mode):
    root = persistence_root('debian12', tmp_path / 'root')
    failed, result = run_module(persistence_snapshot.main, {'root': str(root), '_ansible_check_mode': check_mode})
    assert not failed and result['changed'] is False
    snap = result['snapshot']
    assert list(snap) == ['format', 'kernel_release', 'files', 'module_tree', 'dkms', 'taint', 'problems']
    assert snap['kernel_release'] == RELEASE
    assert sorted(snap['files']) == ['boot', 'etc/modprobe.d', 'etc/modules', 'etc/modules-load.d']
    initrd = (root / 'boot' / f'initrd.img-{RELEASE}').read_bytes()
    assert snap['files']['boot'][f'initrd.img-{RELEASE}'] == hashlib.sha256(initrd).hexdigest()
    assert sorted(snap['files']['boot']) == ['initrd.img-6.1.0-56-amd64', f'initrd.img-{RELEASE}']
    assert snap['module_tree']['count'] == 10 and snap['module_tree']['extra'] == []
    assert snap['taint'] == 0 and snap['problems'] == []


def test_nothing_is_written(tmp_path):
    root = persistence_root('debian12', tmp_path / 'root')

    def state():
        found = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                info = os.lstat(path)
                found[path] = (info.st_mode, info.st_size, info.st_mtime_ns)
        return found

    before = state()
    run_module(persistence_snapshot.main, {'root': str(root)})
    assert state() == before


def test_options(tmp_path):
    root = persistence_root('debian12_dkms', tmp_path / 'root')
    (root / 'efi').mkdir()
    (root / 'efi' / f'initramfs-{RELEASE}.img').write_bytes(os.urandom(2048))
    proc = tmp_path / 'proc'
    (proc / 'sys/kernel').mkdir(parents=True)
    (proc / 'sys/kernel/tainted').write_text('12289\n')
    failed, result = run_module(persistence_snapshot.main, {
        'root': str(root), 'kernel_release': RELEASE, 'boot_dir': '/efi', 'initramfs_globs': ['initramfs-*'],
        'procfs_root': str(proc)})
    assert not failed
    snap = result['snapshot']
    assert list(snap['files']['efi']) == [f'initramfs-{RELEASE}.img']
    assert snap['module_tree']['extra'] == ['updates/dkms/nvidia-current.ko']
    assert snap['dkms']['present'] is True
    assert snap['taint'] == 12289


def test_problems_are_reported_not_failed(tmp_path):
    root = persistence_root('debian12', tmp_path / 'root')
    shutil.rmtree(root / 'boot')
    (root / 'etc/modules').unlink()
    (root / 'etc/modules').mkdir()
    os.symlink('/nonexistent.conf', root / 'etc/modprobe.d/dangling.conf')
    failed, result = run_module(persistence_snapshot.main, {'root': str(root)})
    assert not failed
    snap = result['snapshot']
    assert snap['files']['etc/modprobe.d']['dangling.conf'] == '-> /nonexistent.conf'
    assert snap['files']['etc/modules'] == '(directory)'
    assert snap['problems'] == ['etc/modules: a directory, not a file', 'boot: no such directory']


@pytest.mark.parametrize('args, message', [
    ({'kernel_release': '../x'}, "kernel_release must be a release like 6.1.0-57-amd64, got '../x'"),
    ({'boot_dir': '../boot'}, "boot_dir must stay below the root (no ..), got '../boot'"),
])
def test_bad_options_fail(tmp_path, args, message):
    root = persistence_root('debian12', tmp_path / 'root')
    failed, result = run_module(persistence_snapshot.main, dict(args, root=str(root)))
    assert failed
    assert result['msg'] == message


def test_missing_root_fails(tmp_path):
    failed, result = run_module(persistence_snapshot.main, {'root': str(tmp_path / 'nowhere')})
    assert failed
    assert result['msg'] == f'root {tmp_path / "nowhere"} is not a directory'


def test_before_and_after_through_the_module(tmp_path):
    root = persistence_root('debian12', tmp_path / 'root')
    _failed, before = run_module(persistence_snapshot.main, {'root': str(root)})
    (root / TREE / 'updates').mkdir()
    (root / TREE / 'updates/thunderbolt-net.ko').write_bytes(os.urandom(900))
    (root / 'proc/sys/kernel/tainted').write_text('12288\n')
    _failed, after = run_module(persistence_snapshot.main, {'root': str(root)})
    result = compare(before, after)
    assert result['differences'] == [f'{TREE}: 1 file more (updates/thunderbolt-net.ko)']
    assert result['taint']['note'] == 'kernel taint 0 -> 12288 (OE: an out-of-tree unsigned module was loaded)'

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The persistence snapshot, on fixture roots under tests/unit/fixtures/persistence/.

``persistence_root(name, dest)`` copies a fixture root and creates the symlinks listed in ``NAME.symlinks`` beside
it; the module and filter tests use it too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _persistence
from ansible_collections.inferlab.distributed.plugins.module_utils._persistence import PersistenceError, snapshot
from ansible_collections.inferlab.distributed.plugins.module_utils._persistence_compare import compare, taint_flags

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures' / 'persistence'
RELEASE = '6.1.0-57-amd64'
TREE = 'lib/modules/' + RELEASE
INITRD = 'boot/initrd.img-' + RELEASE


def persistence_root(name, dest):
    """Copy fixture root ``name`` to ``dest`` and create the symlinks of ``NAME.symlinks``; returns ``dest``."""
    dest = Path(dest)
    shutil.copytree(FIXTURES / name, dest, symlinks=True)
    for line in (FIXTURES / f'{name}.symlinks').read_text(encoding='utf-8').splitlines():
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        link, _sep, target = (part.strip() for part in line.partition(' -> '))
        path = dest / link
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    return dest


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def listing_sha(top):
    """The module tree hash computed independently of the module: sorted ``rel<TAB>size<TAB>mode`` lines."""
    lines = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, top)
            if stat.S_ISDIR(info.st_mode):
                size = '-'
            elif stat.S_ISLNK(info.st_mode):
                size = '-> ' + os.readlink(path)
            else:
                size = str(info.st_size)
            lines.append((rel, f'{rel}\t{size}\t{info.st_mode:o}'))
    return hashlib.sha256('\n'.join(line for _rel, line in sorted(lines)).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# snapshot


def test_debian12_snapshot(root):
    snap = snapshot(str(root))
    assert list(snap) == ['format', 'kernel_release', 'files', 'module_tree', 'dkms', 'taint', 'problems']
    assert snap['format'] == 'inferlab.persistence/1'
    assert snap['kernel_release'] == RELEASE  # read from the root's proc/sys/kernel/osrelease
    assert snap['files'] == {
        'etc/modprobe.d': {
            'nvidia-blacklists-nouveau.conf': sha(root / 'etc/modprobe.d/nvidia-blacklists-nouveau.conf'),
            'thunderbolt.conf': sha(root / 'etc/modprobe.d/thunderbolt.conf'),
        },
        'etc/modules-load.d': {
            'modules.conf': '-> ../modules',
            'tcp_bbr.conf': sha(root / 'etc/modules-load.d/tcp_bbr.conf'),
        },
        'etc/modules': sha(root / 'etc/modules'),
        'boot': {  # vmlinuz and config do not match the initramfs globs
            'initrd.img-6.1.0-56-amd64': sha(root / 'boot/initrd.img-6.1.0-56-amd64'),
            'initrd.img-6.1.0-57-amd64': sha(root / INITRD),
        },
    }
    # 8 files and 2 symlinks (build, source); the directories are hashed in the list but not counted
    assert snap['module_tree'] == {'path': TREE, 'count': 10, 'sha256': listing_sha(root / TREE), 'extra': []}
    assert snap['dkms'] == {'present': False, 'count': 0, 'sha256': None}
    assert snap['taint'] == 0
    assert snap['problems'] == []
    json.dumps(snap)


def test_unchanged_root_has_no_differences(root):
    first = snapshot(str(root))
    assert snapshot(str(root)) == first
    result = compare(first, snapshot(str(root)))
    assert result == {'differences': [], 'problems': [],
                      'taint': {'before': 0, 'after': 0, 'note': 'kernel taint 0, unchanged (not tainted)'}}


def test_merged_usr_dkms_root(dkms_root):
    snap = snapshot(str(dkms_root))
    assert snap['problems'] == []
    # lib -> usr/lib is resolved inside the root; the path stays the one asked for
    assert snap['module_tree']['path'] == TREE
    assert snap['module_tree']['count'] == 10
    assert snap['module_tree']['sha256'] == listing_sha(dkms_root / 'usr' / TREE)
    assert snap['module_tree']['extra'] == ['updates/dkms/nvidia-current.ko']
    assert snap['dkms']['present'] is True
    # dkms_dbversion, the module, make.log and the two symlinks (source, kernel-...-x86_64)
    assert snap['dkms']['count'] == 5
    assert snap['dkms']['sha256'] == listing_sha(dkms_root / 'var/lib/dkms')
    assert snap['taint'] == 4097
    assert taint_flags(snap['taint']) == 'PO'


def test_module_not_in_modules_dep_is_extra(root):
    (root / TREE / 'kernel/drivers/net/thunderbolt_net_candidate.ko').write_bytes(b'\x7fELF' + bytes(60))
    (root / TREE / 'kernel/drivers/net/zz.ko.xz').write_bytes(b'\xfd7zXZ' + bytes(30))
    (root / TREE / 'kernel/drivers/net/notes.txt').write_text('not a module\n')
    snap = snapshot(str(root))
    assert snap['module_tree']['extra'] == ['kernel/drivers/net/thunderbolt_net_candidate.ko',
                                            'kernel/drivers/net/zz.ko.xz']
    assert snap['module_tree']['count'] == 13


def test_absolute_paths_in_modules_dep(root):
    dep = root / TREE / 'modules.dep'
    dep.write_text(''.join(f'/lib/modules/{RELEASE}/{line}\n' if line else ''
                           for line in dep.read_text().splitlines()))
    assert snapshot(str(root))['module_tree']['extra'] == []


def test_missing_modules_dep_is_a_problem_and_modules_are_not_guessed(root):
    (root / TREE / 'modules.dep').unlink()
    (root / TREE / 'updates').mkdir()
    (root / TREE / 'updates/thunderbolt-net.ko').write_bytes(b'\x7fELF')
    snap = snapshot(str(root))
    assert snap['module_tree']['extra'] == ['updates/thunderbolt-net.ko']
    assert snap['problems'] == [f'{TREE}/modules.dep: missing, so modules it does not list are not looked for']


def test_kernel_release_default(root, monkeypatch):
    (root / 'proc/sys/kernel/osrelease').unlink()
    monkeypatch.setattr(_persistence.os, 'uname', lambda: os.uname_result(('Linux', 'h', RELEASE, '#1', 'x86_64')))
    assert snapshot(str(root))['kernel_release'] == RELEASE
    snap = snapshot(str(root), kernel_release='6.1.0-56-amd64')
    assert snap['module_tree'] == {'path': 'lib/modules/6.1.0-56-amd64', 'count': 0, 'sha256': None, 'extra': []}
    assert snap['problems'] == ['lib/modules/6.1.0-56-amd64: no such directory']


def test_procfs_root_option(root, tmp_path):
    proc = tmp_path / 'proc'
    (proc / 'sys/kernel').mkdir(parents=True)
    (proc / 'sys/kernel/tainted').write_text('12288\n')
    (proc / 'sys/kernel/osrelease').write_text(RELEASE + '\n')
    snap = snapshot(str(root), procfs_root=str(proc))
    assert snap['taint'] == 12288
    assert snap['kernel_release'] == RELEASE


def test_boot_dir_and_globs(root):
    (root / 'boot/efi').mkdir()
    (root / 'boot/efi/initramfs-6.1.0-57-amd64.img').write_bytes(os.urandom(2048))
    (root / 'boot/efi/initrd.img-6.1.0-57-amd64').write_bytes(os.urandom(2048))
    snap = snapshot(str(root), boot_dir='/boot/efi/', initramfs_globs=['initramfs-*'])
    assert snap['files']['boot/efi'] == {
        'initramfs-6.1.0-57-amd64.img': sha(root / 'boot/efi/initramfs-6.1.0-57-amd64.img')}
    assert 'boot' not in snap['files']


def test_large_initramfs_is_hashed_streaming(root):
    data = os.urandom(3 * _persistence.CHUNK_BYTES + 12345)
    (root / INITRD).write_bytes(data)
    assert snapshot(str(root))['files']['boot']['initrd.img-' + RELEASE] == hashlib.sha256(data).hexdigest()


def test_symlinks_are_recorded_not_followed(root):
    os.symlink('/etc/passwd', root / 'etc/modprobe.d/outside.conf')
    os.symlink('/nonexistent/gone.conf', root / 'etc/modprobe.d/dangling.conf')
    os.symlink('../../../../../../../etc/shadow', root / 'boot/initrd.img-6.1.0-99-amd64')
    (root / 'etc/modules').unlink()
    os.symlink('/etc/hostname', root / 'etc/modules')
    snap = snapshot(str(root))
    assert snap['files']['etc/modprobe.d']['outside.conf'] == '-> /etc/passwd'
    assert snap['files']['etc/modprobe.d']['dangling.conf'] == '-> /nonexistent/gone.conf'
    assert snap['files']['boot']['initrd.img-6.1.0-99-amd64'] == '-> ../../../../../../../etc/shadow'
    assert snap['files']['etc/modules'] == '-> /etc/hostname'
    assert snap['problems'] == []


@pytest.mark.parametrize('target', ['/usr/lib', '../../../../../../../usr/lib'])
def test_directory_symlinks_resolve_inside_the_root(tmp_path, target):
    root = persistence_root('debian12_dkms', tmp_path / 'root')
    os.unlink(root / 'lib')
    os.symlink(target, root / 'lib')  # an absolute target, or one climbing out: both stay in the root
    snap = snapshot(str(root))
    assert snap['module_tree']['sha256'] == listing_sha(root / 'usr' / TREE)
    assert snap['problems'] == []


def test_subdirectories_of_config_dirs_are_walked(root):
    (root / 'etc/modprobe.d/vendor').mkdir()
    (root / 'etc/modprobe.d/vendor/x.conf').write_text('install evil /bin/true\n')
    snap = snapshot(str(root))
    assert snap['files']['etc/modprobe.d']['vendor/x.conf'] == sha(root / 'etc/modprobe.d/vendor/x.conf')


def test_missing_config_dirs_and_etc_modules_are_facts_not_problems(root):
    shutil.rmtree(root / 'etc/modprobe.d')
    shutil.rmtree(root / 'etc/modules-load.d')
    (root / 'etc/modules').unlink()
    snap = snapshot(str(root))
    assert snap['files']['etc/modprobe.d'] == {}
    assert snap['files']['etc/modules-load.d'] == {}
    assert snap['files']['etc/modules'] is None
    assert snap['problems'] == []


def test_file_names_that_are_not_utf8(root):
    os.close(os.open(os.path.join(bytes(root), b'etc/modprobe.d/caf\xe9.conf'), os.O_CREAT | os.O_WRONLY, 0o644))
    snap = snapshot(str(root))
    assert 'caf\\xe9.conf' in snap['files']['etc/modprobe.d']
    json.dumps(snap)


# --- malformed and unreadable: named in problems, never a crash ---------------------------------------------------


def test_directory_where_a_file_is_expected(root):
    (root / 'etc/modules').unlink()
    (root / 'etc/modules').mkdir()
    (root / INITRD).unlink()
    (root / INITRD).mkdir()
    snap = snapshot(str(root))
    assert snap['files']['etc/modules'] == '(directory)'
    assert snap['files']['boot']['initrd.img-' + RELEASE] == '(directory)'
    assert snap['problems'] == ['etc/modules: a directory, not a file',
                                f'{INITRD}: a directory, not a file']


def test_fifo_is_not_opened(root):
    os.mkfifo(root / 'etc/modprobe.d/pipe.conf')
    snap = snapshot(str(root))
    assert snap['files']['etc/modprobe.d']['pipe.conf'] == '(fifo)'
    assert snap['problems'] == ['etc/modprobe.d/pipe.conf: a fifo, not a file']


def test_unreadable_file(root, monkeypatch):
    real_open = os.open
    victim = str(root / 'etc/modprobe.d/thunderbolt.conf')

    def refusing_open(path, flags, *args):
        if str(path) == victim:
            raise PermissionError(13, 'Permission denied', path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(_persistence.os, 'open', refusing_open)
    snap = snapshot(str(root))
    assert snap['files']['etc/modprobe.d']['thunderbolt.conf'] == '(unreadable)'
    assert snap['problems'] == ['etc/modprobe.d/thunderbolt.conf: unreadable (Permission denied)']


def test_unlistable_directory(root, monkeypatch):
    real_scandir = os.scandir
    victim = str(root / TREE / 'kernel/net')

    def refusing_scandir(path):
        if str(path) == victim:
            raise PermissionError(13, 'Permission denied', path)
        return real_scandir(path)

    monkeypatch.setattr(_persistence.os, 'scandir', refusing_scandir)
    snap = snapshot(str(root))
    assert snap['problems'] == [f'{TREE}/kernel/net: cannot list it (Permission denied)']
    assert snap['module_tree']['count'] == 9


def test_missing_boot_dir(root):
    shutil.rmtree(root / 'boot')
    snap = snapshot(str(root))
    assert snap['files']['boot'] == {}
    assert snap['problems'] == ['boot: no such directory']


def test_dangling_boot_symlink(root):
    shutil.rmtree(root / 'boot')
    os.symlink('/efi/nowhere', root / 'boot')
    snap = snapshot(str(root))
    assert snap['files']['boot'] == {}
    assert snap['problems'] == ['boot: no such directory']


def test_boot_is_a_file(root):
    shutil.rmtree(root / 'boot')
    (root / 'boot').write_text('not a directory\n')
    assert snapshot(str(root))['problems'] == ['boot: a regular file, not a directory']


def test_symlink_loop(root):
    shutil.rmtree(root / 'boot')
    os.symlink('boot2', root / 'boot')
    os.symlink('boot', root / 'boot2')
    assert snapshot(str(root))['problems'] == ['boot: more than 40 symlinks on the way (a loop?)']


def test_missing_module_tree_and_dkms_tree_as_a_file(root):
    shutil.rmtree(root / TREE)
    (root / 'var/lib').mkdir(parents=True)
    (root / 'var/lib/dkms').write_text('')
    snap = snapshot(str(root))
    assert snap['module_tree'] == {'path': TREE, 'count': 0, 'sha256': None, 'extra': []}
    assert snap['dkms'] == {'present': True, 'count': 0, 'sha256': None}
    assert snap['problems'] == [f'{TREE}: no such directory', 'var/lib/dkms: a regular file, not a directory']


@pytest.mark.parametrize('content, problem', [
    (None, 'proc/sys/kernel/tainted: missing, so the kernel taint is not recorded'),
    ('abc\n', "proc/sys/kernel/tainted: malformed 'abc' (expected a decimal integer)"),
    ('-1\n', "proc/sys/kernel/tainted: malformed '-1' (expected a decimal integer)"),
    ('', "proc/sys/kernel/tainted: malformed '' (expected a decimal integer)"),
])
def test_bad_taint(root, content, problem):
    path = root / 'proc/sys/kernel/tainted'
    path.unlink()
    if content is not None:
        path.write_text(content)
    snap = snapshot(str(root))
    assert snap['taint'] is None
    assert snap['problems'] == [problem]


@pytest.mark.parametrize('kwargs, message', [
    ({'kernel_release': '../../etc'}, "kernel_release must be a release like 6.1.0-57-amd64, got '../../etc'"),
    ({'kernel_release': ''}, "kernel_release must be a release like 6.1.0-57-amd64, got ''"),
    ({'boot_dir': '../boot'}, "boot_dir must stay below the root (no ..), got '../boot'"),
    ({'boot_dir': '/'}, "boot_dir must name a directory below the root, got '/'"),
    ({'initramfs_globs': ['*/initrd']}, "initramfs_globs must be file name patterns without /, got ['*/initrd']"),
])
def test_bad_arguments(root, kwargs, message):
    with pytest.raises(PersistenceError) as err:
        snapshot(str(root), **kwargs)
    assert str(err.value) == message


def test_root_must_be_a_directory(tmp_path):
    with pytest.raises(PersistenceError, match='is not a directory'):
        snapshot(str(tmp_path / 'missing'))

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import pwd

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import (
    MalformedValueError,
    SysfsReader,
    SysfsReadError,
    parse_gbps,
    parse_int,
    read_file,
)


@pytest.fixture
def root(tmp_path):
    (tmp_path / 'a').mkdir()
    (tmp_path / 'a' / 'value').write_text('  42\n')
    (tmp_path / 'a' / 'empty').write_text('\n')
    (tmp_path / 'a' / 'hex').write_text('0x0000000f\n')
    (tmp_path / 'a' / 'speed').write_text('20.0 Gb/s\n')
    (tmp_path / 'a' / 'bad').write_text('fast\n')
    return tmp_path


def test_read_file_strips_and_defaults(root):
    assert read_file(str(root / 'a' / 'value')) == '42'
    assert read_file(str(root / 'a' / 'value'), strip=False) == '  42\n'
    assert read_file(str(root / 'a' / 'missing')) is None
    assert read_file(str(root / 'a' / 'missing'), default='x') == 'x'
    # a path through a regular file is "missing" too (ENOTDIR)
    assert read_file(str(root / 'a' / 'value' / 'below'), default='x') == 'x'


def test_read_file_empty_is_a_fact_not_missing(root):
    assert read_file(str(root / 'a' / 'empty'), default='x') == ''


def test_read_file_unreadable_raises_naming_path(root):
    path = root / 'a'
    with pytest.raises(SysfsReadError, match=f'cannot read {path}'):
        read_file(str(path))  # a directory: IsADirectoryError


def test_read_file_permission_denied(tmp_path):
    """Root reads files whatever their mode, so as root (CI) the read runs in a child that drops to nobody."""
    folder = tmp_path / 'world'
    folder.mkdir()
    path = folder / 'value'
    path.write_text('1\n')
    path.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(SysfsReadError, match='Permission denied'):
            read_file(str(path))
        return
    # the child must reach the file: every directory above it searchable by others
    for parent in [folder, *folder.parents]:
        if not parent.stat().st_mode & 0o001:
            parent.chmod(parent.stat().st_mode | 0o001)
    nobody = pwd.getpwnam('nobody')
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, read, report through the exit status only
        status = 3
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            read_file(str(path))
            status = 1
        except SysfsReadError as err:
            status = 0 if 'Permission denied' in str(err) and str(path) in str(err) else 2
        finally:
            os._exit(status)
    wait_status = os.waitpid(pid, 0)[1]
    assert os.waitstatus_to_exitcode(wait_status) == 0, 'as nobody: 1 = read anyway, 2 = another error, 3 = no drop'


@pytest.mark.parametrize('text, base, expected', [
    ('42', 10, 42),
    (' -1 ', 10, -1),
    ('0x0000000f', 16, 15),
    ('0000000f', 16, 15),
    ('0x10', 0, 16),
])
def test_parse_int(text, base, expected):
    assert parse_int(text, '/x/f', base=base) == expected


@pytest.mark.parametrize('text, kwargs, message', [
    ('x', {}, "malformed lanes in /x/lanes: 'x' (expected a decimal integer)"),
    ('', {}, "malformed lanes in /x/lanes: '' (expected a decimal integer)"),
    ('1.5', {}, "malformed lanes in /x/lanes: '1.5' (expected a decimal integer)"),
    ('zz', {'base': 16}, "malformed lanes in /x/lanes: 'zz' (expected a hexadecimal integer like 0x0000000f)"),
    ('-1', {'minimum': 0}, "malformed lanes in /x/lanes: '-1' (expected a decimal integer >= 0)"),
    (None, {}, "malformed lanes in /x/lanes: None (expected a decimal integer)"),
])
def test_parse_int_malformed(text, kwargs, message):
    with pytest.raises(MalformedValueError) as exc:
        parse_int(text, '/x/lanes', **kwargs)
    assert str(exc.value) == message
    assert exc.value.path == '/x/lanes'
    assert exc.value.value == text


@pytest.mark.parametrize('text, expected', [
    ('20.0 Gb/s', 20.0),
    ('40.0 Gb/s\n', 40.0),
    ('10 Gb/s', 10.0),
    ('20.0Gb/s', 20.0),
])
def test_parse_gbps(text, expected):
    assert parse_gbps(text, '/x/rx_speed') == expected


@pytest.mark.parametrize('text', ['fast', '20.0', '20.0 Mb/s', 'Gb/s', '-20.0 Gb/s', ''])
def test_parse_gbps_malformed(text):
    with pytest.raises(MalformedValueError) as exc:
        parse_gbps(text, '/x/sys/bus/thunderbolt/devices/0-1/rx_speed')
    assert str(exc.value) == (f"malformed rx_speed in /x/sys/bus/thunderbolt/devices/0-1/rx_speed: {text!r} "
                              "(expected like '20.0 Gb/s')")


def test_reader_paths_are_under_root(root):
    reader = SysfsReader(str(root))
    assert reader.path('a', 'value') == str(root / 'a' / 'value')
    assert reader.path('/a/value') == str(root / 'a' / 'value')
    assert reader.read('a', 'value') == '42'
    assert reader.read('a', 'nope', default='d') == 'd'
    assert reader.exists('a', 'value') and not reader.exists('a', 'nope')
    assert reader.isdir('a') and not reader.isdir('a', 'value')
    assert reader.listdir('a') == ['bad', 'empty', 'hex', 'speed', 'value']
    assert reader.listdir('nope') == []


def test_reader_typed_reads(root):
    reader = SysfsReader(str(root))
    assert reader.read_int('a', 'value') == 42
    assert reader.read_int('a', 'hex', base=16) == 15
    assert reader.read_int('a', 'missing', default=-7) == -7
    assert reader.read_gbps('a', 'speed') == 20.0
    assert reader.read_gbps('a', 'missing') is None
    with pytest.raises(MalformedValueError, match=r"malformed bad in .*/a/bad: 'fast'"):
        reader.read_int('a', 'bad')
    with pytest.raises(MalformedValueError, match=r"malformed rx_speed in .*/a/bad: 'fast' \(expected like"):
        reader.read_gbps('a', 'bad', name='rx_speed')


def test_reader_realpath_follows_relative_links(root):
    (root / 'b').mkdir()
    os.symlink('../a', root / 'b' / 'link')
    reader = SysfsReader(str(root))
    assert reader.realpath('b', 'link') == os.path.realpath(root / 'a')
    assert reader.read('b', 'link', 'value') == '42'

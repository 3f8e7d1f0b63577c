# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.inferlab.distributed.plugins.modules import host_files
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def manifest(root, content='print("ledger")\n'):
    return {
        'directories': [{'path': str(root / 'bin'), 'mode': '0755'}, {'path': str(root / 'ledger'), 'mode': '0700'}],
        'files': [{'dest': str(root / 'bin' / 'inferlab_ledger.py'), 'content': content, 'mode': '0644'},
                  {'dest': str(root / 'bin' / 'inferlab_tc.py'), 'content': 'TC = "é"\n', 'mode': '0644'}],
    }


def test_installs_then_changes_nothing(tmp_path):
    failed, result = run_module(host_files.main, manifest(tmp_path))
    assert not failed and result['changed']
    assert result['created'] == [str(tmp_path / 'bin'), str(tmp_path / 'ledger')]
    assert len(result['written']) == 2
    assert mode_of(tmp_path / 'ledger') == 0o700 and mode_of(tmp_path / 'bin') == 0o755
    assert (tmp_path / 'bin' / 'inferlab_tc.py').read_bytes() == 'TC = "é"\n'.encode()
    assert mode_of(tmp_path / 'bin' / 'inferlab_ledger.py') == 0o644
    assert sorted(os.listdir(tmp_path / 'bin')) == ['inferlab_ledger.py', 'inferlab_tc.py']  # no temporary left

    failed, result = run_module(host_files.main, manifest(tmp_path))
    assert not failed and not result['changed'] and result['created'] == [] and result['written'] == []


def test_rewrites_only_what_differs(tmp_path):
    run_module(host_files.main, manifest(tmp_path))
    os.chmod(tmp_path / 'bin' / 'inferlab_tc.py', 0o600)
    inode = os.stat(tmp_path / 'bin' / 'inferlab_tc.py').st_ino
    failed, result = run_module(host_files.main, manifest(tmp_path, content='print("newer ledger")\n'))
    assert not failed and result['changed'] and result['created'] == []
    assert result['written'] == [str(tmp_path / 'bin' / 'inferlab_ledger.py'), str(tmp_path / 'bin' / 'inferlab_tc.py')]
    assert (tmp_path / 'bin' / 'inferlab_ledger.py').read_text() == 'print("newer ledger")\n'
    assert mode_of(tmp_path / 'bin' / 'inferlab_tc.py') == 0o644
    assert os.stat(tmp_path / 'bin' / 'inferlab_tc.py').st_ino != inode  # replaced by a rename, never edited in place


def test_check_mode_writes_nothing(tmp_path):
    failed, result = run_module(host_files.main, dict(manifest(tmp_path), _ansible_check_mode=True))
    assert not failed and result['changed'] and len(result['written']) == 2
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('field, value, message', [
    ('mode', '644x', "expected an octal mode such as 0644 for "),
    ('mode', '17777', "expected an octal mode such as 0644 for "),
    ('dest', 'relative/inferlab_tc.py', "expected an absolute path, found 'relative/inferlab_tc.py'"),
])
def test_bad_input_is_refused_before_any_write(tmp_path, field, value, message):
    args = manifest(tmp_path)
    args['files'][1][field] = value
    failed, result = run_module(host_files.main, args)
    assert failed and message in result['msg']
    assert os.listdir(tmp_path) == []


def test_a_missing_directory_fails_with_its_name(tmp_path):
    args = {'files': [{'dest': str(tmp_path / 'absent' / 'inferlab_tc.py'), 'content': 'x\n', 'mode': '0644'}]}
    failed, result = run_module(host_files.main, args)
    assert failed and result['msg'].startswith('could not install ')
    assert 'No such file or directory' in result['msg']

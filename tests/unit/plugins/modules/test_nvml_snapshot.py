# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvml_snapshot: a live reading (the fake NVML of utils) recorded to a file that nvml_info replays."""

from __future__ import annotations

import json
import sys

import pynvml
import yaml

from ansible_collections.inferlab.distributed.plugins.modules import nvml_info, nvml_snapshot
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    fake_gpu,
    install_fake_nvml,
    run_module,
    set_module_args,
)

PROC = str(FIXTURES / 'proc')


def test_record_then_replay(monkeypatch, tmp_path):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    path = tmp_path / 'rec.json'
    failed, result = run_module(nvml_snapshot.main, {'dest': str(path), 'procfs_root': PROC})
    assert not failed and result['changed'] is True and result['dest'] == str(path)
    doc = json.loads(path.read_text())
    assert doc['format'] == 'inferlab.nvml_snapshot/1' and doc['hostname'] and doc['recorded_at'].endswith('Z')
    assert doc['gpus'] == result['nvml']['gpus'] and oct(path.stat().st_mode & 0o777) == '0o644'
    # what was recorded replays to the same facts
    failed, replay = run_module(nvml_info.main, {'snapshot': str(path)})
    assert not failed and replay['nvml']['gpus'] == result['nvml']['gpus']


def test_check_mode_writes_nothing(monkeypatch, tmp_path):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    failed, result = run_module(nvml_snapshot.main, {'dest': str(tmp_path / 'rec.json'), 'procfs_root': PROC,
                                                     '_ansible_check_mode': True})
    assert not failed and result['changed'] is True
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_fails_naming_it(monkeypatch, tmp_path):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    failed, result = run_module(nvml_snapshot.main, {'dest': str(tmp_path / 'no' / 'rec.json'), 'procfs_root': PROC})
    assert failed
    assert result['msg'] == (f'cannot record NVML snapshot to {tmp_path}/no/rec.json: directory {tmp_path}/no does '
                             'not exist')


def test_without_nvidia_ml_py_it_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    failed, result = run_module(nvml_snapshot.main, {'dest': str(tmp_path / 'rec.json')})
    assert failed and 'nvidia-ml-py' in result['msg'] and list(tmp_path.iterdir()) == []


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(nvml_snapshot.DOCUMENTATION)['options']
    with set_module_args({'dest': '/nonexistent/rec.json'}):
        spec = nvml_snapshot.build_module().argument_spec
    assert {n: (o['type'], o.get('default'), o.get('required', False)) for n, o in options.items()} == \
        {n: (o['type'], o.get('default'), o.get('required', False)) for n, o in spec.items()}

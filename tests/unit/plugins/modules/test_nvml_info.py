# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import sys

import pynvml
import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _nvml
from ansible_collections.inferlab.distributed.plugins.modules import nvml_info
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    fake_gpu,
    install_fake_nvml,
    run_module,
    set_module_args,
)

PROC = str(FIXTURES / 'proc')
RTX = str(FIXTURES / 'nvml' / 'rtx5090.json')
H200 = str(FIXTURES / 'nvml' / 'h200.json')


@pytest.mark.parametrize('path', [RTX, H200])
@pytest.mark.parametrize('check_mode', [False, True])
def test_replay(path, check_mode):
    failed, result = run_module(nvml_info.main, {'snapshot': path, '_ansible_check_mode': check_mode})
    assert not failed and result['changed'] is False
    nvml = result['nvml']
    doc = json.loads(open(path).read())
    assert nvml['source'] == 'snapshot'
    assert (nvml['driver_version'], nvml['cuda_driver_version']) == (doc['driver_version'], doc['cuda_driver_version'])
    assert nvml['gpus'] == doc['gpus']


def test_replay_does_not_need_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    failed, result = run_module(nvml_info.main, {'snapshot': RTX})
    assert not failed and result['nvml']['source'] == 'snapshot'


def test_empty_snapshot_means_live(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    failed, result = run_module(nvml_info.main, {'snapshot': '', 'procfs_root': PROC})
    assert not failed and result['nvml']['source'] == 'nvml' and result['changed'] is False


def test_live(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    failed, result = run_module(nvml_info.main, {'procfs_root': PROC, '_ansible_check_mode': True})
    assert not failed and result['changed'] is False
    assert result['nvml']['source'] == 'nvml'
    assert result['nvml']['gpus'] == json.loads(open(RTX).read())['gpus']


def test_live_field_error_is_reported(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(temperature=pynvml.NVMLError_GpuIsLost())])
    failed, result = run_module(nvml_info.main, {'procfs_root': PROC})
    assert not failed
    assert result['nvml']['gpus'][0]['temperature_c'] is None
    assert result['nvml']['notes'] == ['GPU 0 temperature_c: NVML error GpuIsLost (GPU is lost); reported as null']


def test_record_is_no_longer_an_option(tmp_path):
    """Recording writes a file: nvml_snapshot does it (an _info module changes nothing)."""
    failed, result = run_module(nvml_info.main, {'snapshot': RTX, 'record': str(tmp_path / 'x.json')})
    assert failed and 'Unsupported parameters' in result['msg'] and 'record' in result['msg']
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('error, start', [
    (pynvml.NVMLError_LibraryNotFound(),
     'NVML library libnvidia-ml.so.1 not found: install the NVIDIA driver, or set snapshot (inferlab_nvml_snapshot) '
     'to replay a recorded one'),
    (pynvml.NVMLError_DriverNotLoaded(), 'NVIDIA kernel driver not loaded'),
    (pynvml.NVMLError_Uninitialized(), 'NVML could not be initialised'),
])
def test_no_nvml_fails_naming_what_is_missing(monkeypatch, error, start):
    install_fake_nvml(monkeypatch, pynvml, [], init_error=error)
    failed, result = run_module(nvml_info.main, {})
    assert failed and result['msg'].startswith(start)


def test_pynvml_not_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    failed, result = run_module(nvml_info.main, {})
    assert failed
    assert result['msg'].startswith('Failed to import the required Python library (nvidia-ml-py)')
    assert 'to read GPU facts from NVML' in result['msg']


@pytest.mark.parametrize('text, why', [
    ('not json', 'not valid JSON'),
    ('{"format": "other/1", "gpus": []}', "format is 'other/1'"),
    ('{"format": "inferlab.nvml_snapshot/1", "driver_version": "1", "cuda_driver_version": 1}', 'missing gpus'),
])
def test_malformed_snapshot_fails_naming_path(tmp_path, text, why):
    path = tmp_path / 'snap.json'
    path.write_text(text)
    failed, result = run_module(nvml_info.main, {'snapshot': str(path)})
    assert failed and result['msg'].startswith(f'malformed NVML snapshot {path}: {why}')


def test_missing_snapshot_fails(tmp_path):
    failed, result = run_module(nvml_info.main, {'snapshot': str(tmp_path / 'none.json')})
    assert failed and result['msg'] == f'NVML snapshot {tmp_path}/none.json not found'


def test_snapshot_fields_match_documented_format():
    """The RETURN sample of a GPU lists exactly the snapshot fields."""
    doc = yaml.safe_load(nvml_info.RETURN)
    sample = doc['nvml']['contains']['gpus']['sample'][0]
    assert list(sample) == list(_nvml.GPU_FIELDS)


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(nvml_info.DOCUMENTATION)['options']
    with set_module_args({}):
        spec = nvml_info.build_module().argument_spec
    assert {n: (o['type'], o.get('default')) for n, o in options.items()} == \
        {n: (o['type'], o.get('default')) for n, o in spec.items()}

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVML collection against the real ``pynvml`` module with its NVML calls monkeypatched, and snapshot files."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pynvml
import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _nvml
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import (
    FIXTURES,
    fake_gpu,
    install_fake_nvml,
)

PROC = str(FIXTURES / 'proc')
SNAPSHOTS = FIXTURES / 'nvml'


def test_collect_rtx5090(monkeypatch):
    calls = install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert calls == {'init': 1, 'shutdown': 1}
    expected = json.loads((SNAPSHOTS / 'rtx5090.json').read_text())
    assert nvml == {'source': 'nvml', 'driver_version': '580.95.05', 'cuda_driver_version': 13000,
                    'gpus': expected['gpus'], 'notes': []}
    assert list(nvml['gpus'][0]) == list(_nvml.GPU_FIELDS)


def test_collect_data_centre_fields(monkeypatch):
    gpu = fake_gpu(name='NVIDIA H200', ecc=0, clocks=4, power_mw=75312, limit_mw=700000,
                   memory=SimpleNamespace(total=150754820096, free=150080438272, used=674381824), processes=[])
    install_fake_nvml(monkeypatch, pynvml, [gpu, fake_gpu(ecc=2)], driver='570.172.08', cuda=12080)
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    first, second = nvml['gpus']
    assert (first['index'], second['index']) == (0, 1)
    assert first['ecc_uncorrected_volatile'] == 0 and second['ecc_uncorrected_volatile'] == 2
    assert first['clocks_event_reasons'] == 4
    assert first['power_usage_w'] == pytest.approx(75.312) and first['power_limit_w'] == 700.0
    assert first['memory_total_bytes'] // 2**20 == 143771
    assert first['compute_processes'] == []


@pytest.mark.parametrize('key, error, field', [
    ('temperature', pynvml.NVMLError_NotSupported(), 'temperature_c'),
    ('gen', pynvml.NVMLError_NotSupported(), 'pcie_link_gen_current'),
    ('processes', pynvml.NVMLError_NotSupported(), 'compute_processes'),
])
def test_not_supported_is_null_without_note(monkeypatch, key, error, field):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(**{key: error})])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert nvml['gpus'][0][field] is None
    assert nvml['notes'] == []


@pytest.mark.parametrize('key, fields, label', [
    ('temperature', ['temperature_c'], 'temperature_c'),
    ('memory', ['memory_total_bytes', 'memory_free_bytes', 'memory_used_bytes'], 'memory'),
    ('utilization', ['utilization_gpu_pct', 'utilization_memory_pct'], 'utilization'),
    ('power_mw', ['power_usage_w'], 'power_usage_w'),
    ('pci', ['pci_bus_id'], 'pci_bus_id'),
    ('ecc', ['ecc_uncorrected_volatile'], 'ecc_uncorrected_volatile'),
    ('clocks', ['clocks_event_reasons'], 'clocks_event_reasons'),
])
def test_other_field_error_is_null_with_note(monkeypatch, key, fields, label):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(**{key: pynvml.NVMLError_GpuIsLost()})])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    for field in fields:
        assert nvml['gpus'][0][field] is None
    assert nvml['gpus'][0]['name'] == 'NVIDIA GeForce RTX 5090'  # the rest is still read
    assert nvml['notes'] == [f'GPU 0 {label}: NVML error GpuIsLost (GPU is lost); reported as null']


def test_process_list_version_mismatch_is_a_note(monkeypatch):
    error = pynvml.NVMLLibraryMismatchError('Unversioned function called')
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(processes=error)])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert nvml['gpus'][0]['compute_processes'] is None
    assert nvml['notes'] == ['GPU 0 compute_processes: NVML error NVMLLibraryMismatchError '
                             '(Unversioned function called); reported as null']


def test_handle_error_leaves_gpu_null(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(handle=pynvml.NVMLError_GpuIsLost()), fake_gpu()])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert nvml['gpus'][0] == dict.fromkeys(_nvml.GPU_FIELDS) | {'index': 0}
    assert nvml['gpus'][1]['name'] == 'NVIDIA GeForce RTX 5090'
    assert nvml['notes'] == ['GPU 0 handle: NVML error GpuIsLost (GPU is lost); reported as null',
                             'GPU 0: no handle, every field is null']


def test_driver_version_error_is_a_note(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [], driver=pynvml.NVMLError_Unknown(), cuda=pynvml.NVMLError_NotSupported())
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert nvml == {'source': 'nvml', 'driver_version': None, 'cuda_driver_version': None, 'gpus': [],
                    'notes': ['driver_version: NVML error Unknown (Unknown Error); reported as null']}


def test_clocks_fall_back_to_throttle_reasons_when_function_not_found(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(clocks=pynvml.NVMLError_FunctionNotFound(), throttle=5)])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert nvml['gpus'][0]['clocks_event_reasons'] == 5 and nvml['notes'] == []


def test_clocks_fall_back_when_pynvml_lacks_the_new_name(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(throttle=6)])
    monkeypatch.delattr(pynvml, 'nvmlDeviceGetCurrentClocksEventReasons')
    assert _nvml.collect(pynvml, procfs_root=PROC)['gpus'][0]['clocks_event_reasons'] == 6


def test_clocks_when_pynvml_has_neither_name(monkeypatch):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    monkeypatch.delattr(pynvml, 'nvmlDeviceGetCurrentClocksEventReasons')
    monkeypatch.delattr(pynvml, 'nvmlDeviceGetCurrentClocksThrottleReasons')
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    assert nvml['gpus'][0]['clocks_event_reasons'] is None
    assert nvml['notes'] == ['GPU 0 clocks_event_reasons: this pynvml has no clocks event/throttle reasons call; '
                             'reported as null']


def test_processes_names_and_unknown_memory(monkeypatch, tmp_path):
    procs = [SimpleNamespace(pid=1234, usedGpuMemory=None), SimpleNamespace(pid=2345, usedGpuMemory=2**30),
             SimpleNamespace(pid=99999, usedGpuMemory=1)]
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu(processes=procs)])
    assert _nvml.collect(pynvml, procfs_root=PROC)['gpus'][0]['compute_processes'] == [
        {'pid': 1234, 'name': 'python3', 'used_memory_bytes': None},
        {'pid': 2345, 'name': 'sglang::schedul', 'used_memory_bytes': 2**30},
        {'pid': 99999, 'name': None, 'used_memory_bytes': 1},
    ]


def test_process_name_unreadable_is_null(tmp_path):
    (tmp_path / '42' / 'comm').mkdir(parents=True)  # a directory: reading fails with EISDIR
    assert _nvml.process_name(str(tmp_path), 42) is None


@pytest.mark.parametrize('error, message', [
    (pynvml.NVMLError_LibraryNotFound(),
     'NVML library libnvidia-ml.so.1 not found: install the NVIDIA driver, or set snapshot (inferlab_nvml_snapshot) '
     'to replay a recorded one'),
    (pynvml.NVMLError_DriverNotLoaded(),
     'NVIDIA kernel driver not loaded (NVML: Driver Not Loaded): load the nvidia module or reboot into the installed '
     'driver, or set snapshot (inferlab_nvml_snapshot) to replay a recorded one'),
    (pynvml.NVMLError_Uninitialized(),
     'NVML could not be initialised (NVML: Uninitialized): is libnvidia-ml.so.1 from the NVIDIA driver? or set '
     'snapshot (inferlab_nvml_snapshot) to replay a recorded one'),
    (pynvml.NVMLError_LibRmVersionMismatch(),
     'NVML library and NVIDIA kernel driver versions differ (NVML: RM has detected an NVML/RM version mismatch.): '
     'reboot or reload the driver after the driver update, or set snapshot (inferlab_nvml_snapshot) to replay a '
     'recorded one'),
    (pynvml.NVMLError_NoPermission(),
     'NVML initialisation failed (NoPermission: Insufficient Permissions), or set snapshot (inferlab_nvml_snapshot) '
     'to replay a recorded one'),
])
def test_init_errors(monkeypatch, error, message):
    calls = install_fake_nvml(monkeypatch, pynvml, [fake_gpu()], init_error=error)
    with pytest.raises(_nvml.NvmlUnavailableError) as exc:
        _nvml.collect(pynvml)
    assert str(exc.value) == message
    assert calls == {'init': 1, 'shutdown': 0}


def test_count_error_fails_and_shuts_down(monkeypatch):
    calls = install_fake_nvml(monkeypatch, pynvml, [])

    def count():
        raise pynvml.NVMLError_Unknown()

    monkeypatch.setattr(pynvml, 'nvmlDeviceGetCount', count)
    with pytest.raises(_nvml.NvmlUnavailableError, match=r'could not count the GPUs \(Unknown Error\)'):
        _nvml.collect(pynvml)
    assert calls['shutdown'] == 1


def test_real_library_absent_gives_library_not_found():
    """No monkeypatching: on a machine without the NVIDIA driver, nvmlInit really raises LibraryNotFound."""
    import ctypes.util

    if ctypes.util.find_library('nvidia-ml'):
        pytest.skip('this machine has libnvidia-ml')
    with pytest.raises(_nvml.NvmlUnavailableError, match='NVML library libnvidia-ml.so.1 not found'):
        _nvml.collect(pynvml)


@pytest.mark.parametrize('name', ['rtx5090.json', 'h200.json'])
def test_load_snapshot_fixtures(name):
    path = str(SNAPSHOTS / name)
    nvml = _nvml.load_snapshot(path)
    doc = json.loads((SNAPSHOTS / name).read_text())
    assert nvml['source'] == 'snapshot'
    assert nvml['gpus'] == doc['gpus']
    assert nvml['notes'] == [f"replayed from {path} (recorded_at {doc['recorded_at']} on {doc['hostname']})"]


def test_fixture_shapes():
    rtx = _nvml.load_snapshot(str(SNAPSHOTS / 'rtx5090.json'))
    h200 = _nvml.load_snapshot(str(SNAPSHOTS / 'h200.json'))
    assert rtx['gpus'][0]['ecc_uncorrected_volatile'] is None and rtx['gpus'][0]['memory_total_bytes'] == 34190917632
    assert rtx['driver_version'].startswith('580.') and rtx['cuda_driver_version'] == 13000
    assert h200['gpus'][0]['ecc_uncorrected_volatile'] == 0
    assert h200['gpus'][0]['memory_total_bytes'] == 143771 * 2**20
    assert h200['gpus'][0]['clocks_event_reasons'] is not None


def test_load_snapshot_projects_documented_fields(tmp_path):
    doc = json.loads((SNAPSHOTS / 'rtx5090.json').read_text())
    doc['gpus'][0]['fan_speed_pct'] = 30
    doc['gpus'][0]['compute_processes'][0]['extra'] = 1
    path = tmp_path / 's.json'
    path.write_text(json.dumps(doc))
    gpu = _nvml.load_snapshot(str(path))['gpus'][0]
    assert list(gpu) == list(_nvml.GPU_FIELDS)
    assert gpu['compute_processes'] == [{'pid': 1234, 'name': 'python3', 'used_memory_bytes': 524288000}]


def _rtx():
    return json.loads((SNAPSHOTS / 'rtx5090.json').read_text())


MALFORMED = [
    ('{"format": ', 'not valid JSON'),
    ('[]', 'expected a JSON object, found list'),
    (json.dumps(_rtx() | {'format': 'inferlab.nvml_snapshot/2'}),
     "format is 'inferlab.nvml_snapshot/2', expected 'inferlab.nvml_snapshot/1'"),
    (json.dumps({k: v for k, v in _rtx().items() if k != 'format'}),
     "format is None, expected 'inferlab.nvml_snapshot/1'"),
    (json.dumps({k: v for k, v in _rtx().items() if k != 'gpus'}), 'missing gpus'),
    (json.dumps({k: v for k, v in _rtx().items() if k not in ('driver_version', 'gpus')}),
     'missing driver_version, gpus'),
    (json.dumps(_rtx() | {'gpus': {'0': {}}}), 'gpus must be a list, found dict'),
    (json.dumps(_rtx() | {'gpus': ['GPU 0']}), 'gpus[0] must be an object'),
    (json.dumps(_rtx() | {'gpus': [{'index': 0, 'name': 'x'}]}), 'gpus[0] lacks uuid, pci_bus_id'),
    (json.dumps(_rtx() | {'gpus': [_rtx()['gpus'][0] | {'compute_processes': [{'name': 'x'}]}]}),
     'gpus[0].compute_processes must be a list of objects with a pid'),
]


@pytest.mark.parametrize('text, why', MALFORMED, ids=[m[1][:30] for m in MALFORMED])
def test_load_snapshot_malformed_names_path(tmp_path, text, why):
    path = tmp_path / 'snap.json'
    path.write_text(text)
    with pytest.raises(_nvml.SnapshotError) as exc:
        _nvml.load_snapshot(str(path))
    assert str(exc.value).startswith(f'malformed NVML snapshot {path}: {why}')


def test_load_snapshot_missing_and_unreadable(tmp_path):
    with pytest.raises(_nvml.SnapshotError, match=f'NVML snapshot {tmp_path}/nope.json not found'):
        _nvml.load_snapshot(str(tmp_path / 'nope.json'))
    with pytest.raises(_nvml.SnapshotError, match=f'cannot read NVML snapshot {tmp_path}: '):
        _nvml.load_snapshot(str(tmp_path))


def test_snapshot_round_trip(monkeypatch, tmp_path):
    install_fake_nvml(monkeypatch, pynvml, [fake_gpu()])
    nvml = _nvml.collect(pynvml, procfs_root=PROC)
    path = tmp_path / 'rec.json'
    _nvml.write_snapshot(str(path), _nvml.snapshot_document(nvml, hostname='lab-a', recorded_at='2026-11-30T10:00:00Z'))
    assert json.loads(path.read_text()) == _rtx()
    assert oct(path.stat().st_mode & 0o777) == '0o644'
    replayed = _nvml.load_snapshot(str(path))
    assert replayed['gpus'] == nvml['gpus'] and replayed['driver_version'] == nvml['driver_version']
    assert [p.name for p in tmp_path.iterdir()] == ['rec.json']  # no temporary file left


def test_snapshot_document_defaults():
    doc = _nvml.snapshot_document({'driver_version': 'd', 'cuda_driver_version': 1, 'gpus': []})
    assert doc['format'] == _nvml.SNAPSHOT_FORMAT and doc['hostname']
    assert doc['recorded_at'].endswith('Z') and len(doc['recorded_at']) == 20


def test_write_snapshot_errors(tmp_path):
    with pytest.raises(_nvml.SnapshotError, match=f'directory {tmp_path}/nodir does not exist'):
        _nvml.write_snapshot(str(tmp_path / 'nodir' / 'x.json'), {})
    (tmp_path / 'isdir').mkdir()
    with pytest.raises(_nvml.SnapshotError, match=f'cannot record NVML snapshot to {tmp_path}/isdir: '):
        _nvml.write_snapshot(str(tmp_path / 'isdir'), {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ['isdir']


def test_import_pynvml_missing(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, 'pynvml', None)
    with pytest.raises(ImportError):
        _nvml.import_pynvml()

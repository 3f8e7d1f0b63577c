# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU facts through NVML (``pynvml`` from nvidia-ml-py), and the snapshot file that records or replays them.

``pynvml`` is imported only when live collection is asked for, so replaying a snapshot works on hosts without it.
Each field is read on its own: ``NotSupported`` (ECC on consumer cards, for one) is ``None``; any other NVML error
on a field is ``None`` plus a note, so one bad sensor never hides the rest. Only a failure to start NVML at all
(no library, no driver) is fatal.

Snapshot format ``inferlab.nvml_snapshot/1`` (see docs/CONVENTIONS.md)::

    {"format": "inferlab.nvml_snapshot/1", "recorded_at": "...Z", "hostname": "lab-a",
     "driver_version": "580.95.05", "cuda_driver_version": 13000, "gpus": [{<GPU_FIELDS>}, ...]}
"""

from __future__ import annotations

import json
import os
import socket

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base, _ledger_core
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import SysfsError, read_file

SNAPSHOT_FORMAT = 'inferlab.nvml_snapshot/1'

GPU_FIELDS = (
    'index', 'name', 'uuid', 'pci_bus_id',
    'memory_total_bytes', 'memory_free_bytes', 'memory_used_bytes',
    'temperature_c', 'power_usage_w', 'power_limit_w',
    'utilization_gpu_pct', 'utilization_memory_pct',
    'pcie_link_gen_current', 'pcie_link_gen_max', 'pcie_link_width_current', 'pcie_link_width_max',
    'ecc_uncorrected_volatile', 'clocks_event_reasons', 'compute_processes',
)
PROCESS_FIELDS = ('pid', 'name', 'used_memory_bytes')
TOP_FIELDS = ('driver_version', 'cuda_driver_version', 'gpus')

_HINT = 'or set snapshot (inferlab_nvml_snapshot) to replay a recorded one'


class NvmlError(Exception):
    """Base of the errors this file raises; ``str(err)`` is the message for ``fail_json``."""


class NvmlUnavailableError(NvmlError):
    """NVML could not be started: no library, no driver, or a library/driver mismatch."""


class SnapshotError(NvmlError):
    """A snapshot file is missing, unreadable or not in the expected format."""


def import_pynvml():
    """The ``pynvml`` module; raises ``ImportError`` when nvidia-ml-py is not installed."""
    import pynvml  # pylint: disable=import-outside-toplevel

    return pynvml


def read_live(procfs_root='/proc', import_pynvml=import_pynvml):
    """Live facts through NVML; ImportError without nvidia-ml-py, NvmlError when NVML cannot be used."""
    return collect(import_pynvml(), procfs_root=procfs_root)


def _error_name(pynvml, err):
    for name in dir(pynvml):
        if name.startswith('NVMLError_') and isinstance(err, getattr(pynvml, name)):
            return name[len('NVMLError_'):]
    return type(err).__name__


def init_error_message(pynvml, err):
    """Message for an ``nvmlInit()`` failure that names what is missing and what to do."""
    kind = _error_name(pynvml, err)
    if kind == 'LibraryNotFound':
        return f"NVML library libnvidia-ml.so.1 not found: install the NVIDIA driver, {_HINT}"
    if kind == 'DriverNotLoaded':
        return (f"NVIDIA kernel driver not loaded (NVML: {err}): load the nvidia module or reboot into the "
                f"installed driver, {_HINT}")
    if kind == 'Uninitialized':
        return f"NVML could not be initialised (NVML: {err}): is libnvidia-ml.so.1 from the NVIDIA driver? {_HINT}"
    if kind == 'LibRmVersionMismatch':
        return (f"NVML library and NVIDIA kernel driver versions differ (NVML: {err}): reboot or reload the "
                f"driver after the driver update, {_HINT}")
    return f"NVML initialisation failed ({kind}: {err}), {_HINT}"


class _Fields:
    """Calls NVML once per field: ``NotSupported`` -> ``None``; other NVML errors -> ``None`` plus a note."""

    def __init__(self, pynvml, notes):
        self.pynvml = pynvml
        self.notes = notes
        self.not_supported = getattr(pynvml, 'NVMLError_NotSupported', ())
        errors = [pynvml.NVMLError]
        if hasattr(pynvml, 'NVMLLibraryMismatchError'):
            errors.append(pynvml.NVMLLibraryMismatchError)
        self.errors = tuple(errors)

    def call(self, label, func, *args):
        try:
            return func(*args)
        except self.not_supported:
            return None
        except self.errors as err:
            self.notes.append(f"{label}: NVML error {_error_name(self.pynvml, err)} ({err}); reported as null")
            return None


def _text(value):
    return value.decode('utf-8', 'replace') if isinstance(value, bytes) else value


def _watts(milliwatts):
    return None if milliwatts is None else milliwatts / 1000.0


def process_name(procfs_root, pid):
    """``comm`` of ``pid`` under ``procfs_root``, or ``None`` when it cannot be read (gone, other namespace)."""
    try:
        return read_file(os.path.join(procfs_root, str(pid), 'comm'))
    except SysfsError:
        return None


def _clocks_event_reasons(pynvml, fields, handle, label):
    func = getattr(pynvml, 'nvmlDeviceGetCurrentClocksEventReasons', None)
    if func is not None:
        try:
            return func(handle)
        except fields.not_supported:
            return None
        except pynvml.NVMLError as err:
            if _error_name(pynvml, err) != 'FunctionNotFound':
                fields.notes.append(f"{label}: NVML error {_error_name(pynvml, err)} ({err}); reported as null")
                return None
    # drivers before 535 (and older nvidia-ml-py) only have the older name
    older = getattr(pynvml, 'nvmlDeviceGetCurrentClocksThrottleReasons', None)
    if older is None:
        fields.notes.append(f"{label}: this pynvml has no clocks event/throttle reasons call; reported as null")
        return None
    return fields.call(label, older, handle)


def read_gpu(pynvml, fields, index, procfs_root):
    """One GPU as a dict with exactly ``GPU_FIELDS``."""
    gpu = dict.fromkeys(GPU_FIELDS)
    gpu['index'] = index
    prefix = f'GPU {index}'
    handle = fields.call(f'{prefix} handle', pynvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        fields.notes.append(f'{prefix}: no handle, every field is null')
        return gpu

    gpu['name'] = _text(fields.call(f'{prefix} name', pynvml.nvmlDeviceGetName, handle))
    gpu['uuid'] = _text(fields.call(f'{prefix} uuid', pynvml.nvmlDeviceGetUUID, handle))
    pci = fields.call(f'{prefix} pci_bus_id', pynvml.nvmlDeviceGetPciInfo, handle)
    gpu['pci_bus_id'] = _text(pci.busId) if pci is not None else None

    memory = fields.call(f'{prefix} memory', pynvml.nvmlDeviceGetMemoryInfo, handle)
    if memory is not None:
        gpu['memory_total_bytes'] = int(memory.total)
        gpu['memory_free_bytes'] = int(memory.free)
        gpu['memory_used_bytes'] = int(memory.used)

    gpu['temperature_c'] = fields.call(f'{prefix} temperature_c', pynvml.nvmlDeviceGetTemperature, handle,
                                       pynvml.NVML_TEMPERATURE_GPU)
    gpu['power_usage_w'] = _watts(fields.call(f'{prefix} power_usage_w', pynvml.nvmlDeviceGetPowerUsage, handle))
    gpu['power_limit_w'] = _watts(fields.call(f'{prefix} power_limit_w', pynvml.nvmlDeviceGetEnforcedPowerLimit,
                                              handle))

    utilization = fields.call(f'{prefix} utilization', pynvml.nvmlDeviceGetUtilizationRates, handle)
    if utilization is not None:
        gpu['utilization_gpu_pct'] = int(utilization.gpu)
        gpu['utilization_memory_pct'] = int(utilization.memory)

    for key, func in (('pcie_link_gen_current', pynvml.nvmlDeviceGetCurrPcieLinkGeneration),
                      ('pcie_link_gen_max', pynvml.nvmlDeviceGetMaxPcieLinkGeneration),
                      ('pcie_link_width_current', pynvml.nvmlDeviceGetCurrPcieLinkWidth),
                      ('pcie_link_width_max', pynvml.nvmlDeviceGetMaxPcieLinkWidth)):
        gpu[key] = fields.call(f'{prefix} {key}', func, handle)

    gpu['ecc_uncorrected_volatile'] = fields.call(
        f'{prefix} ecc_uncorrected_volatile', pynvml.nvmlDeviceGetTotalEccErrors, handle,
        pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
    gpu['clocks_event_reasons'] = _clocks_event_reasons(pynvml, fields, handle, f'{prefix} clocks_event_reasons')

    processes = fields.call(f'{prefix} compute_processes', pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
    if processes is not None:
        gpu['compute_processes'] = [
            {'pid': int(proc.pid), 'name': process_name(procfs_root, proc.pid),
             'used_memory_bytes': None if proc.usedGpuMemory is None else int(proc.usedGpuMemory)}
            for proc in processes
        ]
    return gpu


def collect(pynvml, procfs_root='/proc'):
    """Live ``nvml`` facts: ``{source, driver_version, cuda_driver_version, gpus, notes}``."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        raise NvmlUnavailableError(init_error_message(pynvml, err)) from err
    notes = []
    fields = _Fields(pynvml, notes)
    try:
        driver_version = _text(fields.call('driver_version', pynvml.nvmlSystemGetDriverVersion))
        cuda_driver_version = fields.call('cuda_driver_version', pynvml.nvmlSystemGetCudaDriverVersion)
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as err:
            raise NvmlUnavailableError(f"NVML started but could not count the GPUs ({err})") from err
        gpus = [read_gpu(pynvml, fields, index, procfs_root) for index in range(count)]
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as err:
            notes.append(f"nvmlShutdown: {err}")
    return {'source': 'nvml', 'driver_version': driver_version, 'cuda_driver_version': cuda_driver_version,
            'gpus': gpus, 'notes': notes}


def _bad(path, why):
    return SnapshotError(f"malformed NVML snapshot {path}: {why}")


def validate_snapshot(doc, path):
    """Check the parsed JSON of a snapshot; returns it. Raises ``SnapshotError`` naming ``path``."""
    if not isinstance(doc, dict):
        raise _bad(path, f"expected a JSON object, found {type(doc).__name__}")
    if doc.get('format') != SNAPSHOT_FORMAT:
        raise _bad(path, f"format is {doc.get('format')!r}, expected {SNAPSHOT_FORMAT!r}")
    missing = [key for key in TOP_FIELDS if key not in doc]
    if missing:
        raise _bad(path, f"missing {', '.join(missing)}")
    if not isinstance(doc['gpus'], list):
        raise _bad(path, f"gpus must be a list, found {type(doc['gpus']).__name__}")
    for position, gpu in enumerate(doc['gpus']):
        if not isinstance(gpu, dict):
            raise _bad(path, f"gpus[{position}] must be an object")
        missing = [key for key in GPU_FIELDS if key not in gpu]
        if missing:
            raise _bad(path, f"gpus[{position}] lacks {', '.join(missing)}")
        procs = gpu['compute_processes']
        if procs is not None and (not isinstance(procs, list)
                                  or not all(isinstance(p, dict) and 'pid' in p for p in procs)):
            raise _bad(path, f"gpus[{position}].compute_processes must be a list of objects with a pid")
    return doc


def load_snapshot(path):
    """Replayed ``nvml`` facts from a snapshot file: exactly the documented fields, ``source: snapshot``."""
    try:
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
    except FileNotFoundError:
        raise SnapshotError(f"NVML snapshot {path} not found") from None
    except OSError as err:
        raise SnapshotError(f"cannot read NVML snapshot {path}: {err.strerror or err}") from err
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise _bad(path, f"not valid JSON ({err})") from None
    validate_snapshot(doc, path)
    gpus = []
    for gpu in doc['gpus']:
        gpu = {key: gpu[key] for key in GPU_FIELDS}
        if gpu['compute_processes'] is not None:
            gpu['compute_processes'] = [{key: proc.get(key) for key in PROCESS_FIELDS}
                                        for proc in gpu['compute_processes']]
        gpus.append(gpu)
    note = (f"replayed from {path} (recorded_at {doc.get('recorded_at', 'unknown')} "
            f"on {doc.get('hostname', 'unknown')})")
    return {'source': 'snapshot', 'driver_version': doc['driver_version'],
            'cuda_driver_version': doc['cuda_driver_version'], 'gpus': gpus, 'notes': [note]}


def read(snapshot=None, procfs_root='/proc', import_pynvml=import_pynvml):
    """The ``nvml`` facts: replayed from ``snapshot`` when given, else read through NVML. Raises
    NvmlUnavailableError, naming the snapshot variable, when nvidia-ml-py is missing."""
    if snapshot:
        return load_snapshot(snapshot)
    try:
        return read_live(procfs_root, import_pynvml)
    except ImportError as err:
        raise NvmlUnavailableError('reading the GPUs needs nvidia-ml-py (pynvml) and the NVIDIA driver, or a '
                                   'recorded snapshot (inferlab_nvml_snapshot): %s' % err) from err


def snapshot_document(nvml, hostname=None, recorded_at=None):
    """The snapshot file content for collected ``nvml`` facts."""
    if recorded_at is None:
        recorded_at = _ledger_core.utc_now()
    return {
        'format': SNAPSHOT_FORMAT,
        'recorded_at': recorded_at,
        'hostname': hostname if hostname is not None else socket.gethostname(),
        'driver_version': nvml['driver_version'],
        'cuda_driver_version': nvml['cuda_driver_version'],
        'gpus': nvml['gpus'],
    }


def write_snapshot(path, document):
    """Write ``document`` to ``path`` atomically (temporary file in the same directory, then rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise SnapshotError(f"cannot record NVML snapshot to {path}: directory {directory} does not exist")
    text = json.dumps(document, indent=2, sort_keys=False) + '\n'
    try:
        _ledger_base.write_atomic(path, text.encode('utf-8'), mode=0o644)
    except OSError as err:
        raise SnapshotError(f"cannot record NVML snapshot to {path}: {err.strerror or err}") from err

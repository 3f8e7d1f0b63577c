# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Helpers for module unit tests, in the style of community.general's ``tests/unit/plugins/modules/utils.py``.

- ``set_module_args(args)``: context manager exposing ``args`` to ``AnsibleModule``; on ansible-core 2.19 it is
  ``ansible.module_utils.testing.patch_module_args`` (the only supported way since module args are profiled).
- ``exit_json`` / ``fail_json`` raise ``AnsibleExitJson`` / ``AnsibleFailJson`` with the result dict;
  ``patch_exits()`` installs them on ``AnsibleModule``. ``run_module(main, args)`` does both and returns
  ``(failed, result)``.
- ``sysfs_tree(name, dest)``: a sysfs fixture tree from ``tests/unit/fixtures/sysfs/`` copied to ``dest`` with its
  symlinks created (they are kept in ``NAME.symlinks`` beside the tree, because ansible-test sanity does not allow
  symlinks to directories inside a collection).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core < 2.19
    patch_module_args = None

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures'


@contextlib.contextmanager
def set_module_args(args=None):
    args = dict(args or {})
    args.setdefault('_ansible_remote_tmp', '/tmp')
    args.setdefault('_ansible_keep_remote_files', False)
    if patch_module_args is not None:
        with patch_module_args(args):
            yield
    else:
        serialized = json.dumps({'ANSIBLE_MODULE_ARGS': args}).encode()
        with mock.patch.object(basic, '_ANSIBLE_ARGS', serialized):
            yield


class AnsibleExitJson(Exception):
    """Raised by ``exit_json``; ``args[0]`` is the result."""


class AnsibleFailJson(Exception):
    """Raised by ``fail_json``; ``args[0]`` is the result."""


def exit_json(*args, **kwargs):
    kwargs.setdefault('changed', False)
    raise AnsibleExitJson(kwargs)


def fail_json(*args, **kwargs):
    kwargs['failed'] = True
    raise AnsibleFailJson(kwargs)


@contextlib.contextmanager
def patch_exits():
    with mock.patch.multiple(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json):
        yield


def run_module(main, args):
    """Run ``main()`` with ``args``; ``(False, result)`` on exit_json, ``(True, result)`` on fail_json. Tests assert
    ``not failed`` with ``result.get("msg", result)``: pytest cuts a dict in an assertion message at 240 characters,
    and a module's message is what says why it failed."""
    with set_module_args(args), patch_exits():
        try:
            main()
        except AnsibleExitJson as exc:
            return False, exc.args[0]
        except AnsibleFailJson as exc:
            return True, exc.args[0]
    raise AssertionError('module returned without calling exit_json or fail_json')


def sysfs_tree(name, dest):
    """Copy fixture tree ``name`` to ``dest`` and create the symlinks listed in ``NAME.symlinks``; returns ``dest``."""
    source = FIXTURES / 'sysfs' / name
    dest = Path(dest)
    shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
    manifest = FIXTURES / 'sysfs' / f'{name}.symlinks'
    if manifest.exists():
        for line in manifest.read_text(encoding='utf-8').splitlines():
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            link, _sep, target = (part.strip() for part in line.partition(' -> '))
            path = dest / link
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path)
    return dest


def fake_gpu(**overrides):
    """What a fake NVML answers for one GPU (an RTX 5090 at idle). A value that is an exception is raised."""
    gpu = {
        'name': 'NVIDIA GeForce RTX 5090',
        'uuid': 'GPU-5f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f',
        'pci': SimpleNamespace(busId=b'00000000:01:00.0'),
        'memory': SimpleNamespace(total=34190917632, free=33117175808, used=1073741824),
        'temperature': 38,
        'power_mw': 31500,
        'limit_mw': 575000,
        'utilization': SimpleNamespace(gpu=0, memory=0),
        'gen': 5, 'max_gen': 5, 'width': 16, 'max_width': 16,
        'ecc': None,  # None: raise NotSupported, as consumer cards do
        'clocks': 1,
        'throttle': 1,
        'processes': [SimpleNamespace(pid=1234, usedGpuMemory=524288000)],
    }
    gpu.update(overrides)
    return gpu


def install_fake_nvml(monkeypatch, pynvml, gpus, driver='580.95.05', cuda=13000, init_error=None):
    """Replace the NVML calls of the real ``pynvml`` module with answers from ``gpus`` (see ``fake_gpu``).

    Returns a dict counting ``init`` and ``shutdown`` calls.
    """
    calls = {'init': 0, 'shutdown': 0}

    def answer(value):
        if isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException)):
            raise value
        return value

    def per_gpu(key):
        def call(handle, *args):
            value = answer(gpus[handle][key])
            if value is None and key == 'ecc':
                raise pynvml.NVMLError_NotSupported()
            return value
        return call

    def init():
        calls['init'] += 1
        if init_error is not None:
            raise init_error

    def shutdown():
        calls['shutdown'] += 1

    def handle_by_index(index):
        answer(gpus[index].get('handle'))
        return index

    monkeypatch.setattr(pynvml, 'nvmlInit', init)
    monkeypatch.setattr(pynvml, 'nvmlShutdown', shutdown)
    monkeypatch.setattr(pynvml, 'nvmlSystemGetDriverVersion', lambda: answer(driver))
    monkeypatch.setattr(pynvml, 'nvmlSystemGetCudaDriverVersion', lambda: answer(cuda))
    monkeypatch.setattr(pynvml, 'nvmlDeviceGetCount', lambda: len(gpus))
    monkeypatch.setattr(pynvml, 'nvmlDeviceGetHandleByIndex', handle_by_index)
    for attr, key in (('nvmlDeviceGetName', 'name'), ('nvmlDeviceGetUUID', 'uuid'),
                      ('nvmlDeviceGetPciInfo', 'pci'), ('nvmlDeviceGetMemoryInfo', 'memory'),
                      ('nvmlDeviceGetTemperature', 'temperature'), ('nvmlDeviceGetPowerUsage', 'power_mw'),
                      ('nvmlDeviceGetEnforcedPowerLimit', 'limit_mw'),
                      ('nvmlDeviceGetUtilizationRates', 'utilization'),
                      ('nvmlDeviceGetCurrPcieLinkGeneration', 'gen'), ('nvmlDeviceGetMaxPcieLinkGeneration', 'max_gen'),
                      ('nvmlDeviceGetCurrPcieLinkWidth', 'width'), ('nvmlDeviceGetMaxPcieLinkWidth', 'max_width'),
                      ('nvmlDeviceGetTotalEccErrors', 'ecc'),
                      ('nvmlDeviceGetCurrentClocksEventReasons', 'clocks'),
                      ('nvmlDeviceGetCurrentClocksThrottleReasons', 'throttle'),
                      ('nvmlDeviceGetComputeRunningProcesses', 'processes')):
        monkeypatch.setattr(pynvml, attr, per_gpu(key))
    return calls

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a ring host ran on: the identity by which ``inferlab matrix`` groups runs across hardware and firmware.

Read through the sysfs seam (``sysfs_root``, a fixture root in the lab) and procfs, never guessed:

- the Thunderbolt host router: the PCI function the ``domainN`` device sits under (the NHI: ``tb_domain_alloc()``
  makes it the domain's parent), with its ``vendor`` and ``device`` ids and slot name, and the host router ``N-0``'s
  ``generation`` and ``nvm_version`` (``%x.%x``; unreadable, ENODATA, while the router is in safe mode);
- the XDomain peer (the other host): its ``vendor`` and ``device`` ids and names, and the link's speed per lane and
  lanes each way;
- the kernel release, and the ``thunderbolt_net`` driver's srcversion and parameters;
- the firmware: DMI ``bios_vendor``, ``bios_version``, ``board_vendor``, ``board_name``, ``product_name`` (mode
  0444; the serials and the product UUID are root-only and never read).

An attribute that is absent or unreadable is None and named in ``missing``; a malformed one raises
``MalformedValueError`` naming the file.
"""

from __future__ import annotations

import os
import re

from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import (
    MalformedValueError,
    SysfsReader,
    SysfsReadError,
)

FORMAT = 'inferlab.host_identity/1'
DMI_DIR = 'class/dmi/id'
DMI_FIELDS = ('bios_vendor', 'bios_version', 'board_vendor', 'board_name', 'product_name')
_HEX_ID_RE = re.compile(r'^0x[0-9a-fA-F]{1,4}$')
_NVM_RE = re.compile(r'^[0-9a-fA-F]+\.[0-9a-fA-F]+$')


def checked_hex_id(name, path, value):
    """A PCI or Thunderbolt id as sysfs prints it (``0x8086``), lower-cased; MalformedValueError otherwise."""
    if not _HEX_ID_RE.match(value):
        raise MalformedValueError(name, path, value, "expected a hex id like '0x8086'")
    return value.lower()


def pci_id(vendor, device):
    """``vendor:device`` as lspci writes it (``8086:1563``) from two hex ids, or None when either is missing."""
    return f'{vendor[2:]:0>4}:{device[2:]:0>4}' if vendor and device else None


def _hex_id(reader, parts, missing):
    path = reader.path(*parts)
    value = reader.read(*parts)
    if value is None:
        missing.append(path)
        return None
    return checked_hex_id(parts[-1], path, value)


def _text(reader, parts, missing):
    value = reader.read(*parts)
    if value is None:
        missing.append(reader.path(*parts))
    return value


def _nhi_dir(reader, domain):
    """The PCI function above ``domain`` (relative to the root), or None when the domain is no symlink into it."""
    resolved = os.path.dirname(reader.realpath(_tbnet.BUS_DEVICES, domain))
    relative = os.path.relpath(resolved, reader.root)
    return None if relative.startswith('..') or relative == '.' else relative


def _first(reader, kind, placeholder, missing):
    """The first ``bus/thunderbolt/devices`` entry of ``kind`` (``_tbnet.classify``), or None, named as missing."""
    found = [n for n in reader.listdir(_tbnet.BUS_DEVICES) if _tbnet.classify(reader, n) == kind]
    if not found:
        missing.append(reader.path(_tbnet.BUS_DEVICES, placeholder))
    return found[0] if found else None


def read_host_router(reader, missing):
    domain = _first(reader, 'domain', 'domain*', missing)
    if domain is None:
        return None
    router = f'{domain[len("domain"):]}-0'
    nhi = _nhi_dir(reader, domain)
    if nhi is None:
        missing.append(f'{reader.path(_tbnet.BUS_DEVICES, domain)}/.. (the NHI PCI function)')
    vendor = _hex_id(reader, (nhi, 'vendor'), missing) if nhi else None
    device = _hex_id(reader, (nhi, 'device'), missing) if nhi else None
    nvm_path = reader.path(_tbnet.BUS_DEVICES, router, 'nvm_version')
    try:
        nvm = reader.read(_tbnet.BUS_DEVICES, router, 'nvm_version')
    except SysfsReadError:  # ENODATA: the router is in safe mode
        nvm = None
    if nvm is None:
        missing.append(nvm_path)
    elif not _NVM_RE.match(nvm):
        raise MalformedValueError('nvm_version', nvm_path, nvm, "expected major.minor in hex like '36.0'")
    generation = reader.read_int(_tbnet.BUS_DEVICES, router, 'generation', minimum=0)
    if generation is None:
        missing.append(reader.path(_tbnet.BUS_DEVICES, router, 'generation'))
    return {
        'domain': domain,
        'pci_slot': os.path.basename(nhi) if nhi else None,
        'pci_vendor': vendor,
        'pci_device': device,
        'pci_id': pci_id(vendor, device),
        'generation': generation,
        'nvm_version': nvm,
        'vendor_name': reader.read(_tbnet.BUS_DEVICES, router, 'vendor_name'),
        'device_name': reader.read(_tbnet.BUS_DEVICES, router, 'device_name'),
    }


def read_peer(reader, missing):
    """The XDomain peer: its ids (read here) and what ``_tbnet.read_peer`` reads of it (names, speed and lanes)."""
    name = _first(reader, 'xdomain', '<xdomain>', missing)
    if name is None:
        return None
    vendor = _hex_id(reader, (_tbnet.BUS_DEVICES, name, 'vendor'), missing)
    device = _hex_id(reader, (_tbnet.BUS_DEVICES, name, 'device'), missing)
    read = _tbnet.read_peer(reader, name, [])
    peer = {'device': name, 'vendor_id': vendor, 'device_id': device,
            'id': pci_id(vendor, device)}
    for key, attr in (('vendor_name', 'vendor_name'), ('device_name', 'device_name'), ('rx_speed_gbps', 'rx_speed'),
                      ('rx_lanes', 'rx_lanes'), ('tx_speed_gbps', 'tx_speed'), ('tx_lanes', 'tx_lanes')):
        peer[key] = read[key]
        if read[key] is None:
            missing.append(reader.path(_tbnet.BUS_DEVICES, name, attr))
    return peer


def read_identity(sysfs_root='/sys', procfs_root='/proc'):
    """The identity document (``format`` FORMAT); see the module docstring."""
    sysfs, procfs = SysfsReader(sysfs_root), SysfsReader(procfs_root)
    missing = []
    kernel_release = _text(procfs, ('sys/kernel/osrelease',), missing)
    module = _tbnet.read_module(sysfs)
    if not module['loaded']:
        missing.append(sysfs.path('module', _tbnet.MODULE_NAME))
    firmware = {field: _text(sysfs, (DMI_DIR, field), missing) for field in DMI_FIELDS}
    return {
        'format': FORMAT,
        'host_router': read_host_router(sysfs, missing),
        'peer': read_peer(sysfs, missing),
        'kernel_release': kernel_release,
        'driver': {'loaded': module['loaded'], 'srcversion': module['srcversion'],
                   'parameters': module['parameters']},
        'firmware': firmware,
        'missing': missing,
    }

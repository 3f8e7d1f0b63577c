# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Thunderbolt / USB4 facts from sysfs, as the ``thunderbolt`` and ``thunderbolt_net`` drivers publish them.

Formats follow Documentation/ABI/testing/sysfs-bus-thunderbolt:

- ``bus/thunderbolt/devices/domainN``: one per host controller (``security``, ``iommu_dma_protection``).
- ``N-R`` routers: the host router ``N-0`` has ``generation`` (4 = USB4); an XDomain (another *host* on the link)
  has no ``generation`` but ``device_name``, ``vendor_name``, ``unique_id``, ``rx_speed``/``tx_speed`` (per lane,
  ``20.0 Gb/s``) and ``rx_lanes``/``tx_lanes``.
- ``N-R.I`` services that the peer advertises: ``key`` (``network`` = ThunderboltIP), ``prtcid``, ``prtcvers``,
  ``prtcrevs`` and ``prtcstns`` (hex bitmask: bit 0 E2E flow control, bit 1 match frags id, bit 2 64k frames).
- ``class/net/IF/device`` of the ``thunderbolt_net`` interface resolves to the service directory.
- ``module/thunderbolt_net/``: present when the module is loaded (or built in); ``parameters/`` holds ``e2e``
  and, with the candidate driver, ``tx_e2e``.
- whether an unsigned module would load (``loading``): ``kernel/security/lockdown`` (``none [integrity]
  confidentiality``, the mode in brackets; Secure Boot turns it on) and ``module/module/parameters/sig_enforce``
  (``Y``/``N``). Either one set means the kernel refuses unsigned modules.

Everything here is pure reading: missing pieces become ``None`` plus a note, malformed values raise
``MalformedValueError`` (from ``_sysfs``) naming the file and the value.
"""

from __future__ import annotations

import re

from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import (
    MalformedValueError,
    SysfsReader,
)

BUS_DEVICES = 'bus/thunderbolt/devices'
NETWORK_KEY = 'network'
MODULE_NAME = 'thunderbolt_net'

# prtcstns bits (drivers/net/thunderbolt: TBNET_E2E, TBNET_MATCH_FRAGS_ID, TBNET_64K_FRAMES)
PRTCSTNS_FLAGS = (('e2e', 0), ('match_frags_id', 1), ('64k_frames', 2))

_DOMAIN_RE = re.compile(r'^domain(\d+)$')
_ROUTER_RE = re.compile(r'^(\d+)-([0-9a-f]+)$')
_SERVICE_RE = re.compile(r'^(\d+-[0-9a-f]+)\.(\d+)$')
_HEX_RE = re.compile(r'^0x[0-9a-fA-F]+$')


def decode_prtcstns(value):
    """Flags dict from the integer value of ``prtcstns``."""
    return {name: bool(value >> bit & 1) for name, bit in PRTCSTNS_FLAGS}


def parse_prtcstns(text, path):
    """``(text, flags)`` from a ``prtcstns`` file (printed by the kernel as ``0x%08x``)."""
    text = text.strip() if isinstance(text, str) else text
    if not isinstance(text, str) or not _HEX_RE.match(text):
        raise MalformedValueError('prtcstns', path, text, "expected a hex bitmask like '0x0000000f'")
    return text, decode_prtcstns(int(text, 16))


def parse_uevent(text):
    """``KEY=VALUE`` lines of a sysfs ``uevent`` file as a dict (``{}`` for ``None``)."""
    result = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        if sep:
            result[key.strip()] = value.strip()
    return result


def classify(reader, name):
    """``domain``, ``router``, ``xdomain``, ``service`` or ``None`` for a ``bus/thunderbolt/devices`` entry.

    The kernel says which in ``uevent`` (``DEVTYPE=thunderbolt_xdomain`` ...). Without it (older trees, sparse
    fixtures) the name decides, and an ``N-R`` device is an XDomain when it has no ``generation`` (routers have one).
    """
    devtype = parse_uevent(reader.read(BUS_DEVICES, name, 'uevent')).get('DEVTYPE', '')
    by_devtype = {
        'thunderbolt_domain': 'domain',
        'thunderbolt_device': 'router',
        'thunderbolt_xdomain': 'xdomain',
        'thunderbolt_service': 'service',
    }
    if devtype in by_devtype:
        return by_devtype[devtype]
    if devtype:
        return None  # retimers and whatever later kernels add
    if _DOMAIN_RE.match(name):
        return 'domain'
    if _SERVICE_RE.match(name) and reader.exists(BUS_DEVICES, name, 'key'):
        return 'service'
    match = _ROUTER_RE.match(name)
    if match:
        if reader.exists(BUS_DEVICES, name, 'generation') or int(match.group(2), 16) == 0:
            return 'router'
        return 'xdomain'
    return None


def _bool01(reader, *parts):
    path = reader.path(*parts)
    value = reader.read(*parts)
    if value is None:
        return None
    if value not in ('0', '1'):
        raise MalformedValueError(parts[-1], path, value, "expected '0' or '1'")
    return value == '1'


def read_domain(reader, name):
    index = _DOMAIN_RE.match(name).group(1) if _DOMAIN_RE.match(name) else None
    host = f'{index}-0' if index is not None else None
    host_router = None
    if host is not None and reader.isdir(BUS_DEVICES, host):
        host_router = {
            'device': host,
            'vendor_name': reader.read(BUS_DEVICES, host, 'vendor_name'),
            'device_name': reader.read(BUS_DEVICES, host, 'device_name'),
            'generation': reader.read_int(BUS_DEVICES, host, 'generation', minimum=0),
        }
    return {
        'device': name,
        'unique_id': reader.read(BUS_DEVICES, host, 'unique_id') if host_router else None,
        'security': reader.read(BUS_DEVICES, name, 'security'),
        'iommu_dma_protection': _bool01(reader, BUS_DEVICES, name, 'iommu_dma_protection'),
        'host_router': host_router,
    }


def read_peer(reader, name, notes):
    peer = {
        'device': name,
        'device_name': reader.read(BUS_DEVICES, name, 'device_name'),
        'vendor_name': reader.read(BUS_DEVICES, name, 'vendor_name'),
        'unique_id': reader.read(BUS_DEVICES, name, 'unique_id'),
    }
    for direction in ('rx', 'tx'):
        speed = reader.read_gbps(BUS_DEVICES, name, f'{direction}_speed')
        lanes = reader.read_int(BUS_DEVICES, name, f'{direction}_lanes', minimum=0)
        for attr, value in ((f'{direction}_speed', speed), (f'{direction}_lanes', lanes)):
            if value is None:
                notes.append(f"peer {name}: {attr} missing ({reader.path(BUS_DEVICES, name, attr)}): "
                             "kernel too old to report link speed")
        peer[f'{direction}_speed_gbps'] = speed
        peer[f'{direction}_lanes'] = lanes
    for direction in ('rx', 'tx'):
        speed, lanes = peer[f'{direction}_speed_gbps'], peer[f'{direction}_lanes']
        peer[f'{direction}_link_gbps'] = speed * lanes if speed is not None and lanes is not None else None
    # keep the documented key order
    order = ('device', 'device_name', 'vendor_name', 'unique_id', 'rx_speed_gbps', 'tx_speed_gbps', 'rx_lanes',
             'tx_lanes', 'rx_link_gbps', 'tx_link_gbps')
    return {key: peer[key] for key in order}


def read_service(reader, name):
    key = reader.read(BUS_DEVICES, name, 'key')
    stns_path = reader.path(BUS_DEVICES, name, 'prtcstns')
    stns_text = reader.read(BUS_DEVICES, name, 'prtcstns')
    prtcstns, flags = (None, None) if stns_text is None else parse_prtcstns(stns_text, stns_path)
    match = _SERVICE_RE.match(name)
    return {
        'device': name,
        'peer': match.group(1) if match else None,
        'key': key,
        'prtcid': reader.read_int(BUS_DEVICES, name, 'prtcid', minimum=0),
        'prtcvers': reader.read_int(BUS_DEVICES, name, 'prtcvers', minimum=0),
        'prtcrevs': reader.read_int(BUS_DEVICES, name, 'prtcrevs', minimum=0),
        'prtcstns': prtcstns,
        # the bits are ThunderboltIP's; other services define their own
        'flags': flags if key == NETWORK_KEY else None,
        'interface': None,
    }


def interfaces_by_device(reader):
    """``{resolved device dir: IFNAME}`` from ``class/net/*/device`` symlinks."""
    result = {}
    for ifname in reader.listdir('class/net'):
        if reader.exists('class/net', ifname, 'device'):
            result.setdefault(reader.realpath('class/net', ifname, 'device'), ifname)
    return result


def read_module(reader):
    if not reader.isdir('module', MODULE_NAME):
        return {'loaded': False, 'parameters': {}, 'srcversion': None, 'taint': None}
    return {
        'loaded': True,
        'parameters': {
            param: reader.read('module', MODULE_NAME, 'parameters', param)
            for param in reader.listdir('module', MODULE_NAME, 'parameters')
        },
        # built-in drivers have neither srcversion nor taint
        'srcversion': reader.read('module', MODULE_NAME, 'srcversion'),
        'taint': reader.read('module', MODULE_NAME, 'taint'),
    }


def read_loading(sysfs, procfs):
    """``{kernel_version, version_signature, lockdown, sig_enforce, unsigned_refused}``: which kernel runs
    (``uname -v``; Ubuntu's ``/proc/version_signature``, None elsewhere) and whether an unsigned module would load.
    ``lockdown`` is None when the kernel has no lockdown LSM; ``unsigned_refused`` is True when either is on."""
    lockdown = sysfs.read('kernel/security/lockdown')
    if lockdown is not None:
        chosen = re.search(r'\[(\w+)\]', lockdown)
        if not chosen:
            raise MalformedValueError('lockdown', sysfs.path('kernel/security/lockdown'), lockdown,
                                      'expected the active mode in brackets, like "none [integrity] confidentiality"')
        lockdown = chosen.group(1)
    sig_enforce = sysfs.read('module/module/parameters/sig_enforce')
    if sig_enforce is not None:
        if sig_enforce not in ('Y', 'N'):
            raise MalformedValueError('sig_enforce', sysfs.path('module/module/parameters/sig_enforce'), sig_enforce,
                                      'expected Y or N')
        sig_enforce = sig_enforce == 'Y'
    return {'kernel_version': procfs.read('sys/kernel/version'), 'version_signature': procfs.read('version_signature'),
            'lockdown': lockdown, 'sig_enforce': sig_enforce,
            'unsigned_refused': bool(sig_enforce) or lockdown not in (None, 'none')}


def collect(sysfs_root='/sys', procfs_root='/proc'):
    """The ``tbnet`` fact dict (see docs/CONVENTIONS.md). Raises ``SysfsError`` on malformed or unreadable files."""
    sysfs = SysfsReader(sysfs_root)
    procfs = SysfsReader(procfs_root)
    notes = []

    kernel_release = procfs.read('sys/kernel/osrelease')
    if kernel_release is None:
        notes.append(f"kernel release unknown: {procfs.path('sys/kernel/osrelease')} missing")

    domains, peers, services = [], [], []
    if not sysfs.isdir(BUS_DEVICES):
        notes.append(f"no thunderbolt bus at {sysfs.path(BUS_DEVICES)}: the thunderbolt driver is not loaded "
                     "or this machine has no Thunderbolt/USB4 controller")
    for name in sysfs.listdir(BUS_DEVICES):
        kind = classify(sysfs, name)
        if kind == 'domain':
            domains.append(read_domain(sysfs, name))
        elif kind == 'xdomain':
            peers.append(read_peer(sysfs, name, notes))
        elif kind == 'service':
            services.append(read_service(sysfs, name))

    if sysfs.isdir(BUS_DEVICES) and not domains:
        notes.append('no Thunderbolt domain: no host controller is registered')
    if sysfs.isdir(BUS_DEVICES) and not peers:
        notes.append('no XDomain peer: no other host is connected over Thunderbolt/USB4')

    by_device = interfaces_by_device(sysfs)
    interfaces = {}
    for service in services:
        ifname = by_device.get(sysfs.realpath(BUS_DEVICES, service['device']))
        service['interface'] = ifname
        if ifname is not None:
            interfaces[ifname] = {'service': service['device'], 'peer': service['peer']}
        elif service['key'] == NETWORK_KEY:
            notes.append(f"ThunderboltIP service {service['device']} has no network interface bound "
                         f"(no {sysfs.path('class/net')}/*/device points at it)")
    for peer in peers:
        if not any(s['peer'] == peer['device'] and s['key'] == NETWORK_KEY for s in services):
            notes.append(f"peer {peer['device']} advertises no ThunderboltIP service (key 'network'): "
                         f"is {MODULE_NAME} loaded on the peer?")

    module = read_module(sysfs)
    if not module['loaded']:
        notes.append(f"{MODULE_NAME} module not loaded ({sysfs.path('module', MODULE_NAME)} missing)")

    return {
        'kernel_release': kernel_release,
        'domains': domains,
        'peers': peers,
        'services': services,
        'interfaces': interfaces,
        'module': module,
        'loading': read_loading(sysfs, procfs),
        'notes': notes,
    }

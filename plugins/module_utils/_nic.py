# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What an Ethernet link is: its NIC and how it trained, read through the sysfs seam and ethtool.

An Ethernet link is verified by what it is, never by a Thunderbolt peer:

- from ``class/net/IF`` (under ``sysfs_root``): ``speed`` (Mb/s; ``-1``, or EINVAL while the link is down, is
  unknown), ``duplex``, ``carrier``, ``carrier_changes``, ``mtu``, ``operstate``; and the PCI function behind
  ``device`` (``vendor``, ``device``, ``subsystem_vendor``, ``subsystem_device``, its slot and its ``driver``
  link), absent for a virtual NIC (a veth has no ``device``);
- from ``ethtool -i IF``: the driver, its version, the firmware version and the bus;
- from ``ethtool -k IF``: the offloads as found (``on``/``off``, and which are fixed), recorded, not judged: a
  transport-tunable layer changes them one at a time.

ethtool's outputs are ``None`` when ethtool is missing or failed (the reason in ``notes``); a sysfs attribute that
is absent is None and named in ``missing``; a malformed one raises ``MalformedValueError`` naming the file.
"""

from __future__ import annotations

import os
import subprocess

from ansible_collections.inferlab.distributed.plugins.module_utils import _ethtool
from ansible_collections.inferlab.distributed.plugins.module_utils._identity import checked_hex_id, pci_id
from ansible_collections.inferlab.distributed.plugins.module_utils._sysfs import (
    MalformedValueError,
    SysfsReader,
    SysfsReadError,
)

CLASS_NET = 'class/net'
PCI_ID_FIELDS = ('vendor', 'device', 'subsystem_vendor', 'subsystem_device')
DUPLEX_VALUES = ('full', 'half', 'unknown')


# an ethtool output that is not what ethtool prints
EthtoolParseError = _ethtool.EthtoolError


def parse_ethtool_info(text):
    """``ethtool -i``'s ``key: value`` lines -> ``{driver, version, firmware_version, bus_info}`` (an empty value is
    None). Raises EthtoolParseError when there is no ``driver:`` line."""
    fields = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition(':')
        if sep:
            fields[key.strip()] = value.strip() or None
    if not fields.get('driver'):
        raise EthtoolParseError('no "driver:" line in ethtool -i output: %r' % (text or '')[:200])
    return {'driver': fields['driver'], 'version': fields.get('version'),
            'firmware_version': fields.get('firmware-version'), 'bus_info': fields.get('bus-info')}


def parse_ethtool_features(text):
    """``ethtool -k``'s feature lines -> ``{name: {on, fixed}}`` (``_ethtool.parse_features``). Raises
    EthtoolParseError when the header ``Features for IF:`` is missing or a line is neither a feature nor blank."""
    return {name: {'on': item['value'] == 'on', 'fixed': item['fixed']}
            for name, item in _ethtool.parse_features(text).items()}


def ethtool_path():
    return (_ethtool.ethtool_argv() or [None])[0]


def run_ethtool(option, interface, run=subprocess.run, which=ethtool_path):
    """``(stdout, note)``: ethtool's output, or None and why not."""
    ethtool = which()
    if not ethtool:
        return None, 'ethtool is not installed (Debian and Ubuntu: the ethtool package)'
    try:
        done = run([ethtool, option, interface], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   universal_newlines=True, env=dict(os.environ, LC_ALL='C'), check=False)
    except OSError as err:
        return None, 'ethtool %s %s could not run: %s' % (option, interface, err)
    if done.returncode != 0:
        return None, 'ethtool %s %s exited %d: %s' % (option, interface, done.returncode, done.stderr.strip()[:200])
    return done.stdout, None


def _ethtool_parsed(option, parse, interface, notes, run, which):
    """ethtool's ``option`` output for ``interface`` parsed, or None with the reason appended to ``notes``."""
    text, note = run_ethtool(option, interface, run=run, which=which)
    parsed = None
    if text is not None:
        try:
            parsed = parse(text)
        except EthtoolParseError as err:
            note = str(err)
    if note:
        notes.append(note)
    return parsed


def _read_optional(reader, parts, missing):
    """A sysfs attribute, None when absent (named in ``missing``) or unreadable (EINVAL: a down link's speed)."""
    try:
        value = reader.read(*parts)
    except SysfsReadError:
        return None
    if value is None:
        missing.append(reader.path(*parts))
    return value


def _int(reader, parts, missing, minimum=None):
    value = _read_optional(reader, parts, missing)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise MalformedValueError(parts[-1], reader.path(*parts), value, 'expected an integer') from None
    return None if minimum is not None and number < minimum else number


def read_pci(reader, interface, missing):
    """The PCI function behind the NIC (``class/net/IF/device``), or None for a virtual NIC (no ``device``)."""
    if not reader.exists(CLASS_NET, interface, 'device'):
        return None
    slot = os.path.basename(reader.realpath(CLASS_NET, interface, 'device'))
    ids = {}
    for field in PCI_ID_FIELDS:
        value = _read_optional(reader, (CLASS_NET, interface, 'device', field), missing)
        ids[field] = (checked_hex_id(field, reader.path(CLASS_NET, interface, 'device', field), value)
                      if value is not None else None)
    driver = (os.path.basename(reader.realpath(CLASS_NET, interface, 'device', 'driver'))
              if reader.exists(CLASS_NET, interface, 'device', 'driver') else None)
    return dict(ids, slot=slot, driver=driver, id=pci_id(ids['vendor'], ids['device']))


def read_nic(interface, sysfs_root='/sys', run=subprocess.run, which=ethtool_path):
    """The NIC document of ``interface`` (see the module docstring)."""
    reader = SysfsReader(sysfs_root)
    missing, notes = [], []
    if not reader.exists(CLASS_NET, interface):
        return {'interface': interface, 'present': False, 'missing': [reader.path(CLASS_NET, interface)],
                'notes': ['%s has no %s' % (sysfs_root, os.path.join(CLASS_NET, interface))]}
    duplex = _read_optional(reader, (CLASS_NET, interface, 'duplex'), missing)
    if duplex is not None and duplex not in DUPLEX_VALUES:
        raise MalformedValueError('duplex', reader.path(CLASS_NET, interface, 'duplex'), duplex,
                                  'one of %s' % ', '.join(DUPLEX_VALUES))
    carrier = _int(reader, (CLASS_NET, interface, 'carrier'), missing)
    info = _ethtool_parsed('-i', parse_ethtool_info, interface, notes, run, which)
    features = _ethtool_parsed('-k', parse_ethtool_features, interface, notes, run, which)
    pci = read_pci(reader, interface, missing)
    return {
        'interface': interface,
        'present': True,
        # -1 (SPEED_UNKNOWN) and a down link's EINVAL are both "not known"
        'speed_mbps': _int(reader, (CLASS_NET, interface, 'speed'), missing, minimum=0),
        'duplex': duplex,
        'carrier': None if carrier is None else carrier == 1,
        'carrier_changes': _int(reader, (CLASS_NET, interface, 'carrier_changes'), missing, minimum=0),
        'mtu': _int(reader, (CLASS_NET, interface, 'mtu'), missing, minimum=0),
        'operstate': _read_optional(reader, (CLASS_NET, interface, 'operstate'), missing),
        'pci': pci,
        'driver': (info or {}).get('driver') or (pci or {}).get('driver'),
        'driver_version': (info or {}).get('version'),
        'firmware_version': (info or {}).get('firmware_version'),
        'bus_info': (info or {}).get('bus_info'),
        'offloads': features,
        'missing': missing,
        'notes': notes,
    }

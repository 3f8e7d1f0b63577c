# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Load the candidate ``thunderbolt_net`` for a while, and put the distribution's driver back.

Over 600 lines on purpose: installed alone on hosts as ``inferlab_tbnet_driver.py`` (the ledger role's files); its
sections (sysfs, commands, emulation, the link's tail, loads, the watchdog, the undo) are one load and its way back.

The one implementation behind the ``tbnet_module`` module and the change ledger's ``kernel_module`` undo (which runs
it on the host without a controller, as ``inferlab_tbnet_driver.py`` beside the ledger's modules). Standard
library only (plus ``_ledger_proc``, which runs its commands); compiles on Python 3.8.

Nothing here persists: the candidate is ``insmod``-ed from its private build directory (a path under
``/lib/modules`` is refused), and the stock driver comes back with ``modprobe`` from the distribution's tree.

What is loaded is read from sysfs, never from a command's exit code: ``insmod thunderbolt-net.ko tx_e2e=1`` on the
STOCK module succeeds with only "unknown parameter 'tx_e2e' ignored" in dmesg. A candidate is
loaded when ``module/thunderbolt_net/srcversion`` is the built module's and ``parameters/tx_e2e`` exists with mode
0444 and the asked value; the stock driver when the srcversion is the distribution's and ``tx_e2e`` is absent.

A real unload removes ``thunderbolt0`` with its addresses, on the peer too (its ThunderboltIP service disappears);
a load brings back an interface with no addresses, and carrier only once both sides have logged in again (the driver
retries every 4.5 s). So after every load and unload the link is brought back by one tail, ``bring_back_link``: the
addressing re-established the way the host manages it (``static``: inferlab re-adds the inventory's address;
``networkd`` or ``NetworkManager``: a bounded wait for the manager to do it), then carrier, the expected speed and
lanes, and an answered ping to the peer. After a candidate load the tail runs in the host-side link watchdog, which
puts the stock driver back when the link does not come back in time; after the stock load, in the undo itself.

Emulated mode (the netns lab, whose hosts cannot load modules) acts on the host's fixture sysfs root instead: it
writes the srcversion, the ``tx_e2e`` parameter and the module taint that a real load would show, so everything that
reads sysfs sees the same thing, and it deletes the direct link's veth as the real unload deletes the netdev (both
ends go, addresses included; the lab brings the pair back, bare, after its login delay). It says nothing about a real
driver; records label it ``driver_layer: emulated``.
"""

from __future__ import annotations

import json
import os
import re
import struct
import time

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_proc
except ImportError:  # on a host, installed beside the ledger's modules (see _ledger_core)
    import inferlab_ledger_proc as _ledger_proc

MODULE = 'thunderbolt_net'
PARAMETER = 'tx_e2e'
PARAMETER_MODE = 0o444
SYSTEM_MODULE_DIRS = ('/lib/modules', '/usr/lib/modules')
SRCVERSION_RE = re.compile(r'^[0-9A-F]{23,24}$')
CHANGE_KEYS = ('module_path', 'candidate_srcversion', 'stock_srcversion', 'stock_build_id', 'stock_loaded',
               'stock_parameters', 'stock_taint', 'tx_e2e', 'interface', 'interface_was_up', 'emulated', 'sysfs_root',
               'link')
# how the direct link's address comes back after a reload, and what the tail needs to check it (a ``link`` param)
ADDRESSING = ('static', 'networkd', 'NetworkManager')
LINK_KEYS = ('addressing', 'address', 'peer', 'timeout_s', 'min_speed_gbps', 'min_lanes')
SPEED_RE = re.compile(r'^(\d+(?:\.\d+)?) Gb/s$')
COMMANDS = ('insmod', 'rmmod', 'modprobe', 'modinfo', 'ip', 'ping')
# seconds a command killed at its timeout gets to die before it is left behind (stuck in the kernel)
KILL_WAIT_S = _ledger_proc.KILL_WAIT_S
COMMAND_DIRS = ('/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin')


class DriverError(Exception):
    """A load, an unload or a verification that failed; the message says what was expected and found."""


# ---------------------------------------------------------------------------------------------------------------
# reading sysfs


def _module_dir(sysfs_root):
    return os.path.join(sysfs_root, 'module', MODULE)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


def read_build_id(path):
    """The GNU build id (hex) in an ELF note file such as ``module/NAME/notes/.note.gnu.build-id``, or None.

    Debian builds its modules without CONFIG_MODULE_SRCVERSION_ALL, so the distribution's thunderbolt_net has no
    srcversion; its build id tells it apart from another build (``readelf -n`` of the .ko shows the same id)."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    offset = 0
    while offset + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from('<III', data, offset)
        name_at = offset + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        if data[name_at:name_at + namesz].rstrip(b'\0') == b'GNU' and kind == 3:  # NT_GNU_BUILD_ID
            return data[desc_at:desc_at + descsz].hex()
        offset = desc_at + (descsz + 3) // 4 * 4
    return None


def module_state(sysfs_root='/sys'):
    """``{loaded, srcversion, build_id, parameters: {name: value}, modes: {name: mode}, taint}`` of
    thunderbolt_net."""
    base = _module_dir(sysfs_root)
    if not os.path.isdir(base):
        return {'loaded': False, 'srcversion': None, 'build_id': None, 'parameters': {}, 'modes': {}, 'taint': None}
    parameters, modes = {}, {}
    param_dir = os.path.join(base, 'parameters')
    if os.path.isdir(param_dir):
        for name in sorted(os.listdir(param_dir)):
            path = os.path.join(param_dir, name)
            parameters[name] = _read(path)
            modes[name] = os.stat(path).st_mode & 0o7777
    return {'loaded': True, 'srcversion': _read(os.path.join(base, 'srcversion')),
            'build_id': read_build_id(os.path.join(base, 'notes', '.note.gnu.build-id')), 'parameters': parameters,
            'modes': modes, 'taint': _read(os.path.join(base, 'taint'))}


def interface_up(sysfs_root, interface):
    """Whether ``interface`` is administratively up (IFF_UP in ``class/net/IF/flags``); None when it is absent."""
    flags = _read(os.path.join(sysfs_root, 'class', 'net', interface, 'flags'))
    if flags is None:
        return None
    try:
        return bool(int(flags, 16) & 0x1)
    except ValueError:
        raise DriverError(f'class/net/{interface}/flags reads {flags!r}, not a hex number') from None


def system_module_dir(path):
    """The distribution's module directory that ``path`` resolves to or under, else None: nothing inferlab builds or
    loads may be there (nothing may persist)."""
    real = os.path.realpath(path)
    return next((system for system in SYSTEM_MODULE_DIRS if real == system or real.startswith(system + '/')), None)


def refuse_system_path(path):
    """A candidate is loaded only from its private build directory, never from the distribution's module tree."""
    real = os.path.realpath(path)
    system = system_module_dir(path)
    if system:
        raise DriverError(f'refusing to load {path} ({real}): a candidate module is loaded only from its private '
                          f'build directory, never from under {system} (nothing may persist)')
    if not os.path.isfile(real):
        raise DriverError(f'the candidate module {path} does not exist')
    return real


def verify_candidate(state, srcversion, tx_e2e):
    """What differs from the candidate loaded with ``tx_e2e``: a list of sentences (empty when it is loaded)."""
    want = 'Y' if tx_e2e else 'N'
    problems = []
    if not state['loaded']:
        return [f'{MODULE} is not loaded']
    if state['srcversion'] != srcversion:
        problems.append(f'srcversion is {state["srcversion"]}, expected the candidate\'s {srcversion}')
    if PARAMETER not in state['parameters']:
        problems.append(f'parameters/{PARAMETER} is absent: the loaded module is not the candidate')
    else:
        if state['parameters'][PARAMETER] != want:
            problems.append(f'parameters/{PARAMETER} reads {state["parameters"][PARAMETER]}, expected {want}')
        if state['modes'][PARAMETER] != PARAMETER_MODE:
            problems.append(f'parameters/{PARAMETER} has mode {state["modes"][PARAMETER]:04o}, expected 0444')
    return problems


def verify_stock(state, stock_srcversion, stock_loaded=True, stock_build_id=None):
    """What differs from the distribution's driver as it was (its srcversion and build id, where it had them): a
    list of sentences."""
    if not stock_loaded:
        return [f'{MODULE} is loaded ({describe(state)}), but it was not before'] if state['loaded'] else []
    if not state['loaded']:
        return [f'{MODULE} is not loaded']
    problems = []
    if PARAMETER in state['parameters']:
        problems.append(f'parameters/{PARAMETER} is present: the candidate is still loaded')
    if stock_srcversion and state['srcversion'] != stock_srcversion:
        problems.append(f'srcversion is {state["srcversion"]}, expected the distribution\'s {stock_srcversion}')
    if stock_build_id and state.get('build_id') != stock_build_id:
        problems.append(f'build id is {state.get("build_id")}, expected the distribution\'s {stock_build_id}')
    return problems


def describe(state):
    """A module state in a few words: srcversion, else build id."""
    if not state['loaded']:
        return 'not loaded'
    if state['srcversion']:
        return f'srcversion {state["srcversion"]}'
    return f'build id {state["build_id"]}' if state.get('build_id') else 'loaded, no srcversion or build id'


def tx_e2e_refusal(state, peer_e2e, want, opted_in, peer_override):
    """Why ``tx_e2e=1`` may not be loaded here, or None. It needs the operator's opt-in, RX E2E in effect
    (``e2e`` = Y) and a peer that advertises TBNET_E2E, or, on a test machine with no peer, the explicit override."""
    if not want:
        return None
    if not opted_in:
        return 'tx_e2e=1 was asked for without the operator\'s opt-in (tbnet_module allow_tx_e2e)'
    e2e = state['parameters'].get('e2e') if state['loaded'] else None
    if e2e is not None and e2e != 'Y':
        return f'tx_e2e=1 needs RX E2E in effect, but {MODULE} e2e reads {e2e}'
    if not peer_e2e and not peer_override:
        return ('tx_e2e=1 needs a peer that advertises TBNET_E2E (prtcstns bit 0); none does on this link. On a test '
                'machine with no peer, set the override (tbnet_module peer_override), which the run records')
    return None


# ---------------------------------------------------------------------------------------------------------------
# commands


def command_argv(name, configured=None):
    if configured:
        return list(configured)
    for directory in COMMAND_DIRS:
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return [path]
    raise DriverError(f'{name} is not installed on this host (package kmod, iproute2 or iputils-ping)')


def run(argv, timeout=60):
    """Run one command with LC_ALL=C and stdin from /dev/null (``_ledger_proc.run_bounded``): ``(rc, stdout,
    stderr)``. Bounded even for a command stuck in the kernel (an ``insmod`` whose module init never returns ignores
    SIGKILL): it is killed at ``timeout`` and waited for KILL_WAIT_S more, then left behind, and a DriverError says
    which."""
    try:
        return _ledger_proc.run_bounded(argv, timeout)
    except OSError as exc:
        raise DriverError(f'{" ".join(argv)} could not run: {exc}') from None
    except _ledger_proc.CommandTimedOut as exc:
        fate = 'it was killed' if exc.died else (
            f'it did not die when killed either (pid {exc.pid}, stuck in the kernel: only a reboot frees it)')
        raise DriverError(f'{" ".join(argv)} did not return within {timeout:g}s, so {fate}') from None


def _must(argv, what, timeout=60):
    rc, out, err = run(argv, timeout)
    if rc != 0:
        raise DriverError(f'{what}: {" ".join(argv)} exited {rc}: {(err or out).strip()[:300]}')
    return out


def modinfo_srcversion(target, commands=None):
    """``modinfo -F srcversion`` of a module file or of the distribution's module by name."""
    out = _must(command_argv('modinfo', (commands or {}).get('modinfo')) + ['-F', 'srcversion', target],
                f'reading the srcversion of {target}').strip()
    if not SRCVERSION_RE.match(out):
        raise DriverError(f'modinfo -F srcversion {target} printed {out[:60]!r}, not a srcversion')
    return out


def _set_link(interface, up, sysfs_root, commands, timeout_s=60):
    if interface_up(sysfs_root, interface) is None:
        return f'{interface} is absent'
    _must(command_argv('ip', commands.get('ip')) + ['link', 'set', 'dev', interface, 'up' if up else 'down'],
          f'setting {interface} {"up" if up else "down"}', timeout_s)
    return f'{interface} set {"up" if up else "down"}'


# ---------------------------------------------------------------------------------------------------------------
# emulation on a fixture root


def _write(path, text, mode=0o644):
    tmp = f'{path}.inferlab-tmp'
    with open(tmp, 'w') as handle:
        handle.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _emulate_candidate(sysfs_root, srcversion, tx_e2e):
    base = _module_dir(sysfs_root)
    if not os.path.isdir(base):
        raise DriverError(f'the fixture root has no {base}: the emulated stock driver is not loaded')
    os.makedirs(os.path.join(base, 'parameters'), exist_ok=True)
    _write(os.path.join(base, 'srcversion'), srcversion + '\n')
    _write(os.path.join(base, 'parameters', PARAMETER), ('Y' if tx_e2e else 'N') + '\n', PARAMETER_MODE)
    _write(os.path.join(base, 'taint'), 'OE\n')  # what an out-of-tree unsigned module shows


def _emulate_stock(sysfs_root, params):
    base = _module_dir(sysfs_root)
    parameter = os.path.join(base, 'parameters', PARAMETER)
    if os.path.lexists(parameter):
        os.unlink(parameter)
    _write(os.path.join(base, 'srcversion'), (params['stock_srcversion'] or '') + '\n')
    _write(os.path.join(base, 'taint'), (params['stock_taint'] or '') + '\n')


# ---------------------------------------------------------------------------------------------------------------
# the direct link after a reload


def parse_link(text, interface):
    """``ip -j addr show dev IF`` output as ``{exists, up, carrier, addresses: ['A/P', ...]}`` (IPv4 addresses).
    An empty text stands for a device that does not exist."""
    absent = {'exists': False, 'up': False, 'carrier': False, 'addresses': []}
    if not text.strip():
        return absent
    try:
        data = json.loads(text)
    except ValueError:
        raise DriverError(f'ip -j addr show dev {interface} printed {text.strip()[:80]!r}, not JSON') from None
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise DriverError(f'ip -j addr show dev {interface} printed {text.strip()[:80]!r}, not a list of interfaces')
    devices = [d for d in data if d.get('ifname') == interface]
    if not devices:
        return absent
    flags = devices[0].get('flags')
    if not isinstance(flags, list):
        raise DriverError(f'ip -j addr show dev {interface} printed no list of flags for {interface}')
    addresses = [f'{a["local"]}/{a["prefixlen"]}' for a in devices[0].get('addr_info') or []
                 if isinstance(a, dict) and a.get('family') == 'inet' and 'local' in a and 'prefixlen' in a]
    return {'exists': True, 'up': 'UP' in flags, 'carrier': 'LOWER_UP' in flags, 'addresses': addresses}


def link_state(interface, commands=None):
    """The interface as the kernel has it now (``parse_link``): existence, IFF_UP, carrier, IPv4 addresses."""
    rc, out, err = run(command_argv('ip', (commands or {}).get('ip')) + ['-j', 'addr', 'show', 'dev', interface],
                       timeout=10)
    if rc != 0:
        if 'does not exist' in err:
            return parse_link('', interface)
        raise DriverError(f'ip -j addr show dev {interface} exited {rc}: {err.strip()[:200]}')
    return parse_link(out, interface)


def trained_link(sysfs_root, interface):
    """``{speed_gbps, lanes}`` of the XDomain link under ``interface``'s ThunderboltIP service (``class/net/IF`` ->
    ``.../<xdomain>/<service>/net/IF``): the slower direction's per-lane speed and the fewer lanes; None where a
    value cannot be read."""
    net = os.path.join(sysfs_root, 'class', 'net', interface)
    if not os.path.exists(net):
        return {'speed_gbps': None, 'lanes': None}
    xdomain = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(net))))
    speeds, lanes = [], []
    for direction in ('rx', 'tx'):
        match = SPEED_RE.match(_read(os.path.join(xdomain, f'{direction}_speed')) or '')
        speeds.append(float(match.group(1)) if match else None)
        count = _read(os.path.join(xdomain, f'{direction}_lanes')) or ''
        lanes.append(int(count) if count.isdigit() else None)
    return {'speed_gbps': None if None in speeds else min(speeds), 'lanes': None if None in lanes else min(lanes)}


def link_problems(state, trained, link, interface, own_end_only=False):
    """What keeps the link from being back (sentences; empty when it is, short of the ping). ``own_end_only``: this
    host's end only (there, up with its address), not what needs the peer (carrier, the trained speed and lanes)."""
    if not state['exists']:
        return [f'{interface} does not exist']
    problems = []
    if not state['up']:
        problems.append(f'{interface} is down')
    if link['address'] not in state['addresses']:
        problems.append(f'{interface} does not have {link["address"]} '
                        f'(has {", ".join(state["addresses"]) or "no IPv4 address"})')
    if own_end_only:
        return problems
    if not state['carrier']:
        problems.append(f'{interface} has no carrier')
    speed, lanes = trained['speed_gbps'], trained['lanes']
    if link['min_speed_gbps'] and (speed is None or speed < link['min_speed_gbps']):
        problems.append(f'the link trained at {speed} Gb/s per lane, expected at least {link["min_speed_gbps"]:g} '
                        '(inferlab_link_min_speed_gbps)')
    if link['min_lanes'] and (lanes is None or lanes < link['min_lanes']):
        problems.append(f'the link has {lanes} lane(s), expected at least {link["min_lanes"]} '
                        '(inferlab_link_min_lanes)')
    return problems


def _readdress(interface, address, state, commands):
    """``static`` addressing: set the interface up and re-add the inventory's address. Returns what it did and what
    failed (the interface may vanish again between two commands: the next round sees it)."""
    ip = command_argv('ip', commands.get('ip'))
    done, failed = [], []
    steps = ([] if state['up'] else [(['link', 'set', 'dev', interface, 'up'], f'set {interface} up')]) + \
        ([] if address in state['addresses'] else [(['addr', 'replace', address, 'dev', interface],
                                                    f're-added {address}')])
    for argv, what in steps:
        rc, out, err = run(ip + argv, timeout=10)
        (done if rc == 0 else failed).append(what if rc == 0 else f'ip {" ".join(argv)}: {(err or out).strip()[:120]}')
    return done, failed


def _addressing_hint(link):
    if link['addressing'] == 'static':
        return (f' (addressing static: inferlab re-adds {link["address"]} itself; the peer\'s end must come back '
                'too, and carrier needs both sides logged in)')
    return (f' (addressing {link["addressing"]}: the host\'s network manager was expected to re-add '
            f'{link["address"]}; set inferlab_link_addressing to static where the address is set by hand, or give '
            'the link more time: tbnet_candidate_link_timeout_s)')


def bring_back_link(interface, link, sysfs_root, commands=None, timeout_s=None, poll_s=0.25, own_end_only=False):
    """The tail of every load and unload: wait, bounded, until the direct link is back as it was.

    ``link`` is a ledger entry's ``link`` param. With ``static`` addressing the interface is set up and its address
    re-added whenever it appears without them (it may appear, vanish and appear again while both ends reload);
    ``networkd`` and ``NetworkManager`` are only waited for. Then carrier, the trained speed and lanes, and an
    answered ping to the peer. Returns ``{seconds, interface_s, carrier_s, addressing, actions}``; DriverError,
    saying what is still missing, at the bound (``timeout_s``, default the link's own).

    ``own_end_only`` stops once this host's end is up with its address: what an undo can promise alone, since carrier
    and the peer's answer need the peer's end back too, which the peer's own tail brings (the restore runs the whole
    tail on both hosts at once after the undo)."""
    commands = commands or {}
    bound = link['timeout_s'] if timeout_s is None else timeout_s
    started = time.monotonic()
    seen, actions = {}, []
    while True:
        state = link_state(interface, commands)
        failed = []
        if state['exists']:
            seen.setdefault('interface_s', round(time.monotonic() - started, 3))
            if link['addressing'] == 'static' and (not state['up'] or link['address'] not in state['addresses']):
                done, failed = _readdress(interface, link['address'], state, commands)
                actions += [f'{what} at {time.monotonic() - started:.1f}s' for what in done]
                state = link_state(interface, commands)
        if state['carrier']:
            seen.setdefault('carrier_s', round(time.monotonic() - started, 3))
        problems = link_problems(state, trained_link(sysfs_root, interface), link, interface, own_end_only) + failed
        if not problems:
            if own_end_only or link_carries_traffic(interface, link['peer'], commands.get('ping')):
                return {'seconds': round(time.monotonic() - started, 3), 'interface_s': seen.get('interface_s'),
                        'carrier_s': seen.get('carrier_s'), 'addressing': link['addressing'], 'actions': actions}
            problems = [f'no answer to a ping to {link["peer"]} over {interface}']
        if time.monotonic() - started + poll_s > bound:
            raise DriverError(f'the direct link did not come back within {bound:g}s of the reload: '
                              + '; '.join(problems) + _addressing_hint(link))
        time.sleep(poll_s)


def link_kind(interface, commands=None):
    """The interface's link kind (``veth``, or '' for a device that is not a virtual link), or None when absent."""
    rc, out, _err = run(command_argv('ip', (commands or {}).get('ip')) + ['-j', '-d', 'link', 'show', 'dev', interface],
                        timeout=10)
    if rc != 0:
        return None
    try:
        return (json.loads(out)[0].get('linkinfo') or {}).get('info_kind') or ''
    except (ValueError, IndexError, AttributeError, KeyError, TypeError):
        return ''


def emulation_refusal(interface, commands=None):
    """Why the emulated driver layer may not act on ``interface`` (it deletes the link as an unload does, and only a
    veth may be deleted), or None."""
    return _refusal_for_kind(interface, link_kind(interface, commands))


def _refusal_for_kind(interface, kind):
    if kind is None or kind == 'veth':
        return None
    return (f'the emulated driver layer deletes the direct link as a real unload does, and only ever a veth: '
            f'{interface} is {kind or "not a virtual link"} (a real host is never emulated: inferlab_driver_layer)')


def _emulate_unload(interface, commands):
    """What a real unload does to the link, on the lab's veth: the netdev goes with its addresses, and the peer's end
    with it (as the peer's netdev goes when this host's ThunderboltIP service disappears). Only a veth is deleted."""
    kind = link_kind(interface, commands)
    refusal = _refusal_for_kind(interface, kind)
    if refusal:
        raise DriverError(refusal)
    if kind is None:
        return f'{interface} is absent (the peer\'s reload took it)'
    argv = command_argv('ip', commands.get('ip')) + ['link', 'del', 'dev', interface]
    rc, out, err = run(argv, timeout=10)
    if rc != 0:
        if link_kind(interface, commands) is None:  # the peer's reload deleted the pair in between
            return f'{interface} is absent (the peer\'s reload took it)'
        raise DriverError(f'deleting {interface}: {" ".join(argv)} exited {rc}: {(err or out).strip()[:300]}')
    return f'{interface} deleted with its addresses (the peer\'s end with it)'


# ---------------------------------------------------------------------------------------------------------------
# load and unload


def load_candidate(params, commands=None, timeout_s=60):
    """Load the candidate as ``params`` (a ``kernel_module`` ledger entry's) describes; verify it through sysfs.
    On a failed verification the stock driver is put back before the error is raised. Each command (the link
    down, the unload, the ``insmod``) gets ``timeout_s``; one that outlasts it is a DriverError, and the caller's
    undo of the entry puts the stock driver back."""
    commands = commands or {}
    sysfs_root = params['sysfs_root']
    if params['emulated']:
        said = [_emulate_unload(params['interface'], commands)]
        _emulate_candidate(sysfs_root, params['candidate_srcversion'], params['tx_e2e'])
        said.append('emulated: the fixture root now shows the candidate')
    else:
        path = refuse_system_path(params['module_path'])
        said = [_set_link(params['interface'], False, sysfs_root, commands, timeout_s)]
        if module_state(sysfs_root)['loaded']:
            _must(command_argv('rmmod', commands.get('rmmod')) + [MODULE], f'unloading {MODULE}', timeout_s)
            said.append(f'unloaded {MODULE}')
        argv = command_argv('insmod', commands.get('insmod')) + [path] + (['tx_e2e=1'] if params['tx_e2e'] else [])
        _must(argv, 'loading the candidate', timeout_s)
        said.append(f'insmod {path}{" tx_e2e=1" if params["tx_e2e"] else ""}')
    problems = verify_candidate(module_state(sysfs_root), params['candidate_srcversion'], params['tx_e2e'])
    if problems:
        back = load_stock(params, commands)
        raise DriverError('the candidate did not load as asked: ' + '; '.join(problems) + f' (then: {back})')
    if params.get('link') is None and params['interface_was_up'] and not params['emulated']:
        said.append(_set_link(params['interface'], True, sysfs_root, commands))
    return '; '.join(said)


def load_stock(params, commands=None):
    """Put the distribution's driver back as it was before the candidate (the ``kernel_module`` undo), and verify it
    through sysfs. Safe when the candidate was never loaded and when run twice."""
    commands = commands or {}
    sysfs_root = params['sysfs_root']
    state = module_state(sysfs_root)
    stock = (params['stock_srcversion'], params['stock_loaded'], params.get('stock_build_id'))
    if not verify_stock(state, *stock):
        said = [f'{MODULE} is already the distribution\'s driver ({describe(state)})']
        return '; '.join(said + _link_back(params, commands))
    if params['emulated']:
        said = [_emulate_unload(params['interface'], commands)]
        _emulate_stock(sysfs_root, params)
        said.append('emulated: the fixture root shows the stock driver again')
    else:
        said = [_set_link(params['interface'], False, sysfs_root, commands)]
        if state['loaded']:
            _must(command_argv('rmmod', commands.get('rmmod')) + [MODULE], f'unloading {MODULE}')
            said.append(f'unloaded {MODULE} ({describe(state)})')
        if params['stock_loaded']:
            _must(command_argv('modprobe', commands.get('modprobe')) + [MODULE], f'loading the stock {MODULE}')
            said.append(f'modprobe {MODULE}')
    problems = verify_stock(module_state(sysfs_root), *stock)
    if problems:
        raise DriverError('the distribution\'s driver is not back: ' + '; '.join(problems))
    if params.get('link') is None and params['interface_was_up'] and not params['emulated']:
        said.append(_set_link(params['interface'], True, sysfs_root, commands))
    return '; '.join(said + _link_back(params, commands))


def _link_back(params, commands):
    """After the stock load, where the entry describes the link: this host's end back (``bring_back_link``'s
    ``own_end_only``), as a sentence in a list."""
    if params.get('link') is None:
        return []
    back = bring_back_link(params['interface'], params['link'], params['sysfs_root'], commands, own_end_only=True)
    return [f'this host\'s end of the direct link came back in {back["seconds"]:g}s'
            + (f' ({", ".join(back["actions"])})' if back['actions'] else '')]


def wait_interface(sysfs_root, interface, timeout_s, poll_s=0.2):
    """Seconds until ``interface`` exists again after a reload (the driver recreates it), or None on timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if interface_up(sysfs_root, interface) is not None:
            return round(time.monotonic() - started, 3)
        time.sleep(poll_s)
    return None


# ---------------------------------------------------------------------------------------------------------------
# the link watchdog


def link_carries_traffic(interface, peer, ping=None, timeout_s=1):
    """One ping to ``peer`` out of ``interface``: whether it was answered."""
    argv = command_argv('ping', ping) + ['-c', '1', '-W', str(int(max(1, timeout_s))), '-I', interface, peer]
    rc, _out, _err = run(argv, timeout=timeout_s + 5)
    return rc == 0


def watch_link(interface, peer, deadline_s, ping=None, poll_s=1.0):
    """Wait until the direct link carries traffic (a ping to the peer answered) within ``deadline_s``.

    After a candidate load this is the host's own guard against the known failure where a controller never returns
    TX credits and the link carries nothing (observed with the ASMedia ASM4242): the caller puts the stock
    driver back when it returns False. Returns ``(ok, seconds, tries)``."""
    started = time.monotonic()
    tries = 0
    while True:
        tries += 1
        if link_carries_traffic(interface, peer, ping):
            return True, round(time.monotonic() - started, 3), tries
        if time.monotonic() - started + poll_s > deadline_s:
            return False, round(time.monotonic() - started, 3), tries
        time.sleep(poll_s)


# ---------------------------------------------------------------------------------------------------------------
# the change ledger's kernel_module kind


def check_change_params(params):
    """Validate a ``kernel_module`` entry's params (DriverError): what was loaded before, the candidate, the link."""
    unknown = sorted(set(params) - set(CHANGE_KEYS))
    if unknown:
        raise DriverError(f'unknown params for a kernel_module entry: {", ".join(unknown)}')
    for name in ('module_path', 'sysfs_root'):
        if not isinstance(params.get(name), str) or not os.path.isabs(params[name]):
            raise DriverError(f'"{name}" must be an absolute path, got {params.get(name)!r}')
    for name in ('candidate_srcversion', 'stock_srcversion'):
        value = params.get(name)
        if value is not None and not SRCVERSION_RE.match(str(value)):
            raise DriverError(f'"{name}" must be a module srcversion, got {value!r}')
    if not params.get('candidate_srcversion'):
        raise DriverError('"candidate_srcversion" is required')
    for name in ('stock_loaded', 'tx_e2e', 'interface_was_up', 'emulated'):
        if not isinstance(params.get(name), bool):
            raise DriverError(f'"{name}" must be true or false, got {params.get(name)!r}')
    if not isinstance(params.get('interface'), str) or not params['interface']:
        raise DriverError('"interface" must name the direct-link interface')
    if not isinstance(params.get('stock_parameters', {}), dict):
        raise DriverError('"stock_parameters" must be a mapping')
    if params.get('link') is not None:
        check_link(params['link'])
    return params


def check_link(link):
    """Validate a ``link`` param (DriverError): how the address comes back, the address, the peer, the bounds."""
    if not isinstance(link, dict) or sorted(link) != sorted(LINK_KEYS):
        raise DriverError(f'"link" must be a mapping of {", ".join(LINK_KEYS)}, got {link!r}')
    if link['addressing'] not in ADDRESSING:
        raise DriverError(f'"link.addressing" must be one of {", ".join(ADDRESSING)}, got {link["addressing"]!r}')
    if not isinstance(link['address'], str) or not re.match(r'^\d+\.\d+\.\d+\.\d+/\d+$', link['address']):
        raise DriverError(f'"link.address" must be an IPv4 address with its prefix length, got {link["address"]!r}')
    if not isinstance(link['peer'], str) or not link['peer']:
        raise DriverError('"link.peer" must be the peer\'s address on the direct link')
    for name, kind in (('timeout_s', (int, float)), ('min_speed_gbps', (int, float)), ('min_lanes', int)):
        value = link[name]
        if isinstance(value, bool) or not isinstance(value, kind) or value < 0 or (name == 'timeout_s' and not value):
            raise DriverError(f'"link.{name}" must be a {"positive" if name == "timeout_s" else "non-negative"} '
                              f'number, got {value!r}')
    return link


def undo_change(params, commands=None):
    try:
        return load_stock(params, commands)
    except DriverError as exc:
        raise DriverError(f'{exc}; restore it by hand: rmmod {MODULE}; modprobe {MODULE}') from None


def last_json_line(path, offset=0):
    """The last line of ``path`` after ``offset`` that is a JSON object (a watchdog's verdict in its log), or None."""
    try:
        with open(path, 'rb') as handle:
            handle.seek(offset)
            lines = handle.read().decode('utf-8', 'replace').splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith('{'):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None

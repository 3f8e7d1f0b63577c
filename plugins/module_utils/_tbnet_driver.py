# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Load the candidate ``thunderbolt_net`` for a while, and put the distribution's driver back.

The one implementation behind the ``tbnet_module`` module and the change ledger's ``kernel_module`` undo (which runs
it on the host without a controller, as ``inferlab_tbnet_driver.py`` beside ``inferlab_ledger.py``). Standard
library only; compiles on Python 3.8.

Nothing here persists: the candidate is ``insmod``-ed from its private build directory (a path under
``/lib/modules`` is refused), and the stock driver comes back with ``modprobe`` from the distribution's tree.

What is loaded is read from sysfs, never from a command's exit code: ``insmod thunderbolt-net.ko tx_e2e=1`` on the
STOCK module succeeds with only "unknown parameter 'tx_e2e' ignored" in dmesg (FACTS.md section 1). A candidate is
loaded when ``module/thunderbolt_net/srcversion`` is the built module's and ``parameters/tx_e2e`` exists with mode
0444 and the asked value; the stock driver when the srcversion is the distribution's and ``tx_e2e`` is absent.

Emulated mode (the netns lab, whose hosts cannot load modules) acts on the host's fixture sysfs root instead: it
writes the srcversion, the ``tx_e2e`` parameter and the module taint that a real load would show, so everything that
reads sysfs sees the same thing. It says nothing about a real driver; records label it ``driver_layer: emulated``.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import time

MODULE = 'thunderbolt_net'
PARAMETER = 'tx_e2e'
PARAMETER_MODE = 0o444
SYSTEM_MODULE_DIRS = ('/lib/modules', '/usr/lib/modules')
SRCVERSION_RE = re.compile(r'^[0-9A-F]{23,24}$')
CHANGE_KEYS = ('module_path', 'candidate_srcversion', 'stock_srcversion', 'stock_build_id', 'stock_loaded',
               'stock_parameters', 'stock_taint', 'tx_e2e', 'interface', 'interface_was_up', 'emulated', 'sysfs_root')
COMMANDS = ('insmod', 'rmmod', 'modprobe', 'modinfo', 'ip', 'ping')
COMMAND_DIRS = ('/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin')
# the PATH of the host-side watchdog (systemd's default for services)
BASE_PATH = ':'.join(COMMAND_DIRS)


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


def refuse_system_path(path):
    """A candidate is loaded only from its private build directory, never from the distribution's module tree."""
    real = os.path.realpath(path)
    for system in SYSTEM_MODULE_DIRS:
        if real == system or real.startswith(system + '/'):
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
    """Run one command with LC_ALL=C: ``(rc, stdout, stderr)``."""
    env = dict(os.environ, LC_ALL='C')
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DriverError(f'{" ".join(argv)} could not run: {exc}') from None
    return proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace')


def _must(argv, what):
    rc, out, err = run(argv)
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


def _set_link(interface, up, sysfs_root, commands):
    if interface_up(sysfs_root, interface) is None:
        return f'{interface} is absent'
    _must(command_argv('ip', commands.get('ip')) + ['link', 'set', 'dev', interface, 'up' if up else 'down'],
          f'setting {interface} {"up" if up else "down"}')
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
# load and unload


def load_candidate(params, commands=None):
    """Load the candidate as ``params`` (a ``kernel_module`` ledger entry's) describes; verify it through sysfs.
    On a failed verification the stock driver is put back before the error is raised."""
    commands = commands or {}
    sysfs_root = params['sysfs_root']
    if params['emulated']:
        _emulate_candidate(sysfs_root, params['candidate_srcversion'], params['tx_e2e'])
        said = ['emulated: the fixture root now shows the candidate']
    else:
        path = refuse_system_path(params['module_path'])
        said = [_set_link(params['interface'], False, sysfs_root, commands)]
        if module_state(sysfs_root)['loaded']:
            _must(command_argv('rmmod', commands.get('rmmod')) + [MODULE], f'unloading {MODULE}')
            said.append(f'unloaded {MODULE}')
        argv = command_argv('insmod', commands.get('insmod')) + [path] + (['tx_e2e=1'] if params['tx_e2e'] else [])
        _must(argv, 'loading the candidate')
        said.append(f'insmod {path}{" tx_e2e=1" if params["tx_e2e"] else ""}')
    problems = verify_candidate(module_state(sysfs_root), params['candidate_srcversion'], params['tx_e2e'])
    if problems:
        back = load_stock(params, commands)
        raise DriverError('the candidate did not load as asked: ' + '; '.join(problems) + f' (then: {back})')
    if params['interface_was_up'] and not params['emulated']:
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
        return f'{MODULE} is already the distribution\'s driver ({describe(state)})'
    if params['emulated']:
        _emulate_stock(sysfs_root, params)
        said = ['emulated: the fixture root shows the stock driver again']
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
    if params['interface_was_up'] and not params['emulated']:
        said.append(_set_link(params['interface'], True, sysfs_root, commands))
    return '; '.join(said)


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
    TX credits and the link carries nothing (the ASMedia ASM4242, FACTS.md section 1): the caller puts the stock
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
    return params


def undo_change(params, commands=None):
    try:
        return load_stock(params, commands)
    except DriverError as exc:
        raise DriverError(f'{exc}; restore it by hand: rmmod {MODULE}; modprobe {MODULE}') from None

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ledger's kinds of things changed in place, each declared with its check and its undo: ``file`` (undo
restores a backup or removes a created file), ``build_dir`` (a private build directory; undo removes it when it
carries inferlab's marker file or is empty), ``tc_profile`` (undo puts back the interface's qdisc tree recorded
before the change), ``sysctl`` and ``driver_param`` (a transport sysctl, a driver's parameter under /sys/module;
undo writes the value read before back) and ``nic_setting`` (a NIC's offloads, coalescing or ring sizes set with
ethtool; undo sets the values read before back).

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ethtool as ethtool
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base as base
    from ansible_collections.inferlab.distributed.plugins.module_utils import _tc as tc
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ethtool as ethtool
    import inferlab_ledger_base as base
    import inferlab_tc as tc


# ---------------------------------------------------------------------------------------------------------------
# kind: file (undo restores a backup or removes a created file)


def _check_file(params):
    base.no_unknown('file', params, {'path', 'backup', 'existed'})
    path = params.get('path')
    if not isinstance(path, str) or not os.path.isabs(path):
        raise base.LedgerError(f'"path" of a file entry must be an absolute path, got {path!r}')
    if 'existed' in params:
        params['existed'] = base.as_bool(params['existed'], 'existed')
    backup = params.get('backup')
    if backup is not None:
        if not isinstance(backup, str) or not os.path.isabs(backup):
            raise base.LedgerError(f'"backup" of a file entry must be an absolute path, got {backup!r}')
        if params.get('existed') is False:
            raise base.LedgerError('a file entry has either "backup" (the file existed) or "existed: false", not both')
        if os.path.normpath(backup) == os.path.normpath(path):
            raise base.LedgerError(f'the backup of {path} cannot be the file itself')
        params['existed'] = True
    elif params.get('existed') is not False:
        raise base.LedgerError(f'a file entry for {path} needs "backup" (a copy taken before the change) or '
                               '"existed: false" (the change creates it)')
    return params


def _undo_file(params, ctx):
    path = params['path']
    if params.get('existed') is False:
        if os.path.isdir(path) and not os.path.islink(path):
            raise base.UndoError(f'{path} is a directory now; a file entry only removes files: remove it by hand')
        if not os.path.lexists(path):
            return f'removed nothing: {path} is absent (it was never written)'
        os.unlink(path)
        return f'removed {path} (it did not exist before the change)'
    backup = params['backup']
    if not os.path.isfile(backup):
        raise base.UndoError(f'backup {backup} of {path} is missing, so the file cannot be restored; restore {path} by '
                             'hand')
    if os.path.isdir(path) and not os.path.islink(path):
        raise base.UndoError(f'{path} is a directory now; cannot restore the file from {backup}')
    st = os.stat(backup)
    _replace_with_copy(path, backup, st)
    return f'restored {path} from {backup} (mode {st.st_mode & 0o7777:04o}); the backup is kept'


def _replace_with_copy(path, backup, st):
    """Put a copy of ``backup`` (content, mode, times and, as root, owner: ``st``) in place of ``path`` by a rename.

    The copy is written to a new file of an unpredictable name in ``path``'s directory, made with O_CREAT|O_EXCL|
    O_NOFOLLOW (tempfile.mkstemp) and set up through its descriptor only: a link planted in that directory is never
    followed, so a restore that runs as root writes nowhere but there."""
    directory = os.path.dirname(path) or '.'
    fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.inferlab-restore.', dir=directory)
    replaced = False
    try:
        with os.fdopen(fd, 'wb') as copy, open(backup, 'rb') as original:
            shutil.copyfileobj(original, copy)
            copy.flush()
            if os.geteuid() == 0:
                os.fchown(copy.fileno(), st.st_uid, st.st_gid)
            os.fchmod(copy.fileno(), stat.S_IMODE(st.st_mode))
            os.utime(copy.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(copy.fileno())
        os.replace(tmp, path)
        replaced = True
        base.fsync_dir(directory)
    finally:
        if not replaced:
            os.unlink(tmp)


FILE = base.Kind('file', _check_file, _undo_file)


# ---------------------------------------------------------------------------------------------------------------
# kind: build_dir (a private directory made for a build, such as the candidate driver's; undo removes it)


# a private build directory (the candidate driver's): its undo removes it only when it carries this marker file
BUILD_DIR_MARKER = '.inferlab-build-dir'
# Where a build directory may never be: the system's own files and the parts of /var the system keeps (a state
# directory under /var/lib, the default, stays allowed; so does one in a user's workspace, such as molecule's).
SYSTEM_DIRS = ('/lib/modules', '/usr/lib/modules', '/boot', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib64', '/proc',
               '/sys', '/dev', '/run', '/var/log', '/var/spool', '/var/mail', '/var/cache', '/var/lib/dpkg',
               '/var/lib/apt', '/var/lib/systemd')
# Nor inside a directory of keys, wherever it is (~/.ssh, ~/.gnupg).
KEY_DIRS = ('.ssh', '.gnupg')


def _check_build_dir(params):
    base.no_unknown('build_dir', params, {'path', 'purpose'})
    path = params.get('path')
    if not isinstance(path, str) or not os.path.isabs(path):
        raise base.LedgerError(f'"path" of a build_dir entry must be an absolute path, got {path!r}')
    path = os.path.normpath(path)
    if path.count('/') < 2:
        raise base.LedgerError(f'a build_dir entry needs a directory at least two levels deep, got {path!r}')
    for system in SYSTEM_DIRS:
        if path == system or path.startswith(system + '/'):
            raise base.LedgerError(f'a build directory may not be under {system}: {path} (nothing inferlab builds may '
                                   'land where the system keeps its own files)')
    keys = [part for part in path.split('/') if part in KEY_DIRS]
    if keys:
        raise base.LedgerError(f'a build directory may not be inside a {keys[0]} directory: {path} (nothing inferlab '
                               'builds may land among keys)')
    params['path'] = path
    return params


def _undo_build_dir(params, ctx):
    path = params['path']
    if not os.path.lexists(path):
        return f'removed nothing: {path} is absent'
    if os.path.islink(path) or not os.path.isdir(path):
        raise base.UndoError(f'{path} is not a directory now; a build_dir entry only removes the directory it made: '
                             'look at it by hand')
    if os.listdir(path) and not os.path.isfile(os.path.join(path, BUILD_DIR_MARKER)):
        raise base.UndoError(f'{path} has files but no {BUILD_DIR_MARKER} marker: not the directory inferlab '
                             'made, so it is left alone; remove it by hand once you have looked')
    shutil.rmtree(path)
    return f'removed the build directory {path}'


BUILD_DIR = base.Kind('build_dir', _check_build_dir, _undo_build_dir)


# ---------------------------------------------------------------------------------------------------------------
# kind: tc_profile (a link profile, made by the link_profile module; _tc tells whether the root qdisc is ours)


# a link profile: tc qdiscs on one interface's egress, made by the link_profile module (_tc)
TC_PROFILES = tuple(profile for profile in tc.PROFILES if profile != 'clean')  # clean is no profile


def _check_tc_profile(params):
    """``qdiscs``: the interface's egress qdisc tree before the change (``_tc.tree``), which the undo puts back; an
    entry without it (recorded before inferlab kept the tree) is undone by removing our profile. With a tree,
    ``profile`` may be ``clean`` too: our profile (or the lab's stock one) removed from a link."""
    known = {'interface', 'profile', 'handle', 'rate_mbit', 'burst_kb', 'latency_ms', 'pfifo_limit', 'qdiscs'}
    base.no_unknown('tc_profile', params, known)
    if 'qdiscs' in params:
        try:
            tc.check_tree(params['qdiscs'])
        except tc.TcError as exc:
            raise base.LedgerError(f'"qdiscs" of a tc_profile entry must be the interface\'s qdisc tree: '
                                   f'{exc}') from None
    base.check_interface('tc_profile', params.get('interface'))
    if params.get('profile') not in TC_PROFILES and not (params.get('profile') == 'clean' and 'qdiscs' in params):
        raise base.LedgerError(f'"profile" of a tc_profile entry must be one of {", ".join(TC_PROFILES)} (clean is the '
                               f'absence of a profile, nothing to record), got {params.get("profile")!r}')
    params['handle'] = params.get('handle') or tc.ROOT_HANDLE
    handle = params['handle']
    if (not isinstance(handle, str) or not handle.endswith(':') or not 1 <= len(handle) - 1 <= 4
            or any(c not in '0123456789abcdef' for c in handle[:-1]) or handle == '0:'):
        raise base.LedgerError(f'"handle" of a tc_profile entry must be a qdisc handle such as {tc.ROOT_HANDLE!r}, '
                               f'got {handle!r}')
    for name in ('rate_mbit', 'burst_kb', 'latency_ms', 'pfifo_limit'):
        if params.get(name) is not None:
            params[name] = base.as_int(params[name], name, minimum=1)
    return params


TC_SBIN = ('/usr/sbin', '/sbin', '/usr/local/sbin')


def _tc_argv(ctx):
    if ctx.tc_command:
        return list(ctx.tc_command)
    found = shutil.which('tc') or shutil.which('tc', path=os.pathsep.join(TC_SBIN))
    if not found:
        raise base.UndoError('tc is not installed on this host (package iproute2), so the link profile cannot be '
                             'removed; install it and run the undo again')
    return [found]


def _read_qdiscs(interface, tc_argv, ctx):
    """The qdiscs of ``interface`` (``parse_qdiscs``), or None when it no longer exists."""
    show = tc_argv + tc.show_argv(interface)[1:]
    rc, out, err = base.run_command(show, ctx)
    if rc != 0:
        if 'cannot find device' in err.lower():
            return None
        raise base.UndoError(f'cannot read the qdiscs of {interface}: {" ".join(show)} exited {rc}: {err.strip()}')
    try:
        return tc.parse_qdiscs(out)
    except tc.TcError as exc:
        raise base.UndoError(f'{" ".join(show)}: {exc}') from None


def _undo_tc_profile(params, ctx):
    interface, profile = params['interface'], params['profile']
    tc_argv = _tc_argv(ctx)
    qdiscs = _read_qdiscs(interface, tc_argv, ctx)
    if qdiscs is None:
        return f'{interface} no longer exists, and its qdiscs went with it: nothing to remove'
    if 'qdiscs' in params:
        return _put_back_tc_tree(interface, profile, params['qdiscs'], qdiscs, tc_argv, ctx)
    # an entry from before the tree was recorded: its undo removes our profile, as it did then
    found = tc.classify(qdiscs)
    if found['profile'] == 'clean':
        return f'no {profile} profile on {interface} ({found["reason"]}): nothing to remove'
    described = tc.describe(qdiscs)
    if found['profile'] == 'foreign':
        raise base.UndoError(f'{interface} has a root qdisc inferlab did not make ({described}); not deleting it. Look '
                             f'at `tc qdisc show dev {interface}`, remove it yourself if it is a leftover '
                             f'(tc qdisc del dev {interface} root), then run the undo again')
    delete = tc_argv + tc.delete_root_argv(interface)[1:]
    rc, out, err = base.run_command(delete, ctx)
    if rc != 0:
        raise base.UndoError(f'{" ".join(delete)} exited {rc}: {err.strip() or out.strip()}')
    return f'removed the {profile} profile from {interface} ({described})'


def _put_back_tc_tree(interface, profile, recorded, qdiscs, tc_argv, ctx):
    """Put ``recorded`` (the tree found before the change) back, when what is there now is what the entry made
    (``profile``: our tbf for tx_cliff and lossy, the kernel's default root for clean); read it back to prove it."""
    before = tc.describe_tree(recorded)
    if not tc.tree_differences(recorded, tc.tree(qdiscs)):
        return f'{interface} has the qdiscs recorded before the {profile} profile ({before}): nothing to put back'
    found = tc.classify(qdiscs)
    if (found['profile'] == 'clean') != (profile == 'clean') or found['profile'] == 'foreign':
        raise base.UndoError(f'{interface} has {tc.describe_tree(tc.tree(qdiscs))}, not the {profile} profile this '
                             f'entry made, so something else changed it since; not replacing it. Look at `tc qdisc '
                             f'show dev {interface}`; what was there before the change: {before}')
    try:
        commands = tc.rebuild_commands(interface, recorded, qdiscs, tc=tc_argv[0])
    except tc.TcError as exc:
        raise base.UndoError(f'cannot put back the qdiscs of {interface} ({before}): {exc}') from None
    for argv in commands:
        argv = tc_argv + argv[1:]
        rc, out, err = base.run_command(argv, ctx)
        if rc != 0:
            raise base.UndoError(f'{" ".join(argv)} exited {rc}: {err.strip() or out.strip()}; the qdiscs to put '
                                 f'back on {interface}: {before}')
    now = _read_qdiscs(interface, tc_argv, ctx) or []
    differences = tc.tree_differences(recorded, tc.tree(now))
    if differences:
        raise base.UndoError(f'put the qdiscs of {interface} back, but they differ from the recorded ones: '
                             f'{"; ".join(differences)}')
    return f'put back the qdiscs of {interface} from before the {profile} profile: {before}'


TC_PROFILE = base.Kind('tc_profile', _check_tc_profile, _undo_tc_profile)


# ---------------------------------------------------------------------------------------------------------------
# kinds: sysctl and driver_param (a setting file written at run time; undo writes the value read before back)


# a transport tunable: one sysctl under net.* written at run time (never persisted: no file under /etc/sysctl.d), by
# the sysctl_layer module. ``path`` is where it was written (``<proc_sys_root>/net/...``, injectable for tests),
# ``previous`` the value read just before and ``value`` the one written, each as the kernel prints it with its
# whitespace folded to single spaces. The undo writes ``previous`` back only while the value is still ``value``.
SYSCTL_NAME_RE = re.compile(r'^net\.(core|ipv4|ipv6)\.[A-Za-z0-9_.-]+$')


def is_transport_sysctl(name):
    """Whether ``name`` is a sysctl the ledger takes: under net.core, net.ipv4 or net.ipv6, no empty part."""
    return isinstance(name, str) and bool(SYSCTL_NAME_RE.match(name)) and '..' not in name


def sysctl_text(value):
    """A sysctl value as compared and recorded: its whitespace folded to single spaces, no ends."""
    return ' '.join(str(value).split())


def _check_sysctl(params):
    base.no_unknown('sysctl', params, {'name', 'path', 'previous', 'value'})
    name, path = params.get('name'), params.get('path')
    if not is_transport_sysctl(name):
        raise base.LedgerError(f'"name" of a sysctl entry must be a transport sysctl under net.core, net.ipv4 or '
                               f'net.ipv6, got {name!r}')
    suffix = '/' + name.replace('.', '/')
    if not isinstance(path, str) or not os.path.isabs(path) or not os.path.normpath(path).endswith(suffix):
        raise base.LedgerError(f'"path" of a sysctl entry must be the absolute path of {name} (ending {suffix}), '
                               f'got {path!r}')
    _check_setting_values('sysctl', params)
    params['path'] = os.path.normpath(path)
    return params


def _check_setting_values(kind, params):
    """``previous`` and ``value`` of a setting file's entry (sysctl, driver_param): text, whitespace folded."""
    for key in ('previous', 'value'):
        if not isinstance(params.get(key), (str, int)) or isinstance(params.get(key), bool):
            raise base.LedgerError(f'"{key}" of a {kind} entry must be the value as text, got {params.get(key)!r}')
        params[key] = sysctl_text(params[key])


# a driver's parameter written at run time under /sys/module/DRIVER/parameters (only those the driver lets change
# while loaded; a load-time parameter is a reload's, as the candidate thunderbolt_net's tx_e2e), by the
# driver_param_layer module: ``path`` (under an injectable sysfs root), ``previous`` and ``value`` as the sysctl
# kind's, and undone the same way.
DRIVER_PARAM_NAME_RE = re.compile(r'^[A-Za-z0-9_-]+$')


def driver_param_path(sysfs_root, driver, name):
    """The file of ``driver``'s parameter ``name`` under ``sysfs_root``; LedgerError for a name that is not one."""
    for label, text in (('driver', driver), ('parameter', name)):
        if not isinstance(text, str) or not DRIVER_PARAM_NAME_RE.match(text):
            raise base.LedgerError(f'{text!r} is not a {label} name: expected letters, digits, "_" or "-", for example '
                                   'virtio_net and napi_tx')
    return os.path.join(sysfs_root, 'module', driver, 'parameters', name)


def _check_driver_param(params):
    base.no_unknown('driver_param', params, {'driver', 'name', 'path', 'previous', 'value'})
    driver, name, path = params.get('driver'), params.get('name'), params.get('path')
    suffix = os.path.join('/module', str(driver), 'parameters', str(name))
    driver_param_path('/', driver, name)
    if not isinstance(path, str) or not os.path.isabs(path) or not os.path.normpath(path).endswith(suffix):
        raise base.LedgerError(f'"path" of a driver_param entry must be the absolute path of the parameter (ending '
                               f'{suffix}), got {path!r}')
    _check_setting_values('driver_param', params)
    params['path'] = os.path.normpath(path)
    return params


def read_setting(path):
    """The value of a setting file (a sysctl, a driver's parameter) as the ledger records it (sysctl_text); None
    when the path is gone."""
    try:
        with open(path, encoding='utf-8') as handle:
            return sysctl_text(handle.read())
    except FileNotFoundError:
        return None


def write_setting(path, value):
    """Write a setting file (the kernel parses the text as ``sysctl -w`` or a module option would give it) and read
    it back."""
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(str(value) + '\n')
    return read_setting(path)


def _put_back_setting(label, path, previous, value, by_hand):
    """Write ``previous`` back to the setting file ``path`` while it still holds ``value`` (inferlab's); a value at
    neither is someone else's and left alone, ``by_hand`` saying how to put it back once they know who set it."""
    found = read_setting(path)
    if found is None:
        return f'{path} is gone (its network namespace or driver with it?): nothing to put back'
    if found == previous:
        return f'{label} is {previous!r} already: nothing to put back'
    if found != value:
        raise base.UndoError(f'{label} is {found!r} now, neither the {value!r} inferlab wrote nor the {previous!r} it '
                             f'found: someone changed it since, so it is left alone; put it back yourself '
                             f'({by_hand}) once you know who did')
    try:
        back = write_setting(path, previous)
    except OSError as exc:
        raise base.UndoError(f'could not write {previous!r} to {path}: {exc}') from None
    if back != previous:
        raise base.UndoError(f'wrote {previous!r} to {path}, but it reads {back!r}')
    return f'{label} back to {previous!r} (from {value!r})'


def _undo_sysctl(params, ctx):
    name, previous = params['name'], params['previous']
    return _put_back_setting(name, params['path'], previous, params['value'], f'sysctl -w {name}="{previous}"')


def _undo_driver_param(params, ctx):
    label = f'{params["driver"]}\'s parameter {params["name"]}'
    return _put_back_setting(label, params['path'], params['previous'], params['value'],
                             f'echo {params["previous"]} > {params["path"]}')


SYSCTL = base.Kind('sysctl', _check_sysctl, _undo_sysctl)
DRIVER_PARAM = base.Kind('driver_param', _check_driver_param, _undo_driver_param)


# ---------------------------------------------------------------------------------------------------------------
# kind: nic_setting


# a NIC's ethtool settings of one group (offloads, interrupt coalescing or ring sizes: _ethtool.GROUPS) set in one
# command by the nic_layer module. ``previous`` holds each set name's value read just before, ``value`` the value
# set, each as text (on/off or a whole number). The undo sets back each name still at ``value``, and leaves the
# entry open, naming them, when a name is at neither value (someone else set it since).
def _check_nic_setting(params):
    base.no_unknown('nic_setting', params, {'interface', 'group', 'previous', 'value'})
    base.check_interface('nic_setting', params.get('interface'))
    if params.get('group') not in ethtool.GROUPS:
        raise base.LedgerError(f'"group" of a nic_setting entry must be one of {", ".join(ethtool.GROUPS)}, got '
                               f'{params.get("group")!r}')
    previous, value = params.get('previous'), params.get('value')
    if not isinstance(value, dict) or not value or not isinstance(previous, dict) or set(previous) != set(value):
        raise base.LedgerError('"previous" and "value" of a nic_setting entry must map the same setting names (at '
                               f'least one) to their values, got {previous!r} and {value!r}')
    for key, values in (('previous', previous), ('value', value)):
        for name, text in values.items():
            try:
                values[name] = ethtool.setting_text(text)
            except ethtool.EthtoolError as exc:
                raise base.LedgerError(f'"{key}" of a nic_setting entry: {name}: {exc}') from None
    return params


def _undo_nic_setting(params, ctx):
    interface, group, previous, value = params['interface'], params['group'], params['previous'], params['value']
    prefix = ethtool.ethtool_argv(ctx.ethtool_command)
    if prefix is None:
        raise base.UndoError(f'ethtool is not installed on this host (package ethtool), so the {group} of '
                             f'{interface} cannot be set back; install it and run the undo again')

    def runner(argv, timeout=60):
        return base.run_command(argv, ctx, timeout=timeout)

    try:
        found = ethtool.read_group(prefix, group, interface, runner=runner)
    except ethtool.EthtoolError as exc:
        # ethtool's ioctl and netlink paths say it differently
        if any(text in str(exc).lower() for text in ('no such device', 'no device matches name')):
            return f'{interface} no longer exists, and its settings went with it: nothing to put back'
        raise base.UndoError(f'cannot read the {group} of {interface}: {exc}') from None
    now = {name: (found.get(name) or {}).get('value') for name in value}
    foreign = {name: text for name, text in now.items() if text not in (previous[name], value[name])}
    if foreign:
        raise base.UndoError(
            f'{interface}: ' + ', '.join(f'{name} is {text!r} now, neither the {value[name]!r} inferlab set nor the '
                                         f'{previous[name]!r} it found' for name, text in sorted(foreign.items()))
            + '; someone changed it since, so nothing is set back; put it back yourself ('
            + ' '.join(ethtool.set_argv(['ethtool'], group, interface, previous)) + ') once you know who did')
    back = {name: previous[name] for name, text in now.items() if text != previous[name]}
    if not back:
        return f'the {group} of {interface} are as found before already: nothing to put back'
    argv = ethtool.set_argv(prefix, group, interface, back)
    rc, out, err = base.run_command(argv, ctx)
    if rc != 0:
        raise base.UndoError(f'{" ".join(argv)} exited {rc}: {(err.strip() or out.strip())[:300]}')
    try:
        wrong = ethtool.differences(ethtool.read_group(prefix, group, interface, runner=runner), back)
    except ethtool.EthtoolError as exc:
        raise base.UndoError(f'set the {group} of {interface} back, but cannot read them again: {exc}') from None
    if wrong:
        raise base.UndoError(f'set the {group} of {interface} back, but they read {wrong} (expected {back})')
    return f'the {group} of {interface} back to ' + ', '.join(f'{n} {back[n]}' for n in sorted(back))


NIC_SETTING = base.Kind('nic_setting', _check_nic_setting, _undo_nic_setting)

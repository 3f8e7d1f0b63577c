# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared body of the modules that set a kernel setting file for a run, each write recorded in the change ledger
first: ``sysctl_layer`` (a sysctl under ``/proc/sys/net``) and ``driver_param_layer`` (a driver's parameter under
``/sys/module/DRIVER/parameters``).

Every setting of ``settings`` is located and read before anything is written (a name the module does not take, or a
file that is absent, fails with nothing changed); then, for each value that differs, an entry of ``kind`` is recorded
with the value read (``previous``) and the one to write, the file is written and read back, and the entry is marked
applied. ``state=undone`` runs the ledger's undo of the host's open entries of ``kind`` (those of the names given,
or all), which writes ``previous`` back only while the value is still inferlab's (``_ledger_settings.read_setting``).
"""

from __future__ import annotations

from ansible_collections.inferlab.distributed.plugins.module_utils import (
    _ledger_core,
    _ledger_settings,
    _ledger_undo,
    _module_base,
)


class SettingFile:
    """What differs between the setting kinds. ``locate(name)`` -> the file (LedgerError for a name the kind does
    not take); ``missing(name, path)`` -> why an absent file cannot be set; ``refuse(name, path)`` -> why a present
    one cannot be set at run time, or None; ``params(name, path, previous, value)`` -> the entry's params."""

    kind = None
    result_key = None

    def locate(self, name):
        raise NotImplementedError

    def missing(self, name, path):
        raise NotImplementedError

    def refuse(self, name, path):
        return None

    def params(self, name, path, previous, value):
        raise NotImplementedError


class SettingLayer:
    def __init__(self, module, setting):
        self.module = module
        self.p = module.params
        self.setting = setting

    def fail(self, msg, found=None, undone=None):
        self.module.fail_json(msg=msg, **{self.setting.result_key: found or {}, 'undone': undone or []})

    def plan(self):
        """``{name: {previous, value, changed, entry_id}}`` and ``{name: path}``, every name checked first."""
        found, paths = {}, {}
        try:
            for name, wanted in sorted(self.p['settings'].items()):
                path = self.setting.locate(name)
                previous = _ledger_settings.read_setting(path)
                if previous is None:
                    self.fail(f'{self.setting.missing(name, path)}. Nothing was changed for it', found)
                refused = self.setting.refuse(name, path)
                if refused:
                    self.fail(f'{refused}. Nothing was changed', found)
                value = _ledger_settings.sysctl_text(wanted)
                found[name] = {'previous': previous, 'value': value, 'changed': previous != value, 'entry_id': None}
                paths[name] = path
        except _ledger_core.LedgerError as exc:
            self.fail(f'{exc}. Nothing was changed', found)
        return found, paths

    def apply(self):
        found, paths = self.plan()
        if self.module.check_mode:
            return found
        for name, item in found.items():
            if item['changed']:
                self.write(name, paths[name], item, found)
        return found

    def write(self, name, path, item, found):
        params = self.setting.params(name, path, item['previous'], item['value'])
        try:
            entry = _ledger_undo.change(self.p['ledger_dir'], self.p['ledger_host'], self.setting.kind, params,
                                        run_id=self.p['run_id'], undo_on_error=False)
        except (_ledger_core.LedgerError, OSError) as exc:
            self.not_set(name, item, exc, found)
        item['entry_id'] = entry.id
        with entry:
            try:
                back = _ledger_settings.write_setting(path, item['value'])
            except OSError as exc:
                self.not_set(name, item, exc, found)
            if back != item['value']:
                self.fail(f'wrote {item["value"]!r} to {name}, but it reads {back!r}: the kernel took another value (a '
                          'maximum elsewhere, or a format it does not parse). The ledger entry stays open for the '
                          'restore', found)

    def not_set(self, name, item, exc, found):
        self.fail(f'could not set {name} to {item["value"]!r}: {exc} (the ledger holds every write made or about to '
                  'be made: a restore puts them back)', found)

    def undo(self):
        """The ledger's undo of the host's open entries of this kind (those of the names given, or all)."""
        names = set(self.p['settings'])
        try:
            return _ledger_undo.undo_kind(self.p['ledger_dir'], self.p['ledger_host'], self.setting.kind,
                                          select=lambda params: not names or params['name'] in names,
                                          run_id=self.p['run_id'], check_mode=self.module.check_mode)
        except _ledger_core.LedgerError as exc:
            self.fail(str(exc))

    def run(self):
        if self.p['state'] == 'applied':
            found = self.apply()
            self.module.exit_json(changed=any(item['changed'] for item in found.values()),
                                  **{self.setting.result_key: found, 'undone': []})
        result = self.undo()
        if result['failed']:
            self.fail(f'could not put every {self.setting.kind} back: {result["message"]}',
                      undone=result['details'])
        self.module.exit_json(changed=result['changed'], **{self.setting.result_key: {}, 'undone': result['details']})


def argument_spec(**extra):
    """The options every setting module takes: ``settings``, ``state`` and the ledger's, plus ``extra``."""
    return _module_base.ledger_argument_spec(
        settings=dict(type='dict', default={}),
        state=dict(type='str', choices=['applied', 'undone'], default='applied'),
        **extra,
    )

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared base of the stateful modules (``managed_process``, ``paused_service``, ``tbnet_module``,
``tbnet_build``, ``change_ledger``), after community.general's StateModuleHelper and CmdRunner, kept small:

- ``StateModule.run``: ``prepare`` (the options checked), then the method of the state asked for, named
  ``<option>_<value>`` (``state_started``, ``action_lock``); an expected error (``expected_errors``) fails with its
  message, the method's result is the module's;
- ``fail`` and ``exit``, each with what every result of the module carries (``result_extras``);
- commands: ``run_command`` (LC_ALL=C, arguments not expanded), ``checked_command`` (fails naming the command) and
  ``undo_command`` (the ledger's command runner, built on ``run_command`` so that a module's tests see the undo's
  commands like its other ones);
- the ledger: ``open_entries`` of the module's host, and ``undo`` of some of them through a context.

Standard library only (plus the ledger's modules), Python 3.8+: it runs on the managed hosts, in the modules only
(nothing the ledger role installs imports it).
"""

from __future__ import annotations

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_undo


class StateModule:
    """A module whose logic is one method per state. Subclasses name ``state_option`` (the option that picks the
    method) and ``host_option`` (the option naming whose ledger), and may widen ``expected_errors``."""

    state_option = 'state'
    host_option = 'ledger_host'
    expected_errors = (_ledger_core.LedgerError,)

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.check_mode = module.check_mode
        self.ledger_dir = self.params['ledger_dir']
        self.host = self.params[self.host_option]
        # what every result carries, success or failure (an echo of the arguments with secrets redacted, a mode)
        self.result_extras = {}

    def run(self):
        try:
            self.prepare()
            result = getattr(self, f'{self.state_option}_{self.params[self.state_option]}')()
        except Exception as err:  # pylint: disable=broad-exception-caught
            if not isinstance(err, self.expected_errors):
                raise
            self.fail_on(err)
        self.exit(**result)

    def prepare(self):
        """Check the options before any state runs: nothing by default."""

    def fail_on(self, err):
        """Fail on an expected error: its message."""
        self.fail(str(err))

    def exit(self, **result):
        self.module.exit_json(**self.result_extras, **result)

    def fail(self, msg, **result):
        self.module.fail_json(msg=msg, **self.result_extras, **result)

    # -- commands ----------------------------------------------------------------------------------------------

    def run_command(self, argv, cwd=None):
        """``(rc, stdout, stderr)`` of ``argv`` in the C locale, its arguments taken as they are."""
        return self.module.run_command(argv, cwd=cwd, environ_update={'LC_ALL': 'C'}, expand_user_and_vars=False)

    def checked_command(self, argv, what, shown=None, **extra):
        """The stdout of ``argv``; a failure saying ``what`` and naming the command as ``shown`` (redacted), or as
        itself, when it exits non-zero."""
        rc, out, err = self.run_command(argv)
        if rc != 0:
            shown = shown or argv
            self.fail(f'{what}: {" ".join(shown)} exited {rc}: {err.strip() or out.strip()}', rc=rc, stdout=out,
                      stderr=err, cmd=shown, **extra)
        return out

    def undo_command(self, argv, timeout):
        """The ledger's command runner (``UndoContext.run_command``): ``module.run_command``. It has no timeout;
        what an undo runs through it (systemctl, docker and podman) ends on its own after the recorded timeout."""
        try:
            return self.module.run_command(argv, environ_update={'LC_ALL': 'C'}, expand_user_and_vars=False,
                                           handle_exceptions=False)
        except OSError as exc:
            raise _ledger_core.UndoError(f'{" ".join(argv)} could not run: {exc}') from exc

    # -- the ledger --------------------------------------------------------------------------------------------

    def open_entries(self, wanted):
        """The open (pending, applied, undo_failed) entries of this host's ledger for which ``wanted(entry)`` is
        true, oldest first."""
        return [e for e in _ledger_core.entries(self.ledger_dir, self.host)
                if e['state'] in _ledger_core.OPEN_STATES and wanted(e)]

    def undo(self, ids, ctx, run_id=None):
        """The ledger's undo of ``ids`` (newest first) through ``ctx``, in check mode what it would undo."""
        return _ledger_undo.undo(self.ledger_dir, self.host, ids=ids, run_id=run_id, ctx=ctx,
                                 check_mode=self.check_mode)


def ledger_argument_spec(**options):
    """An argument spec: ``options`` and the ledger's own, ``ledger_dir``, ``ledger_host`` and ``run_id`` (what the
    ``inferlab.distributed.ledger`` doc fragment documents)."""
    return dict(options, ledger_dir=dict(type='path', required=True), ledger_host=dict(type='str', required=True),
                run_id=dict(type='str'))

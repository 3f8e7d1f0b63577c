# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The registry of the change ledger's kinds: kind name -> its declaration (``_ledger_base.Kind``).

A kind is declared once, beside its check and its undo, in the module that knows the change (``_ledger_running``,
``_ledger_settings``); the two whose work lives in a module of its own, ``gateway_config`` (``_gateway_swap``) and
``kernel_module`` (``_tbnet_driver``, which stays free of the ledger), are declared here. ``KINDS`` lists them in the
order docs/CONVENTIONS.md does. Adding a kind is its declaration and its line in ``KINDS``.

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base as base
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_running as running
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_settings as settings
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ledger_base as base
    import inferlab_ledger_running as running
    import inferlab_ledger_settings as settings


# The two companions are imported when their kind is first checked or undone, not with the ledger: every module that
# records in the ledger runs its code from a fresh interpreter (AnsiballZ compiles it each time, and the restore runs
# on Ansible's linear strategy), and the gateway's HTTP stack and the driver's code cost most of the ledger's import.
# Ansible still bundles them: it finds imports inside functions too.
def _gateway_swap():
    try:
        from ansible_collections.inferlab.distributed.plugins.module_utils import _gateway_swap as gateway_swap
    except ImportError:  # on a host, installed beside it (see _ledger_core)
        import inferlab_gateway_swap as gateway_swap
    return gateway_swap


def _tbnet_driver():
    try:
        from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_driver as tbnet_driver
    except ImportError:  # on a host, installed beside it (see _ledger_core)
        import inferlab_tbnet_driver as tbnet_driver
    return tbnet_driver


def _companion_kind(name, companion, error, check, undo):
    """A kind whose work is a companion module's (``companion()`` imports it): ``check(module, params)`` and
    ``undo(module, params, ctx)``; its ``error`` (and an OSError in the undo) become the ledger's."""
    def imported(failure):
        try:
            return companion()
        except ImportError as exc:  # a stale or missing file beside the ledger script on a host
            raise failure(f'the {name} kind needs its companion module beside {__file__}: {exc}') from None

    def checked(params):
        module = imported(base.LedgerError)
        try:
            return check(module, params)
        except getattr(module, error) as exc:
            raise base.LedgerError(str(exc)) from None

    def undone(params, ctx):
        module = imported(base.UndoError)
        try:
            return undo(module, params, ctx)
        except (getattr(module, error), OSError) as exc:
            raise base.UndoError(str(exc)) from None

    return base.Kind(name, checked, undone)


def _undo_gateway_config(gateway_swap, params, ctx):
    systemctl = ctx.systemctl_command[0] if ctx.systemctl_command else 'systemctl'
    return gateway_swap.undo_change(params, procfs_root=ctx.procfs_root, systemctl=systemctl)


# a temporary gateway config (a fallback); undo puts the original bytes back and restarts the instances that run
# another config, one at a time behind the front
GATEWAY_CONFIG = _companion_kind('gateway_config', _gateway_swap, 'GatewayError',
                                 lambda module, params: module.check_change_params(params), _undo_gateway_config)
# the candidate thunderbolt_net loaded in place of the distribution's; undo puts the distribution's back or, in the
# netns lab, the fixture root's stock state
KERNEL_MODULE = _companion_kind('kernel_module', _tbnet_driver, 'DriverError',
                                lambda module, params: module.check_change_params(params),
                                lambda module, params, ctx: module.undo_change(params))

KINDS = {kind.name: kind for kind in (
    running.PROCESS,
    running.SAMPLER,
    settings.FILE,
    settings.TC_PROFILE,
    running.SYSTEMD_UNIT,
    running.CONTAINER,
    running.SERVICE_PAUSE,
    GATEWAY_CONFIG,
    KERNEL_MODULE,
    settings.BUILD_DIR,
    settings.SYSCTL,
    settings.NIC_SETTING,
    settings.DRIVER_PARAM,
)}

# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The undo of the change ledger: the undo of a host's open entries, each by its kind's undo (``_ledger_kinds``),
the write-ahead protocol of one change (``change``), and the leftovers.

One of the ledger's host-side modules (see ``_ledger_core``): standard library only, Python 3.8+.
"""

from __future__ import annotations

import os

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base as base
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core as core
except ImportError:  # on a host, installed beside them (see _ledger_core)
    import inferlab_ledger_base as base
    import inferlab_ledger_core as core

# what an undo may need from its surroundings (base), under the name callers know
UndoContext = base.UndoContext


# ---------------------------------------------------------------------------------------------------------------
# undo


def undo(ledger_dir, host, ids=None, run_id=None, ctx=None, check_mode=False, exclude=None):
    """Undo every open entry (pending, applied, undo_failed) in reverse order of first appearance, or only
    ``ids``, leaving out the ids in ``exclude`` (the dead man's switch leaves its own process entry). Appends
    ``undone`` or ``undo_failed`` for each; one failure does not stop the others. Returns
    ``{changed, undone, failed, skipped, details, problems, message}``; an empty or fully undone ledger is a
    no-op with ``changed: false``. A mark that cannot be written (a full or read-only filesystem) stops nothing:
    every other entry is still undone, the mark is tried again at the end, and one still unwritten is a failure
    that says so (the entry reads open, and a later undo finds its change already undone)."""
    ctx = ctx or UndoContext()
    if check_mode or not os.path.isdir(ledger_dir):
        return _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude)
    with core.DirGuard(ledger_dir):
        return _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude)


def change(ledger_dir, host, kind, params, run_id=None, ctx=None, undo_on_error=True):
    """The write-ahead protocol of one change: ``with change(ledger_dir, host, kind, params) as entry:``.

    The call records the entry ``pending`` (fsynced) before the body makes the change, and raises as ``record``
    does; a normal exit marks it ``applied``, with what ``entry.update`` learned during the change (a pid) merged
    into its params. On an exception, any (KeyboardInterrupt too), or a mark that cannot be written, the entry is
    undone by its kind's undo (``entry.undone`` holds the result) and the exception goes on. With
    ``undo_on_error=False`` it stays as it is instead, open for the restore, for a caller that reports a failed
    change with its entry open."""
    return Change(ledger_dir, host, core.record(ledger_dir, host, kind, params, run_id=run_id), run_id, ctx,
                  undo_on_error)


class Change:
    """An entry under ``change``'s protocol: ``id``, ``line`` (the pending line), ``undone``."""

    def __init__(self, ledger_dir, host, line, run_id, ctx, undo_on_error):
        self.ledger_dir, self.host, self.line, self.id = ledger_dir, host, line, line['id']
        self.run_id, self.ctx, self.undo_on_error = run_id, ctx, undo_on_error
        self.learned = {}
        self.undone = None

    def update(self, **params):
        """Params learned during the change, written with the ``applied`` mark."""
        self.learned.update(params)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                core.mark(self.ledger_dir, self.host, self.id, 'applied', params=self.learned or None,
                          run_id=self.run_id)
                return False
        except BaseException:
            self._undo()
            raise
        self._undo()
        return False

    def _undo(self):
        if self.undo_on_error:
            self.undone = undo(self.ledger_dir, self.host, ids=[self.id], run_id=self.run_id, ctx=self.ctx)


def undo_kind(ledger_dir, host, kind, select=None, run_id=None, check_mode=False):
    """``undo`` of the host's open entries of ``kind`` (those whose params ``select`` keeps, or all), newest first;
    with none open, a no-op result that says so. The layer modules' ``state=undone``."""
    ids = [entry['id'] for entry in core.entries(ledger_dir, host)
           if entry['kind'] == kind and entry['state'] in core.OPEN_STATES
           and (select is None or select(entry['params']))]
    if not ids:
        return {'changed': False, 'details': [], 'failed': [], 'message': f'no open {kind} entry: nothing to undo'}
    return undo(ledger_dir, host, ids=ids, run_id=run_id, check_mode=check_mode)


def _undo(ledger_dir, host, ids, run_id, ctx, check_mode, exclude=None):
    core.check_lock_owner(ledger_dir, host, run_id)
    entries, problems = core.read_ledger(ledger_dir, host)
    view = core.current_entries(entries)
    if ids:
        missing = [i for i in ids if i not in view]
        if missing:
            raise core.LedgerError(f'no entry {", ".join(missing)} in the ledger of {host}')
    excluded = set(exclude or ())
    selected = [e for e in view.values() if (not ids or e['id'] in ids) and e['id'] not in excluded]
    skipped = [e['id'] for e in selected if e['state'] not in core.OPEN_STATES]
    todo = sorted((e for e in selected if e['state'] in core.OPEN_STATES), key=lambda e: e['first_line'], reverse=True)
    undone, failed, details, unwritten = [], [], [], []
    for entry in todo:
        detail = {'id': entry['id'], 'kind': entry['kind'], 'state': entry['state']}
        details.append(detail)
        if check_mode:
            undone.append(entry['id'])
            detail.update(result='would undo', message='')
            continue
        error = None
        try:
            kind = core.KINDS.get(entry['kind'])
            if kind is None:
                raise core.UndoError(f'unknown kind {entry["kind"]!r}: this ledger tool ({core.FORMAT}) cannot undo it')
            message = kind.undo(dict(entry['params']), ctx)
        except core.UndoError as exc:
            error = str(exc)
        except Exception as exc:  # recorded as undo_failed and reported: never swallowed
            error = f'undo of the {entry["kind"]} entry failed: {type(exc).__name__}: {exc}'
        new_state = 'undo_failed' if error else 'undone'
        line = core.make_line(entry['id'], entry['kind'], entry['params'], new_state,
                              run_id=run_id or entry.get('run_id'), error=error)
        try:
            core.append_line(ledger_dir, host, line)
        except OSError as exc:  # a full or read-only filesystem: the other entries are undone all the same
            unwritten.append((line, detail, exc))
        if error:
            failed.append({'id': entry['id'], 'kind': entry['kind'], 'error': error})
            detail.update(result='undo_failed', message=error)
        else:
            undone.append(entry['id'])
            detail.update(result='undone', message=message)
    for line, detail, exc in _retry_marks(ledger_dir, host, unwritten):
        error = (f'{"undone" if line["state"] == "undone" else "its undo failed"}, but the {line["state"]} mark '
                 f'could not be written to the ledger ({exc}), so the entry still reads open: free the ledger\'s '
                 'filesystem and run the undo again (it finds what was undone already undone)')
        if line['id'] in undone:
            undone.remove(line['id'])
            failed.append({'id': line['id'], 'kind': line['kind'], 'error': error})
        else:
            failed[[f['id'] for f in failed].index(line['id'])]['error'] += f'; {error}'
        detail.update(result='mark_not_written', message=f'{detail["message"]}; {error}'.lstrip('; '))
    if not todo:
        message = (f'nothing to undo on {host} ({len(selected)} entries, all undone)' if selected
                   else f'nothing to undo on {host} (empty ledger)')
    else:
        message = f'{"would undo" if check_mode else "undid"} {len(undone)} of {len(todo)} open changes on {host}'
        if failed:
            message += f'; {len(failed)} failed: ' + '; '.join(f'{f["id"]}: {f["error"]}' for f in failed)
    if problems:
        message += ' (ledger problems: ' + '; '.join(problems) + ')'
    return {'changed': bool(todo), 'undone': undone, 'failed': failed, 'skipped': skipped, 'details': details,
            'problems': problems, 'message': message}


def _retry_marks(ledger_dir, host, unwritten):
    """Try once more, after every undo, to write the marks that could not be written; return the ones that still
    cannot be, as ``(line, detail, error)``."""
    left = []
    for line, detail, _first in unwritten:
        try:
            core.append_line(ledger_dir, host, line)
        except OSError as exc:
            left.append((line, detail, exc))
    return left


# ---------------------------------------------------------------------------------------------------------------
# leftovers


def leftovers(ledger_dir, host, procfs_root='/proc', ctx=None):
    """What this host's ledger closed (``undone``) that still runs, each kind's as its ``leftovers`` finds it (a kind
    without one leaves nothing running), matched by the ledger's identity only, never by a command line, so a
    production process that the restore resumed is never one, whatever its arguments:

    - ``process`` and ``sampler``: the recorded pid with its recorded start time, and, for an entry recorded with its
      process group, every live member of that group;
    - ``systemd_unit``: the recorded unit, still active (``systemctl is-active``);
    - ``container``: the recorded container, still running (``ENGINE container inspect``).

    A unit or container that an open entry names again (a later start under the same name) is that entry's, not a
    leftover, and a name undone several times is one leftover (its newest entry); a host without systemctl or the
    engine runs no unit or container. ``ctx`` (UndoContext, by default on ``procfs_root``) names the commands.
    Returns ``[{id, kind, pid, what, message}]`` (``cmdline`` for processes, ``unit`` or ``engine`` and ``name`` for
    the others), oldest entry first; ``what`` names the thing: its pid, ``unit NAME`` or ``ENGINE container
    NAME``."""
    ctx = ctx or UndoContext(procfs_root=procfs_root)
    lines, _problems = core.read_ledger(ledger_dir, host)
    view = core.current_entries(lines).values()
    open_things = {_identity(e) for e in view if e['state'] in core.OPEN_STATES} - {None}
    # a thing started and undone several times is checked once, under its newest entry
    newest = {_identity(e): e['id'] for e in view if e['state'] == 'undone'}
    found = []
    for entry in view:
        kind = core.KINDS.get(entry['kind'])
        if entry['state'] != 'undone' or kind is None or kind.leftovers is None:
            continue
        thing = _identity(entry)
        if thing is None or (thing not in open_things and newest[thing] == entry['id']):
            found.extend(kind.leftovers(entry, ctx))
    return found


def _identity(entry):
    """``(kind, identity)`` of an entry whose kind names the thing it changed (Kind.identity), else None."""
    kind = core.KINDS.get(entry['kind'])
    if kind is None or kind.identity is None:
        return None
    return entry['kind'], kind.identity(entry['params'])

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How two persistence snapshots (``_persistence.snapshot``, format ``inferlab.persistence/1``) differ.

``compare`` lists every difference, one sentence each (empty: nothing persisted), and notes the kernel taint before
and after, decoded by ``taint_flags`` and ``taint_note`` after the kernel's
``Documentation/admin-guide/tainted-kernels.rst``; the taint is information, not a difference. The
``persistence_differences`` filter wraps ``compare``.

Standard library only, Python 3.8+, like ``_persistence``.
"""

from __future__ import annotations

import re

from ansible_collections.inferlab.distributed.plugins.module_utils._persistence import (
    DKMS_DIR,
    FORMAT,
    PersistenceError,
)

SHA256_RE = re.compile(r'^[0-9a-f]{64}$')
SHORT_HASH = 12
ELLIPSIS = '\u2026'

# Documentation/admin-guide/tainted-kernels.rst: bit -> (letter, what happened)
TAINT_BITS = (
    (0, 'P', 'a proprietary module was loaded'),
    (1, 'F', 'a module was force-loaded'),
    (2, 'S', 'the kernel runs on an out-of-specification system'),
    (3, 'R', 'a module was force-unloaded'),
    (4, 'M', 'the processor reported a machine check exception'),
    (5, 'B', 'a bad page was referenced or unexpected page flags were found'),
    (6, 'U', 'user space requested a taint'),
    (7, 'D', 'the kernel died recently (an OOPS or a BUG)'),
    (8, 'A', 'an ACPI table was overridden by the user'),
    (9, 'W', 'the kernel issued a warning'),
    (10, 'C', 'a staging driver was loaded'),
    (11, 'I', 'a workaround for a platform firmware bug was applied'),
    (12, 'O', 'an out-of-tree module was loaded'),
    (13, 'E', 'an unsigned module was loaded'),
    (14, 'L', 'a soft lockup occurred'),
    (15, 'K', 'the kernel was live-patched'),
    (16, 'X', 'an auxiliary taint, defined by the distribution'),
    (17, 'T', 'the kernel was built with the struct randomization plugin'),
    (18, 'N', 'an in-kernel test was run'),
    (19, 'J', 'user space used a mutating debug operation in fwctl'),
)
TAINT_OUT_OF_TREE_UNSIGNED = 'an out-of-tree unsigned module was loaded'


def taint_flags(value):
    """The letters of the set taint bits in bit order (``OE`` for 12288); unknown bits as ``bitN``."""
    if value is None:
        return None
    known = dict((bit, letter) for bit, letter, _what in TAINT_BITS)
    flags = []
    for bit in range(max(value.bit_length(), 1)):
        if value >> bit & 1:
            flags.append(known.get(bit) or '(bit %d)' % bit)
    return ''.join(flags)


def _taint_events(bits):
    """What the set bits of ``bits`` say happened, as one phrase."""
    known = dict((bit, what) for bit, _letter, what in TAINT_BITS)
    phrases = []
    out_of_tree_unsigned = bits >> 12 & 3 == 3
    for bit in range(bits.bit_length()):
        if not bits >> bit & 1:
            continue
        if out_of_tree_unsigned and bit == 12:
            phrases.append(TAINT_OUT_OF_TREE_UNSIGNED)
        elif out_of_tree_unsigned and bit == 13:
            continue
        else:
            phrases.append(known.get(bit, 'taint bit %d, not in this decoder\'s table' % bit))
    return '; '.join(phrases)


def taint_note(before, after):
    """One sentence about the kernel taint before and after, decoded."""
    if before is None and after is None:
        return 'kernel taint not recorded'
    if before is None or after is None:
        missing, known, value = ('before', 'after', after) if before is None else ('after', 'before', before)
        return 'kernel taint not recorded %s (%s: %s)' % (missing, known, value)
    if before == after:
        if not after:
            return 'kernel taint 0, unchanged (not tainted)'
        return 'kernel taint %d, unchanged (%s: %s)' % (after, taint_flags(after), _taint_events(after))
    added = after & ~before
    cleared = before & ~after
    parts = []
    if added:
        if before:
            parts.append('%s added: %s' % (taint_flags(added), _taint_events(added)))
        else:
            parts.append('%s: %s' % (taint_flags(added), _taint_events(added)))
    if cleared:
        parts.append('%s cleared: taint is only cleared by a reboot, so the kernel was restarted in between'
                     % taint_flags(cleared))
    return 'kernel taint %d -> %d (%s)' % (before, after, '; '.join(parts))


def _snapshot_arg(value, side):
    if isinstance(value, dict) and 'snapshot' in value and 'format' not in value:
        value = value['snapshot']
    if not isinstance(value, dict):
        raise PersistenceError('the %s snapshot must be a dict (persistence_snapshot\'s snapshot), got %s'
                               % (side, type(value).__name__))
    if value.get('format') != FORMAT:
        raise PersistenceError('the %s snapshot has format %r, expected %r' % (side, value.get('format'), FORMAT))
    for key, kind in (('files', dict), ('module_tree', dict), ('dkms', dict), ('problems', list)):
        if not isinstance(value.get(key), kind):
            raise PersistenceError('the %s snapshot\'s %s must be a %s, got %r'
                                   % (side, key, kind.__name__, value.get(key)))
    taint = value.get('taint')
    if taint is not None and (isinstance(taint, bool) or not isinstance(taint, int) or taint < 0):
        raise PersistenceError('the %s snapshot\'s taint must be a non-negative integer or null, got %r'
                               % (side, taint))
    return value


def _short(digest):
    return digest[:SHORT_HASH] + ELLIPSIS


def _describe(value):
    if value is None:
        return 'absent'
    if isinstance(value, str) and SHA256_RE.match(value):
        return 'sha256 ' + _short(value)
    if isinstance(value, str) and value.startswith('-> '):
        return 'symlink ' + value
    if isinstance(value, str) and value.startswith('(') and value.endswith(')'):
        what = value[1:-1]
        return what if what == 'unreadable' else 'a ' + what
    if isinstance(value, dict):
        return 'a directory of %d file(s)' % len(value)
    return repr(value)


def _change(path, before, after):
    if before is None:
        described = _describe(after)
        if described.startswith('sha256 '):
            return '%s was added' % path
        return '%s was added (%s)' % (path, described)
    if after is None:
        return '%s was removed' % path
    if (isinstance(before, str) and isinstance(after, str) and SHA256_RE.match(before)
            and SHA256_RE.match(after)):
        return '%s changed (sha256 %s -> %s)' % (path, _short(before), _short(after))
    return '%s changed (%s -> %s)' % (path, _describe(before), _describe(after))


def _file_differences(before, after):
    differences = []
    for group in sorted(set(before) | set(after)):
        old, new = before.get(group), after.get(group)
        if isinstance(old, dict) or isinstance(new, dict):
            if not isinstance(old, dict) or not isinstance(new, dict):
                differences.append(_change(group, old, new))
                continue
            for rel in sorted(set(old) | set(new)):
                if old.get(rel) != new.get(rel):
                    differences.append(_change(group + '/' + rel, old.get(rel), new.get(rel)))
        elif old != new:
            differences.append(_change(group, old, new))
    return differences


def _files(count):
    return '%d file%s' % (count, '' if count == 1 else 's')


def _list_change(path, old_count, new_count, old_sha, new_sha, added=(), removed=()):
    """One sentence about a file list that changed (a count, a list hash and, for module trees, extras)."""
    delta = (new_count or 0) - (old_count or 0)
    details = []
    if added:
        details.append(', '.join(added) if not removed else 'added ' + ', '.join(added))
    if removed:
        details.append('removed ' + ', '.join(removed))
    if not details:
        old_short = _short(old_sha) if old_sha else 'none'
        new_short = _short(new_sha) if new_sha else 'none'
        details.append('sha256 %s -> %s' % (old_short, new_short))
    if delta > 0:
        head = '%s more' % _files(delta)
    elif delta < 0:
        head = '%s fewer' % _files(-delta)
    else:
        head = 'file list changed, same count (names, sizes or modes)'
    return '%s: %s (%s)' % (path, head, '; '.join(details))


def _module_tree_differences(before, after):
    differences = []
    old_path, new_path = before.get('path'), after.get('path')
    if old_path != new_path:
        differences.append('module tree %s -> %s (the snapshots describe different kernels)' % (old_path, new_path))
        return differences
    old_extra, new_extra = list(before.get('extra') or []), list(after.get('extra') or [])
    if (before.get('count'), before.get('sha256'), old_extra) == (after.get('count'), after.get('sha256'), new_extra):
        return differences
    if before.get('sha256') is None and after.get('sha256') is not None:
        differences.append('%s was created (%s)' % (new_path, _files(after.get('count') or 0)))
    elif before.get('sha256') is not None and after.get('sha256') is None:
        differences.append('%s is gone or unreadable (it held %s)' % (new_path, _files(before.get('count') or 0)))
    else:
        added = [rel for rel in new_extra if rel not in old_extra]
        removed = [rel for rel in old_extra if rel not in new_extra]
        differences.append(_list_change(new_path, before.get('count'), after.get('count'), before.get('sha256'),
                                        after.get('sha256'), added, removed))
    return differences


def _dkms_differences(before, after):
    old_present, new_present = bool(before.get('present')), bool(after.get('present'))
    if not old_present and new_present:
        return ['%s was created (%s)' % (DKMS_DIR, _files(after.get('count') or 0))]
    if old_present and not new_present:
        return ['%s was removed (it held %s)' % (DKMS_DIR, _files(before.get('count') or 0))]
    if (before.get('count'), before.get('sha256')) == (after.get('count'), after.get('sha256')):
        return []
    return [_list_change(DKMS_DIR, before.get('count'), after.get('count'), before.get('sha256'),
                         after.get('sha256'))]


def compare(before, after):
    """How snapshot ``after`` differs from ``before``.

    Returns ``{differences: [str], taint: {before, after, note}, problems: [str]}``: ``differences`` has one
    sentence per difference and is empty when nothing persisted; the taint change is information, not a
    difference; ``problems`` repeats what either snapshot could not read (a proof with problems is incomplete).
    A whole registered module result (with a ``snapshot`` key) is accepted too. Raises ``PersistenceError``.
    """
    before = _snapshot_arg(before, 'before')
    after = _snapshot_arg(after, 'after')
    differences = []
    if before.get('kernel_release') != after.get('kernel_release'):
        differences.append('kernel release %s -> %s (the snapshots describe different kernels)'
                           % (before.get('kernel_release'), after.get('kernel_release')))
    differences.extend(_file_differences(before['files'], after['files']))
    differences.extend(_module_tree_differences(before['module_tree'], after['module_tree']))
    differences.extend(_dkms_differences(before['dkms'], after['dkms']))
    problems = []
    for problem in before['problems']:
        problems.append('%s (%s)' % (problem, 'before and after' if problem in after['problems'] else 'before'))
    for problem in after['problems']:
        if problem not in before['problems']:
            problems.append('%s (after)' % problem)
    return {
        'differences': differences,
        'taint': {'before': before.get('taint'), 'after': after.get('taint'),
                  'note': taint_note(before.get('taint'), after.get('taint'))},
        'problems': problems,
    }

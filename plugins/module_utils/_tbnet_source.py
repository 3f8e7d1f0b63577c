# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which ``tx_e2e`` patch a ``thunderbolt_net`` source tree takes: its layout and its TX E2E history.

Pure functions over file names and file TEXT; nothing here reads the disk except ``main`` (the command line).

Layouts (``LAYOUTS``: layout -> driver file, relative to the kernel tree root):

- ``single``: ``drivers/net/thunderbolt.c``, Linux 6.1 (Debian 12's kernel);
- ``split``: ``drivers/net/thunderbolt/main.c`` (beside ``trace.c``/``trace.h``), newer kernels (Debian 12's 6.12
  among them).

Histories of the TX ring's flags in ``tbnet_open()``:

- ``rx_only``: the TX ring never gets ``RING_FLAG_E2E`` (upstream before 2025-07 and after the 2026 revert
  1881f2efbf7f); only the RX ring does, when ``e2e`` is set and the peer advertises ``TBNET_E2E``;
- ``tx_always``: a stable backport of a8065af3346e ("net: thunderbolt: Enable end-to-end flow control also in
  transmit") without the revert: the TX ring gets the same flags as the RX ring, E2E included;
- ``patched``: the candidate is already there (the ``tx_e2e`` parameter, used for the TX ring).

The patch for a tree is ``patch_name(layout, history)`` in ``roles/tbnet_candidate/files/``; there is none for
``patched``. Standard library only, Python 3.8+: it may run on a managed host, and as a script::

    python3 _tbnet_source.py KERNEL_TREE      prints {"layout", "driver", "history", "patch"} as JSON

(exit 0; 2 on a usage error; 3 when the tree is not one it can tell, with the reason on stderr).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys

LAYOUTS = {
    'single': 'drivers/net/thunderbolt.c',
    'split': 'drivers/net/thunderbolt/main.c',
}
HISTORIES = ('rx_only', 'tx_always', 'patched')
PATCHABLE_HISTORIES = ('rx_only', 'tx_always')
PATCH_PARAM = 'tx_e2e'

_OPEN_RE = re.compile(r'\btbnet_open\s*\(\s*struct\s+net_device\s*\*\s*\w+\s*\)\s*\{')
_CALL_RE = r'\b{name}\s*\('
_PARAM_RE = re.compile(r'\bmodule_param(?:_named)?\s*\(\s*' + PATCH_PARAM + r'\s*,')
_IDENT_RE = re.compile(r'^[A-Za-z_]\w*$')


class SourceError(ValueError):
    """The tree or text is not a ``thunderbolt_net`` source this module can tell, with the reason."""


def source_layout(tree_files):
    """``'single'`` or ``'split'`` from the relative paths present in a kernel tree (other paths are ignored).

    ``tree_files`` is an iterable of paths relative to the tree root (``./`` prefixes and ``\\`` separators are
    tolerated). Raises ``SourceError`` when neither driver file is there, or both are (not a real tree).
    """
    if isinstance(tree_files, str):
        raise SourceError('source_layout() takes a list of relative paths, not one string')
    present = set()
    for path in tree_files:
        if not isinstance(path, str):
            raise SourceError('source_layout(): every path must be a string, got %r' % (path,))
        normal = posixpath.normpath(path.replace('\\', '/'))
        present.add(normal[2:] if normal.startswith('./') else normal)
    found = [layout for layout, driver in LAYOUTS.items() if driver in present]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SourceError('no thunderbolt_net driver in the tree: expected %s (Linux 6.1) or %s (newer '
                          'kernels such as 6.12)' % (LAYOUTS['single'], LAYOUTS['split']))
    raise SourceError('both %s and %s are present: not one kernel tree' % (LAYOUTS['single'], LAYOUTS['split']))


def driver_path(layout):
    """The driver file of ``layout``, relative to the kernel tree root."""
    if layout not in LAYOUTS:
        raise SourceError('unknown layout %r (expected one of %s)' % (layout, ', '.join(LAYOUTS)))
    return LAYOUTS[layout]


def patch_name(layout, history):
    """File name of the patch for ``layout`` and ``history``: ``tx_e2e-<layout>-<history>.patch``."""
    driver_path(layout)
    if history == 'patched':
        raise SourceError('the source already has the %s parameter: there is no patch to apply' % PATCH_PARAM)
    if history not in PATCHABLE_HISTORIES:
        raise SourceError('unknown history %r (expected one of %s)' % (history, ', '.join(PATCHABLE_HISTORIES)))
    return 'tx_e2e-%s-%s.patch' % (layout, history)


def code_only(text):
    """``text`` with C comments replaced by one space and string/char literals emptied (``""``, ``''``).

    Braces, commas and parentheses inside comments and literals then no longer count, and commented-out code is
    not mistaken for code. An unterminated comment or literal raises ``SourceError``.
    """
    out = []
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        pair = text[i:i + 2]
        if pair == '/*':
            end = text.find('*/', i + 2)
            if end < 0:
                raise SourceError('unterminated /* comment')
            out.append(' ')
            i = end + 2
        elif pair == '//':
            end = text.find('\n', i)
            out.append(' ')
            i = size if end < 0 else end
        elif char in '"\'':
            j = i + 1
            while j < size and text[j] != char:
                if text[j] == '\n':
                    raise SourceError('unterminated %s literal' % ('string' if char == '"' else 'character'))
                j += 2 if text[j] == '\\' else 1
            if j >= size:
                raise SourceError('unterminated %s literal' % ('string' if char == '"' else 'character'))
            out.append(char * 2)
            i = j + 1
        else:
            out.append(char)
            i += 1
    return ''.join(out)


def squeeze(code):
    """``code`` without any whitespace: the comparisons below are then independent of layout and indentation."""
    return re.sub(r'\s+', '', code)


def function_body(code, opening_re, name):
    """The text between the braces of the function whose header ``opening_re`` matches (``code`` from
    ``code_only``). Raises ``SourceError`` when it is missing, defined twice or not closed."""
    matches = list(opening_re.finditer(code))
    if not matches:
        raise SourceError('no %s() definition: not the thunderbolt_net driver' % name)
    if len(matches) > 1:
        raise SourceError('%s() is defined %d times' % (name, len(matches)))
    depth, start = 1, matches[0].end()
    for pos in range(start, len(code)):
        if code[pos] == '{':
            depth += 1
        elif code[pos] == '}':
            depth -= 1
            if depth == 0:
                return code[start:pos]
    raise SourceError('%s() is not closed: the text is cut short' % name)


def call_arguments(code, name):
    """``[(position, [argument, ...]), ...]`` for every call of ``name`` in ``code``; arguments are squeezed
    (no whitespace) and split at top-level commas."""
    calls = []
    for match in re.finditer(_CALL_RE.format(name=re.escape(name)), code):
        depth, args, current = 1, [], []
        for pos in range(match.end(), len(code)):
            char = code[pos]
            if char in '([{':
                depth += 1
            elif char in ')]}':
                depth -= 1
                if depth == 0:
                    args.append(squeeze(''.join(current)))
                    break
            if char == ',' and depth == 1:
                args.append(squeeze(''.join(current)))
                current = []
            else:
                current.append(char)
        else:
            raise SourceError('the call of %s() is not closed' % name)
        calls.append((match.start(), args))
    return calls


def _one_call(body, name):
    calls = call_arguments(body, name)
    if len(calls) != 1:
        raise SourceError('tbnet_open() calls %s() %d times, expected once' % (name, len(calls)))
    position, args = calls[0]
    if len(args) < 4:
        raise SourceError('%s() takes its ring flags as 4th argument; tbnet_open() passes %d arguments'
                          % (name, len(args)))
    return position, args[3]


def _gets_e2e(body, variable, before):
    """Whether ``variable`` gets ``RING_FLAG_E2E`` (``variable |= RING_FLAG_E2E;``) in ``body[:before]``."""
    return re.search(r'\b%s\s*\|=\s*RING_FLAG_E2E\s*;' % re.escape(variable), body[:before]) is not None


def tx_e2e_history(text):
    """``'rx_only'``, ``'tx_always'`` or ``'patched'`` for the TEXT of the driver file (or an excerpt that holds
    ``tbnet_open()``). Comments, literals and whitespace do not count; these lines of ``tbnet_open()`` decide:

    - the RX ring must get E2E: ``tb_ring_alloc_rx(..., FLAGS, ...)`` with a variable ``FLAGS`` that gets
      ``FLAGS |= RING_FLAG_E2E;`` before that call (under ``if (tbnet_e2e && net->svc->prtcstns & TBNET_E2E)``);
      a driver without RX E2E (older than 8bdc25cf62c7, 2022) is refused;
    - ``rx_only``: the TX ring's flags, the 4th argument of ``tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE,
      RING_FLAG_FRAME)``, are exactly ``RING_FLAG_FRAME``;
    - ``tx_always``: they are a variable that gets ``|= RING_FLAG_E2E`` BEFORE the ``tb_ring_alloc_tx`` call
      (a8065af3346e moved the RX flags block up and passes ``flags`` to both rings);
    - ``patched``: ``module_param(tx_e2e, ...)`` (or ``module_param_named(tx_e2e, ...)``) is in the text AND the
      TX flags argument uses ``tx_e2e`` (the candidate passes ``tx_e2e ? flags : RING_FLAG_FRAME``).

    Anything else raises ``SourceError`` naming what was found: a text that is not the driver, the parameter
    without its use (or the reverse), or TX flags in a form none of the histories has.
    """
    if not isinstance(text, str):
        raise SourceError('tx_e2e_history() takes the text of the driver file, got %s' % type(text).__name__)
    code = code_only(text)
    body = function_body(code, _OPEN_RE, 'tbnet_open')
    tx_at, tx_flags = _one_call(body, 'tb_ring_alloc_tx')
    rx_at, rx_flags = _one_call(body, 'tb_ring_alloc_rx')
    if not _IDENT_RE.match(rx_flags) or not _gets_e2e(body, rx_flags, rx_at):
        raise SourceError('the RX ring of tbnet_open() never gets RING_FLAG_E2E (RX flags %r): a driver without '
                          'E2E flow control, older than 8bdc25cf62c7' % rx_flags)
    param = bool(_PARAM_RE.search(code))
    uses_param = re.search(r'\b%s\b' % PATCH_PARAM, tx_flags) is not None
    if param and uses_param:
        return 'patched'
    if param:
        raise SourceError('the %s parameter is declared but the TX ring ignores it (TX flags %r): a partial patch'
                          % (PATCH_PARAM, tx_flags))
    if uses_param:
        raise SourceError('the TX ring uses %s (TX flags %r) but no module_param declares it: a partial patch'
                          % (PATCH_PARAM, tx_flags))
    if tx_flags == 'RING_FLAG_FRAME':
        return 'rx_only'
    if _IDENT_RE.match(tx_flags) and _gets_e2e(body, tx_flags, tx_at):
        return 'tx_always'
    raise SourceError('cannot tell the TX E2E history: tb_ring_alloc_tx() gets flags %r, neither RING_FLAG_FRAME '
                      '(rx_only) nor a variable given RING_FLAG_E2E before the call (tx_always)' % tx_flags)


def describe_tree(tree):
    """``{layout, driver, history, patch}`` for the kernel tree (or staged driver) in directory ``tree``."""
    present = [path for path in LAYOUTS.values() if os.path.isfile(os.path.join(tree, path))]
    layout = source_layout(present)
    driver = driver_path(layout)
    with open(os.path.join(tree, driver), encoding='utf-8', errors='replace') as handle:
        history = tx_e2e_history(handle.read())
    return {'layout': layout, 'driver': driver, 'history': history,
            'patch': None if history == 'patched' else patch_name(layout, history)}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith('-'):
        sys.stderr.write('usage: python3 _tbnet_source.py KERNEL_TREE\n')
        return 2
    try:
        result = describe_tree(argv[0])
    except (SourceError, OSError) as exc:
        sys.stderr.write('%s: %s\n' % (argv[0], exc))
        return 3
    sys.stdout.write(json.dumps(result) + '\n')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

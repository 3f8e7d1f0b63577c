# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of _tbnet_source: the layout from a file list, the TX E2E history from the driver's text (excerpts of the
real Debian sources in tests/unit/fixtures/tbnet_source/, and edits of them), the patch names and the patch files
themselves. tests/kernel/check_patch.sh applies and builds the patches for real."""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_source as ts
from ansible_collections.inferlab.distributed.plugins.module_utils._tbnet_source import SourceError
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES

REPO_ROOT = FIXTURES.parents[2]
PATCH_DIR = REPO_ROOT / 'roles' / 'tbnet_candidate' / 'files'
SOURCES = FIXTURES / 'tbnet_source'

FIXTURE_HISTORY = {
    'single_rx_only-6.1.192-3.c': 'rx_only',
    'single_tx_always-6.1.176-1.c': 'tx_always',
    'split_rx_only-6.12.117.c': 'rx_only',
    'split_tx_always-synthetic.c': 'tx_always',
    'single_patched-6.1.192-3.c': 'patched',
}
RX_ONLY_TX = '\tring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE,\n\t\t\t\tRING_FLAG_FRAME);\n'
TX_ALWAYS_TX = '\tring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE, flags);\n'
PARAM = 'static bool tx_e2e;\nmodule_param(tx_e2e, bool, 0444);\n'


def fixture(name):
    return (SOURCES / name).read_text()


def edit(text, old, new):
    assert text.count(old) == 1, old
    return text.replace(old, new)


# --- source_layout -------------------------------------------------------------------------------------------

@pytest.mark.parametrize('files, expected', [
    (['drivers/net/thunderbolt.c'], 'single'),
    (['drivers/net/thunderbolt/main.c'], 'split'),
    (['Makefile', 'drivers/net/thunderbolt/Makefile', 'drivers/net/thunderbolt/trace.c',
      'drivers/net/thunderbolt/main.c', 'drivers/thunderbolt/nhi.c'], 'split'),
    (('./drivers/net/thunderbolt.c', 'drivers/thunderbolt/xdomain.c'), 'single'),
    (['drivers//net/./thunderbolt.c'], 'single'),
    (iter(['drivers/net/thunderbolt/main.c']), 'split'),
])
def test_source_layout(files, expected):
    assert ts.source_layout(files) == expected


@pytest.mark.parametrize('files, message', [
    ([], 'no thunderbolt_net driver in the tree: expected drivers/net/thunderbolt.c (Linux 6.1) or '
         'drivers/net/thunderbolt/main.c'),
    (['drivers/thunderbolt/nhi.c', 'drivers/net/thunderbolt/trace.c', 'thunderbolt.c'], 'no thunderbolt_net driver'),
    (['/usr/src/linux/drivers/net/thunderbolt.c'], 'no thunderbolt_net driver'),  # not relative to the tree root
    (['drivers/net/thunderbolt.c', 'drivers/net/thunderbolt/main.c'], 'both drivers/net/thunderbolt.c and '
                                                                      'drivers/net/thunderbolt/main.c are present'),
    ('drivers/net/thunderbolt.c', 'takes a list of relative paths, not one string'),
    ([None], 'every path must be a string'),
])
def test_source_layout_refused(files, message):
    with pytest.raises(SourceError, match=re.escape(message)):
        ts.source_layout(files)


# --- patch_name / driver_path ----------------------------------------------------------------------------------

@pytest.mark.parametrize('layout, history', [(lay, his) for lay in ts.LAYOUTS for his in ts.PATCHABLE_HISTORIES])
def test_patch_name_names_a_shipped_patch(layout, history):
    name = ts.patch_name(layout, history)
    assert name == f'tx_e2e-{layout}-{history}.patch'
    assert (PATCH_DIR / name).is_file()


@pytest.mark.parametrize('layout, history, message', [
    ('single', 'patched', 'already has the tx_e2e parameter: there is no patch to apply'),
    ('single', 'tx_never', "unknown history 'tx_never'"),
    ('both', 'rx_only', "unknown layout 'both' (expected one of single, split)"),
])
def test_patch_name_refused(layout, history, message):
    with pytest.raises(SourceError, match=re.escape(message)):
        ts.patch_name(layout, history)


def test_driver_path():
    assert ts.driver_path('single') == 'drivers/net/thunderbolt.c'
    assert ts.driver_path('split') == 'drivers/net/thunderbolt/main.c'
    with pytest.raises(SourceError):
        ts.driver_path('drivers/net/thunderbolt.c')


# --- tx_e2e_history on the real excerpts -------------------------------------------------------------------------

@pytest.mark.parametrize('name, expected', sorted(FIXTURE_HISTORY.items()))
def test_history_of_fixtures(name, expected):
    assert ts.tx_e2e_history(fixture(name)) == expected


def test_fixtures_are_excerpts():
    for path in SOURCES.iterdir():
        lines = path.read_text().splitlines()
        assert len(lines) < 100, path
        assert lines[2].startswith(' * Excerpt of drivers/net/thunderbolt'), path


def test_synthetic_tx_always_is_the_upstream_edit_of_the_real_rx_only():
    """The synthetic split fixture is the real 6.12 excerpt with a8065af3346e's edit, nothing else."""
    real = fixture('split_rx_only-6.12.117.c').split('*/\n', 1)[1]
    synthetic = fixture('split_tx_always-synthetic.c').split('*/\n', 1)[1]
    flags_block = ('\tflags = RING_FLAG_FRAME;\n\t/* Only enable full E2E if the other end supports it too */\n'
                   '\tif (tbnet_e2e && net->svc->prtcstns & TBNET_E2E)\n\t\tflags |= RING_FLAG_E2E;\n\n')
    made = edit(real, RX_ONLY_TX, flags_block + TX_ALWAYS_TX)
    made = edit(made, '\teof_mask = BIT(TBIP_PDF_FRAME_END);\n\n' + flags_block,
                '\teof_mask = BIT(TBIP_PDF_FRAME_END);\n\n')
    assert made == synthetic


def reindent(text):
    return text.replace('\t', '    ')


def crlf(text):
    return text.replace('\n', '\r\n')


def squash_calls(text):
    """Every call on one line, however it was wrapped; spaces around | and |= changed."""
    text = re.sub(r',\s*\n\s*', ', ', text)
    return text.replace(' |= ', '|=').replace(' & ', '&')


def spread_args(text):
    """Arguments wrapped and spaced differently."""
    text = text.replace('TBNET_RING_SIZE, ', 'TBNET_RING_SIZE ,\n\t\t\t\t  ')
    return text.replace('(xd->tb->nhi, -1,', '(\n  xd->tb->nhi , -1 ,')


@pytest.mark.parametrize('variant', [reindent, crlf, squash_calls, spread_args])
@pytest.mark.parametrize('name, expected', sorted(FIXTURE_HISTORY.items()))
def test_history_ignores_whitespace(name, expected, variant):
    text = variant(fixture(name))
    assert text != fixture(name)
    assert ts.tx_e2e_history(text) == expected


def test_history_ignores_comments_and_strings():
    text = fixture('single_rx_only-6.1.192-3.c')
    # commented-out code of the other histories does not count
    text = edit(text, '\tnetif_carrier_off(dev);\n', '\tnetif_carrier_off(dev);\n'
                '\t/* ring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE, flags); { */\n'
                '\t// module_param(tx_e2e, bool, 0444); tx_e2e ? flags : 0 }\n')
    # a literal with braces, quotes and parentheses does not upset the parsing
    text = edit(text, '"failed to allocate Tx ring\\n"', '"failed to allocate Tx ring } ( \\" \\n"')
    text = edit(text, 'int hopid;\n', "int hopid;\n\tchar brace = '}', quote = '\\'';\n")
    assert ts.tx_e2e_history(text) == 'rx_only'


def test_history_of_a_whole_file_shape():
    """Functions before and after tbnet_open(), and a TBNET_E2E in tbnet_init(), change nothing."""
    before = 'static void tbnet_stop(struct net_device *dev)\n{\n\tif (x) {\n\t\ty();\n\t}\n}\n\n'
    after = ('\nstatic int __init tbnet_init(void)\n{\n\tunsigned int flags;\n\n\tflags = TBNET_MATCH_FRAGS_ID;\n'
             '\tif (tbnet_e2e)\n\t\tflags |= TBNET_E2E;\n\treturn 0;\n}\n')
    for name, expected in FIXTURE_HISTORY.items():
        assert ts.tx_e2e_history(before + fixture(name) + after) == expected


def test_module_param_named_counts_as_patched():
    text = fixture('single_patched-6.1.192-3.c')
    text = edit(text, 'module_param(tx_e2e, bool, 0444);', 'module_param_named(tx_e2e, tbnet_tx_e2e, bool, 0444);')
    assert ts.tx_e2e_history(text) == 'patched'


# --- tx_e2e_history refusals ----------------------------------------------------------------------------------

def rx_only():
    return fixture('single_rx_only-6.1.192-3.c')


def patched():
    return fixture('single_patched-6.1.192-3.c')


@pytest.mark.parametrize('make, message', [
    (lambda: fixture('malformed-cut_short.c'), 'tbnet_open() is not closed: the text is cut short'),
    (lambda: 'Thunderbolt networking\n', 'no tbnet_open() definition: not the thunderbolt_net driver'),
    (lambda: '', 'no tbnet_open() definition'),
    (lambda: rx_only().replace('static int tbnet_open(', 'static int tbnet_close('), 'no tbnet_open() definition'),
    (lambda: rx_only() + '\n' + rx_only(), 'tbnet_open() is defined 2 times'),
    (lambda: rx_only() + '/* trailing', 'unterminated /* comment'),
    (lambda: rx_only().replace('"failed to allocate Tx ring\\n"', '"failed to allocate Tx ring\n"'),
     'unterminated string literal'),
    (lambda: edit(rx_only(), RX_ONLY_TX, RX_ONLY_TX + RX_ONLY_TX), 'calls tb_ring_alloc_tx() 2 times, expected once'),
    (lambda: edit(rx_only(), RX_ONLY_TX, ''), 'calls tb_ring_alloc_tx() 0 times'),
    (lambda: edit(rx_only(), RX_ONLY_TX, '\tring = tb_ring_alloc_tx(xd->tb->nhi, -1);\n'),
     'tb_ring_alloc_tx() takes its ring flags as 4th argument; tbnet_open() passes 2 arguments'),
    (lambda: edit(rx_only(), '\t\tflags |= RING_FLAG_E2E;\n', '\t\tflags |= 0;\n'),
     "the RX ring of tbnet_open() never gets RING_FLAG_E2E (RX flags 'flags')"),
    (lambda: edit(rx_only(), 'TBNET_RING_SIZE, flags,', 'TBNET_RING_SIZE, RING_FLAG_FRAME,'),
     "the RX ring of tbnet_open() never gets RING_FLAG_E2E (RX flags 'RING_FLAG_FRAME')"),
    (lambda: edit(rx_only(), 'RING_FLAG_FRAME);', 'tbnet_tx_flags(net));'),
     "cannot tell the TX E2E history: tb_ring_alloc_tx() gets flags 'tbnet_tx_flags(net)'"),
    (lambda: edit(rx_only(), 'RING_FLAG_FRAME);', 'RING_FLAG_FRAME | RING_FLAG_E2E);'),
     "gets flags 'RING_FLAG_FRAME|RING_FLAG_E2E', neither RING_FLAG_FRAME"),
    # TX gets the variable, but the variable gets E2E only after the TX ring exists: no history has that
    (lambda: edit(rx_only(), 'RING_FLAG_FRAME);', 'flags);'),
     "cannot tell the TX E2E history: tb_ring_alloc_tx() gets flags 'flags'"),
    (lambda: edit(rx_only(), 'MODULE_PARM_DESC(e2e,', PARAM + 'MODULE_PARM_DESC(e2e,'),
     "the tx_e2e parameter is declared but the TX ring ignores it (TX flags 'RING_FLAG_FRAME'): a partial patch"),
    (lambda: edit(patched(), PARAM, ''),
     "the TX ring uses tx_e2e (TX flags 'tx_e2e?flags:RING_FLAG_FRAME') but no module_param declares it"),
    (lambda: edit(patched(), PARAM, '/* ' + PARAM + ' */'), 'but no module_param declares it'),
])
def test_history_refused(make, message):
    with pytest.raises(SourceError, match=re.escape(message)):
        ts.tx_e2e_history(make())


def test_history_refuses_bytes():
    with pytest.raises(SourceError, match='takes the text of the driver file, got bytes'):
        ts.tx_e2e_history(rx_only().encode())


def test_code_only():
    assert ts.code_only('a /* b { */ c // d }\ne "f{\\"g" h \'}\' i \'\\\'\'') == 'a   c  \ne "" h \'\' i \'\''
    assert ts.squeeze(' a ,\n\tb ') == 'a,b'


# --- the patch files ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('layout, history', [(lay, his) for lay in ts.LAYOUTS for his in ts.PATCHABLE_HISTORIES])
def test_patch_files(layout, history):
    """Each patch is a git-style mail for `git apply` on its layout's driver, with the parameter as specified and a
    Tx ring that gets E2E only through tx_e2e. (check_patch.sh applies, gates and builds them for real.)"""
    text = (PATCH_DIR / ts.patch_name(layout, history)).read_text()
    driver = ts.driver_path(layout)
    header, _sep, diff = text.partition('\n---\n')
    assert header.startswith('From 0000000000000000000000000000000000000000 ')
    assert '\nFrom: inferlab developers <inferlab@invalid>\n' in header
    assert re.search(r'\nSubject: \[PATCH\] net: thunderbolt: ', header)
    assert header.endswith('\nSigned-off-by: inferlab developers <inferlab@invalid>')
    assert f'\ndiff --git a/{driver} b/{driver}\n' in diff
    assert f'\n--- a/{driver}\n+++ b/{driver}\n' in diff
    assert len(re.findall(r'^diff --git ', diff, re.M)) == 1
    added = [line[1:] for line in diff.splitlines() if line.startswith('+') and not line.startswith('+++')]
    removed = [line[1:] for line in diff.splitlines() if line.startswith('-') and not line.startswith('---')]
    assert 'static bool tx_e2e;' in added
    assert 'module_param(tx_e2e, bool, 0444);' in added
    assert [line for line in added if line.startswith('MODULE_PARM_DESC(tx_e2e, "')
            and line.endswith('(default: false)");')]
    assert '\t\t\t\ttx_e2e ? flags : RING_FLAG_FRAME);' in added
    assert not [line for line in added if line != line.rstrip()]
    if history == 'rx_only':
        assert '\t\t\t\tRING_FLAG_FRAME);' in removed
    else:
        assert removed == ['\tring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE, flags);']


def test_patches_of_a_history_differ_only_in_the_path():
    for history in ts.PATCHABLE_HISTORIES:
        single = (PATCH_DIR / ts.patch_name('single', history)).read_text()
        split = (PATCH_DIR / ts.patch_name('split', history)).read_text()

        def body(text):
            text = re.sub(r'^index \S+ \d+$', 'index', text, flags=re.M)
            text = re.sub(r'^@@ -\d+,\d+ \+\d+,\d+ @@', '@@', text, flags=re.M)
            return re.sub(r'drivers/net/thunderbolt(/main)?\.c( +\|)?', 'DRIVER', text)
        assert body(single) == body(split)


# --- the command line ------------------------------------------------------------------------------------------

def tree(tmp_path, layout, name):
    path = tmp_path / 'linux' / ts.driver_path(layout)
    path.parent.mkdir(parents=True)
    path.write_text(fixture(name))
    return str(tmp_path / 'linux')


@pytest.mark.parametrize('layout, name, history, patch', [
    ('single', 'single_rx_only-6.1.192-3.c', 'rx_only', 'tx_e2e-single-rx_only.patch'),
    ('single', 'single_tx_always-6.1.176-1.c', 'tx_always', 'tx_e2e-single-tx_always.patch'),
    ('split', 'split_rx_only-6.12.117.c', 'rx_only', 'tx_e2e-split-rx_only.patch'),
    ('split', 'split_tx_always-synthetic.c', 'tx_always', 'tx_e2e-split-tx_always.patch'),
    ('single', 'single_patched-6.1.192-3.c', 'patched', None),
])
def test_main(tmp_path, capsys, layout, name, history, patch):
    assert ts.main([tree(tmp_path, layout, name)]) == 0
    expected = {'layout': layout, 'driver': ts.driver_path(layout), 'history': history, 'patch': patch}
    assert json.loads(capsys.readouterr().out) == expected


def test_main_refusals(tmp_path, capsys):
    assert ts.main([]) == 2
    assert ts.main(['--help']) == 2
    assert 'usage: python3 _tbnet_source.py KERNEL_TREE' in capsys.readouterr().err
    os.makedirs(tmp_path / 'empty')
    assert ts.main([str(tmp_path / 'empty')]) == 3
    assert 'no thunderbolt_net driver in the tree' in capsys.readouterr().err
    assert ts.main([tree(tmp_path, 'split', 'malformed-cut_short.c')]) == 3
    assert capsys.readouterr().err.endswith('tbnet_open() is not closed: the text is cut short\n')

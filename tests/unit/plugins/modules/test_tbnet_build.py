# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tbnet_build through AnsibleModule: the build_dir ledger entry, the private directory and its record, idempotence,
check mode, and what a refusal leaves (nothing). Commands go through ``TbnetBuild.run_command``, replaced by the
table of module_utils/test_tbnet_build_logic.py: git runs for real, make and modinfo are answered from the table."""

from __future__ import annotations

import json
import os
import stat

import pytest
import yaml

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _ledger_settings
from ansible_collections.inferlab.distributed.plugins.modules import tbnet_build
from ansible_collections.inferlab.distributed.tests.unit.module_docs import documented_options
from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.test_tbnet_build_logic import (
    RELEASE,
    SCRIPTS,
    UNAME_V,
    FakeRun,
    candidate_patch,
    expected_calls,
    headers,
    kernel_tree,
    make_tarball,
    makefile,
    module_path,
)
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module, set_module_args

HOST = 'lab-a'
APPLY_FAILS = (1, '', 'error: patch failed: drivers/net/thunderbolt.c:215\n'
                      'error: drivers/net/thunderbolt.c: patch does not apply\n')


@pytest.fixture
def build_host(tmp_path, monkeypatch):
    """The 6.1 source, the headers and the candidate patch in tmp_path; ``args(**extra)`` gives the module's
    arguments and ``answer(table)`` sets the commands the next run expects."""
    source = kernel_tree(tmp_path / 'src' / 'linux-6.1')
    headers_dir = headers(tmp_path / 'root')
    patch = candidate_patch(tmp_path / 'patches')
    fake = {'run': FakeRun([])}
    monkeypatch.setattr(tbnet_build.TbnetBuild, 'run_command', lambda self, argv, cwd=None: fake['run'](argv, cwd))

    def args(**extra):
        base = {'source': str(source), 'patches': [str(patch)], 'headers_dir': str(headers_dir),
                'target_kernel_release': RELEASE, 'target_kernel_version': UNAME_V,
                'build_dir': str(tmp_path / 'state' / 'build' / 'tbnet-candidate'),
                'ledger_dir': str(tmp_path / 'state' / 'ledger'), 'ledger_host': HOST, 'run_id': 'run-1'}
        base.update(extra)
        return base

    def answer(table):
        fake['run'] = FakeRun(table)
        return fake['run']

    def successful(a, layout='single', **answers):
        """The table of a whole build with the module's arguments ``a``."""
        p = {'build_dir': a['build_dir'], 'headers_dir': a['headers_dir'], 'signing_key': a.get('signing_key')}
        patches = a['patches'] or [os.path.join(a['patch_dir'], f'tx_e2e-{layout}-rx_only.patch')]
        return answer(expected_calls(p, patches, layout, **answers))
    args.answer, args.successful = answer, successful
    args.source, args.headers, args.patch, args.root = source, headers_dir, patch, tmp_path
    return args


def ledger_lines(a):
    lines, problems = _ledger_core.read_ledger(a['ledger_dir'], HOST)
    assert problems == []
    return lines


def ledger_file(a):
    return _ledger_core.ledger_path(a['ledger_dir'], HOST)


def test_a_build_is_recorded_then_made(build_host):
    a = build_host()
    run = build_host.successful(a)
    failed, result = run_module(tbnet_build.main, a)
    assert not failed and result['changed'] is True, result
    assert run.table == []
    path = a['build_dir']
    ko = module_path(a)
    assert result['message'] == f'built {ko} (single, rx_only)'
    assert result['build']['module']['module_path'] == ko and result['build']['module']['srcversion']
    assert result['build']['source']['source_version'] == '6.1.192'

    lines = ledger_lines(a)
    assert [(line['id'], line['kind'], line['state']) for line in lines] == [
        (result['entry_id'], 'build_dir', 'pending'), (result['entry_id'], 'build_dir', 'applied')]
    assert lines[0]['params'] == {'path': path, 'purpose': 'tbnet candidate'} and lines[0]['run_id'] == 'run-1'

    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    with open(os.path.join(path, _ledger_settings.BUILD_DIR_MARKER)) as handle:
        assert result['entry_id'] in handle.read()
    record_path = os.path.join(path, tbnet_build.RECORD_FILE)
    assert stat.S_IMODE(os.stat(record_path).st_mode) == 0o600
    with open(record_path) as handle:
        record = json.load(handle)
    assert record['build'] == result['build']
    makefile = os.path.join(a['source'], 'Makefile')
    assert record['inputs'] == {'source': a['source'],
                                'patches': {a['patches'][0]: _ledger_core.sha256_file(a['patches'][0])},
                                'source_fingerprint': tbnet_build.source_fingerprint(a['source']),
                                'headers_dir': a['headers_dir'], 'headers_version': '6.1.192',
                                'target_kernel_release': RELEASE, 'signing_key': None}
    assert record['inputs']['source_fingerprint'][makefile] == [os.stat(makefile).st_size,
                                                                int(os.stat(makefile).st_mtime)]
    assert sorted(os.listdir(path)) == [_ledger_settings.BUILD_DIR_MARKER, tbnet_build.RECORD_FILE, 'module', 'tree']


def test_the_same_inputs_change_nothing(build_host):
    a = build_host()
    build_host.successful(a)
    failed, first = run_module(tbnet_build.main, a)
    assert not failed and first['changed'] is True
    run = build_host.answer([])  # no command at all
    failed, again = run_module(tbnet_build.main, a)
    assert not failed and again['changed'] is False and run.calls == []
    assert again['message'] == 'already built with the same inputs' and again['build'] == first['build']
    assert 'entry_id' not in again and len(ledger_lines(a)) == 2
    failed, check = run_module(tbnet_build.main, dict(a, _ansible_check_mode=True))
    assert not failed and check['changed'] is False


def test_new_inputs_rebuild_in_the_recorded_directory(build_host):
    a = build_host()
    build_host.successful(a)
    failed, first = run_module(tbnet_build.main, a)
    assert not failed
    with open(os.path.join(a['build_dir'], 'stale-file'), 'w') as handle:
        handle.write('from an earlier build\n')
    with open(a['patches'][0], 'a') as handle:  # the patch changed: its sha256 is an input
        handle.write('-- \n2.39.5\n')
    run = build_host.successful(a)
    failed, second = run_module(tbnet_build.main, a)
    assert not failed and second['changed'] is True and run.table == []
    assert second['entry_id'] == first['entry_id'] and len(ledger_lines(a)) == 2  # the same entry, reused
    assert not os.path.exists(os.path.join(a['build_dir'], 'stale-file'))
    assert os.path.isfile(os.path.join(a['build_dir'], _ledger_settings.BUILD_DIR_MARKER))


def test_a_changed_module_is_rebuilt(build_host):
    a = build_host()
    build_host.successful(a)
    failed, _first = run_module(tbnet_build.main, a)
    assert not failed
    with open(module_path(a), 'ab') as handle:
        handle.write(b'tampered')
    run = build_host.successful(a)
    failed, second = run_module(tbnet_build.main, a)
    assert not failed and second['changed'] is True and run.table == []


def test_patch_dir_gives_the_patch_of_the_layout_and_history(build_host):
    a = build_host(patches=[], patch_dir=str(build_host.patch.parent))
    run = build_host.successful(a)
    failed, result = run_module(tbnet_build.main, a)
    assert not failed and result['changed'] is True and run.table == []
    assert result['build']['source']['patches'] == [{'path': str(build_host.patch),
                                                     'sha256': _ledger_core.sha256_file(str(build_host.patch))}]


def test_check_mode_makes_nothing(build_host):
    a = build_host()
    run = build_host.answer([])
    failed, result = run_module(tbnet_build.main, dict(a, _ansible_check_mode=True))
    assert not failed and result['changed'] is True and result['build'] is None, result
    assert result['message'] == f"would build in {a['build_dir']}"
    assert run.calls == [] and not os.path.lexists(a['build_dir']) and not os.path.exists(ledger_file(a))


@pytest.mark.parametrize('gate, answers, output', [
    ('git apply --check', {'apply_check': APPLY_FAILS}, APPLY_FAILS[2].strip()),
    ('checkpatch', {'checkpatch': (1, 'ERROR: trailing whitespace\n#30: FILE: drivers/net/thunderbolt.c:218:\n'
                                      '\ntotal: 1 errors, 0 warnings, 0 checks, 41 lines checked\n', '')},
     'ERROR: trailing whitespace\n#30: FILE: drivers/net/thunderbolt.c:218:\n\n'
     'total: 1 errors, 0 warnings, 0 checks, 41 lines checked'),
    ('vermagic', {'vermagic': (0, '6.1.0-56-amd64 SMP preempt mod_unload modversions\n', '')}, ''),
])
def test_a_gate_failure_leaves_no_build_directory(build_host, gate, answers, output):
    a = build_host()
    run = build_host.successful(a, **answers)
    failed, result = run_module(tbnet_build.main, a)
    assert failed and result['failed_gate'] == gate and result['output'] == output, result
    assert run.calls[-1][0] == {'git apply --check': 'git', 'checkpatch': 'perl', 'vermagic': 'modinfo'}[gate]
    assert gate == 'vermagic' or run.table, 'the build went on after the gate'
    assert result['msg'].endswith('(nothing was loaded; the build directory: removed the build directory '
                                  f"{a['build_dir']})"), result['msg']
    assert not os.path.lexists(a['build_dir'])
    lines = ledger_lines(a)
    assert [line['state'] for line in lines] == ['pending', 'applied', 'undone']
    assert len({line['id'] for line in lines}) == 1
    # the next run starts afresh: a new entry, a new directory
    build_host.successful(a)
    failed, result = run_module(tbnet_build.main, a)
    assert not failed and result['changed'] is True and result['entry_id'] != lines[0]['id']


def test_a_tarball_of_another_version_is_refused_once_staged(build_host):
    source = kernel_tree(build_host.root / 'old', version='6.1.176')
    a = build_host(source=str(make_tarball(build_host.root / 'linux-source-6.1.tar.xz', source)))
    build_host.answer([])
    failed, result = run_module(tbnet_build.main, a)
    assert failed and result['failed_gate'] == 'precondition'
    assert result['msg'].startswith('the source is Linux 6.1.176 but the headers for 6.1.0-57-amd64 are 6.1.192')
    assert not os.path.lexists(a['build_dir'])
    assert [line['state'] for line in ledger_lines(a)] == ['pending', 'applied', 'undone']


def refused_before(build_host, a, message, gate='precondition'):
    run = build_host.answer([])
    failed, result = run_module(tbnet_build.main, a)
    assert failed and result['msg'].startswith('Nothing was changed: '), result
    assert message in result['msg'], result['msg']
    assert result['failed_gate'] == gate and run.calls == []
    assert not os.path.exists(ledger_file(a)) and not os.path.lexists(a['build_dir'])
    return result


def test_missing_headers_are_refused_before_anything(build_host):
    refused_before(build_host, build_host(headers_dir=str(build_host.root / 'absent')),
                   'no kernel headers for 6.1.0-57-amd64 at %s: install linux-headers-6.1.0-57-amd64'
                   % (build_host.root / 'absent'))


def test_the_default_headers_dir_is_under_lib_modules(build_host):
    a = build_host(target_kernel_release='0.0.0-inferlab-test')
    del a['headers_dir']
    refused_before(build_host, a, 'no kernel headers for 0.0.0-inferlab-test at '
                                  '/lib/modules/0.0.0-inferlab-test/build:')


def test_another_source_version_is_refused_before_anything(build_host):
    (build_host.source / 'Makefile').write_text(makefile('6.1.176'))
    refused_before(build_host, build_host(), 'the source is Linux 6.1.176 but the headers for 6.1.0-57-amd64 are '
                                             '6.1.192')


def test_checkpatch_without_spelling_txt_is_refused_before_anything(build_host):
    (build_host.source / 'scripts' / 'spelling.txt').unlink()
    assert 'spelling.txt' in SCRIPTS
    refused_before(build_host, build_host(), 'without spelling.txt checkpatch passes silently', gate='checkpatch')


def test_required_signature_without_a_key_is_refused_before_anything(build_host):
    refused_before(build_host, build_host(require_signature=True), 'set tbnet_candidate_signing_key')


def test_a_build_dir_under_lib_modules_is_refused(build_host):
    a = build_host(build_dir=f'/lib/modules/{RELEASE}/extra/tbnet')
    refused_before(build_host, a, 'the candidate is never installed where the system keeps its modules')


def test_neither_patches_nor_patch_dir(build_host):
    failed, result = run_module(tbnet_build.main, build_host(patches=[]))
    assert failed and result['msg'] == 'give patches, or patch_dir with the tx_e2e-<layout>-<history>.patch files'


@pytest.mark.parametrize('content', ['foreign', 'marker', 'symlink'])
def test_a_foreign_directory_is_left_alone(build_host, content):
    a = build_host()
    path = a['build_dir']
    os.makedirs(os.path.dirname(path))
    if content == 'symlink':
        os.makedirs(build_host.root / 'elsewhere')
        os.symlink(build_host.root / 'elsewhere', path)
    else:
        os.makedirs(path)
        name = _ledger_settings.BUILD_DIR_MARKER if content == 'marker' else 'notes.txt'  # a marker, no entry
        with open(os.path.join(path, name), 'w') as handle:
            handle.write('not yours\n')
    before = sorted(os.listdir(path))
    run = build_host.answer([])
    failed, result = run_module(tbnet_build.main, a)
    assert failed and result['failed_gate'] == 'build_dir' and run.calls == []
    assert result['msg'] == (f'Nothing was changed: {path} exists and is not a build directory this ledger '
                             'recorded: move it away or set tbnet_candidate_build_dir')
    assert sorted(os.listdir(path)) == before and not os.path.exists(ledger_file(a))


def test_a_source_without_the_driver_fails_cleanly(build_host):
    (build_host.source / 'drivers/net/thunderbolt.c').unlink()
    a = build_host()
    build_host.answer([])
    failed, result = run_module(tbnet_build.main, a)
    assert failed and 'no thunderbolt_net driver' in result['msg']
    assert not os.path.lexists(a['build_dir'])


def test_a_missing_patch_dir_is_refused(build_host):
    a = build_host(patches=[], patch_dir=str(build_host.root / 'absent'))
    build_host.answer([])
    failed, result = run_module(tbnet_build.main, a)
    assert failed and result['msg'].startswith('Nothing was changed')
    assert not os.path.exists(ledger_file(a))


def test_a_source_replaced_at_the_same_path_is_built_again(build_host):
    a = build_host()
    build_host.answer(expected_calls(a, a['patches']))
    failed, first = run_module(tbnet_build.main, a)
    assert not failed and first['changed']
    makefile = os.path.join(a['source'], 'Makefile')
    os.utime(makefile, (0, 0))
    build_host.answer(expected_calls(a, a['patches']))
    failed, second = run_module(tbnet_build.main, a)
    assert not failed and second['changed'] and second['entry_id'] == first['entry_id']


def test_argument_spec_matches_documentation():
    options = documented_options(tbnet_build)  # its ledger options from the ledger doc fragment
    with set_module_args({'source': '/s', 'target_kernel_release': RELEASE, 'build_dir': '/var/lib/x/b',
                          'ledger_dir': '/x', 'ledger_host': 'h'}):
        spec = tbnet_build.build_module().argument_spec

    def shape(opts):
        return {name: (o['type'], o.get('default'), o.get('required', False), o.get('elements'))
                for name, o in opts.items()}
    assert shape(options) == shape(spec)
    returns = yaml.safe_load(tbnet_build.RETURN)
    assert all('returned' in r for r in returns.values())
    yaml.safe_load(tbnet_build.EXAMPLES)
    json.dumps(returns)

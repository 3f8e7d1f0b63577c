# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of _tbnet_build: versions from kernel Makefiles and ``uname -v``, staging from a directory or a tarball,
the preconditions, and the gates and the build with a table of expected commands (``FakeRun``, in the style of
community.general's test_cpanm.yaml). git runs for real; make, modinfo, perl (checkpatch) and sign-file are
answered from the table. The kernel trees are small fakes made in tmp_path from the excerpts in
tests/unit/fixtures/tbnet_source/; tests/kernel/check_patch.sh builds the real patches against real sources."""

from __future__ import annotations

import difflib
import hashlib
import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _tbnet_driver
from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_build as tb
from ansible_collections.inferlab.distributed.plugins.module_utils._tbnet_build import BuildError
from ansible_collections.inferlab.distributed.plugins.module_utils._tbnet_source import LAYOUTS
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import FIXTURES

REPO_ROOT = FIXTURES.parents[2]
SOURCES = FIXTURES / 'tbnet_source'
SHIPPED_PATCHES = REPO_ROOT / 'roles' / 'tbnet_candidate' / 'files'

RELEASE = '6.1.0-57-amd64'
UNAME_V = '#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-10-01)'
VERMAGIC = RELEASE + ' SMP preempt mod_unload modversions'
SRCVERSION = '3C1D8F0A5E6B7C2D9A4F1E0'
PARM = ('e2e:USB4NET full end-to-end flow control (default: true) (bool)\n'
        'tx_e2e:USB4NET end-to-end flow control on transmit too (default: false) (bool)\n')
SPLIT = {'release': '6.12.117+deb12-amd64', 'version': '6.12.117',
         'uname_v': '#1 SMP PREEMPT_DYNAMIC Debian 6.12.117-1~deb12u1 (2026-10-20)',
         'driver': 'split_rx_only-6.12.117.c'}
SINGLE_DRIVER = 'single_rx_only-6.1.192-3.c'
PATCHED_DRIVER = 'single_patched-6.1.192-3.c'
SPLIT_MAKEFILE = ('# SPDX-License-Identifier: GPL-2.0\nobj-$(CONFIG_USB4_NET) := thunderbolt_net.o\n'
                  'thunderbolt_net-objs := main.o trace.o\n\n# Tracepoints need to know where to find trace.h\n'
                  'CFLAGS_trace.o := -I$(src)\n')
CHECKPATCH_CLEAN = ('total: 0 errors, 0 warnings, 0 checks, 41 lines checked\n\n'
                    '{patch} has no obvious style problems and is ready for submission.\n')
MAKE_LOG = ('make: Entering directory \'/usr/src/linux-headers-6.1.0-57-amd64\'\n'
            '  CC [M]  {out}/thunderbolt.o\n  LD [M]  {out}/thunderbolt-net.o\n  MODPOST {out}/Module.symvers\n'
            '  CC [M]  {out}/thunderbolt-net.mod.o\n  LD [M]  {out}/thunderbolt-net.ko\n'
            'make: Leaving directory \'/usr/src/linux-headers-6.1.0-57-amd64\'\n')

# What a kernel tree holds besides the driver: none of it may be staged.
DECOYS = ('drivers/net/Makefile', 'drivers/net/Kconfig', 'drivers/net/loopback.c', 'drivers/thunderbolt/nhi.c',
          'scripts/Makefile.build', 'scripts/checkstack.pl', 'README')
STAGED = {
    'single': ['Makefile', 'drivers/net/thunderbolt.c', 'scripts/checkpatch.pl', 'scripts/const_structs.checkpatch',
               'scripts/spelling.txt'],
    'split': ['Makefile', 'drivers/net/thunderbolt/Kconfig', 'drivers/net/thunderbolt/Makefile',
              'drivers/net/thunderbolt/main.c', 'drivers/net/thunderbolt/trace.c', 'drivers/net/thunderbolt/trace.h',
              'scripts/checkpatch.pl', 'scripts/const_structs.checkpatch', 'scripts/spelling.txt'],
}
SCRIPTS = {
    'checkpatch.pl': '#!/usr/bin/env perl\n# SPDX-License-Identifier: GPL-2.0\n# a stand-in: the tests answer for it\n',
    'spelling.txt': '# Originally from Debian\'s Lintian tool.\nabandonned||abandoned\nabondon||abandon\n',
    'const_structs.checkpatch': 'acpi_dock_ops\naddress_space_operations\nbacklight_ops\n',
}


# --- fake kernel trees, headers, patches -------------------------------------------------------------------------

def fixture(name):
    return (SOURCES / name).read_text()


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def makefile(version='6.1.192', extra=''):
    """The head of a kernel's top-level Makefile (what makefile_version reads)."""
    major, minor, sub = version.split('.')
    extraversion = ('EXTRAVERSION = ' + extra).rstrip()
    return (f'# SPDX-License-Identifier: GPL-2.0\nVERSION = {major}\nPATCHLEVEL = {minor}\nSUBLEVEL = {sub}\n'
            f'{extraversion}\nNAME = Curry Ramen\n\n# *DOCUMENTATION*\n'
            '# To see a list of typical targets execute "make help"\n')


def kernel_tree(root, layout='single', driver=None, version='6.1.192', scripts=None):
    """A fake kernel tree: the top Makefile, the driver of ``layout`` (a fixture excerpt), checkpatch's files
    (``scripts``: name -> text) and files that must not be staged."""
    driver = driver or (SINGLE_DRIVER if layout == 'single' else SPLIT['driver'])
    write(root / 'Makefile', makefile(version))
    write(root / LAYOUTS[layout], fixture(driver))
    if layout == 'split':
        write(root / 'drivers/net/thunderbolt/trace.c', '// SPDX-License-Identifier: GPL-2.0\n'
                                                        '#define CREATE_TRACE_POINTS\n#include "trace.h"\n')
        write(root / 'drivers/net/thunderbolt/trace.h', '/* SPDX-License-Identifier: GPL-2.0 */\n'
                                                        '#undef TRACE_SYSTEM\n#define TRACE_SYSTEM thunderbolt_net\n')
        write(root / 'drivers/net/thunderbolt/Makefile', SPLIT_MAKEFILE)
        write(root / 'drivers/net/thunderbolt/Kconfig', '# SPDX-License-Identifier: GPL-2.0-only\n'
                                                        'config USB4_NET\n\ttristate "Networking over USB4"\n')
    for name in DECOYS:
        write(root / name, '# not part of the candidate\n')
    for name, text in (SCRIPTS if scripts is None else scripts).items():
        write(root / 'scripts' / name, text)
    return root


def headers(root, release=RELEASE, version='6.1.192', sign_file=False):
    """Debian's headers: ``linux-headers-RELEASE/Makefile`` is one ``include`` of the ``-common`` package's."""
    common = root / 'usr/src' / (release.rsplit('-', 1)[0] + '-common')
    write(common / 'Makefile', makefile(version))
    ours = root / 'usr/src' / ('linux-headers-' + release)
    write(ours / 'Makefile', 'include %s\n' % (common / 'Makefile'))
    if sign_file:
        write(ours / 'scripts/sign-file', '\x7fELF stand-in\n').chmod(0o755)
    return ours


def make_patch(relative, old, new):
    """A unified diff of one file, as ``git apply`` takes it (``a/`` and ``b/`` prefixes)."""
    return ''.join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), 'a/' + relative, 'b/' + relative))


def candidate_patch(directory, layout='single', driver=None, new=None, name=None):
    """The candidate's change of a fixture driver (the patched excerpt), as a patch file in ``directory``."""
    driver = driver or (SINGLE_DRIVER if layout == 'single' else SPLIT['driver'])
    name = name or f'tx_e2e-{layout}-rx_only.patch'
    return write(directory / name, make_patch(LAYOUTS[layout], fixture(driver), new or fixture(PATCHED_DRIVER)))


def make_tarball(path, tree, top='linux-source-6.1'):
    """``linux-source-X.Y.tar.xz``: the tree under one top directory."""
    with tarfile.open(path, 'w:xz') as archive:
        archive.add(tree, arcname=top)
    return path


def files_under(root):
    """The files under ``root``, relative to it, without a ``.git`` directory."""
    found = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != '.git']
        found += [os.path.relpath(os.path.join(directory, name), root) for name in names]
    return sorted(found)


# --- the table of expected commands ------------------------------------------------------------------------------

REAL = 'run it'


class FakeRun:
    """``run(argv, cwd=None) -> (rc, stdout, stderr)`` answering an ordered table of ``(argv, answer)``: each call
    must be the next argv of the table; ``answer`` is ``(rc, stdout, stderr)``, ``REAL`` (run the command, for
    git) or a callable ``answer(argv) -> (rc, stdout, stderr)`` (a command with a side effect)."""

    def __init__(self, table):
        self.table = list(table)
        self.calls = []

    def __call__(self, argv, cwd=None):
        assert self.table, f'unexpected command: {argv!r}'
        expected, answer = self.table.pop(0)
        assert argv == expected, f'expected {expected!r}, got {argv!r}'
        self.calls.append(argv)
        if answer == REAL:
            env = dict(os.environ, GIT_CONFIG_NOSYSTEM='1', GIT_CONFIG_GLOBAL=os.devnull, LC_ALL='C')
            done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, check=False)
            return done.returncode, done.stdout, done.stderr
        if callable(answer):
            return answer(argv)
        return answer


def make_writes(ko, log=None, err=''):
    """``make modules`` that leaves ``ko`` behind."""
    def answer(argv):
        with open(ko, 'wb') as handle:
            handle.write(b'\x7fELF the candidate ' + os.path.basename(ko).encode())
        return 0, log if log is not None else MAKE_LOG.format(out=os.path.dirname(ko)), err
    return answer


def module_path(p, layout='single'):
    return os.path.join(p['build_dir'], 'module', 'thunderbolt-net.ko' if layout == 'single' else 'thunderbolt_net.ko')


def expected_calls(p, patches, layout='single', **answers):
    """Every command of a successful ``Build.run``, in order; ``answers`` replace the answer of one step:
    ``apply_check``, ``apply``, ``diff_check``, ``checkpatch``, ``make``, ``vermagic``, ``srcversion``, ``parm``,
    ``sign``."""
    tree = os.path.join(p['build_dir'], 'tree')
    out = os.path.join(p['build_dir'], 'module')
    ko = module_path(p, layout)
    answer = {'apply_check': REAL, 'apply': REAL, 'diff_check': REAL, 'make': make_writes(ko),
              'vermagic': (0, VERMAGIC + '\n', ''), 'srcversion': (0, SRCVERSION + '\n', ''), 'parm': (0, PARM, ''),
              'sign': (0, '', '')}
    answer.update(answers)
    calls = [(['git', 'init', '-q', tree], REAL),
             (['git'] + tb.GIT_IDENTITY + ['-C', tree, 'add', '-A'], REAL),
             (['git'] + tb.GIT_IDENTITY + ['-C', tree, 'commit', '-q', '-m', 'distribution source'], REAL)]
    for patch in patches:
        calls += [(['git', '-C', tree, 'apply', '--check', patch], answer['apply_check']),
                  (['git', '-C', tree, 'apply', patch], answer['apply'])]
    calls.append((['git', '-C', tree, 'diff', '--check'], answer['diff_check']))
    for patch in patches:
        calls.append((['perl', os.path.join(tree, 'scripts', 'checkpatch.pl'), '--strict', '--no-tree', patch],
                      answer.get('checkpatch', (0, CHECKPATCH_CLEAN.format(patch=patch), ''))))
    calls.append((['make', '-C', p['headers_dir'], 'M=' + out, 'CONFIG_USB4_NET=m', 'CONFIG_MODULE_SRCVERSION_ALL=y',
                   'modules'], answer['make']))
    calls += [(['modinfo', '-F', field, ko], answer[field]) for field in ('vermagic', 'srcversion', 'parm')]
    if p.get('signing_key'):
        calls.append(([os.path.join(p['headers_dir'], 'scripts', 'sign-file'), 'sha256', p['signing_key'],
                       p['signing_cert'], ko], answer['sign']))
    return calls


@pytest.fixture
def host(tmp_path):
    """A build host: the 6.1 source (a directory), the headers of RELEASE, the candidate patch; ``params(**changes)``
    gives Build's params with the build directory made (as the module makes it)."""
    source = kernel_tree(tmp_path / 'src' / 'linux-6.1')
    headers_dir = headers(tmp_path / 'root')
    patch = candidate_patch(tmp_path / 'patches')

    def params(**changes):
        base = {'source': str(source), 'patches': [str(patch)], 'patch_dir': str(patch.parent),
                'headers_dir': str(headers_dir), 'build_dir': str(tmp_path / 'build' / 'tbnet-candidate'),
                'target_kernel_release': RELEASE, 'target_kernel_version': UNAME_V, 'signing_key': None,
                'signing_cert': None, 'require_signature': False}
        base.update(changes)
        os.makedirs(base['build_dir'], mode=0o700, exist_ok=True)
        return base
    params.source, params.headers, params.patch, params.root = source, headers_dir, patch, tmp_path
    return params


# --- versions ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('text, expected', [
    (makefile('6.1.192'), ('6.1.192', None)),
    (makefile('6.12.117'), ('6.12.117', None)),
    (makefile('6.13.0', '-rc1'), ('6.13.0-rc1', None)),
    ('VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 0\n', ('6.1.0', None)),  # no EXTRAVERSION line at all
    ('VERSION=6\nPATCHLEVEL=1\nSUBLEVEL=192\nEXTRAVERSION=\n', ('6.1.192', None)),
    ('include /usr/src/linux-headers-6.1.0-57-common/Makefile\n',
     (None, '/usr/src/linux-headers-6.1.0-57-common/Makefile')),  # Debian's per-ABI headers Makefile
    ('include /usr/src/a/Makefile\ninclude /usr/src/b/Makefile\n', (None, '/usr/src/a/Makefile')),
    ('include scripts/Kbuild.include\n', (None, None)),  # a relative include is not followed
    ('VERSION = 6\nPATCHLEVEL = 1\n', (None, None)),  # no SUBLEVEL
    ('VERSION = 6\nPATCHLEVEL = one\nSUBLEVEL = 192\n', (None, None)),
    ('VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL =\n', (None, None)),
    ('  VERSION = 6\n  PATCHLEVEL = 1\n  SUBLEVEL = 192\n', (None, None)),  # not at the start of a line
    ('# VERSION = 6\n', (None, None)),
    ('', (None, None)),
])
def test_makefile_version(text, expected):
    assert tb.makefile_version(text) == expected


def test_tree_version_follows_the_include(tmp_path):
    ours = headers(tmp_path)
    assert (ours / 'Makefile').read_text().startswith('include /')
    assert tb.tree_version(str(ours)) == '6.1.192'
    assert tb.tree_version(str(kernel_tree(tmp_path / 'src', version='6.1.176'))) == '6.1.176'


def test_tree_version_none(tmp_path):
    assert tb.tree_version(str(tmp_path / 'absent')) is None
    write(tmp_path / 'dangling/Makefile', 'include %s\n' % (tmp_path / 'gone' / 'Makefile'))
    assert tb.tree_version(str(tmp_path / 'dangling')) is None
    write(tmp_path / 'loop/Makefile', 'include %s\n' % (tmp_path / 'loop' / 'Makefile'))
    assert tb.tree_version(str(tmp_path / 'loop')) is None  # an include of itself stops after ``depth`` files
    write(tmp_path / 'plain/Makefile', 'all:\n\techo no version here\n')
    assert tb.tree_version(str(tmp_path / 'plain')) is None


@pytest.mark.parametrize('uname_v, expected', [
    (UNAME_V, '6.1.192'),
    ('#1 SMP PREEMPT_DYNAMIC Debian 6.1.176-1 (2026-07-14)', '6.1.176'),
    (SPLIT['uname_v'], '6.12.117'),
    ('#1 SMP PREEMPT_DYNAMIC Debian 6.12.38-1 (2025-07-16)', '6.12.38'),
    ('#58-Ubuntu SMP PREEMPT_DYNAMIC Thu Oct 16 12:42:16 UTC 2025', None),  # Ubuntu's says it in version_signature
    ('#1 SMP PREEMPT_DYNAMIC Fri Nov  7 10:00:00 UTC 2025', None),
    ('', None),
    (None, None),
])
def test_running_upstream_version(uname_v, expected):
    assert tb.running_upstream_version(uname_v) == expected


# Ubuntu's /proc/version_signature beside its uname -v (tests/unit/fixtures/proc-ubuntu has the same kernel)
UBUNTU = {'release': '5.15.0-79-generic', 'uname_v': '#86-Ubuntu SMP Mon Jul 10 16:07:21 UTC 2023',
          'signature': 'Ubuntu 5.15.0-79.86-generic 5.15.111'}
UBUNTU_HWE_V = '#14~24.04.1-Ubuntu SMP PREEMPT_DYNAMIC Mon Jan 20 22:00:00 UTC 2025'


@pytest.mark.parametrize('uname_v, signature, expected', [
    (UBUNTU['uname_v'], UBUNTU['signature'], '5.15.111'),
    (UBUNTU_HWE_V, 'Ubuntu 6.11.0-17.17~24.04.2-generic 6.11.11\n', '6.11.11'),
    (UBUNTU['uname_v'], 'Ubuntu 6.8.0-1.1-generic 6.8', '6.8.0'),
    (UBUNTU['uname_v'], None, None),
    (UBUNTU['uname_v'], 'Ubuntu 5.15.0-79.86-generic', None),  # malformed: no mainline version
    (UNAME_V, None, '6.1.192'),
])
def test_running_upstream_version_reads_ubuntus_signature(uname_v, signature, expected):
    assert tb.running_upstream_version(uname_v, signature) == expected


@pytest.mark.parametrize('uname_v, signature, message', [
    (UNAME_V, None, None),
    (UNAME_V, '', None),
    (UBUNTU['uname_v'], UBUNTU['signature'], None),
    ('', None, None),  # unknown: the source is compared with the headers only
    (None, None, None),
    (UBUNTU['uname_v'], None,
     "the target runs an Ubuntu kernel (uname -v '#86-Ubuntu SMP Mon Jul 10 16:07:21 UTC 2023') but its "
     "/proc/version_signature was not given (target_version_signature)"),
    (UBUNTU_HWE_V, '', 'the target runs an Ubuntu kernel'),
    (UBUNTU['uname_v'], 'Ubuntu 5.15.0-79.86-generic',
     "malformed /proc/version_signature on the target: 'Ubuntu 5.15.0-79.86-generic', expected Ubuntu's \"Ubuntu "
     "<abi>-<flavour> <X.Y.Z>\" (target_version_signature)"),
    (UBUNTU['uname_v'], 'Debian 6.1.192', 'malformed /proc/version_signature on the target'),
    ('#1 SMP PREEMPT_DYNAMIC Fri Nov  7 10:00:00 UTC 2025', None,
     "the target's kernel is neither Debian's nor Ubuntu's (uname -v '#1 SMP PREEMPT_DYNAMIC Fri Nov  7 10:00:00 UTC "
     "2025', no /proc/version_signature): the candidate build supports those two"),
])
def test_unsupported_kernel_says_why(uname_v, signature, message):
    found = tb.unsupported_kernel(uname_v, signature)
    assert (found is None) if message is None else (message in found), found


def test_version_problems_none_when_all_match():
    assert tb.version_problems('6.1.192', '6.1.192', '6.1.192', RELEASE) == []
    assert tb.version_problems('6.1.192', '6.1.192', None, RELEASE) == []  # uname -v without a version: not checked


def test_version_problems_source_against_headers():
    assert tb.version_problems('6.1.176', '6.1.192', None, RELEASE) == [
        'the source is Linux 6.1.176 but the headers for 6.1.0-57-amd64 are 6.1.192: use the source of the running '
        'kernel (tbnet_candidate_source)']


def test_version_problems_source_against_running():
    assert tb.version_problems('6.1.192', '6.1.192', '6.1.176', RELEASE) == [
        'the source is Linux 6.1.192 but the running kernel 6.1.0-57-amd64 is 6.1.176 (uname -v, or Ubuntu\'s '
        '/proc/version_signature)']
    both = tb.version_problems('6.1.176', '6.1.192', '6.1.192', RELEASE)
    assert len(both) == 2 and 'headers for 6.1.0-57-amd64 are 6.1.192' in both[0] and '(uname -v, or' in both[1]


def test_version_problems_without_versions():
    problems = tb.version_problems(None, '6.1.192', '6.1.192', RELEASE)
    assert problems == ['the source has no top-level Makefile with VERSION, PATCHLEVEL and SUBLEVEL, so it cannot be '
                        'matched with the running kernel']
    assert tb.version_problems('6.1.192', None, None, RELEASE) == [
        'the headers for 6.1.0-57-amd64 have no Makefile with the kernel version']
    assert len(tb.version_problems(None, None, None, RELEASE)) == 2


@pytest.mark.parametrize('vermagic', [VERMAGIC, VERMAGIC + '\n', RELEASE])
def test_vermagic_for_the_target(vermagic):
    assert tb.vermagic_problem(vermagic, RELEASE) is None


@pytest.mark.parametrize('vermagic, first', [
    ('6.1.0-56-amd64 SMP preempt mod_unload modversions', "'6.1.0-56-amd64'"),
    ('6.1.0-57-amd64-rt SMP preempt_rt mod_unload modversions', "'6.1.0-57-amd64-rt'"),
    ('6.1.0-57 SMP preempt mod_unload modversions', "'6.1.0-57'"),  # a prefix of the release is not the release
    ('', 'None'),
    (None, 'None'),
])
def test_vermagic_for_another_kernel(vermagic, first):
    problem = tb.vermagic_problem(vermagic, RELEASE)
    assert problem.startswith(f'the built module is for {first} (vermagic {vermagic!r})'), problem
    assert problem.endswith('not for the target kernel 6.1.0-57-amd64 (uname -r)')


# --- system_module_dir (the build directory's refusal) -------------------------------------------------------------

@pytest.mark.parametrize('path', ['/lib/modules', '/lib/modules/6.1.0-57-amd64/extra/tbnet',
                                  '/usr/lib/modules/6.1.0-57-amd64/updates', '/lib/modules/../modules/x'])
def test_a_system_module_dir_is_found(path):
    assert _tbnet_driver.system_module_dir(path) in ('/lib/modules', '/usr/lib/modules')


def test_a_symlink_into_lib_modules_is_a_system_module_dir(tmp_path):
    link = tmp_path / 'build'
    link.symlink_to('/lib/modules')
    assert _tbnet_driver.system_module_dir(str(link)) in ('/lib/modules', '/usr/lib/modules')
    assert _tbnet_driver.system_module_dir(str(link / RELEASE / 'tbnet')) in ('/lib/modules', '/usr/lib/modules')


@pytest.mark.parametrize('path', ['/var/lib/inferlab/build/tbnet', '/lib/modules-old/x', '/usr/lib/modulesx'])
def test_other_paths_are_not(tmp_path, path):
    assert _tbnet_driver.system_module_dir(path) is None
    assert _tbnet_driver.system_module_dir(str(tmp_path / 'build')) is None


# --- staging -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('layout', ['single', 'split'])
def test_stage_directory(tmp_path, layout):
    source = kernel_tree(tmp_path / 'src', layout)
    (source / '.git').mkdir()  # a git checkout of a kernel tree
    write(source / '.git/HEAD', 'ref: refs/heads/master\n')
    dest = tmp_path / 'tree'
    assert tb.stage_directory(str(source), str(dest)) == layout
    assert files_under(dest) == STAGED[layout]
    for relative in STAGED[layout]:
        assert (dest / relative).read_bytes() == (source / relative).read_bytes()


@pytest.mark.parametrize('layout', ['single', 'split'])
def test_stage_tarball(tmp_path, layout):
    source = kernel_tree(tmp_path / 'src', layout)
    tarball = make_tarball(tmp_path / 'linux-source-6.1.tar.xz', source)
    dest = tmp_path / 'tree'
    assert tb.stage_tarball(str(tarball), str(dest)) == layout
    assert files_under(dest) == STAGED[layout]
    for relative in STAGED[layout]:
        assert (dest / relative).read_bytes() == (source / relative).read_bytes()


def test_stage_tarball_takes_only_regular_files_below_the_top_directory(tmp_path):
    source = kernel_tree(tmp_path / 'src')
    (source / 'scripts' / 'checkpatch.pl').unlink()
    (source / 'scripts' / 'checkpatch.pl').symlink_to('/etc/passwd')
    tarball = tmp_path / 'linux-source-6.1.tar.gz'
    with tarfile.open(tarball, 'w:gz') as archive:
        archive.add(source, arcname='linux-source-6.1')
        stray = tarfile.TarInfo('Makefile')  # a member outside the top directory
        data = b'VERSION = 9\n'
        stray.size = len(data)
        archive.addfile(stray, io.BytesIO(data))
    dest = tmp_path / 'tree'
    assert tb.stage_tarball(str(tarball), str(dest)) == 'single'
    assert files_under(dest) == [p for p in STAGED['single'] if p != 'scripts/checkpatch.pl']
    assert (dest / 'Makefile').read_text() == makefile()


def test_stage_tarball_not_a_tarball(tmp_path):
    garbage = write(tmp_path / 'linux-source-6.1.tar.xz', 'this is not a tarball\n' * 20)
    with pytest.raises(BuildError, match=re.escape(f'cannot read the source tarball {garbage}')) as err:
        tb.stage_tarball(str(garbage), str(tmp_path / 'tree'))
    assert err.value.gate == 'precondition'
    with pytest.raises(BuildError, match='cannot read the source tarball'):
        tb.stage_tarball(str(tmp_path / 'absent.tar.xz'), str(tmp_path / 'tree'))


def test_stage_tarball_cut_short(tmp_path):
    source = kernel_tree(tmp_path / 'src')
    write(source / 'drivers/net/big.bin', os.urandom(200000).hex())  # incompressible, so the cut is in the stream
    whole = make_tarball(tmp_path / 'whole.tar.xz', source).read_bytes()
    cut = tmp_path / 'linux-source-6.1.tar.xz'
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(BuildError, match='cannot read the source tarball'):
        tb.stage_tarball(str(cut), str(tmp_path / 'tree'))


def test_stage_directory_without_drivers_net(tmp_path):
    write(tmp_path / 'notakernel' / 'README', 'hello\n')
    with pytest.raises(BuildError) as err:
        tb.stage_directory(str(tmp_path / 'notakernel'), str(tmp_path / 'tree'))
    assert str(err.value).startswith('the source %s has no drivers/net: No such file or directory' %
                                     (tmp_path / 'notakernel'))
    assert 'tbnet_candidate_source must be a kernel tree or the linux-source tarball' in str(err.value)
    assert not (tmp_path / 'tree').exists()


def test_stage_directory_without_the_driver(tmp_path):
    source = kernel_tree(tmp_path / 'src')
    (source / 'drivers/net/thunderbolt.c').unlink()
    with pytest.raises(BuildError, match='no thunderbolt_net driver'):
        tb.stage_directory(str(source), str(tmp_path / 'tree'))


def test_sha256_file(tmp_path):
    path = write(tmp_path / 'x', 'abc')
    assert _ledger_core.sha256_file(str(path)) == hashlib.sha256(b'abc').hexdigest()


# --- Build.preconditions -----------------------------------------------------------------------------------------

def test_preconditions_of_a_directory_source(host):
    found = tb.Build(host(), FakeRun([])).preconditions()
    assert found == {'source_kind': 'directory', 'headers_version': '6.1.192', 'running_version': '6.1.192',
                     'source_version': '6.1.192'}


def test_preconditions_of_a_tarball_source_leave_the_version_to_the_staging(host):
    tarball = make_tarball(host.root / 'linux-source-6.1.tar.xz', kernel_tree(host.root / 'old', version='6.1.176'))
    found = tb.Build(host(source=str(tarball)), FakeRun([])).preconditions()
    assert found == {'source_kind': 'tarball', 'headers_version': '6.1.192', 'running_version': '6.1.192'}


def ubuntu_host(host, version):
    """The build host of an Ubuntu target: its headers (a full Makefile, no include) and a source of ``version``."""
    headers_dir = host.root / 'ubuntu/usr/src' / ('linux-headers-' + UBUNTU['release'])
    write(headers_dir / 'Makefile', makefile('5.15.111'))
    write(host.source / 'Makefile', makefile(version))
    return host(headers_dir=str(headers_dir), target_kernel_release=UBUNTU['release'],
                target_kernel_version=UBUNTU['uname_v'], target_version_signature=UBUNTU['signature'])


def test_preconditions_match_an_ubuntu_source_with_the_version_signature(host):
    found = tb.Build(ubuntu_host(host, '5.15.111'), FakeRun([])).preconditions()
    assert (found['running_version'], found['headers_version'], found['source_version']) == ('5.15.111',) * 3


def test_preconditions_read_ubuntus_flavour_headers_through_their_makefile_symlink(host):
    """Ubuntu's packaging (debian/rules.d/2-binary-arch.mk) removes the flavour headers' Makefile and links it to
    the common headers' full one (newer releases copy it instead, which ubuntu_host models)."""
    p = ubuntu_host(host, '5.15.111')
    common = host.root / 'ubuntu/usr/src/linux-headers-5.15.0-79'
    write(common / 'Makefile', makefile('5.15.111'))
    flavour = Path(p['headers_dir'])
    (flavour / 'Makefile').unlink()
    (flavour / 'Makefile').symlink_to(common / 'Makefile')
    assert tb.Build(p, FakeRun([])).preconditions()['headers_version'] == '5.15.111'


def test_preconditions_refuse_an_ubuntu_source_of_another_version(host):
    p = ubuntu_host(host, '5.15.110')
    refused(p, 'the source is Linux 5.15.110 but the running kernel 5.15.0-79-generic is 5.15.111 (uname -v, or '
               "Ubuntu's /proc/version_signature)")


@pytest.mark.parametrize('changes, message', [
    ({'target_version_signature': ''}, 'the target runs an Ubuntu kernel'),
    ({'target_version_signature': 'Ubuntu'}, 'malformed /proc/version_signature on the target'),
    ({'target_kernel_version': '#1 SMP PREEMPT_DYNAMIC Fri Nov  7 10:00:00 UTC 2025', 'target_version_signature': ''},
     "the target's kernel is neither Debian's nor Ubuntu's"),
])
def test_preconditions_refuse_a_kernel_they_cannot_match_before_making_anything(host, changes, message):
    p = ubuntu_host(host, '5.15.111')
    p.update(changes)
    refused(p, message)
    assert os.listdir(p['build_dir']) == []


def refused(p, message, gate='precondition'):
    with pytest.raises(BuildError) as err:
        tb.Build(p, FakeRun([])).preconditions()
    assert message in str(err.value), str(err.value)
    assert err.value.gate == gate and err.value.output == ''
    return str(err.value)


def test_preconditions_refuse_missing_headers(host):
    missing = host.root / 'root/usr/src/linux-headers-6.1.0-58-amd64'
    msg = refused(host(headers_dir=str(missing), target_kernel_release='6.1.0-58-amd64'),
                  f'no kernel headers for 6.1.0-58-amd64 at {missing}: install linux-headers-6.1.0-58-amd64 on the '
                  'build host')
    assert 'tbnet_candidate_headers_dir' in msg


def test_preconditions_refuse_headers_without_makefile(host):
    (host.headers / 'Makefile').unlink()
    refused(host(), 'install linux-headers-6.1.0-57-amd64')


def test_preconditions_refuse_a_missing_source(host):
    absent = host.root / 'usr/src/linux-source-6.1.tar.xz'
    refused(host(source=str(absent)), f'the kernel source {absent} does not exist (tbnet_candidate_source')


def test_preconditions_refuse_a_missing_patch(host):
    absent = host.root / 'patches/tx_e2e-single-tx_always.patch'
    refused(host(patches=[str(host.patch), str(absent)]),
            f'the patch {absent} does not exist (tbnet_candidate_patches)')


@pytest.mark.parametrize('key, cert', [(None, None), ('key', None), (None, 'cert')])
def test_preconditions_refuse_unsigned_when_signatures_are_required(host, key, cert):
    key = key and str(write(host.root / 'mok/MOK.priv', 'key\n'))
    cert = cert and str(write(host.root / 'mok/MOK.der', 'cert\n'))
    msg = refused(host(require_signature=True, signing_key=key, signing_cert=cert),
                  'the target refuses unsigned modules (Secure Boot lockdown or module.sig_enforce)')
    assert 'set tbnet_candidate_signing_key and tbnet_candidate_signing_cert' in msg and 'mokutil --import' in msg


def test_preconditions_with_a_key(host):
    key = str(write(host.root / 'mok/MOK.priv', 'key\n'))
    cert = str(write(host.root / 'mok/MOK.der', 'cert\n'))
    refused(host(require_signature=True, signing_key=key, signing_cert=cert),
            'signing needs %s, which is missing' % (host.headers / 'scripts' / 'sign-file'))
    headers(host.root / 'root', sign_file=True)
    assert tb.Build(host(require_signature=True, signing_key=key, signing_cert=cert), FakeRun([])).preconditions()
    refused(host(signing_key=key, signing_cert=str(host.root / 'mok/absent.der')),
            'signing needs %s, which is missing' % (host.root / 'mok/absent.der'))


@pytest.mark.parametrize('version, uname_v, message', [
    ('6.1.176', UNAME_V, 'the source is Linux 6.1.176 but the headers for 6.1.0-57-amd64 are 6.1.192: use the source '
                         'of the running kernel (tbnet_candidate_source); the source is Linux 6.1.176 but the running '
                         'kernel 6.1.0-57-amd64 is 6.1.192 (uname -v, or Ubuntu\'s /proc/version_signature)'),
    ('6.1.176', '', 'the source is Linux 6.1.176 but the headers for 6.1.0-57-amd64 are 6.1.192: use the source of '
                    'the running kernel (tbnet_candidate_source)'),
    ('6.1.192', '#1 SMP PREEMPT_DYNAMIC Debian 6.1.193-1 (2026-11-01)',
     'the source is Linux 6.1.192 but the running kernel 6.1.0-57-amd64 is 6.1.193 (uname -v, or Ubuntu\'s '
     '/proc/version_signature)'),
])
def test_preconditions_refuse_another_version(host, version, uname_v, message):
    write(host.source / 'Makefile', makefile(version))
    assert refused(host(target_kernel_version=uname_v), message) == message


def test_preconditions_refuse_a_source_without_version(host):
    write(host.source / 'Makefile', '# no version here\n')
    refused(host(), 'the source has no top-level Makefile with VERSION, PATCHLEVEL and SUBLEVEL')


def test_preconditions_refuse_a_build_dir_under_lib_modules(host):
    p = host()
    p['build_dir'] = f'/lib/modules/{RELEASE}/extra/tbnet'
    msg = refused(p, ' is under /')  # /usr/lib/modules where /lib is a link to /usr/lib
    assert re.search(r'is under /(usr/)?lib/modules: the candidate is never installed where the system keeps its '
                     'modules$', msg), msg


@pytest.mark.parametrize('missing, empty, listed', [
    (['spelling.txt'], [], 'spelling.txt'),
    ([], ['spelling.txt'], 'spelling.txt'),
    (['const_structs.checkpatch'], [], 'const_structs.checkpatch'),
    (['checkpatch.pl', 'spelling.txt'], [], 'checkpatch.pl, spelling.txt'),
])
def test_preconditions_refuse_checkpatch_without_its_files(host, missing, empty, listed):
    for name in missing:
        (host.source / 'scripts' / name).unlink()
    for name in empty:
        (host.source / 'scripts' / name).write_text('')
    refused(host(), f"refusing to run checkpatch: {listed} missing from the source's scripts/ (without spelling.txt "
                    'checkpatch passes silently)', gate='checkpatch')


# --- Build.stage -------------------------------------------------------------------------------------------------

def stage(p, patches=None, layout='single'):
    """Build.preconditions and Build.stage with real git; returns (build, found, patches)."""
    build = tb.Build(p, FakeRun(expected_calls(p, patches or p['patches'], layout)[:3]))
    found = build.preconditions()
    return build, found, build.stage(found)


def test_stage_a_directory(host):
    p = host()
    build, found, patches = stage(p)
    assert patches == p['patches'] and build.run_command.table == []
    assert found['layout'] == 'single' and found['history'] == 'rx_only' and found['driver'] == LAYOUTS['single']
    digest = hashlib.sha256(host.patch.read_bytes()).hexdigest()
    assert found['patches'] == [{'path': p['patches'][0], 'sha256': digest}]
    tree = os.path.join(p['build_dir'], 'tree')
    assert files_under(tree) == STAGED['single']
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM='1', GIT_CONFIG_GLOBAL=os.devnull)
    log = subprocess.run(['git', '-C', tree, 'log', '--format=%an <%ae> %s'], capture_output=True, text=True,
                         check=True, env=env).stdout
    assert log == 'inferlab <inferlab@invalid> distribution source\n'


def test_stage_a_tarball_checks_its_version_once_staged(host):
    tarball = make_tarball(host.root / 'linux-source-6.1.tar.xz', kernel_tree(host.root / 'old', version='6.1.176'))
    p = host(source=str(tarball))
    build = tb.Build(p, FakeRun([]))
    with pytest.raises(BuildError, match='the source is Linux 6.1.176 but the headers for 6.1.0-57-amd64 are '
                                         '6.1.192') as err:
        build.stage(build.preconditions())
    assert err.value.gate == 'precondition'


def test_stage_a_tarball_without_spelling_txt(host):
    source = kernel_tree(host.root / 'tarred', scripts={k: v for k, v in SCRIPTS.items() if k != 'spelling.txt'})
    p = host(source=str(make_tarball(host.root / 'linux-source-6.1.tar.xz', source)))
    build = tb.Build(p, FakeRun([]))
    with pytest.raises(BuildError, match='spelling.txt missing') as err:
        build.stage(build.preconditions())
    assert err.value.gate == 'checkpatch'


@pytest.mark.parametrize('driver, patch', [(SINGLE_DRIVER, 'tx_e2e-single-rx_only.patch'),
                                           ('single_tx_always-6.1.176-1.c', 'tx_e2e-single-tx_always.patch')])
def test_stage_picks_the_patch_from_patch_dir(host, driver, patch):
    kernel_tree(host.source, driver=driver)
    chosen = candidate_patch(host.root / 'patches', driver=driver, name=patch)
    p = host(patches=[])
    build, found, patches = stage(p, patches=[str(chosen)])
    assert patches == [str(chosen)] and found['patches'][0]['path'] == str(chosen)


def test_stage_without_the_patch_for_the_history(host):
    kernel_tree(host.source, driver='single_tx_always-6.1.176-1.c')
    p = host(patches=[])
    build = tb.Build(p, FakeRun([]))
    with pytest.raises(BuildError, match=re.escape('no patch for the single layout with the tx_always history: %s is '
                                                   'missing' % (host.root / 'patches/tx_e2e-single-tx_always.patch'))):
        build.stage(build.preconditions())


def test_stage_refuses_a_patched_source(host):
    kernel_tree(host.source, driver=PATCHED_DRIVER)
    build = tb.Build(host(), FakeRun([]))
    with pytest.raises(BuildError, match='the source already has the tx_e2e parameter: give the unpatched '
                                         'distribution source'):
        build.stage(build.preconditions())


# --- Build.run: the gates and the build --------------------------------------------------------------------------

def test_run_single_layout_from_a_directory(host):
    p = host()
    run = FakeRun(expected_calls(p, p['patches']))
    result = tb.Build(p, run).run()
    assert run.table == [] and len(run.calls) == 11
    ko = module_path(p)
    assert result == {
        'source': {'path': p['source'], 'source_kind': 'directory', 'source_version': '6.1.192',
                   'headers_version': '6.1.192', 'running_version': '6.1.192', 'layout': 'single',
                   'history': 'rx_only', 'driver': LAYOUTS['single'],
                   'patches': [{'path': p['patches'][0], 'sha256': _ledger_core.sha256_file(p['patches'][0])}]},
        'gates': {'git_diff_check': 'passed', 'patches': [
            {'patch': p['patches'][0], 'git_apply_check': 'passed',
             'checkpatch': CHECKPATCH_CLEAN.format(patch=p['patches'][0]).strip().splitlines()[-1]}]},
        'module': {'module_path': ko, 'sha256': _ledger_core.sha256_file(ko), 'vermagic': VERMAGIC,
                   'srcversion': SRCVERSION,
                   'parm': PARM.splitlines(), 'signed': False, 'compiler_warnings': 0},
        'target_kernel_release': RELEASE, 'headers_dir': p['headers_dir']}
    out = os.path.join(p['build_dir'], 'module')
    assert sorted(os.listdir(out)) == ['Kbuild', 'thunderbolt-net.ko', 'thunderbolt.c']
    with open(os.path.join(out, 'Kbuild')) as handle:
        assert handle.read() == tb.SINGLE_KBUILD
    with open(os.path.join(out, 'thunderbolt.c')) as handle:
        assert handle.read() == fixture(PATCHED_DRIVER)  # the patched text is what make builds


def test_run_split_layout_from_a_tarball_with_signing(host):
    root = host.root
    source = kernel_tree(root / 'split', 'split', version=SPLIT['version'])
    tarball = make_tarball(root / 'linux-source-6.12.tar.xz', source, top='linux-source-6.12')
    headers_dir = headers(root, release=SPLIT['release'], version=SPLIT['version'], sign_file=True)
    patch = candidate_patch(root / 'patches12', 'split')
    key = str(write(root / 'mok/MOK.priv', 'key\n'))
    cert = str(write(root / 'mok/MOK.der', 'cert\n'))
    p = host(source=str(tarball), patches=[str(patch)], headers_dir=str(headers_dir),
             target_kernel_release=SPLIT['release'], target_kernel_version=SPLIT['uname_v'], signing_key=key,
             signing_cert=cert, require_signature=True)
    vermagic = SPLIT['release'] + ' SMP preempt mod_unload modversions'
    run = FakeRun(expected_calls(p, [str(patch)], 'split', vermagic=(0, vermagic + '\n', '')))
    result = tb.Build(p, run).run()
    assert run.table == [] and run.calls[-1][0] == str(headers_dir / 'scripts/sign-file')
    assert result['source']['source_kind'] == 'tarball' and result['source']['source_version'] == SPLIT['version']
    assert (result['source']['layout'], result['source']['history']) == ('split', 'rx_only')
    assert result['module']['module_path'] == module_path(p, 'split') and result['module']['signed'] is True
    assert result['module']['vermagic'] == vermagic
    out = os.path.join(p['build_dir'], 'module')
    assert sorted(os.listdir(out)) == ['Kconfig', 'Makefile', 'main.c', 'thunderbolt_net.ko', 'trace.c', 'trace.h']
    with open(os.path.join(out, 'Makefile')) as handle:
        assert handle.read() == SPLIT_MAKEFILE


def run_fails(p, calls, gate):
    run = FakeRun(calls)
    with pytest.raises(BuildError) as err:
        tb.Build(p, run).run()
    assert err.value.gate == gate, (err.value.gate, str(err.value), err.value.output)
    return err.value, run


APPLY_FAILS = (1, '', 'error: patch failed: drivers/net/thunderbolt.c:215\n'
                      'error: drivers/net/thunderbolt.c: patch does not apply\n')


def test_a_failing_git_apply_check_stops_the_build(host):
    p = host()
    err, run = run_fails(p, expected_calls(p, p['patches'], apply_check=APPLY_FAILS), 'git apply --check')
    tree = os.path.join(p['build_dir'], 'tree')
    assert str(err) == f"git apply --check failed (rc 1): git -C {tree} apply --check {p['patches'][0]}"
    assert err.output == APPLY_FAILS[2].strip()
    assert run.calls[-1][-2:] == ['--check', p['patches'][0]] and not os.path.exists(module_path(p))


def test_the_shipped_patch_does_not_apply_to_an_excerpt(host):
    """Real git on a real failure: the shipped patch's context is not in the 65-line fixture excerpt."""
    p = host(patches=[str(SHIPPED_PATCHES / 'tx_e2e-single-rx_only.patch')])
    err, _run = run_fails(p, expected_calls(p, p['patches']), 'git apply --check')
    assert 'patch failed: drivers/net/thunderbolt.c:215' in err.output and 'patch does not apply' in err.output


def test_git_diff_check_stops_trailing_whitespace(host):
    new = fixture(PATCHED_DRIVER).replace('static bool tx_e2e;\n', 'static bool tx_e2e;  \n')
    p = host(patches=[str(candidate_patch(host.root / 'patches', new=new, name='spaces.patch'))])
    err, run = run_fails(p, expected_calls(p, p['patches']), 'git diff --check')
    assert str(err).startswith('git diff --check failed (rc 2): git -C ')
    assert 'drivers/net/thunderbolt.c:' in err.output and 'trailing whitespace' in err.output
    assert run.calls[-1][-2:] == ['diff', '--check']


def test_git_diff_check_failure_from_the_table(host):
    p = host()
    said = (2, 'drivers/net/thunderbolt.c:18: trailing whitespace.\n+static bool tx_e2e; \n', '')
    err, _run = run_fails(p, expected_calls(p, p['patches'], diff_check=said), 'git diff --check')
    assert err.output == said[1].strip()


def test_checkpatch_failure_output_is_kept(host):
    p = host()
    said = ('CHECK: Alignment should match open parenthesis\n#52: FILE: drivers/net/thunderbolt.c:933:\n'
            '+\tring = tb_ring_alloc_tx(xd->tb->nhi, -1, TBNET_RING_SIZE,\n'
            '+\t\t\ttx_e2e ? flags : RING_FLAG_FRAME);\n\n'
            'total: 0 errors, 0 warnings, 1 checks, 41 lines checked\n\n'
            'NOTE: For some of the reported defects, checkpatch may be able to\n'
            '      mechanically convert to the typical style using --fix or --fix-inplace.\n')
    err, run = run_fails(p, expected_calls(p, p['patches'], checkpatch=(1, said, '')), 'checkpatch')
    checkpatch = os.path.join(p['build_dir'], 'tree', 'scripts', 'checkpatch.pl')
    assert str(err).startswith(f"checkpatch failed (rc 1): perl {checkpatch} --strict --no-tree {p['patches'][0]}")
    assert err.output == said.strip() and run.calls[-1][0] == 'perl'


def test_a_patch_that_does_not_make_the_candidate(host):
    new = fixture(SINGLE_DRIVER).replace('MODULE_PARM_DESC(e2e, "USB4NET full end-to-end flow control (default: '
                                         'true)");\n', 'MODULE_PARM_DESC(e2e, "USB4NET full E2E (default: true)");\n')
    p = host(patches=[str(candidate_patch(host.root / 'patches', new=new, name='cosmetic.patch'))])
    err, _run = run_fails(p, expected_calls(p, p['patches']), 'git apply')
    assert str(err) == ('the patched tree does not read as the candidate (no tx_e2e parameter used by the TX ring)')


def test_make_failure(host):
    p = host()
    log = MAKE_LOG.format(out='/x').split('  LD', maxsplit=1)[0]
    err = 'thunderbolt.c:940:2: error: implicit declaration\nmake[2]: *** [scripts/Makefile.build:250] Error 1\n'
    said = (2, log, err)
    err, _run = run_fails(p, expected_calls(p, p['patches'], make=said), 'build')
    assert str(err).startswith(f"make modules failed (rc 2): make -C {p['headers_dir']} M=")
    assert 'implicit declaration' in err.output and 'Error 1' in err.output


def test_make_without_a_module(host):
    p = host()
    err, _run = run_fails(p, expected_calls(p, p['patches'], make=(0, 'nothing to be done\n', '')), 'build')
    out = os.path.join(p['build_dir'], 'module')
    assert str(err) == f'make succeeded but left no .ko in {out}, not one module'
    assert err.output == 'nothing to be done\n'


def test_vermagic_of_another_release_is_refused(host):
    p = host()
    other = '6.1.0-56-amd64 SMP preempt mod_unload modversions'
    err, run = run_fails(p, expected_calls(p, p['patches'], vermagic=(0, other + '\n', '')), 'vermagic')
    assert str(err) == (f"the built module is for '6.1.0-56-amd64' (vermagic {other!r}), not for the target kernel "
                        '6.1.0-57-amd64 (uname -r)')
    assert [c[:3] for c in run.calls[-3:]] == [['modinfo', '-F', f] for f in ('vermagic', 'srcversion', 'parm')]


@pytest.mark.parametrize('parm', [
    'e2e:USB4NET full end-to-end flow control (default: true) (bool)\n',  # the stock driver: built unpatched
    'e2e:USB4NET full end-to-end flow control (default: true) (bool)\ntx_e2e:E2E on transmit (int)\n',
    '',
])
def test_modinfo_without_a_bool_tx_e2e_is_refused(host, parm):
    p = host()
    err, _run = run_fails(p, expected_calls(p, p['patches'], parm=(0, parm, '')), 'modinfo')
    assert str(err) == f'the built module has no bool tx_e2e parameter (modinfo: {parm.strip()!r})'


def test_modinfo_without_srcversion_is_refused(host):
    p = host()
    err, _run = run_fails(p, expected_calls(p, p['patches'], srcversion=(0, '\n', '')), 'modinfo')
    assert str(err) == 'the built module has no srcversion'


def test_modinfo_failure(host):
    p = host()
    said = (1, '', 'modinfo: ERROR: could not get modinfo from \'thunderbolt-net\': Exec format error\n')
    err, _run = run_fails(p, expected_calls(p, p['patches'], vermagic=said), 'modinfo')
    assert err.output == said[2].strip()


def test_sign_file_failure(host):
    headers(host.root / 'root', sign_file=True)
    key = str(write(host.root / 'mok/MOK.priv', 'key\n'))
    cert = str(write(host.root / 'mok/MOK.der', 'cert\n'))
    p = host(signing_key=key, signing_cert=cert)
    said = (1, '', 'At main.c:298:\n- SSL error:1E08010C:DECODER routines::unsupported\nsign-file: MOK.priv\n')
    err, _run = run_fails(p, expected_calls(p, p['patches'], sign=said), 'sign')
    assert str(err).startswith(f"sign-file failed (rc 1): {host.headers / 'scripts/sign-file'} sha256 {key} {cert} ")
    assert 'DECODER routines::unsupported' in err.output


def test_compiler_warnings_are_counted(host):
    p = host()
    warning = ('%s/thunderbolt.c: In function \'tbnet_open\':\n%s/thunderbolt.c:931:13: warning: unused variable '
               '\'hopid\' [-Wunused-variable]\n' % ((os.path.join(p['build_dir'], 'module'),) * 2))
    run = FakeRun(expected_calls(p, p['patches'], make=make_writes(module_path(p), err=warning)))
    assert tb.Build(p, run).run()['module']['compiler_warnings'] == 1

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The candidate ``thunderbolt_net``, built out of tree in a private directory: stage, patch, gate, build, check.

The steps, in order (``Build.run``); a failure raises ``BuildError`` with the step (``gate``) and its output:

1. preconditions, before anything is made: the headers of the target's kernel release (``<headers>/Makefile``), the
   source, the patches, checkpatch with ``spelling.txt`` and ``const_structs.checkpatch`` beside it (without
   ``spelling.txt`` checkpatch passes silently), the source's version against the headers' and the running
   kernel's, the signing key when unsigned modules would be refused;
2. stage only the driver (plus ``Makefile`` and checkpatch) from a directory or a ``linux-source`` tarball into
   ``<build_dir>/tree``, a fresh git repository with the distribution's text as its first commit;
3. gates: ``git apply --check``, ``git apply``, ``git diff --check``, ``checkpatch.pl --strict --no-tree``;
4. ``make -C <headers> M=<build_dir>/module modules`` (``CONFIG_MODULE_SRCVERSION_ALL=y``, so the module has a
   srcversion to verify after the load: Debian's config leaves it unset);
5. the vermagic must start with the TARGET's ``uname -r``; ``tx_e2e`` must be a bool parameter;
6. sign with ``<headers>/scripts/sign-file`` when a key is given; record sha256, srcversion and build id.

Commands run through ``run(argv, cwd=None) -> (rc, stdout, stderr)``, given by the caller (the module passes
``AnsibleModule.run_command``; unit tests pass a table of expected calls). Nothing here knows about Ansible.
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import tarfile
import zlib

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core, _tbnet_driver
from ansible_collections.inferlab.distributed.plugins.module_utils import _tbnet_source as source_rules

CHECKPATCH_FILES = ('checkpatch.pl', 'spelling.txt', 'const_structs.checkpatch')
GIT_IDENTITY = ['-c', 'user.name=inferlab', '-c', 'user.email=inferlab@invalid']
# Kbuild of the single-file layout: drivers/net/Makefile's two lines for it
SINGLE_KBUILD = 'obj-m := thunderbolt-net.o\nthunderbolt-net-y := thunderbolt.o\n'
_MAKE_VAR_RE = re.compile(r'^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=\s*(\S*)\s*$', re.M)
_INCLUDE_RE = re.compile(r'^include\s+(/\S+)\s*$', re.M)
_DEBIAN_VERSION_RE = re.compile(r'\bDebian (\d+\.\d+(?:\.\d+)?)')
# /proc/version_signature, Ubuntu only: "Ubuntu <abi>.<upload>-<flavour> <mainline>" ("Ubuntu 5.15.0-79.86-generic
# 5.15.111"); the mainline version is the one in the kernel's Makefile, which uname -r and uname -v do not show.
_UBUNTU_SIGNATURE_RE = re.compile(r'^Ubuntu \S+ (\d+\.\d+(?:\.\d+)?)$')


class BuildError(Exception):
    """A step refused or failed; ``gate`` names it and ``output`` is what the command said."""

    def __init__(self, msg, gate='precondition', output=''):
        super().__init__(msg)
        self.gate = gate
        self.output = output


# ---------------------------------------------------------------------------------------------------------------
# versions


def makefile_version(text):
    """``(version, include)`` from a kernel Makefile's text: ``'6.1.192'`` (EXTRAVERSION appended) or None, and the
    absolute path of its first ``include`` line or None (Debian's per-ABI headers Makefile is only that line)."""
    found = dict(_MAKE_VAR_RE.findall(text))
    include = _INCLUDE_RE.search(text)
    include = include.group(1) if include else None
    if not all(found.get(key, '').isdigit() for key in ('VERSION', 'PATCHLEVEL', 'SUBLEVEL')):
        return None, include
    version = '%s.%s.%s' % (found['VERSION'], found['PATCHLEVEL'], found['SUBLEVEL'])
    return version + found.get('EXTRAVERSION', ''), include


def tree_version(tree, depth=3):
    """The kernel version of a source or headers tree, following ``include`` lines; None when there is none."""
    path = os.path.join(tree, 'Makefile')
    for _level in range(depth):
        try:
            with open(path, encoding='utf-8', errors='replace') as handle:
                version, include = makefile_version(handle.read())
        except OSError:
            return None
        if version or not include:
            return version
        path = include
    return None


def running_upstream_version(kernel_version, version_signature=None):
    """The running kernel's upstream version, where its distribution says it: Debian in ``uname -v``
    (``/proc/sys/kernel/version``: ``#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-10-01)``), Ubuntu in
    ``/proc/version_signature`` (``Ubuntu 5.15.0-79.86-generic 5.15.111``); None when neither names one."""
    found = _UBUNTU_SIGNATURE_RE.match((version_signature or '').strip()) or _DEBIAN_VERSION_RE.search(
        kernel_version or '')
    if not found:
        return None
    version = found.group(1)
    return version + '.0' if version.count('.') == 1 else version  # Debian 6.6-1 is the Makefile's 6.6.0


def unsupported_kernel(kernel_version, version_signature=None):
    """Why the target's kernel cannot be matched with a source (None when it can, or when neither string is
    known): the candidate build supports Debian's and Ubuntu's kernels, whose upstream version it can read."""
    kernel_version = (kernel_version or '').strip()
    version_signature = (version_signature or '').strip()
    if version_signature:
        if _UBUNTU_SIGNATURE_RE.match(version_signature):
            return None
        return ('malformed /proc/version_signature on the target: %r, expected Ubuntu\'s "Ubuntu <abi>-<flavour> '
                '<X.Y.Z>" (target_version_signature)' % version_signature)
    if not kernel_version or _DEBIAN_VERSION_RE.search(kernel_version):
        return None
    if '-Ubuntu ' in kernel_version:
        return ('the target runs an Ubuntu kernel (uname -v %r) but its /proc/version_signature was not given '
                '(target_version_signature): its upstream version cannot be matched with the source' % kernel_version)
    return ('the target\'s kernel is neither Debian\'s nor Ubuntu\'s (uname -v %r, no /proc/version_signature): the '
            'candidate build supports those two, whose upstream version it can match with the source' % kernel_version)


def version_problems(source_version, headers_version, running_version, release):
    """Why the source does not match the target's kernel (empty when it does, as far as can be told)."""
    problems = []
    if not source_version:
        problems.append('the source has no top-level Makefile with VERSION, PATCHLEVEL and SUBLEVEL, so it cannot '
                        'be matched with the running kernel')
    if not headers_version:
        problems.append('the headers for %s have no Makefile with the kernel version' % release)
    if source_version and headers_version and source_version != headers_version:
        problems.append('the source is Linux %s but the headers for %s are %s: use the source of the running kernel '
                        '(tbnet_candidate_source)' % (source_version, release, headers_version))
    if source_version and running_version and source_version != running_version:
        problems.append('the source is Linux %s but the running kernel %s is %s (uname -v, or Ubuntu\'s '
                        '/proc/version_signature)' % (source_version, release, running_version))
    return problems


def vermagic_problem(vermagic, release):
    """None when the module's vermagic is for ``release`` (its first word), else why not."""
    first = (vermagic or '').split()
    if not first or first[0] != release:
        return 'the built module is for %r (vermagic %r), not for the target kernel %s (uname -r)' % (
            first[0] if first else None, vermagic, release)
    return None


# ---------------------------------------------------------------------------------------------------------------
# staging


def _wanted(relative, layout=None):
    """Whether a tree-relative path is staged: the Makefile, checkpatch's files, the driver of the layout."""
    if relative == 'Makefile' or relative in ['scripts/' + name for name in CHECKPATCH_FILES]:
        return True
    if layout == 'split' or layout is None:
        if relative.startswith('drivers/net/thunderbolt/') and relative.count('/') == 3:
            return True
    return (layout == 'single' or layout is None) and relative == source_rules.LAYOUTS['single']


def _layout_of(paths):
    try:
        return source_rules.source_layout([p for p in paths if p in source_rules.LAYOUTS.values()])
    except source_rules.SourceError as exc:
        raise BuildError(str(exc)) from None


def describe(tree, gate='stage'):
    """``_tbnet_source.describe_tree`` with its refusal as a BuildError of ``gate``."""
    try:
        return source_rules.describe_tree(tree)
    except (source_rules.SourceError, OSError) as exc:
        raise BuildError('%s: %s' % (tree, exc), gate=gate) from None


def stage_directory(source, dest):
    """Copy what the build needs from a kernel tree (or a git checkout of one) into ``dest``."""
    driver_dir = os.path.join(source, 'drivers', 'net')
    try:
        names = os.listdir(driver_dir)
    except OSError as exc:
        raise BuildError('the source %s has no drivers/net: %s (tbnet_candidate_source must be a kernel tree or the '
                         'linux-source tarball)' % (source, exc.strerror)) from None
    listed = ['drivers/net/' + n for n in names]
    if os.path.isdir(os.path.join(driver_dir, 'thunderbolt')):
        listed += ['drivers/net/thunderbolt/' + n for n in os.listdir(os.path.join(driver_dir, 'thunderbolt'))]
    layout = _layout_of(listed)
    wanted = [p for p in listed + ['Makefile'] + ['scripts/' + n for n in CHECKPATCH_FILES] if _wanted(p, layout)]
    for relative in wanted:
        src = os.path.join(source, relative)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, relative)), exist_ok=True)
            shutil.copyfile(src, os.path.join(dest, relative))
    return layout


def stage_tarball(tarball, dest):
    """Extract what the build needs from a ``linux-source-X.Y.tar.*`` (one top directory, stripped)."""
    try:
        with tarfile.open(tarball) as archive:
            chosen = []
            for member in archive:
                parts = member.name.split('/', 1)
                if len(parts) == 2 and member.isfile() and _wanted(parts[1]):
                    chosen.append((parts[1], member))
            layout = _layout_of([relative for relative, _m in chosen])
            for relative, member in chosen:
                if not _wanted(relative, layout):
                    continue
                target = os.path.join(dest, relative)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with archive.extractfile(member) as data, open(target, 'wb') as out:
                    shutil.copyfileobj(data, out)
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
        raise BuildError('cannot read the source tarball %s: %s' % (tarball, exc or type(exc).__name__)) from None
    return layout


def _checkpatch_missing(scripts):
    return [name for name in CHECKPATCH_FILES if not os.path.isfile(os.path.join(scripts, name))
            or not os.path.getsize(os.path.join(scripts, name))]


# ---------------------------------------------------------------------------------------------------------------
# the build


class Build:
    """One build of the candidate; ``params``: source, patches (list, may be empty: the role's patch for the
    detected layout and history from ``patch_dir``), patch_dir, headers_dir, build_dir, target_kernel_release,
    target_kernel_version, target_version_signature, signing_key, signing_cert, require_signature."""

    def __init__(self, params, run):
        self.p = params
        self.run_command = run
        self.tree = os.path.join(params['build_dir'], 'tree')
        self.out = os.path.join(params['build_dir'], 'module')

    def _run(self, argv, gate, cwd=None, what=None, both=False):
        """stdout of the command (with ``both``, stdout then stderr: gcc warns on stderr)."""
        rc, out, err = self.run_command(argv, cwd=cwd)
        if rc != 0:
            raise BuildError('%s failed (rc %d): %s' % (what or gate, rc, ' '.join(argv)), gate=gate,
                             output=(out + err).strip())
        return out + err if both else out

    # 1. preconditions -------------------------------------------------------------------------------------------
    def preconditions(self):
        """Everything checked before anything is made; returns what was found."""
        p = self.p
        release = p['target_kernel_release']
        if not os.path.isfile(os.path.join(p['headers_dir'], 'Makefile')):
            raise BuildError('no kernel headers for %s at %s: install linux-headers-%s on the build host (or set '
                             'tbnet_candidate_headers_dir)' % (release, p['headers_dir'], release))
        if not os.path.exists(p['source']):
            raise BuildError('the kernel source %s does not exist (tbnet_candidate_source: a kernel tree, a git '
                             'checkout of one, or the linux-source tarball)' % p['source'])
        for patch in p['patches']:
            if not os.path.isfile(patch):
                raise BuildError('the patch %s does not exist (tbnet_candidate_patches)' % patch)
        if p['require_signature'] and not (p['signing_key'] and p['signing_cert']):
            raise BuildError('the target refuses unsigned modules (Secure Boot lockdown or module.sig_enforce) and no '
                             'signing key is given: set tbnet_candidate_signing_key and tbnet_candidate_signing_cert '
                             'to a key enrolled as a MOK (mokutil --import), or disable Secure Boot on the target')
        if p['signing_key']:
            for path in (p['signing_key'], p['signing_cert'], os.path.join(p['headers_dir'], 'scripts', 'sign-file')):
                if not path or not os.path.isfile(path):
                    raise BuildError('signing needs %s, which is missing' % path)
        system = _tbnet_driver.system_module_dir(p['build_dir'])
        if system:
            raise BuildError('the build directory %s is under %s: the candidate is never installed where the system '
                             'keeps its modules' % (p['build_dir'], system))
        unsupported = unsupported_kernel(p['target_kernel_version'], p.get('target_version_signature'))
        if unsupported:
            raise BuildError(unsupported)
        found = {'source_kind': 'directory' if os.path.isdir(p['source']) else 'tarball',
                 'headers_version': tree_version(p['headers_dir']),
                 'running_version': running_upstream_version(p['target_kernel_version'],
                                                             p.get('target_version_signature'))}
        if found['source_kind'] == 'directory':
            self.check_source(found, p['source'])  # a tarball is checked once staged (reading it takes a while)
        return found

    def check_source(self, found, tree):
        """The source's version against the headers and the running kernel, and checkpatch's files."""
        found['source_version'] = tree_version(tree)
        problems = version_problems(found['source_version'], found['headers_version'], found['running_version'],
                                    self.p['target_kernel_release'])
        if problems:
            raise BuildError('; '.join(problems))
        missing = _checkpatch_missing(os.path.join(tree, 'scripts'))
        if missing:
            raise BuildError('refusing to run checkpatch: %s missing from the source\'s scripts/ (without '
                             'spelling.txt checkpatch passes silently)' % ', '.join(missing), gate='checkpatch')

    # 2. staging -------------------------------------------------------------------------------------------------
    def stage(self, found):
        os.makedirs(self.tree)
        if found['source_kind'] == 'directory':
            layout = stage_directory(self.p['source'], self.tree)
        else:
            layout = stage_tarball(self.p['source'], self.tree)
        if found['source_kind'] == 'tarball':
            self.check_source(found, self.tree)
        described = describe(self.tree)
        if described['history'] == 'patched':
            raise BuildError('the source already has the tx_e2e parameter: give the unpatched distribution source')
        found.update(layout=layout, history=described['history'], driver=described['driver'])
        patches = self.p['patches'] or [os.path.join(self.p['patch_dir'], described['patch'])]
        if not os.path.isfile(patches[0]):
            raise BuildError('no patch for the %s layout with the %s history: %s is missing' % (
                layout, described['history'], patches[0]))
        found['patches'] = [{'path': path, 'sha256': _ledger_core.sha256_file(path)} for path in patches]
        self._run(['git', 'init', '-q', self.tree], 'stage', what='git init')
        self._run(['git'] + GIT_IDENTITY + ['-C', self.tree, 'add', '-A'], 'stage', what='git add')
        self._run(['git'] + GIT_IDENTITY + ['-C', self.tree, 'commit', '-q', '-m', 'distribution source'], 'stage',
                  what='git commit')
        return patches

    # 3. gates ---------------------------------------------------------------------------------------------------
    def gates(self, patches):
        results = []
        for patch in patches:
            self._run(['git', '-C', self.tree, 'apply', '--check', patch], 'git apply --check')
            self._run(['git', '-C', self.tree, 'apply', patch], 'git apply')
            results.append({'patch': patch, 'git_apply_check': 'passed'})
        self._run(['git', '-C', self.tree, 'diff', '--check'], 'git diff --check')
        scripts = os.path.join(self.tree, 'scripts')
        for result in results:
            out = self._run(['perl', os.path.join(scripts, 'checkpatch.pl'), '--strict', '--no-tree',
                             result['patch']], 'checkpatch')
            result['checkpatch'] = out.strip().splitlines()[-1:] or ['']
            result['checkpatch'] = result['checkpatch'][0]
        if describe(self.tree, gate='git apply')['history'] != 'patched':
            raise BuildError('the patched tree does not read as the candidate (no tx_e2e parameter used by the TX '
                             'ring)', gate='git apply')
        return {'git_diff_check': 'passed', 'patches': results}

    # 4-6. build, check, sign -------------------------------------------------------------------------------------
    def build(self, layout):
        os.makedirs(self.out)
        driver_dir = os.path.join(self.tree, os.path.dirname(source_rules.LAYOUTS[layout]))
        if layout == 'split':
            for name in os.listdir(driver_dir):
                shutil.copyfile(os.path.join(driver_dir, name), os.path.join(self.out, name))
        else:
            shutil.copyfile(os.path.join(self.tree, source_rules.LAYOUTS['single']),
                            os.path.join(self.out, 'thunderbolt.c'))
            with open(os.path.join(self.out, 'Kbuild'), 'w') as handle:
                handle.write(SINGLE_KBUILD)
        log = self._run(['make', '-C', self.p['headers_dir'], 'M=' + self.out, 'CONFIG_USB4_NET=m',
                         'CONFIG_MODULE_SRCVERSION_ALL=y', 'modules'], 'build', what='make modules', both=True)
        built = sorted(name for name in os.listdir(self.out) if name.endswith('.ko'))
        if len(built) != 1:
            raise BuildError('make succeeded but left %s in %s, not one module' % (built or 'no .ko', self.out),
                             gate='build', output=log)
        ko = os.path.join(self.out, built[0])  # thunderbolt-net.ko (6.1's Makefile) or thunderbolt_net.ko (split)
        modinfo = {field: self._run(['modinfo', '-F', field, ko], 'modinfo').strip()
                   for field in ('vermagic', 'srcversion', 'parm')}
        problem = vermagic_problem(modinfo['vermagic'], self.p['target_kernel_release'])
        if problem:
            raise BuildError(problem, gate='vermagic')
        if not re.search(r'^%s:.*\(bool\)$' % source_rules.PATCH_PARAM, modinfo['parm'], re.M):
            raise BuildError('the built module has no bool tx_e2e parameter (modinfo: %r)' % modinfo['parm'],
                             gate='modinfo')
        if not modinfo['srcversion']:
            raise BuildError('the built module has no srcversion', gate='modinfo')
        signed = False
        if self.p['signing_key']:
            self._run([os.path.join(self.p['headers_dir'], 'scripts', 'sign-file'), 'sha256', self.p['signing_key'],
                       self.p['signing_cert'], ko], 'sign', what='sign-file')
            signed = True
        return {'module_path': ko, 'sha256': _ledger_core.sha256_file(ko), 'vermagic': modinfo['vermagic'],
                'srcversion': modinfo['srcversion'], 'parm': modinfo['parm'].splitlines(), 'signed': signed,
                'compiler_warnings': len(re.findall(r'warning:', log))}

    def run(self):
        """Stage, gate, build; the build directory must exist (made and recorded by the caller)."""
        found = self.preconditions()
        patches = self.stage(found)
        gates = self.gates(patches)
        module = self.build(found['layout'])
        return {'source': dict(found, path=self.p['source']), 'gates': gates, 'module': module,
                'target_kernel_release': self.p['target_kernel_release'], 'headers_dir': self.p['headers_dir']}

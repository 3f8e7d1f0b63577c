# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The proof that no kernel change persisted: a snapshot of every place a module change could survive a reboot.

inferlab never persists a kernel change: nothing goes under /lib/modules, into the initramfs, /etc/modprobe.d or
/etc/modules-load.d. ``snapshot`` hashes those places before and after a candidate-driver experiment and
``compare`` (``_persistence_compare``) lists every difference, one sentence each; the restore fails when the list is
not empty. The ``persistence_snapshot`` module and the ``persistence_differences`` filter wrap these two.

Snapshot format ``inferlab.persistence/1``::

    {"format": "inferlab.persistence/1", "kernel_release": "6.1.0-57-amd64",
     "files": {"etc/modprobe.d": {REL: VALUE}, "etc/modules-load.d": {REL: VALUE}, "etc/modules": VALUE|null,
               "boot": {"initrd.img-6.1.0-57-amd64": VALUE}},
     "module_tree": {"path": "lib/modules/6.1.0-57-amd64", "count": N, "sha256": HEX|null, "extra": [REL]},
     "dkms": {"present": bool, "count": N, "sha256": HEX|null},
     "taint": int|null,
     "problems": [str]}

- A VALUE is the sha256 of a regular file (hashed streaming, so large initramfs images are fine), ``-> TARGET``
  for a symlink (recorded, never followed), ``(directory)``, ``(fifo)``, ``(socket)``, ``(device)`` for what is
  not a regular file, or ``(unreadable)``. Anything but a hash or a symlink is also named in ``problems``.
- The configuration directories are walked recursively; REL is relative to the directory. The ``boot`` group holds
  the files of the boot directory (not recursive) that match the initramfs globs; its key is the boot directory
  relative to the root (``boot`` by default).
- ``module_tree`` and ``dkms`` (``var/lib/dkms``) hash their file LIST, not the contents: one line
  ``relpath<TAB>size<TAB>mode`` per entry (mode in octal with the file type bits), sorted, joined with newlines.
  A symlink has ``-> TARGET`` in place of the size and a directory ``-`` (directory sizes change with the file
  system's bookkeeping). ``count`` counts what is not a directory. ``extra`` names everything under ``updates/``
  and ``extra/`` (where DKMS and out-of-tree installs put modules) and every module file (``.ko``, ``.ko.gz``,
  ``.ko.xz``, ``.ko.zst``) that ``modules.dep`` does not list.
- ``taint`` is ``/proc/sys/kernel/tainted``; ``_persistence_compare``'s ``taint_flags`` and ``taint_note`` decode
  it after the kernel's ``Documentation/admin-guide/tainted-kernels.rst``.
- ``problems`` names, relative to the root, what could not be read: a snapshot never fails on a bad file.

Every path is read under ``root`` (a fixture tree in tests and the lab), and symlinks on the way to a directory
(``lib -> usr/lib`` on a merged-/usr system) are resolved inside it: an absolute target starts again at the root
and ``..`` stops at it, so nothing outside the root is ever read.

Standard library only, Python 3.8+: it runs on the managed hosts.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import posixpath
import stat

FORMAT = 'inferlab.persistence/1'
CONFIG_DIRS = ('etc/modprobe.d', 'etc/modules-load.d')
MODULES_FILE = 'etc/modules'
MODULES_DIR = 'lib/modules'
DKMS_DIR = 'var/lib/dkms'
DEFAULT_BOOT_DIR = 'boot'
DEFAULT_INITRAMFS_GLOBS = ('initrd.img-*', 'initramfs-*')
EXTRA_DIRS = ('updates', 'extra')
MODULE_SUFFIXES = ('.ko', '.ko.gz', '.ko.xz', '.ko.zst')
CHUNK_BYTES = 1024 * 1024
MAX_SYMLINKS = 40


class PersistenceError(ValueError):
    """A request or a snapshot that does not have the documented shape."""


class _Unresolvable(Exception):
    """A path on the way to a directory that cannot be followed; the message says why."""


def _text(name):
    """A file name as text that JSON can carry: undecodable bytes become backslash escapes."""
    return name.encode('utf-8', 'surrogateescape').decode('utf-8', 'backslashreplace')


def _reason(err):
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err)


def _join(*parts):
    return '/'.join(part for part in parts if part)


def _relative(path, what):
    """A path relative to the root, without ``.``, ``..`` or a leading slash; ``/boot`` is ``boot``."""
    if not isinstance(path, str) or not path.strip('/'):
        raise PersistenceError('%s must name a directory below the root, got %r' % (what, path))
    parts = [part for part in path.split('/') if part not in ('', '.')]
    if '..' in parts:
        raise PersistenceError('%s must stay below the root (no ..), got %r' % (what, path))
    return '/'.join(parts)


def _kind(mode):
    if stat.S_ISDIR(mode):
        return 'directory'
    if stat.S_ISFIFO(mode):
        return 'fifo'
    if stat.S_ISSOCK(mode):
        return 'socket'
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return 'device'
    return 'special file'


class _Reader:
    """Reads below one root and collects what it cannot read in ``problems``."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.problems = []

    def problem(self, rel, what):
        self.problems.append('%s: %s' % (_text(rel), what))

    def resolve(self, rel):
        """The host path of ``rel`` with every symlink resolved inside the root; None when something is missing."""
        todo = [part for part in rel.split('/') if part not in ('', '.')]
        todo.reverse()
        done = []
        hops = 0
        while todo:
            name = todo.pop()
            if name == '..':
                if done:
                    done.pop()
                continue
            path = os.path.join(self.root, *(done + [name]))
            try:
                info = os.lstat(path)
            except OSError as err:
                if err.errno in (errno.ENOENT, errno.ENOTDIR):
                    return None
                where = _text(_join(*(done + [name])))
                raise _Unresolvable('cannot look at %s (%s)' % (where, _reason(err))) from err
            if stat.S_ISLNK(info.st_mode):
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise _Unresolvable('more than %d symlinks on the way (a loop?)' % MAX_SYMLINKS)
                try:
                    target = os.readlink(path)
                except OSError as err:
                    where = _text(_join(*(done + [name])))
                    raise _Unresolvable('cannot read the symlink %s (%s)' % (where, _reason(err))) from err
                if target.startswith('/'):
                    done = []
                todo.extend(reversed([part for part in target.split('/') if part not in ('', '.')]))
                continue
            if todo and not stat.S_ISDIR(info.st_mode):
                return None
            done.append(name)
        return os.path.join(self.root, *done)

    def directory(self, rel, missing_is_problem):
        """The host path of directory ``rel``, or None (missing, or not a directory: named in ``problems``)."""
        try:
            path = self.resolve(rel)
        except _Unresolvable as err:
            self.problem(rel, str(err))
            return None
        if path is None:
            if missing_is_problem:
                self.problem(rel, 'no such directory')
            return None
        try:
            info = os.stat(path)
        except OSError as err:
            if err.errno == errno.ENOENT:
                if missing_is_problem:
                    self.problem(rel, 'no such directory')
            else:
                self.problem(rel, 'cannot look at it (%s)' % _reason(err))
            return None
        if not stat.S_ISDIR(info.st_mode):
            self.problem(rel, 'a %s, not a directory' % ('regular file' if stat.S_ISREG(info.st_mode)
                                                         else _kind(info.st_mode)))
            return None
        return path

    def value(self, path, rel, info=None):
        """What a snapshot records for the entry at host path ``path``; None when it does not exist."""
        try:
            if info is None:
                info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                return '-> ' + _text(os.readlink(path))
        except OSError as err:
            if err.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            self.problem(rel, 'unreadable (%s)' % _reason(err))
            return '(unreadable)'
        if not stat.S_ISREG(info.st_mode):
            kind = _kind(info.st_mode)
            self.problem(rel, 'a %s, not a file' % kind)
            return '(%s)' % kind
        return self.sha256(path, rel)

    def sha256(self, path, rel):
        flags = os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_CLOEXEC', 0)
        digest = hashlib.sha256()
        try:
            fd = os.open(path, flags)
        except OSError as err:
            self.problem(rel, 'unreadable (%s)' % _reason(err))
            return '(unreadable)'
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                kind = _kind(info.st_mode)
                self.problem(rel, 'a %s, not a file' % kind)
                return '(%s)' % kind
            while True:
                chunk = os.read(fd, CHUNK_BYTES)
                if not chunk:
                    break
                digest.update(chunk)
        except OSError as err:
            self.problem(rel, 'unreadable (%s)' % _reason(err))
            return '(unreadable)'
        finally:
            os.close(fd)
        return digest.hexdigest()

    def walk(self, top, top_rel):
        """Every entry below directory ``top`` as ``(rel, host path, lstat)``, sorted; symlinks are not entered."""
        entries = []
        pending = ['']
        while pending:
            sub = pending.pop()
            path = os.path.join(top, sub) if sub else top
            try:
                with os.scandir(path) as listing:
                    found = sorted(listing, key=lambda entry: entry.name)
            except OSError as err:
                self.problem(_join(top_rel, sub), 'cannot list it (%s)' % _reason(err))
                continue
            for entry in found:
                rel = _join(sub, entry.name)
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError as err:
                    self.problem(_join(top_rel, rel), 'cannot look at it (%s)' % _reason(err))
                    continue
                entries.append((rel, entry.path, info))
                if stat.S_ISDIR(info.st_mode):
                    pending.append(rel)
        entries.sort(key=lambda item: item[0])
        return entries

    def file_map(self, rel_dir, missing_is_problem=False):
        """``{REL: VALUE}`` for everything but directories below ``rel_dir`` (recursively)."""
        top = self.directory(rel_dir, missing_is_problem)
        if top is None:
            return {}
        files = {}
        for rel, path, info in self.walk(top, rel_dir):
            if not stat.S_ISDIR(info.st_mode):
                files[_text(rel)] = self.value(path, _join(rel_dir, rel), info)
        return files

    def single_file(self, rel):
        """VALUE of the file ``rel`` (a symlink itself is recorded, not followed), or None when it is absent."""
        parent, name = posixpath.split(rel)
        try:
            top = self.resolve(parent) if parent else self.root
        except _Unresolvable as err:
            self.problem(rel, str(err))
            return '(unreadable)'
        if top is None:
            return None
        return self.value(os.path.join(top, name), rel)

    def boot_files(self, rel_dir, globs):
        top = self.directory(rel_dir, missing_is_problem=True)
        if top is None:
            return {}
        try:
            with os.scandir(top) as listing:
                found = sorted(listing, key=lambda entry: entry.name)
        except OSError as err:
            self.problem(rel_dir, 'cannot list it (%s)' % _reason(err))
            return {}
        files = {}
        for entry in found:
            if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in globs):
                files[_text(entry.name)] = self.value(entry.path, _join(rel_dir, entry.name))
        return files

    def listing_hash(self, top, top_rel):
        """``(count, sha256, entries)`` of the file list below ``top`` (see the module docstring)."""
        entries = self.walk(top, top_rel)
        lines = []
        count = 0
        for rel, path, info in entries:
            if stat.S_ISDIR(info.st_mode):
                size = '-'
            elif stat.S_ISLNK(info.st_mode):
                count += 1
                try:
                    size = '-> ' + _text(os.readlink(path))
                except OSError as err:
                    self.problem(_join(top_rel, rel), 'cannot read the symlink (%s)' % _reason(err))
                    size = '(unreadable)'
            else:
                count += 1
                size = str(info.st_size)
            lines.append('%s\t%s\t%o' % (_text(rel), size, info.st_mode))
        digest = hashlib.sha256('\n'.join(lines).encode('utf-8', 'surrogateescape')).hexdigest()
        return count, digest, entries

    def modules_dep(self, tree, tree_rel, kernel_release):
        """The module paths ``modules.dep`` lists, relative to the tree; None when it cannot be read."""
        rel = _join(tree_rel, 'modules.dep')
        path = os.path.join(tree, 'modules.dep')
        try:
            with open(path, 'rb') as handle:
                text = handle.read().decode('utf-8', 'surrogateescape')
        except OSError as err:
            what = 'missing' if err.errno == errno.ENOENT else 'unreadable (%s)' % _reason(err)
            self.problem(rel, '%s, so modules it does not list are not looked for' % what)
            return None
        absolute_prefix = '/%s/%s/' % (MODULES_DIR, kernel_release)
        listed = set()
        for line in text.splitlines():
            name, sep, _deps = line.partition(':')
            name = name.strip()
            if not sep or not name:
                continue
            if name.startswith(absolute_prefix):
                name = name[len(absolute_prefix):]
            listed.add(name)
        return listed

    def module_tree(self, kernel_release):
        tree_rel = _join(MODULES_DIR, kernel_release)
        result = {'path': tree_rel, 'count': 0, 'sha256': None, 'extra': []}
        tree = self.directory(tree_rel, missing_is_problem=True)
        if tree is None:
            return result
        count, digest, entries = self.listing_hash(tree, tree_rel)
        listed = self.modules_dep(tree, tree_rel, kernel_release)
        extra = []
        for rel, _path, info in entries:
            if stat.S_ISDIR(info.st_mode):
                continue
            under_extra_dir = rel.split('/', 1)[0] in EXTRA_DIRS
            unlisted_module = (listed is not None and rel.endswith(MODULE_SUFFIXES) and rel not in listed)
            if under_extra_dir or unlisted_module:
                extra.append(_text(rel))
        result.update(count=count, sha256=digest, extra=extra)
        return result

    def dkms(self):
        try:
            path = self.resolve(DKMS_DIR)
        except _Unresolvable as err:
            self.problem(DKMS_DIR, str(err))
            return {'present': False, 'count': 0, 'sha256': None}
        if path is None:
            return {'present': False, 'count': 0, 'sha256': None}
        top = self.directory(DKMS_DIR, missing_is_problem=True)
        if top is None:
            return {'present': True, 'count': 0, 'sha256': None}
        count, digest, _entries = self.listing_hash(top, DKMS_DIR)
        return {'present': True, 'count': count, 'sha256': digest}

    def taint(self, procfs_root):
        if procfs_root is None:
            rel = 'proc/sys/kernel/tainted'
            try:
                path = self.resolve(rel)
            except _Unresolvable as err:
                self.problem(rel, str(err))
                return None
        else:
            rel = os.path.join(procfs_root, 'sys/kernel/tainted')
            path = rel
        if path is None:
            self.problem(rel, 'missing, so the kernel taint is not recorded')
            return None
        try:
            with open(path, 'rb') as handle:
                text = handle.read(64).decode('ascii', 'replace').strip()
        except OSError as err:
            what = 'missing' if err.errno == errno.ENOENT else 'unreadable (%s)' % _reason(err)
            self.problem(rel, '%s, so the kernel taint is not recorded' % what)
            return None
        if not text.isdigit():
            self.problem(rel, 'malformed %r (expected a decimal integer)' % text)
            return None
        return int(text)


def running_kernel_release(procfs_root):
    """``sys/kernel/osrelease`` below ``procfs_root`` when readable, else ``os.uname().release``."""
    try:
        with open(os.path.join(procfs_root, 'sys/kernel/osrelease'), encoding='ascii', errors='replace') as handle:
            release = handle.read().strip()
    except OSError:
        release = ''
    return release or os.uname().release


def snapshot(root='/', kernel_release=None, boot_dir=DEFAULT_BOOT_DIR, initramfs_globs=DEFAULT_INITRAMFS_GLOBS,
             procfs_root=None):
    """The persistence snapshot of the system below ``root`` (format in the module docstring).

    ``kernel_release`` names ``lib/modules/<release>``; by default the running kernel's, read from
    ``sys/kernel/osrelease`` under ``procfs_root`` (default ``<root>/proc``) or else ``os.uname()``.
    ``boot_dir`` is relative to the root. Raises ``PersistenceError`` for a bad argument only; what cannot be read
    is named in ``problems``.
    """
    if not isinstance(root, str) or not root:
        raise PersistenceError('root must be a directory path, got %r' % (root,))
    if not os.path.isdir(root):
        raise PersistenceError('root %s is not a directory' % root)
    if kernel_release is None:
        kernel_release = running_kernel_release(procfs_root or os.path.join(root, 'proc'))
    if (not isinstance(kernel_release, str) or not kernel_release or '/' in kernel_release
            or kernel_release in ('.', '..')):
        raise PersistenceError('kernel_release must be a release like 6.1.0-57-amd64, got %r' % (kernel_release,))
    boot_rel = _relative(boot_dir, 'boot_dir')
    globs = list(initramfs_globs or [])
    if not all(isinstance(pattern, str) and pattern and '/' not in pattern for pattern in globs):
        raise PersistenceError('initramfs_globs must be file name patterns without /, got %r' % (globs,))
    reader = _Reader(root)
    files = {}
    for rel in CONFIG_DIRS:
        files[rel] = reader.file_map(rel)
    files[MODULES_FILE] = reader.single_file(MODULES_FILE)
    files[boot_rel] = reader.boot_files(boot_rel, globs)
    return {
        'format': FORMAT,
        'kernel_release': kernel_release,
        'files': files,
        'module_tree': reader.module_tree(kernel_release),
        'dkms': reader.dkms(),
        'taint': reader.taint(procfs_root),
        'problems': reader.problems,
    }

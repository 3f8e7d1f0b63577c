# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The proof that no kernel change persisted: a snapshot of every place a module change could survive a reboot.

inferlab never persists a kernel change: nothing goes under /lib/modules, into the initramfs, /etc/modprobe.d or
/etc/modules-load.d. ``snapshot`` hashes those places before and after a candidate-driver experiment and
``compare`` lists every difference, one sentence each; the restore fails when the list is not empty. The
``persistence_snapshot`` module and the ``persistence_differences`` filter wrap these two.

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
- ``taint`` is ``/proc/sys/kernel/tainted``; ``taint_flags`` and ``taint_note`` decode it after the kernel's
  ``Documentation/admin-guide/tainted-kernels.rst``.
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
import re
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


# ---------------------------------------------------------------------------------------------------------------
# comparison


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

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One injectable reader for sysfs and procfs files.

Modeled on ansible-core's ``module_utils/facts/utils.py`` ``get_file_content`` and ansible.posix ``mount.py``'s
``get_linux_mounts(module, mntinfo_file=...)``: every path is taken relative to a root (``sysfs_root`` /
``procfs_root``), so unit tests and the embedded lab point it at a fixture tree.

Two differences from ``get_file_content``, on purpose:

- only a *missing* file gives the default. A file that exists but cannot be read raises ``SysfsReadError``
  naming the path, so a permission problem is never mistaken for "feature absent".
- an empty file reads as ``''``, not as the default: an empty ``taint`` file means "not tainted", which is a fact.

Values that do not parse raise ``MalformedValueError`` with the path, the bad value and what was expected; modules
turn that into ``fail_json(msg=str(err))``.
"""

from __future__ import annotations

import errno
import os
import re

_MISSING_ERRNOS = (errno.ENOENT, errno.ENOTDIR)


class SysfsError(Exception):
    """Base class of the errors raised by the readers in this file."""


class SysfsReadError(SysfsError):
    """A file exists but could not be read."""

    def __init__(self, path, error):
        self.path = path
        self.error = error
        reason = getattr(error, 'strerror', None) or str(error)
        super().__init__(f"cannot read {path}: {reason}")


class MalformedValueError(SysfsError):
    """A file holds a value that does not parse.

    ``str(err)`` reads like ``malformed rx_speed in /sys/.../rx_speed: 'fast' (expected like '20.0 Gb/s')``.
    """

    def __init__(self, name, path, value, expected):
        self.name = name
        self.path = path
        self.value = value
        self.expected = expected
        super().__init__(f"malformed {name} in {path}: {value!r} ({expected})")


def read_file(path, default=None, strip=True):
    """Return the text of ``path`` (stripped unless ``strip=False``), or ``default`` when it does not exist."""
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            data = handle.read()
    except OSError as err:
        if err.errno in _MISSING_ERRNOS:
            return default
        raise SysfsReadError(path, err) from err
    return data.strip() if strip else data


def parse_int(text, path, name=None, base=10, minimum=None):
    """Parse ``text`` read from ``path`` as an integer, or raise ``MalformedValueError`` naming both.

    ``base=0`` accepts ``0x`` prefixes, ``base=16`` plain or ``0x``-prefixed hex.
    """
    name = name or os.path.basename(path)
    kind = {10: 'a decimal integer', 16: 'a hexadecimal integer like 0x0000000f'}.get(base, 'an integer')
    try:
        value = int(text.strip(), base)
    except (AttributeError, ValueError):
        raise MalformedValueError(name, path, text, f"expected {kind}") from None
    if minimum is not None and value < minimum:
        raise MalformedValueError(name, path, text, f"expected {kind} >= {minimum}")
    return value


_SPEED_RE = re.compile(r'^(\d+(?:\.\d+)?)\s*Gb/s$')


def parse_gbps(text, path, name=None):
    """Parse a Thunderbolt speed like ``20.0 Gb/s`` into a float (Gb/s)."""
    name = name or os.path.basename(path)
    match = _SPEED_RE.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise MalformedValueError(name, path, text, "expected like '20.0 Gb/s'")
    return float(match.group(1))


class SysfsReader:
    """Reads files relative to a root directory (``/sys``, ``/proc``, or a fixture tree)."""

    def __init__(self, root):
        self.root = os.path.abspath(root)

    def path(self, *parts):
        """Absolute path of ``parts`` under the root (leading slashes in ``parts`` are ignored)."""
        return os.path.join(self.root, *(p.lstrip('/') for p in parts))

    def exists(self, *parts):
        return os.path.exists(self.path(*parts))

    def isdir(self, *parts):
        return os.path.isdir(self.path(*parts))

    def listdir(self, *parts):
        """Sorted entries of a directory; ``[]`` when it does not exist."""
        path = self.path(*parts)
        try:
            return sorted(os.listdir(path))
        except OSError as err:
            if err.errno in _MISSING_ERRNOS:
                return []
            raise SysfsReadError(path, err) from err

    def realpath(self, *parts):
        """Resolved path. Symlinks in fixture trees are relative, so they resolve inside the root."""
        return os.path.realpath(self.path(*parts))

    def read(self, *parts, default=None, strip=True):
        return read_file(self.path(*parts), default=default, strip=strip)

    def read_int(self, *parts, default=None, base=10, minimum=None, name=None):
        """Integer in a file; ``default`` when the file is missing; ``MalformedValueError`` when it does not parse."""
        path = self.path(*parts)
        text = read_file(path)
        if text is None:
            return default
        return parse_int(text, path, name=name, base=base, minimum=minimum)

    def read_gbps(self, *parts, default=None, name=None):
        """Speed like ``20.0 Gb/s`` as a float; ``default`` when missing; ``MalformedValueError`` when malformed."""
        path = self.path(*parts)
        text = read_file(path)
        if text is None:
            return default
        return parse_gbps(text, path, name=name)

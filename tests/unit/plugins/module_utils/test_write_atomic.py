# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the one atomic file write on a host (``_ledger_base.write_atomic``), which the gateway swap, the
process managers' env files, the host-side install (``host_files``) and the NVML snapshot use."""

import os
import stat

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base as base


def test_write_atomic_keeps_the_mode(tmp_path):
    path = tmp_path / "upstream.conf"
    path.write_bytes(b"old")
    os.chmod(path, 0o640)
    base.write_atomic(str(path), b"new \xff bytes")
    assert path.read_bytes() == b"new \xff bytes"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    base.write_atomic(str(path), b"again", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.conf"
    base.write_atomic(str(fresh), b"x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.conf", "upstream.conf"]


def test_write_atomic_replaces_by_a_rename(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"old")
    inode = path.stat().st_ino
    base.write_atomic(str(path), b"new")
    assert path.stat().st_ino != inode


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "file"
    path.write_bytes(b"old")

    def refuse(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(OSError, match="No space left on device"):
        base.write_atomic(str(path), b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file"]

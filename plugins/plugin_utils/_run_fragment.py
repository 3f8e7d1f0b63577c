# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write one JSON fragment into the run directory on the controller (the action plugin fragment's work)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import tempfile

# a directory inside the run directory: relative, parts of letters, digits, '.', '_', '-', none of them '.' or '..'
_PART = re.compile(r"^[A-Za-z0-9_.-]+$")


class FragmentError(ValueError):
    """An argument that names no place inside the run directory, or content that is not a JSON object."""


def fragment_path(run_dir, fragment_dir, name):
    """The fragment's path, <run_dir>/<fragment_dir>/<name>.json, refusing anything that leaves the run directory."""
    return run_file_path(run_dir, fragment_dir, name, ".json")


def run_file_path(run_dir, file_dir, name, suffix):
    """<run_dir>/<file_dir>/<name><suffix>, refusing anything that leaves the run directory."""
    if not run_dir:
        raise FragmentError(
            "writing a fragment needs the run directory (inferlab_run_dir, found nothing): run through "
            "`inferlab run`, or pass -e inferlab_run_dir=DIR to ansible-playbook")
    parts = file_dir.split("/") if isinstance(file_dir, str) else []
    if not parts or any(not _PART.match(p) or p in (".", "..") for p in parts):
        raise FragmentError(
            "dir must be a directory inside the run directory made of letters, digits, '.', '_' and '-', parts "
            "separated by '/', for example fragments/verify (found %r)" % (file_dir,))
    if not isinstance(name, str) or not _PART.match(name) or name in (".", ".."):
        raise FragmentError(
            "name must be a file name without %s made of letters, digits, '.', '_' and '-' (found %r)"
            % (suffix, name))
    return os.path.join(run_dir, *parts) + os.sep + name + suffix


def fragment_text(content):
    """The fragment's bytes as text: the JSON object as to_nice_json writes it (indent 4, keys sorted), a newline."""
    if not isinstance(content, dict):
        raise FragmentError("content must be a JSON object (a dict), found %s" % type(content).__name__)
    return json.dumps(content, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def write_fragment(run_dir, fragment_dir, name, content):
    """Write the fragment atomically (see write_run_file); return its path."""
    path = fragment_path(run_dir, fragment_dir, name)
    write_run_file(path, fragment_text(content))
    return path


def write_run_file(path, text):
    """Write a file of the run directory atomically (a temporary file beside it, then a rename), mode 0644.

    A reader never sees half a file, and a full disk leaves the previous file (if any) whole."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise

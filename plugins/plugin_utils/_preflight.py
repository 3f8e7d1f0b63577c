# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The problems a site dry run (playbooks/preflight.yml) notes: a JSON line each in <run dir>/preflight/problems.jsonl.

Every check that found a problem appends its line as it runs (forks write at once: one ``write`` of one line, opened
with O_APPEND, which POSIX keeps whole); the preflight's last play reads them all and fails listing every one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

PROBLEMS_FILE = os.path.join("preflight", "problems.jsonl")
# a line beyond this is cut (one write of a short line is not interleaved with another's)
MAX_MESSAGE_CHARS = 2000


class PreflightError(ValueError):
    """No run directory to note a problem in."""


def problems_path(run_dir):
    if not run_dir:
        raise PreflightError(
            "a preflight notes its problems in the run directory (inferlab_run_dir, found nothing): run it through "
            "`inferlab run preflight`, or pass -e inferlab_run_dir=DIR to ansible-playbook")
    return os.path.join(run_dir, PROBLEMS_FILE)


def note_problem(run_dir, host, check, message):
    """Append one problem ``{host, check, message}``; returns it."""
    problem = {"host": host, "check": check, "message": " ".join(str(message).split())[:MAX_MESSAGE_CHARS]}
    path = problems_path(run_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = (json.dumps(problem, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return problem


def read_problems(run_dir):
    """Every noted problem, in the order noted, each once (a run_once check's result reaches every host of its
    play), and the lines that are not one (a line cut by a full disk, say) as problems of their own."""
    try:
        with open(problems_path(run_dir), "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []
    problems, seen = [], set()
    for number, line in enumerate(lines, 1):
        try:
            problem = json.loads(line)
        except ValueError:
            problem = None
        if not isinstance(problem, dict) or not all(isinstance(problem.get(k), str) for k in ("check", "message")):
            problem = {"host": None, "check": "read the problems", "message": "line %d of %s is not a problem: %r"
                       % (number, PROBLEMS_FILE, line[:200])}
        key = (problem.get("check"), problem.get("message"))
        if key not in seen:
            seen.add(key)
            problems.append(problem)
    return problems

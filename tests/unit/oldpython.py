"""Find an older CPython to prove that host-side scripts (the ledger, the sampler) run on a host's own Python."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def find_python(version):
    """A working interpreter of `version` (the PATH, /usr/bin, pyenv's versions), or None."""
    candidates = [shutil.which(f"python{version}"), f"/usr/bin/python{version}"]
    candidates += sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob(f"{version}.*/bin/python"))
    for candidate in filter(None, candidates):
        try:
            probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                   capture_output=True, text=True, timeout=30, check=False)
        except OSError:
            continue
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


def require_python(version):
    """The interpreter of `version` for a test of the host-side scripts on a host's own Python.

    Missing, the test skips on a developer's machine and fails under CI (CI=true): CI's image has 3.8 and 3.9 (the
    oldest Pythons the host-side scripts support), and a gate must not turn green by skipping."""
    python = find_python(version)
    if python is None:
        message = f"no Python {version} on this machine (the PATH, /usr/bin, ~/.pyenv/versions)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}: CI must run the host-side scripts on Python {version}", pytrace=False)
        pytest.skip(message)
    return python

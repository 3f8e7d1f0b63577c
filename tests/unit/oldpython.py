"""Find an older CPython to prove that host-side scripts (the ledger, the sampler) run on a host's own Python."""

import shutil
import subprocess
from pathlib import Path


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

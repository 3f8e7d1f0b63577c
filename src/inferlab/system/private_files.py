"""The run directory's files: readable by their owner only (a run directory holds the run's extra vars and its
records), and written whole or not at all (a full disk or a kill leaves the previous file or none, never a part)."""

from __future__ import annotations

import os
from pathlib import Path


def make_private_dir(path: Path) -> None:
    """A run directory readable by its owner only (0700): it holds the run's extra vars and its records."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 from the start (never readable by others, not even briefly)."""
    make_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(text)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a part written before a full disk stopped it is nobody's file
        raise

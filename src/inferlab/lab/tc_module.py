"""The link profiles' tc logic, which lives once, in the collection (plugins/module_utils/_tc.py). The package never
reads the collection's files: as the ledger role installs that file on a real host, the lab role installs it into the
lab's tree and records its path as ``tc_module`` (lab.json, link.json); the link daemon and status load it from
there. Its own module, so that both load it without importing each other."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from inferlab.lab.layout import LabError

REBUILD = "rebuild the lab (`inferlab lab down && inferlab lab up`)"


class TcModuleError(LabError):
    """The lab's tc module cannot be loaded; the message says how to get it back."""


def load_tc(path):
    """The tc module at ``path`` (the lab's ``tc_module``), loaded once per path."""
    return _load(Path(path).resolve())


@functools.cache
def _load(path: Path):
    if not path.is_file():
        raise TcModuleError(f"the lab's tc module {path} is missing (`inferlab lab up` installs it from the "
                            f"collection): {REBUILD}")
    spec = importlib.util.spec_from_file_location("inferlab_lab_tc", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (OSError, SyntaxError) as exc:
        raise TcModuleError(f"the lab's tc module {path} cannot be loaded ({exc}): {REBUILD}") from None
    return module

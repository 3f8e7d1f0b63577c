"""The ledger's modules as the ``ledger`` role installs them on a host, for tests that run them there way."""

import atexit
import shutil
import tempfile
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
ROLE_VARS = REPO_ROOT / "roles" / "ledger" / "vars" / "main.yml"
SRC_PREFIX = "{{ role_path }}/../../"


def ledger_files():
    """``[(source in this checkout, installed file name)]`` from the role's ``__ledger_files``: the command line is
    the ledger script (``inferlab_ledger.py``), every other one keeps its ``inferlab_<name>.py``."""
    files = []
    for item in yaml.safe_load(ROLE_VARS.read_text())["__ledger_files"]:
        assert item["src"].startswith(SRC_PREFIX), item
        name = "inferlab_ledger.py" if item["dest"] == "{{ ledger_script }}" else item["dest"].rsplit("/", 1)[-1]
        files.append((REPO_ROOT / item["src"][len(SRC_PREFIX):], name))
    return files


def install_ledger(folder):
    """Copy the ledger's files into ``folder`` as the role does; returns the ledger script's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for source, name in ledger_files():
        shutil.copy(source, folder / name)
    return folder / "inferlab_ledger.py"


_INSTALLED = []


def ledger_script():
    """The ledger script of one installation shared by this test process (made on first use, removed at exit)."""
    if not _INSTALLED:
        folder = Path(tempfile.mkdtemp(prefix="inferlab-ledger-bin-"))
        atexit.register(shutil.rmtree, folder, True)
        _INSTALLED.append(install_ledger(folder))
    return _INSTALLED[0]

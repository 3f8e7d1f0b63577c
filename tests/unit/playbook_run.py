"""ansible-playbook as the collection's tests run it, from pytest in a checkout and from ``ansible-test units``:
the program beside the test's Python (a venv), else the one on PATH (ansible-test puts its own there), with the
checkout's ansible.cfg and the collection found where this tree is importable from."""

import os
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# ansible-test runs the tests in a copy at .../ansible_collections/inferlab/distributed; a checkout has .collections/
COLLECTIONS_DIR = REPO_ROOT.parents[2] if REPO_ROOT.parents[1].name == "ansible_collections" else REPO_ROOT.joinpath(
    ".collections")


def ansible_playbook():
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    assert found, f"ansible-playbook is neither beside {sys.executable} nor on PATH"
    return found


def playbook_env(tmp_path, **extra):
    """The environment of a test's ansible-playbook: the checkout's settings, this tree's collection, no colour and
    a local temp of the test's own; ``extra`` adds to it (ANSIBLE_STRATEGY=..., say)."""
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
                ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_DIR), ANSIBLE_NOCOLOR="1",
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), **extra)

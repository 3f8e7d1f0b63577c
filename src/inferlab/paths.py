"""Where the collection's pieces live: the checkout this package runs from, or an installed collection.

Run from a checkout (this file two levels below a directory with galaxy.yml and playbooks/), the package uses the
checkout: its playbooks, its ansible.cfg, its lab inventory and its runs/ directory. Installed with pip, it finds the
inferlab.distributed collection that ansible-galaxy installed: in INFERLAB_COLLECTION (the collection's own
directory), else under ANSIBLE_COLLECTIONS_PATH's entries and Ansible's default collection paths; it runs Ansible
with the ansible.cfg it carries (the checkout's, as package data) and tells Ansible where it found the collection
(runner.py, ANSIBLE_COLLECTIONS_PATH). Run directories go to INFERLAB_RUNS when it is set, else to the checkout's
runs/, or to ./runs when installed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMA = PACKAGE_DIR / "schemas" / "record.schema.json"
# The checkout's ansible.cfg, carried into the wheel (a link to ../../ansible.cfg in the source tree).
PACKAGED_ANSIBLE_CFG = PACKAGE_DIR / "ansible.cfg"
COLLECTION_SUBDIR = Path("ansible_collections") / "inferlab" / "distributed"
# Ansible's default COLLECTIONS_PATHS (ansible-core's base.yml), where ansible-galaxy installs without -p.
DEFAULT_COLLECTION_PATHS = ("~/.ansible/collections", "/usr/share/ansible/collections")


def is_collection(path: Path) -> bool:
    return (path / "playbooks").is_dir() and ((path / "galaxy.yml").is_file() or (path / "MANIFEST.json").is_file())


def checkout_root() -> Path | None:
    """The source tree this package runs from, when it is one (an editable install or PYTHONPATH=src)."""
    root = PACKAGE_DIR.parents[1]
    return root if (root / "galaxy.yml").is_file() and (root / "pyproject.toml").is_file() else None


def collection_search_paths(environ: dict[str, str] | None = None) -> list[Path]:
    """The directories an installed collection is looked for in, in order (each holds ansible_collections/)."""
    environ = os.environ if environ is None else environ
    listed = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    entries = [entry for entry in listed.split(os.pathsep) if entry] or list(DEFAULT_COLLECTION_PATHS)
    # ansible-core also looks in sys.path (a collection pip installed, as the `ansible` package ships them)
    return [Path(entry).expanduser() for entry in [*entries, *sys.path] if entry]


def find_collection(environ: dict[str, str] | None = None) -> tuple[Path | None, list[Path]]:
    """The collection's directory (None when not found) and every place looked at, for the error that says so."""
    environ = os.environ if environ is None else environ
    looked: list[Path] = []
    if environ.get("INFERLAB_COLLECTION"):
        given = Path(environ["INFERLAB_COLLECTION"]).expanduser().resolve()
        installed = given.parts[-3:] == COLLECTION_SUBDIR.parts and is_collection(given)
        return (given if installed else None), [given]
    checkout = checkout_root()
    if checkout is not None:
        return checkout, [checkout]
    for base in collection_search_paths(environ):
        candidate = base / COLLECTION_SUBDIR
        looked.append(candidate)
        if is_collection(candidate):
            return candidate.resolve(), looked
    return None, looked


def not_found_message(looked: list[Path]) -> str:
    return ("the inferlab.distributed collection was not found (looked for playbooks/ and MANIFEST.json in: "
            + ", ".join(map(str, looked)) + "); install it (ansible-galaxy collection install "
            "inferlab-distributed-VERSION.tar.gz) or set INFERLAB_COLLECTION to the directory it was installed to "
            "(.../ansible_collections/inferlab/distributed)")


def collections_path(collection: Path) -> Path:
    """The directory that holds ansible_collections/ for an installed collection's directory."""
    return collection.parents[len(COLLECTION_SUBDIR.parts) - 1]


CHECKOUT = checkout_root()
COLLECTION_ROOT, COLLECTION_LOOKED = find_collection()
# Where a missing collection would be: every use below names a path that does not exist, and runner.py says why.
REPO_ROOT = COLLECTION_ROOT or CHECKOUT or PACKAGE_DIR
PLAYBOOKS = REPO_ROOT / "playbooks"
# The checkout's own ansible.cfg; an installed package carries a copy of it.
ANSIBLE_CFG = CHECKOUT / "ansible.cfg" if CHECKOUT else PACKAGED_ANSIBLE_CFG
# The lab's inventory (a checkout's); installed, ./inventory/lab/hosts.yml, which a site does not have: it passes -i.
DEFAULT_INVENTORY = (CHECKOUT or Path.cwd()) / "inventory" / "lab" / "hosts.yml"
RUNS = Path(os.environ["INFERLAB_RUNS"]).expanduser() if os.environ.get("INFERLAB_RUNS") else (
    CHECKOUT / "runs" if CHECKOUT else Path.cwd() / "runs")

"""Where the collection's pieces live: the checkout this package runs from, or an installed collection.

Run from a checkout (this file two levels below a directory with galaxy.yml and playbooks/), the package uses the
checkout: its playbooks, its ansible.cfg, its lab inventory and its runs/ directory. Installed with pip, it finds the
inferlab.distributed collection that ansible-galaxy installed: in INFERLAB_COLLECTION (the collection's own
directory), else under ANSIBLE_COLLECTIONS_PATH's entries and Ansible's default collection paths; it runs Ansible
with the ansible.cfg it carries (the checkout's, as package data) and tells Ansible where it found the collection
(runner.py, ANSIBLE_COLLECTIONS_PATH). Run directories go to INFERLAB_RUNS when it is set, else to the checkout's
runs/, or to ./runs when installed.

Nothing here is read at import: a command resolves its Settings once (cli.main, api.run) from the environment and the
current directory, and passes them to what it calls.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


def collection_search_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The directories an installed collection is looked for in, in order (each holds ansible_collections/)."""
    environ = os.environ if environ is None else environ
    listed = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    entries = [entry for entry in listed.split(os.pathsep) if entry] or list(DEFAULT_COLLECTION_PATHS)
    # ansible-core also looks in sys.path (a collection pip installed, as the `ansible` package ships them)
    return [Path(entry).expanduser() for entry in [*entries, *sys.path] if entry]


def find_collection(environ: Mapping[str, str] | None = None) -> tuple[Path | None, list[Path]]:
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


def not_found_message(looked: Sequence[Path]) -> str:
    return ("the inferlab.distributed collection was not found (looked for playbooks/ and MANIFEST.json in: "
            + ", ".join(map(str, looked)) + "); install it (ansible-galaxy collection install "
            "inferlab-distributed-VERSION.tar.gz) or set INFERLAB_COLLECTION to the directory it was installed to "
            "(.../ansible_collections/inferlab/distributed)")


def collections_path(collection: Path) -> Path:
    """The directory that holds ansible_collections/ for an installed collection's directory."""
    return collection.parents[len(COLLECTION_SUBDIR.parts) - 1]


@dataclass(frozen=True)
class Settings:
    """Where one command's pieces are: resolved once (Settings.resolve, from the environment and the current directory
    then) and passed down, so nothing reads os.environ or the cwd for a path later."""

    checkout: Path | None  # the source tree the package runs from (checkout_root), None when installed
    collection: Path | None  # the collection's directory (find_collection), None when not found
    collection_looked: tuple[Path, ...]  # every place the collection was looked for, for not_found_message
    default_inventory: Path  # the lab's (a checkout's); installed, ./inventory/lab/hosts.yml: a site passes -i
    runs: Path  # INFERLAB_RUNS, else the checkout's runs/, else ./runs

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Settings:
        """The settings of a command run in ``environ`` (default os.environ) from ``cwd`` (default the current
        directory)."""
        environ = os.environ if environ is None else environ
        cwd = Path.cwd() if cwd is None else Path(cwd)
        checkout = checkout_root()
        collection, looked = find_collection(environ)
        runs = (Path(environ["INFERLAB_RUNS"]).expanduser() if environ.get("INFERLAB_RUNS")
                else checkout / "runs" if checkout else cwd / "runs")
        return cls(
            checkout=checkout,
            collection=collection,
            collection_looked=tuple(looked),
            default_inventory=(checkout or cwd) / "inventory" / "lab" / "hosts.yml",
            runs=runs,
        )

    @property
    def repo_root(self) -> Path:
        """The collection, else the checkout, else the package: a missing one names paths that do not exist."""
        return self.collection or self.checkout or PACKAGE_DIR

    @property
    def playbooks(self) -> Path:
        return self.repo_root / "playbooks"

    @property
    def ansible_cfg(self) -> Path:
        """The checkout's own ansible.cfg; an installed package carries a copy of it."""
        return self.checkout / "ansible.cfg" if self.checkout else PACKAGED_ANSIBLE_CFG

    def installed_collections_path(self) -> Path | None:
        """The directory holding ansible_collections/ for an installed collection (the packaged ansible.cfg's
        collections_path holds none), None when the collection is the checkout or was not found."""
        if self.collection is None or self.collection == self.checkout:
            return None
        return collections_path(self.collection)

# inferlab-offline-get-pip: replacement for get-pip.py, installed by tests/ansible_test/run.sh
"""Offline stand-in for the pip bootstrap script that ansible-test downloads.

ansible-test bootstraps pip into each empty test virtual environment with a
``get-pip.py`` script fetched from the Ansible project's file host. It looks in
``~/.ansible/test/cache/get_pip_<version>.py`` first, so ``tests/ansible_test/run.sh``
copies this file there on machines that cannot reach that host.

It is called like the real script: ``--no-setuptools`` and ``--no-wheel`` are
understood, every other argument (pip options and requirement specifiers such as
``pip==24.2``) is handed to ``pip install``. pip itself comes from the wheel that
the standard library's ``ensurepip`` bundles (no network); the requested
packages then come from the package index in the machine's normal pip
configuration.

The first line is a marker: run.sh only replaces a cached script carrying it.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import subprocess
import sys

MARKER = "# inferlab-offline-get-pip"


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Split the real get-pip.py options from the ones meant for pip install."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--no-setuptools", action="store_true")
    parser.add_argument("--no-wheel", action="store_true")
    return parser.parse_known_args(argv)


def wanted(name: str, cli_disabled: bool) -> bool:
    """Mirror get-pip.py: add setuptools/wheel unless disabled or already there."""
    if cli_disabled or os.environ.get(f"PIP_NO_{name.upper()}"):
        return False
    return importlib.util.find_spec(name) is None


def bundled_pip_wheel() -> str | None:
    """Return the pip wheel that ensurepip ships, if it can be found."""
    try:
        import ensurepip
    except ImportError:
        return None
    dirs = []
    # Debian and derivatives keep the wheels outside the standard library.
    wheel_dir = getattr(ensurepip, "_WHEEL_PKG_DIR", None)
    if wheel_dir:
        dirs.append(wheel_dir)
    dirs.append(os.path.join(os.path.dirname(ensurepip.__file__), "_bundled"))
    for directory in dirs:
        found = sorted(glob.glob(os.path.join(directory, "pip-*.whl")))
        if found:
            return found[-1]
    return None


def run(cmd: list[str]) -> int:
    """Run a command, echoing it to stderr."""
    print("get_pip_offline: " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.call(cmd)


def main(argv: list[str]) -> int:
    """Bootstrap pip without the network, then install the requested packages."""
    opts, pip_args = parse_args(argv)
    had_setuptools = importlib.util.find_spec("setuptools") is not None
    extra = ["pip"]
    if wanted("setuptools", opts.no_setuptools):
        extra.append("setuptools")
    if wanted("wheel", opts.no_wheel):
        extra.append("wheel")
    install = ["install", "--upgrade", *pip_args, *extra]

    wheel = bundled_pip_wheel()
    if wheel:
        # pip runs straight from its wheel, as get-pip.py runs it from its zip.
        return run([sys.executable, os.path.join(wheel, "pip"), *install])

    # No wheel found: let ensurepip install pip (it may add setuptools too).
    rc = run([sys.executable, "-m", "ensurepip", "--default-pip"])
    if rc:
        print("get_pip_offline: ensurepip failed; is the python3-venv package installed?", file=sys.stderr)
        return rc
    rc = run([sys.executable, "-m", "pip", *install])
    asked = any(arg.lower().startswith("setuptools") for arg in pip_args)
    if rc == 0 and not had_setuptools and not asked and "setuptools" not in extra:
        rc = run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "setuptools"])
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

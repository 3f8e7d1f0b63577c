"""The kernel scenario's verifier reads what converge kept (results.json, systemd.json, the gates' JSON) and asks
the guest. ``guest_testinfra_hosts()`` is each test module's ``testinfra_hosts``."""

import json
import os
from pathlib import Path

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])


def guest_testinfra_hosts():
    """The guest over SSH. Its host keys come from a cached image, the same on every boot: not pinned (the guest is
    local and sealed)."""
    guest = json.loads((EPHEMERAL / "guest.json").read_text())
    ssh_config = EPHEMERAL / "ssh_config"
    ssh_config.write_text(f"Host guest\n  HostName 127.0.0.1\n  Port {guest['port']}\n  User root\n"
                          f"  IdentityFile {guest['ssh_key']}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
                          "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    return [f"ssh://guest?ssh_config={ssh_config}"]

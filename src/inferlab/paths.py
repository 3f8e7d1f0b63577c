"""Where the checkout's pieces live, found from this file rather than the current directory."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO_ROOT / "playbooks"
ANSIBLE_CFG = REPO_ROOT / "ansible.cfg"
DEFAULT_INVENTORY = REPO_ROOT / "inventory" / "lab" / "hosts.yml"
RUNS = REPO_ROOT / "runs"
SCHEMA = Path(__file__).resolve().parent / "schemas" / "record.schema.json"

"""What the testinfra verifiers know about the molecule lab: its lab.json, and the run directory molecule used."""

import json
import os
import re
import sys
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner
import yaml

from inferlab.lab.status import lab_dir_from_inventory

INVENTORY = str(Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent)
RUN_DIR = Path(os.environ["INFERLAB_MOLECULE_RUN_DIR"])
# the scenario's lab (imol, or a scenario's own such as cluster's imolc), from the hosts file in its inventory
LAB_DIR = lab_dir_from_inventory(Path(INVENTORY))[1]
# testinfra's ansible backend does not template inventory variables (the lab's are derived in group_vars), so the
# tests reach the ring hosts over plain ssh with the ssh_config that `lab up` writes.
RING_NAMES = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("ring")
RING = [f"ssh://{name}?ssh_config={LAB_DIR}/ssh/config" for name in RING_NAMES]
REPO_ROOT = Path(__file__).resolve().parents[3]


def lab_host(host) -> dict:
    """This host's entry in lab.json (addresses, services, log paths), read on the controller."""
    name = host.backend.get_hostname()
    lab = json.loads((LAB_DIR / "lab.json").read_text())
    return next(h for h in lab["hosts"] if h["name"] == name)


def log_tails(entry: dict, lines: int = 30) -> str:
    """The ends of the host's sshd and service logs, printed when a check fails (prometheus.prometheus style)."""
    paths = [entry["ssh"]["log"]] + [s["log"] for s in entry["services"]]
    out = []
    for path in paths:
        text = Path(path).read_text(errors="replace").splitlines()[-lines:] if Path(path).exists() else ["(missing)"]
        out.append(f"--- {path}\n" + "\n".join(text))
    return "\n".join(out)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Print the host's service logs under a failing check, so the failure explains itself.

    Each scenario's conftest.py imports this hook.
    """
    outcome = yield
    report = outcome.get_result()
    host = item.funcargs.get("host") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and host is not None:
        report.sections.append(("lab logs", log_tails(lab_host(host))))


def own_processes(host, pattern: str) -> list:
    """The lines of ``pgrep -af PATTERN`` that are this lab's: their command line holds the lab's directory or one
    of its hosts' link addresses. The lab hosts are network namespaces that share the machine's process table with
    any other lab on the machine (a demo lab, another checkout's molecule lab)."""
    lab = json.loads((LAB_DIR / "lab.json").read_text())
    addresses = [h["link"]["address"] for h in lab["hosts"]]
    own = re.compile("|".join([re.escape(f"{LAB_DIR}/")]
                              + [rf"(?<![\d.]){re.escape(a)}(?![\d.])" for a in addresses]))
    return [line for line in host.run(f"pgrep -af {pattern!r}").stdout.splitlines() if own.search(line)]


def lab_canary() -> str:
    """The secret the lab gives every rank (inventory/lab/group_vars/ring.yml, inferlab_sglang_secret_environment)."""
    group_vars = yaml.safe_load((REPO_ROOT / "inventory" / "lab" / "group_vars" / "ring.yml").read_text())
    return group_vars["inferlab_sglang_secret_environment"]["INFERLAB_LAB_CANARY"]


def files_holding(text: str, root: Path) -> list:
    """The files under ``root`` whose bytes contain ``text``; fails when ``root`` holds no file at all (a search of
    nothing would pass)."""
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert files, f"{root} holds no file to search"
    needle = text.encode()
    return [str(p) for p in files if needle in p.read_bytes()]


def assert_records_valid(run_dir: Path = RUN_DIR) -> int:
    """Every record this scenario wrote matches record.schema.json: each `record.json` under the run directory
    (runs through `inferlab run`), and every other directory with fragments (playbooks that molecule ran with
    ansible-playbook, killed runs) assembled into a record. Returns how many records were checked."""
    sys.path.insert(0, str(REPO_ROOT / "src"))
    from inferlab.record import record  # pylint: disable=import-outside-toplevel

    checked = 0
    for fragments in sorted(run_dir.glob("**/fragments")):
        directory = fragments.parent
        if (directory / "record.json").is_file():
            data = json.loads((directory / "record.json").read_text())
        else:
            data = record.assemble(directory, {
                "id": directory.name, "playbook": "molecule converge", "inventory": INVENTORY,
                "started": "1970-01-01T00:00:00Z", "finished": "1970-01-01T00:00:00Z", "status": "successful",
                "exit_code": 0, "exit_meaning": "success", "extravars": {}})
        record.validate(data)
        checked += 1
    return checked


def ledger_entries(ledger: Path) -> dict:
    """The current state of every entry of a ledger file (its last line per id)."""
    last = {}
    for line in ledger.read_text().splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    return last


def host_ledger(name: str) -> dict:
    """The current state of every entry of a lab host's ledger (``localhost`` the controller, ``lab-gw`` the
    gateway), read from the lab's directory (one filesystem with the hosts)."""
    folder = LAB_DIR / ("controller" if name == "localhost" else "gateway" if name == "lab-gw"
                        else f"hosts/{name[-1]}")
    return ledger_entries(folder / "state" / "ledger" / f"{name}.jsonl")


def assert_guarded_and_disarmed(hosts: list) -> None:
    """The run armed a dead man's switch on each of ``hosts`` (host names, ``localhost`` the controller) and its
    heartbeat on the controller, each recorded in its host's ledger, and its end disarmed them all: every such entry
    undone, the heartbeat stopped by that undo with every host's renewals confirmed."""
    def processes(name, word):
        return [e for e in host_ledger(name).values()
                if e["kind"] == "process" and f" {word} " in " ".join(e["params"].get("cmdline") or [])]

    for name in hosts:
        switches = processes(name, "deadman")
        assert switches and {e["state"] for e in switches} == {"undone"}, (name, switches)
    heartbeats = processes("localhost", "heartbeat")
    assert heartbeats and {e["state"] for e in heartbeats} == {"undone"}, heartbeats
    status = json.loads((LAB_DIR / "controller" / "state" / "run" / "heartbeat.json").read_text())
    assert status["reason"] == "stopped by SIGTERM (the undo of its process entry)", status
    assert set(status["hosts"]) == set(hosts) and all(h["renewals"] > 0 for h in status["hosts"].values()), status

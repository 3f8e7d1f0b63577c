"""The heartbeat of the deadman role (roles/deadman/tasks/heartbeat.yml) in real ansible-playbook runs on the
controller: each host's renew command resolved from Ansible's own settings, the heartbeat started through a real
ledger, every host's first renewal awaited, the check a stage's start runs, the stop; a host refused over SSH fails
the run in seconds with its name and the reason; a password is refused before the heartbeat starts."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_heartbeat, _ledger_proc
from ansible_collections.inferlab.distributed.tests.unit.ledger_host import install_ledger
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[2]

PLAYBOOK = """
- name: The heartbeat of the switches, as a run drives it
  hosts: localhost
  gather_facts: false
  vars:
    deadman_hosts: "{{ groups['ring'] + ['localhost'] }}"
  tasks:
    - name: Resolve the renew commands (before anything changes)
      ansible.builtin.include_role:
        name: inferlab.distributed.deadman
        tasks_from: resolve

    - name: Start it
      ansible.builtin.include_role:
        name: inferlab.distributed.deadman
        tasks_from: heartbeat

    - name: Check it as a stage's start does
      ansible.builtin.include_role:
        name: inferlab.distributed.deadman
        tasks_from: check

    - name: Check it again, keeping what the check saw
      inferlab.distributed.heartbeat_check:
        status_file: "{{ hostvars['localhost'].deadman_heartbeat_status_file }}"
        run_id: "{{ inferlab_run_dir | inferlab.distributed.run_id('') }}"
        within_s: "{{ deadman_deadline_s | float / 2 }}"
      register: checked

    - name: Keep what the check saw
      ansible.builtin.copy:
        content: "{{ checked | to_json }}"
        dest: "{{ inferlab_run_dir }}/checked.json"
        mode: "0644"

    - name: Stop it (no switch was armed here, so the disarm stops the heartbeat only)
      ansible.builtin.include_role:
        name: inferlab.distributed.deadman
        tasks_from: disarm
"""


def closed_port():
    """A loopback port nothing listens on (bound, then closed): ssh to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def site(tmp_path):
    """A controller (localhost) and a ring host reached locally, each with the ledger script and an armed switch's
    renew file; any heartbeat left behind is killed at the end."""
    state = {"localhost": tmp_path / "controller", "lab-a": tmp_path / "lab-a"}
    for folder in state.values():
        install_ledger(folder / "bin")
        (folder / "run").mkdir()
        (folder / "run" / "deadman.renew").write_text("")
    (tmp_path / "run" / "fragments" / "journal").mkdir(parents=True)
    yield tmp_path, state
    pidfile = state["localhost"] / "run" / "heartbeat.pid"
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def run(site, ring):
    tmp_path, state = site
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}},
                         "children": {"ring": {"hosts": ring}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    extra = {"inferlab_run_dir": str(tmp_path / "run"), "inferlab_controller_state_dir": str(state["localhost"]),
             "deadman_deadline_s": 2}
    return subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e",
                           json.dumps(extra)], cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"),
                          capture_output=True, text=True, timeout=300, check=False)


def said(proc):
    return " ".join(proc.stdout.split())  # the callback folds long messages


def test_the_heartbeat_renews_every_host_and_a_stages_check_passes(site):
    tmp_path, state = site
    lab_a = {"ansible_connection": "ansible.builtin.local", "ansible_python_interpreter": sys.executable,
             "inferlab_state_dir": str(state["lab-a"])}
    proc = run(site, {"lab-a": lab_a})
    assert proc.returncode == 0, proc.stdout[-4000:]
    checked = json.loads((tmp_path / "run" / "checked.json").read_text())
    assert checked["problems"] == [] and set(checked["hosts"]) == {"lab-a", "localhost"}
    assert all(host["renewals"] >= 1 and host["last_error"] is None for host in checked["hosts"].values())
    status = _ledger_heartbeat.read_status(str(state["localhost"] / "run" / "heartbeat.json"))
    assert not status["running"] and status["reason"] == "stopped by SIGTERM (the undo of its process entry)"
    assert not _ledger_proc.same_process(status["pid"], status["start_time"])


def test_a_host_refused_over_ssh_fails_the_run_at_the_start_with_its_name_and_the_reason(site):
    _tmp_path, state = site
    port = closed_port()
    proc = run(site, {"gpu-b": {"ansible_host": "127.0.0.1", "ansible_port": port, "ansible_user": "nobody",
                                "inferlab_state_dir": str(state["lab-a"])}})
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "TASK [inferlab.distributed.deadman : Wait for every host's first renewal" in proc.stdout
    assert ("the dead man's switches are not all renewed (each host must renew within 1s, or its switch fires and "
            "undoes the run's changes): gpu-b: its renew process exited 255: ssh: connect to host 127.0.0.1 port "
            f"{port}: Connection refused; no renewal confirmed in ") in said(proc)


def test_a_password_is_refused_before_the_heartbeat_starts(site):
    _tmp_path, state = site
    proc = run(site, {"gpu-b": {"ansible_host": "127.0.0.1", "ansible_password": "secret",
                                "inferlab_state_dir": str(state["lab-a"])}})
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert ("gpu-b: the heartbeat cannot use ansible_password (it renews the switch without a person, every minute "
            "of the run): give the heartbeat a key: ansible_ssh_private_key_file, or a key in the ssh agent") in said(
        proc)
    assert "Start it" not in proc.stdout and not (state["localhost"] / "run" / "heartbeat.pid").exists()

"""playbooks/deadman_arm.yml and deadman_disarm.yml, the guard every playbook that changes hosts imports, in real
ansible-playbook runs on the controller with two ring hosts reached locally: the guard locks every host, arms each
switch and starts the heartbeat, and the disarm undoes the switches and the heartbeat and releases the locks; a host
that cannot be armed makes the guard disarm the others, release every lock and fail the run, naming the host."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_heartbeat, _ledger_proc
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("localhost", "lab-a", "lab-b")


@pytest.fixture
def site(tmp_path):
    """Each host's state directory; every switch or heartbeat left behind is killed at the end."""
    state = {name: tmp_path / name for name in HOSTS}
    (tmp_path / "run").mkdir()
    yield tmp_path, state
    for folder in state.values():
        for pidfile in (folder / "run").glob("*.pid") if (folder / "run").is_dir() else []:
            try:
                os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)
            except (ProcessLookupError, ValueError, PermissionError):
                pass


def run(site, play, lab_b=None):
    tmp_path, state = site
    local = {"ansible_connection": "ansible.builtin.local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"hosts": {"localhost": {**local, "inferlab_controller_state_dir": str(state["localhost"])}},
                         "children": {"ring": {"hosts": {
                             "lab-a": {**local, "inferlab_state_dir": str(state["lab-a"])},
                             "lab-b": {**local, "inferlab_state_dir": str(state["lab-b"]), **(lab_b or {})}}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(play.replace("PLAYBOOKS", str(REPO_ROOT / "playbooks")))
    extra = {"inferlab_run_dir": str(tmp_path / "run"), "deadman_deadline_s": 60}
    return subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e",
                           json.dumps(extra)], cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"),
                          capture_output=True, text=True, timeout=300, check=False)


GUARDED = """
- name: Arm
  ansible.builtin.import_playbook: PLAYBOOKS/deadman_arm.yml
  vars:
    deadman_play_hosts: ring:localhost

- name: The work, under the guard
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say where the work ran
      ansible.builtin.copy:
        content: "{{ hostvars['localhost'].deadman_heartbeat_run }}"
        dest: "{{ inferlab_run_dir }}/worked"
        mode: "0644"

- name: Disarm
  ansible.builtin.import_playbook: PLAYBOOKS/deadman_disarm.yml
  vars:
    deadman_play_hosts: ring:localhost
"""


def entries(folder, name):
    """The current entries of a host's ledger (none when it recorded nothing)."""
    path = folder / "ledger" / f"{name}.jsonl"
    last = {}
    for line in (path.read_text() if path.exists() else "").splitlines():
        entry = json.loads(line)
        last[entry["id"]] = entry
    return list(last.values())


def commands(found):
    return [" ".join(e["params"].get("cmdline") or []) for e in found if e["kind"] == "process"]


def said(proc):
    return " ".join(proc.stdout.split())  # the callback folds long messages


def test_the_guard_arms_every_host_under_its_lock_and_the_disarm_undoes_it_all(site):
    tmp_path, state = site
    proc = run(site, GUARDED)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert (tmp_path / "run" / "worked").read_text() == "run"  # the heartbeat ran for this run during the work
    for name in HOSTS:
        found = entries(state[name], name)
        assert any(" deadman " in c for c in commands(found)), (name, found)
        assert {e["state"] for e in found} == {"undone"}, (name, found)
        assert not (state[name] / "ledger" / f"{name}.lock").exists()  # released
    assert any(" heartbeat " in c for c in commands(entries(state["localhost"], "localhost")))
    status = _ledger_heartbeat.read_status(str(state["localhost"] / "run" / "heartbeat.json"))
    assert status["reason"] == "stopped by SIGTERM (the undo of its process entry)"
    assert set(status["hosts"]) == set(HOSTS) and all(h["renewals"] >= 1 for h in status["hosts"].values())
    assert not _ledger_proc.same_process(status["pid"], status["start_time"])


def test_a_host_that_cannot_be_armed_disarms_the_others_releases_every_lock_and_fails_the_run(site):
    tmp_path, state = site
    proc = run(site, GUARDED, lab_b={"inferlab_process_manager": "no-such-manager"})
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert ("The dead man's switches could not guard the run, so it changes nothing (the switches armed were "
            "disarmed, the locks released): lab-b: ") in said(proc)
    assert not (tmp_path / "run" / "worked").exists()
    for name in HOSTS:
        assert not (state[name] / "ledger" / f"{name}.lock").exists(), name
        assert {e["state"] for e in entries(state[name], name)} <= {"undone"}, name
    assert any(" deadman " in c for c in commands(entries(state["lab-a"], "lab-a")))  # armed, then disarmed
    assert entries(state["lab-b"], "lab-b") == []  # refused before its switch was recorded

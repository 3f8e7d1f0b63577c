"""The ledger role's takeover of a stale lock (roles/ledger/tasks/lock.yml) in real ansible-playbook runs whose
Python has no inferlab package (ansible-test's, like a bare ansible-runner's): the holder is then judged by its pid
alone, as ps sees it, so a dead holder's lock is taken over and a live one's refused, naming it. With the package
(`inferlab run`), the same check is `python -m inferlab.system.liveness`
(tests/package/test_liveness.py; molecule restore)."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[2]

PLAYBOOK = """
- name: Take the controller's ledger lock over, as a restore does
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Take it
      ansible.builtin.include_role:
        name: inferlab.distributed.ledger
        tasks_from: lock
      vars:
        ledger_host: localhost
        ledger_break_stale_lock: true
"""


def dead_pid():
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def take_over(tmp_path, holder_pid):
    state = tmp_path / "state"
    _ledger_core.acquire_lock(str(state / "ledger"), "localhost", "old-run", controller=socket.gethostname(),
                              pid=holder_pid)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    extra = {"inferlab_run_dir": str(tmp_path / "new-run"), "inferlab_state_dir": str(state)}
    proc = subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e",
                           json.dumps(extra)], cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"),
                          capture_output=True, text=True, timeout=300, check=False)
    lock = json.loads((state / "ledger" / "localhost.lock").read_text())
    return proc, lock


def test_without_the_package_a_dead_holder_is_told_by_its_pid_and_its_lock_taken_over(tmp_path):
    with pytest.raises(ImportError):
        __import__("inferlab.system.liveness")  # the case under test: no inferlab package here
    proc, lock = take_over(tmp_path, dead_pid())
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert lock["run_id"] == "new-run"


def test_without_the_package_a_live_holder_keeps_its_lock_and_is_named(tmp_path):
    proc, lock = take_over(tmp_path, 1)  # pid 1 lives
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert lock["run_id"] == "old-run"
    assert "not breaking it: pid 1 is still alive on controller" in " ".join(proc.stdout.split())


UNLOCK_PLAYBOOK = PLAYBOOK.replace("tasks_from: lock", "tasks_from: unlock")


@pytest.mark.parametrize(("playbook", "extra", "expected"), [
    (PLAYBOOK, {"ledger_run_id": ""}, "Taking the ledger lock of localhost needs a run id and the pid of the run on "
                                      "the controller; found ledger_run_id='' and ledger_controller_pid="),
    (PLAYBOOK, {"ledger_controller_pid": -1}, "found ledger_run_id='new-run' and ledger_controller_pid='-1'. Run the "
                                              "playbook through `inferlab run`"),
    (PLAYBOOK, {"ledger_controller_pid": 0}, "or set ledger_run_id and ledger_controller_pid."),
    (UNLOCK_PLAYBOOK, {"ledger_run_id": ""}, "Releasing the ledger lock of localhost needs the id of the run that "
                                             "holds it, and ledger_run_id is empty. Run the playbook through"),
])
def test_a_run_without_an_id_or_a_controller_pid_is_refused_naming_the_variable(tmp_path, playbook, extra, expected):
    state = tmp_path / "state"
    (tmp_path / "play.yml").write_text(playbook)
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    extra = {"inferlab_run_dir": str(tmp_path / "new-run"), "inferlab_state_dir": str(state), **extra}
    proc = subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e",
                           json.dumps(extra)], cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert expected in " ".join(proc.stdout.split()), proc.stdout[-4000:]
    assert not (state / "ledger" / "localhost.lock").exists()

"""The candidate's build host is checked for every program the build runs, each missing one named with the package
that installs it, before anything changes: roles/tbnet_candidate/tasks/build_tools.yml in a real ansible-playbook
run on the controller (this machine has the real ones; a program no machine has stands for a missing one)."""

import sys

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import run_playbook, said

# the shell module runs on the controller, with this test's Python
CONTROLLER = {"all": {"hosts": {"localhost": {"ansible_python_interpreter": sys.executable}}}}

PLAYBOOK = """
- name: The candidate's build programs
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check the build host
      ansible.builtin.include_role:
        name: inferlab.distributed.tbnet_candidate
        tasks_from: build_tools
    - name: Say the play went on
      ansible.builtin.debug:
        msg: went on
"""


def test_a_build_host_with_every_program_goes_on(tmp_path):
    proc = run_playbook(tmp_path, PLAYBOOK, CONTROLLER, __tbnet_candidate_build_tools={"sh": "dash", "ls": "coreutils"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout


def test_a_missing_program_is_named_with_its_package(tmp_path):
    tools = {"sh": "dash", "inferlab-no-such-gcc": "gcc", "inferlab-no-such-modinfo": "kmod"}
    proc = run_playbook(tmp_path, PLAYBOOK, CONTROLLER, __tbnet_candidate_build_tools=tools)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("The candidate's build runs sh, inferlab-no-such-gcc, inferlab-no-such-modinfo on localhost, which lacks "
            "inferlab-no-such-gcc, inferlab-no-such-modinfo. Nothing was changed. Install them there (Debian, Ubuntu: "
            "apt-get install gcc kmod), or build on another host (tbnet_candidate_build_host).") in said(proc)
    assert "went on" not in proc.stdout

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lookup that finds the playbook process the dead man's switches watch: the outermost ansible-playbook above the
worker, on a procfs fixture and under a real ansible-playbook run."""

import json
import subprocess
import sys

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.inferlab.distributed.plugins.lookup import playbook_process
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env


def fake_proc(root, pid, ppid, argv, start_time):
    folder = root / str(pid)
    folder.mkdir(parents=True)
    (folder / "stat").write_text(f"{pid} (python3) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
                                 f"{start_time} 0 0\n")
    (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_the_playbook_process_is_the_outermost_ansible_playbook_above_the_worker(tmp_path):
    playbook = ["/venv/bin/python", "/venv/bin/ansible-playbook", "-i", "hosts", "experiment.yml"]
    fake_proc(tmp_path, 100, 1, ["/venv/bin/python", "/venv/bin/inferlab", "run", "experiment"], 500)
    fake_proc(tmp_path, 200, 100, playbook, 600)
    fake_proc(tmp_path, 300, 200, playbook, 700)  # a worker forked by it: the same command line
    fake_proc(tmp_path, 400, 300, ["/bin/sh", "-c", "python3 module"], 800)
    assert playbook_process.playbook_process(400, str(tmp_path)) == {"pid": 200, "start_time": 600}
    assert playbook_process.playbook_process(200, str(tmp_path)) == {"pid": 200, "start_time": 600}
    with pytest.raises(AnsibleLookupError, match=r"no ansible-playbook process among the ancestors of pid 100 "
                                                 r"\(100 <- 1\)"):
        playbook_process.playbook_process(100, str(tmp_path))


def test_the_lookup_under_a_real_ansible_playbook_names_that_process(tmp_path):
    play = tmp_path / "play.yml"
    out = tmp_path / "found.json"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.copy:\n"
                    "        content: \"{{ lookup('inferlab.distributed.playbook_process') | to_json }}\"\n"
                    f"        dest: {out}\n        mode: '0644'\n")
    run = subprocess.Popen([ansible_playbook(), "-i", "localhost,", "-c", "local",
                            "-e", f"ansible_python_interpreter={sys.executable}", str(play)],
                           env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    log, _err = run.communicate(timeout=120)
    assert run.returncode == 0, log.decode()[-2000:]
    assert json.loads(out.read_text())["pid"] == run.pid

"""The llamacpp_engine role in real ansible-playbook runs on local hosts: an install named by llamacpp_engine_bin_dir
is verified by what its programs print (stand-ins that print the real build's captured --version and --help,
tests/unit/fixtures/llamacpp), its facts kept; an install without RPC fails naming what is missing and the variable
to set; check mode verifies a named install and builds nothing."""

import json
import subprocess
import sys
from pathlib import Path

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

CAPTURES = Path(__file__).resolve().parent / "fixtures" / "llamacpp"

PLAYBOOK = """
- name: The engine on the ring
  hosts: ring
  gather_facts: false
  roles:
    - role: inferlab.distributed.llamacpp_engine
  post_tasks:
    - name: Keep the facts
      ansible.builtin.copy:
        content: "{{ llamacpp_engine_info | to_json }}"
        dest: "{{ facts_file }}"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
"""


def program(path, script):
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def install(directory, rpc=True):
    directory.mkdir()
    help_text = directory / "help.txt"
    lines = (CAPTURES / "llama-server_help.txt").read_text().splitlines(True)
    help_text.write_text("".join(line for line in lines if rpc or not line.startswith("--rpc")))
    program(directory / "llama-server", f'case "$1" in --version) cat {CAPTURES / "llama-server_version.txt"} >&2 ;; '
                                        f'--help) cat {help_text} ;; esac\n')
    program(directory / "ggml-rpc-server", f'cat {CAPTURES / "ggml-rpc-server_help.txt"} >&2\n')
    return directory


def run(tmp_path, bin_dir, *extra):
    inventory = {"ring": {"hosts": {"lab-a": {"ansible_connection": "local",
                                              "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    variables = {"llamacpp_engine_bin_dir": str(bin_dir), "facts_file": str(tmp_path / "facts.json")}
    return subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(variables), *extra], capture_output=True, text=True,
                          env=playbook_env(tmp_path), timeout=300, check=False)


def test_a_named_install_is_verified_and_its_facts_kept(tmp_path):
    done = run(tmp_path, install(tmp_path / "bin"))
    assert done.returncode == 0, done.stdout[-3000:]
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts["version"] == {"version": "0.5.0-dev", "build": 1, "commit": "0c1e570"}
    assert facts["rpc"] is True and "draft-simple" in facts["spec_types"]


def test_an_install_without_rpc_fails_naming_it_and_the_variable(tmp_path):
    done = run(tmp_path, install(tmp_path / "bin", rpc=False))
    assert done.returncode != 0
    assert "The engine on lab-a cannot serve an RPC ring:" in done.stdout
    assert "--help lists no --rpc: the build lacks GGML_RPC=ON" in done.stdout
    assert "Set llamacpp_engine_bin_dir to an install built with GGML_RPC=ON" in done.stdout
    assert not (tmp_path / "facts.json").exists()


def test_check_mode_verifies_a_named_install(tmp_path):
    done = run(tmp_path, install(tmp_path / "bin"), "--check")
    assert done.returncode == 0, done.stdout[-3000:]
    assert json.loads((tmp_path / "facts.json").read_text())["rpc"] is True

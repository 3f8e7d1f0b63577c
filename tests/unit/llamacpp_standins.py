"""Stand-ins for a llama.cpp install and a local ring, shared by the tests of llamacpp_info, llamacpp_engine and
llamacpp_rpc (and tests/engine): programs that print what the real build printed (tests/unit/fixtures/llamacpp), and
ansible-playbook runs on hosts reached locally."""

import json
import subprocess
import sys
from pathlib import Path

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

CAPTURES = Path(__file__).resolve().parent / "fixtures" / "llamacpp"


# roles/llamacpp_engine on the ring, its facts written to the file in the extra var facts_file: {"build" (null
# without a build), "info"}
ENGINE_ROLE_PLAYBOOK = """
- name: The engine on the ring
  hosts: ring
  gather_facts: false
  roles:
    - role: inferlab.distributed.llamacpp_engine
  post_tasks:
    - name: Keep the facts
      ansible.builtin.copy:
        content: "{{ {'build': llamacpp_engine_build | default(none), 'info': llamacpp_engine_info} | to_json }}"
        dest: "{{ facts_file }}"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
"""


def program(path, script):
    """An executable shell script at path."""
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def standin_engine(directory, rpc=True):
    """A bin dir whose llama-server prints the real --version (on stderr, as the build does) and --help (without
    its --rpc lines when rpc is false: a build without GGML_RPC), and whose ggml-rpc-server prints its real usage
    on stderr. Its help text is directory/server_help.txt, for a test to change."""
    directory.mkdir(parents=True, exist_ok=True)
    help_text = directory / "server_help.txt"
    lines = (CAPTURES / "llama-server_help.txt").read_text().splitlines(True)
    help_text.write_text("".join(line for line in lines if rpc or not line.startswith("--rpc")))
    program(directory / "llama-server", f'case "$1" in --version) cat {CAPTURES / "llama-server_version.txt"} >&2 ;; '
                                        f'--help) cat {help_text} ;; esac\n')
    program(directory / "ggml-rpc-server", f'cat {CAPTURES / "ggml-rpc-server_help.txt"} >&2\n')
    return directory


def run_playbook(tmp_path, playbook, hosts, variables, *options):
    """ansible-playbook of playbook (text) on the ring group's hosts ({name: host variables}), each reached locally
    with this Python, with variables as extra vars; the CompletedProcess."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"ring": {"hosts": {name: dict(local, **extra) for name, extra in hosts.items()}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(playbook)
    return subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(variables), *options], capture_output=True, text=True,
                          env=playbook_env(tmp_path), timeout=600, check=False)

"""roles/llamacpp_engine against the real build: a host whose cache already holds the build (the one `make engine`
made, which the role's own script made) answers from it offline, the real programs are verified, and a second run
changes nothing."""

import json
import subprocess
import sys
from pathlib import Path

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

PLAYBOOK = """
- name: The engine on the ring, from the host's cache
  hosts: ring
  gather_facts: false
  roles:
    - role: inferlab.distributed.llamacpp_engine
  post_tasks:
    - name: Keep the facts
      ansible.builtin.copy:
        content: "{{ {'build': llamacpp_engine_build, 'info': llamacpp_engine_info} | to_json }}"
        dest: "{{ facts_file }}"
        mode: "0644"
      delegate_to: localhost
"""


def run(tmp_path, cache_dir):
    inventory = {"ring": {"hosts": {"lab-a": {"ansible_connection": "local",
                                              "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    variables = {"llamacpp_engine_cache_dir": str(cache_dir), "facts_file": str(tmp_path / "facts.json")}
    return subprocess.run([ansible_playbook(), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(variables)], capture_output=True, text=True, env=playbook_env(tmp_path),
                          timeout=600, check=False)


def test_a_cached_build_is_taken_offline_verified_and_changes_nothing_the_second_time(bin_dir, tmp_path):
    cache_dir = Path(bin_dir).parents[1]  # CACHE/llamacpp-<sha>-<options>/bin
    first = run(tmp_path, cache_dir)
    assert first.returncode == 0, first.stdout[-3000:]
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts["build"]["cached"] is True and facts["build"]["bin_dir"] == str(bin_dir)
    assert facts["info"]["rpc"] is True and facts["info"]["version"]["commit"] == "0c1e570"
    second = run(tmp_path, cache_dir)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "changed=0" in second.stdout.split("PLAY RECAP")[1]

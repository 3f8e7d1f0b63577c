"""The fallback stage refuses, before anything changes, a fallback target served from a ring host (both GPUs are
borrowed while the primaries are paused): roles/fallback_route/tasks/target_elsewhere.yml in a real ansible-playbook
run, on gateway config roles as the preflight reads them."""

import pytest

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import run_playbook, said

PLAYBOOK = """
- name: The fallback's check of its target
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Keep the config's roles as the preflight reads them
      ansible.builtin.set_fact:
        __fallback_route_roles: {models: [small, large], backends: "{{ backends }}", fallbacks: {}}
    - name: Check the target
      ansible.builtin.include_role:
        name: inferlab.distributed.fallback_route
        tasks_from: target_elsewhere
    - name: Say the play went on
      ansible.builtin.debug:
        msg: went on
"""

RING = {
    "gpu-a": {"ansible_host": "gpu-a.lan", "inferlab_link_address": "169.254.10.1",
              "inferlab_original_services": [{"name": "qwen-a", "url": "http://127.0.0.1:30000/v1", "model": "q"}]},
    "gpu-b": {"ansible_host": "10.0.0.12", "inferlab_link_address": "169.254.10.2",
              "inferlab_original_services": [{"name": "qwen-b", "url": "http://10.0.0.12:30000/v1", "model": "q"}]},
}


def run_check(tmp_path, large_backends):
    backends = {"small": ["http://gpu-a.lan:30000/v1", "http://10.0.0.12:30000/v1"], "large": large_backends}
    return run_playbook(tmp_path, PLAYBOOK, {"all": {"children": {"ring": {"hosts": RING}}}}, backends=backends,
                        fallback_route_target_model="large", inferlab_run_dir=str(tmp_path))


@pytest.mark.parametrize("large", [["http://gw-large.lan:8200/v1"], [None], [], ["os.environ/LARGE_API_BASE"]])
def test_a_third_server_or_a_hosted_api_goes_on(tmp_path, large):
    proc = run_check(tmp_path, large)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout


@pytest.mark.parametrize(("large", "host", "name"), [
    (["http://gpu-a.lan:8200/v1"], "gpu-a", "gpu-a.lan"),
    (["http://gw-large.lan:8200/v1", "http://10.0.0.12:8200/v1"], "gpu-b", "10.0.0.12"),
    (["http://169.254.10.1:8200/v1"], "gpu-a", "169.254.10.1"),
])
def test_a_target_on_a_ring_host_is_refused_naming_it(tmp_path, large, host, name):
    proc = run_check(tmp_path, large)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert (f"Nothing was changed: the fallback target 'large' (inferlab_fallback_target_model) is served from {host} "
            f"({name}), a ring host whose GPUs the experiment borrows") in said(proc)
    assert "The fallback needs a third server, another machine or a hosted API behind the gateway" in said(proc)
    assert "went on" not in proc.stdout

"""Mode nextn refused before launch on an SGLang without the merged FlashInfer autotune caches (the first field
report's decisive fix, upstream commit fc5a979f, in 0.5.21 and later): roles/sglang_tp/tasks/nextn_fix.yml in a
real ansible-playbook run, on each ring host's version as the preflight reads it."""

import pytest

from ansible_collections.inferlab.distributed.tests.unit.playbook_run import run_playbook, said

PLAYBOOK = """
- name: The preflight's check of NEXTN's SGLang
  hosts: ring
  gather_facts: false
  tasks:
    - name: Keep what the preflight read on the host
      ansible.builtin.set_fact:
        __sglang_tp_identity: {versions: {sglang: "{{ sglang_version }}"}}
    - name: Check the versions
      ansible.builtin.include_role:
        name: inferlab.distributed.sglang_tp
        tasks_from: nextn_fix
    - name: Say the play went on
      ansible.builtin.debug:
        msg: went on
"""


def run_check(tmp_path, version_a, version_b, **extra_vars):
    ring = {"gpu-a": {"sglang_version": version_a}, "gpu-b": {"sglang_version": version_b}}
    return run_playbook(tmp_path, PLAYBOOK, {"all": {"children": {"ring": {"hosts": ring}}}}, **extra_vars)


@pytest.mark.parametrize(("version_a", "version_b"), [
    ("0.5.21", "0.5.21"), ("0.5.23", "v0.5.23.post1"), ("0.6.0", "0.5.22rc1")])
def test_a_release_with_the_fix_goes_on(tmp_path, version_a, version_b):
    proc = run_check(tmp_path, version_a, version_b)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "went on" in proc.stdout


def test_an_older_release_is_refused_naming_the_fix_and_the_ways_out(tmp_path):
    proc = run_check(tmp_path, "0.5.21", "0.5.20")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("Stop before launch: mode nextn needs SGLang 0.5.21 or later, found gpu-b runs SGLang 0.5.20. Before it, "
            "the draft worker's FlashInfer autotune drops the target's tuned tactics (upstream commit fc5a979f merges "
            "the caches across speculative workers)") in said(proc)
    assert ("leave nextn out of sglang_tp_modes, or set sglang_tp_nextn_min_sglang_version to \"\" for a build that "
            "carries the fix") in said(proc)
    assert "went on" not in proc.stdout


def test_a_version_the_check_cannot_read_is_refused(tmp_path):
    proc = run_check(tmp_path, "main-fc5a979", "0.5.23")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "found gpu-a runs SGLang main-fc5a979." in said(proc)


def test_a_lower_minimum_lets_an_older_release_on(tmp_path):
    proc = run_check(tmp_path, "0.5.20", "0.5.20", sglang_tp_nextn_min_sglang_version="0.5.19")
    assert proc.returncode == 0, proc.stdout[-3000:]

"""ansible-playbook as the collection's tests run it, from pytest in a checkout and from ``ansible-test units``:
the program beside the test's Python (a venv), else the one on PATH (ansible-test puts its own there), with the
checkout's ansible.cfg and the collection found where this tree is importable from."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# ansible-test runs the tests in a copy at .../ansible_collections/inferlab/distributed; a checkout has .collections/
COLLECTIONS_DIR = REPO_ROOT.parents[2] if REPO_ROOT.parents[1].name == "ansible_collections" else REPO_ROOT.joinpath(
    ".collections")


def ansible_playbook():
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    assert found, f"ansible-playbook is neither beside {sys.executable} nor on PATH"
    return found


def playbook_env(tmp_path, **extra):
    """The environment of a test's ansible-playbook: the checkout's settings, this tree's collection, no colour and
    a local temp of the test's own; ``extra`` adds to it (ANSIBLE_STRATEGY=..., say)."""
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
                ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_DIR), ANSIBLE_NOCOLOR="1",
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), **extra)


def run_playbook(tmp_path, playbook, inventory, *extra_args, **extra_vars):
    """``ansible-playbook`` on the controller (``-c local``) with the ``playbook`` text, an ``inventory`` (a dict,
    written as JSON, or a path) and ``extra_vars`` as one JSON ``-e``, after ``extra_args``: a task file's checks in a
    real run, as the roles run them. Returns the finished process (stdout and stderr as text)."""
    path = tmp_path / "playbook.yml"
    path.write_text(playbook)
    if isinstance(inventory, dict):
        written = tmp_path / "hosts.yml"
        written.write_text(json.dumps(inventory))
        inventory = written
    return subprocess.run(
        [ansible_playbook(), "-i", str(inventory), "-c", "local", str(path), *extra_args, "-e", json.dumps(extra_vars)],
        cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"), capture_output=True, text=True,
        timeout=120, check=False)


def said(proc):
    """What a run printed, its whitespace folded: the callback folds long messages at spaces."""
    return " ".join(proc.stdout.split())


# The staged experiment's plan checks (roles/experiment/tasks/plan.yml) as a playbook on the controller, and a line
# that says the play went on past them.
EXPERIMENT_PLAN_PLAYBOOK = """
- name: The experiment's plan checks
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check the plan
      ansible.builtin.include_role:
        name: inferlab.distributed.experiment
        tasks_from: plan
    - name: Say the play went on
      ansible.builtin.debug:
        msg: went on
"""

"""The site dry run's notes: plugin_utils/_preflight.py (append, read, malformed lines) and the preflight_check action
in a real ansible-playbook run, where it is ansible.builtin.assert in a stage and a note in a dry run."""

import json
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.plugin_utils._preflight import (
    PROBLEMS_FILE,
    PreflightError,
    note_problem,
    read_problems,
)
from ansible_collections.inferlab.distributed.tests.unit.playbook_run import ansible_playbook, playbook_env

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_notes_are_read_back_in_order_each_once(tmp_path):
    note_problem(str(tmp_path), "lab-a", "Stop if iperf3 is missing", "Stop if iperf3 is missing on lab-a: ...")
    note_problem(str(tmp_path), "lab-b", "Stop if a port is busy", "port 30000\n  busy")
    # a check run once for its play reaches every host of it: the same check and message again is the same problem
    note_problem(str(tmp_path), "lab-b", "Stop if iperf3 is missing", "Stop if iperf3 is missing on lab-a: ...")
    assert read_problems(str(tmp_path)) == [
        {"host": "lab-a", "check": "Stop if iperf3 is missing", "message": "Stop if iperf3 is missing on lab-a: ..."},
        {"host": "lab-b", "check": "Stop if a port is busy", "message": "port 30000 busy"},
    ]
    assert oct(os.stat(tmp_path / PROBLEMS_FILE).st_mode & 0o777) == "0o600"


def test_no_notes_is_no_problem(tmp_path):
    assert read_problems(str(tmp_path)) == []


def test_a_line_that_is_not_a_problem_is_one(tmp_path):
    note_problem(str(tmp_path), "lab-a", "check", "message")
    with open(tmp_path / PROBLEMS_FILE, "a") as handle:
        handle.write('{"host": "lab-b", "check": "cut short\n[1, 2]\n')
    problems = read_problems(str(tmp_path))
    assert problems[0] == {"host": "lab-a", "check": "check", "message": "message"}
    assert len(problems) == 3
    for number, problem in enumerate(problems[1:], 2):
        assert problem["message"].startswith(f"line {number} of preflight/problems.jsonl is not a problem: ")
    assert "cut short" in problems[1]["message"] and problems[1]["host"] is None


def test_a_note_needs_the_run_directory():
    with pytest.raises(PreflightError, match=r"inferlab_run_dir, found nothing.*inferlab run preflight"):
        note_problem("", "lab-a", "check", "message")


def _note_many(run_dir, worker):
    for n in range(200):
        note_problem(run_dir, f"host-{worker}", f"check {n}", f"{worker}:{n} " + "x" * 900)


def test_hosts_noting_at_once_never_interleave_their_lines(tmp_path):
    workers = [multiprocessing.Process(target=_note_many, args=(str(tmp_path), w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    lines = (tmp_path / PROBLEMS_FILE).read_text().splitlines()
    assert len(lines) == 800
    assert all(json.loads(line)["message"].endswith("x" * 900) for line in lines)
    assert len(read_problems(str(tmp_path))) == 800


PLAYBOOK = """\
- name: Checks as a stage and the dry run run them
  hosts: all
  gather_facts: false
  vars:
    # an expression, as experiment.yml sets it from ansible_check_mode: the action must template it
    inferlab_preflight_collect: "{{ dry_run | default(false) }}"
  tasks:
    - name: Stop if the port is busy
      inferlab.distributed.preflight_check:
        that: port_free | bool
        fail_msg: >-
          Stop if a port is busy on {{ inventory_hostname }}: expected 30000 free, found a listener; set sglang_tp_port
        quiet: true

    - name: Stop if a test port is busy
      inferlab.distributed.preflight_check:
        that: item != 5202
        fail_msg: "port {{ item }} is busy"
      loop: [5201, 5202, 5203, 5204]

    - name: Stop if the context length is unknown
      inferlab.distributed.preflight_check:
        that: never_set.max_position_embeddings > 0
        fail_msg: the context length is unknown

    - name: Stop if all is well
      inferlab.distributed.preflight_check:
        that: true

    - name: Say the play went on
      ansible.builtin.debug:
        msg: went on
"""


def run_playbook(tmp_path, *extra):
    playbook = tmp_path / "checks.yml"
    playbook.write_text(PLAYBOOK)
    return subprocess.run(
        [ansible_playbook(), "-i", "localhost,", "-c", "local", str(playbook), "-e", "port_free=false", *extra],
        cwd=REPO_ROOT, env=playbook_env(tmp_path, ANSIBLE_STRATEGY="linear"), capture_output=True, text=True,
        timeout=120, check=False)


def test_in_a_stage_it_is_assert(tmp_path):
    proc = run_playbook(tmp_path, "-e", f"inferlab_run_dir={tmp_path}")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("Stop if a port is busy on localhost: expected 30000 free, found a listener; set sglang_tp_port"
            in proc.stdout)
    assert "went on" not in proc.stdout
    assert not (tmp_path / PROBLEMS_FILE).exists()


def test_in_a_dry_run_it_notes_every_problem_and_the_play_goes_on(tmp_path):
    proc = run_playbook(tmp_path, "-e", f"inferlab_run_dir={tmp_path}", "-e", "dry_run=true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "went on" in proc.stdout
    problems = read_problems(str(tmp_path))
    assert [(p["host"], p["check"]) for p in problems] == [
        ("localhost", "Stop if the port is busy"),
        ("localhost", "Stop if a test port is busy"),
        ("localhost", "Stop if the context length is unknown"),
    ]
    assert problems[0]["message"] == ("Stop if a port is busy on localhost: expected 30000 free, found a listener; "
                                      "set sglang_tp_port")
    assert problems[1]["message"] == "port 5202 is busy"  # one item of four
    # a condition that cannot be evaluated is noted too, never passed
    assert problems[2]["message"].startswith("not checked: ") and "never_set" in problems[2]["message"]


def test_a_dry_run_without_a_run_directory_fails_saying_so(tmp_path):
    proc = run_playbook(tmp_path, "-e", "dry_run=true")
    assert proc.returncode == 2
    assert "inferlab_run_dir, found nothing" in proc.stdout

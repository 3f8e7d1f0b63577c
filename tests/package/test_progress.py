"""inferlab.run.progress: the lines `inferlab run` shows instead of Ansible's output - plays until the first stage, each
stage's start and end from the experiment's journal, each failed task - and the CLI with and without -v, on a real
ansible-runner run of a tiny playbook."""

import io
import json
import sys

from inferlab import cli, exit_codes
from inferlab.run import progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def journal(run_dir, stage, index, status, started="2026-12-04T08:00:00Z", finished=None, note=""):
    write_json(run_dir / "fragments" / "journal" / f"{stage}.json",
               {"stage": stage, "index": index, "status": status, "started": started, "finished": finished,
                "note": note})


def play(name):
    return {"event": "playbook_on_play_start", "event_data": {"play": name}}


def lines_of(stream):
    return [line.removeprefix("inferlab: ") for line in stream.getvalue().splitlines()]


def test_plays_until_the_first_stage_then_each_stage_start_and_end_in_the_plans_order(tmp_path):
    out, clock = io.StringIO(), Clock()
    shown = progress.Progress(tmp_path, stream=out, clock=clock)
    assert shown(play("Plan the experiment")) is True
    write_json(tmp_path / "fragments" / "experiment" / "plan.json", {"selected": ["verify", "fallback", "restore"]})
    journal(tmp_path, "verify", 1, "running")
    shown({"event": "runner_on_ok", "event_data": {}})
    clock.now = 0.2  # within the poll interval: the journal is not read again
    journal(tmp_path, "verify", 1, "ok", finished="2026-12-04T08:00:12Z")
    shown({"event": "runner_on_ok", "event_data": {}})
    clock.now = 1.0
    shown({"event": "runner_on_ok", "event_data": {}})
    shown(play("Stage fallback"))  # a play once stages run: not shown
    journal(tmp_path, "fallback", 6, "failed", started="2026-12-04T08:00:12Z", finished="2026-12-04T08:01:00Z",
            note="One or more items failed")
    clock.now = 2.0
    shown({"event": "runner_on_ok", "event_data": {}})
    assert lines_of(out) == [
        "play: Plan the experiment",
        "stage 1/3 verify: started",
        "stage 1/3 verify: ok, 12 s",
        "stage 2/3 fallback: started",
        "stage 2/3 fallback: failed, 48 s (One or more items failed)",
    ]


def test_the_plans_stage_table_counts_the_stages_that_always_run(tmp_path):
    """plan.json's `stages` rows (what the experiment writes): the restore and prober_stop run whatever was asked."""
    out = io.StringIO()
    rows = [{"stage": "verify", "index": 1, "selected": True}, {"stage": "link_test", "index": 2, "selected": False},
            {"stage": "prober_stop", "index": 14, "selected": True},
            {"stage": "restore", "index": 13, "selected": True}]
    write_json(tmp_path / "fragments" / "experiment" / "plan.json", {"selected": ["verify"], "stages": rows})
    journal(tmp_path, "restore", 13, "running")
    progress.Progress(tmp_path, stream=out)(play("p"))
    assert lines_of(out) == ["stage 2/3 restore: started"]


def test_a_stage_outside_the_plan_a_file_being_written_and_no_finish_time(tmp_path):
    out = io.StringIO()
    shown = progress.Progress(tmp_path, stream=out)
    journal(tmp_path, "prober_stop", 14, "ok", finished=None)
    (tmp_path / "fragments" / "journal" / "restore.json").write_text('{"stage": "rest')  # cut: read next time
    shown(play("the end"))
    assert lines_of(out) == ["stage prober_stop: started", "stage prober_stop: ok, duration unknown"]


def test_failed_tasks_and_items_with_host_and_message_an_ignored_failure_not_and_no_log_hidden(tmp_path):
    out = io.StringIO()
    shown = progress.Progress(tmp_path, stream=out)
    shown({"event": "runner_item_on_failed",
           "event_data": {"host": "localhost", "task": "Pause the primaries", "item": {"host": "lab-a"},
                          "res": {"msg": "could not stop\nservice original-a",
                                  "_ansible_item_label": "lab-a: original-a",
                                  "_ansible_delegated_vars": {"ansible_host": "lab-a"}}}})
    shown({"event": "runner_on_failed", "event_data": {"host": "lab-b", "task": "Check", "ignore_errors": True,
                                                       "res": {"msg": "expected"}}})
    shown({"event": "runner_on_failed", "event_data": {"host": "lab-b", "task": "Read the key",
                                                       "res": {"censored": "the output has been hidden"}}})
    shown({"event": "runner_on_failed", "event_data": {"host": "lab-b", "task": "Long", "res": {"msg": ["x" * 400]}}})
    shown({"event": "runner_on_unreachable", "event_data": {"host": "lab-c", "res": {"msg": "ssh: timed out"}}})
    assert lines_of(out) == [
        "failed on localhost -> lab-a: Pause the primaries: [lab-a: original-a] could not stop service original-a",
        "failed on lab-b: Read the key: (output hidden: no_log)",
        "failed on lab-b: Long: " + "x" * 297 + "...",
        "unreachable: lab-c: ssh: timed out",
    ]


def test_a_dry_runs_problems_are_shown_every_one_whole_one_a_line(tmp_path):
    """A failure whose message is a list (the site dry run's: a heading, then a problem an item) shows every item on
    a line of its own, whole, however many and however long: the whole list, not its first 300 characters."""
    out = io.StringIO()
    problems = [f"lab-{i}: Stop if the model's disk is small: expected 60 GB free at /models, found {i} GB; set "
                f"inferlab_model_path to a volume with room ({'x' * 200})" for i in range(13)]
    failed = {"host": "localhost", "task": "Stop if the site has a problem",
              "res": {"msg": ["The site dry run found 13 problem(s):"] + problems}}
    progress.Progress(tmp_path, stream=out)({"event": "runner_on_failed", "event_data": failed})
    assert lines_of(out) == ["failed on localhost: Stop if the site has a problem: The site dry run found 13 "
                             "problem(s):"] + ["  " + problem for problem in problems]


def test_a_plan_that_is_not_json_gives_stages_without_their_place(tmp_path):
    out = io.StringIO()
    write_json(tmp_path / "fragments" / "experiment" / "plan.json", ["not", "a", "plan"])
    journal(tmp_path, "verify", 1, "running")
    progress.Progress(tmp_path, stream=out)(play("p"))
    assert lines_of(out) == ["stage verify: started"]


PLAYBOOK = """\
- name: A tiny run against the controller
  hosts: all
  gather_facts: false
  tasks:
    - name: Say something on Ansible's output
      ansible.builtin.debug:
        msg: a line of Ansible's own output

    - name: Fail before changing anything
      ansible.builtin.fail:
        msg: a precondition failed
"""


def test_inferlab_run_shows_plays_and_failures_by_default_and_ansibles_output_with_v(tmp_path, capsys):
    playbook = tmp_path / "tiny.yml"
    playbook.write_text(PLAYBOOK)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    run_dir = tmp_path / "run"
    code = cli.main(["run", str(playbook), "-i", str(inventory), "--run-dir", str(run_dir)])
    assert code == exit_codes.PRECONDITION_FAILED
    captured = capsys.readouterr()
    assert "TASK [" not in captured.out + captured.err
    assert "inferlab: play: A tiny run against the controller" in captured.err
    assert "inferlab: failed on local: Fail before changing anything: a precondition failed" in captured.err
    assert f"inferlab: Ansible's whole output: {run_dir.resolve() / 'artifacts' / 'ansible' / 'stdout'}" in captured.err
    assert "TASK [Fail before changing anything]" in (run_dir / "artifacts" / "ansible" / "stdout").read_text()

    code = cli.main(["run", str(playbook), "-i", str(inventory), "--run-dir", str(tmp_path / "run-v"), "-v"])
    captured = capsys.readouterr()
    assert "TASK [Fail before changing anything]" in captured.out
    assert "inferlab: play:" not in captured.err


def test_limit_runs_on_the_named_hosts_only(tmp_path, capsys):
    playbook = tmp_path / "tiny.yml"
    playbook.write_text(PLAYBOOK)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n"
                         f"other ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    run_dir = tmp_path / "run"
    cli.main(["run", str(playbook), "-i", str(inventory), "--run-dir", str(run_dir), "--limit", "other"])
    err = capsys.readouterr().err
    assert "failed on other:" in err and "failed on local:" not in err
    assert sorted(json.loads((run_dir / "run.json").read_text())["stats"]["failures"]) == ["other"]

"""inferlab.api.run: a real ansible-runner run of a tiny playbook against localhost (no lab), its status, exit code,
run directory and record; cancellation through the cancel callback; and `inferlab run` as its CLI."""

import json
import re
import signal
import sys
from pathlib import Path

import pytest

from inferlab import api, cli, exit_codes
from inferlab.run import runner

PLAYBOOK = """\
- name: A tiny run against the controller
  hosts: local
  gather_facts: false
  tasks:
    - name: Make the fragment directory
      ansible.builtin.file:
        path: "{{ inferlab_run_dir }}/fragments/demo"
        state: directory
        mode: "0755"
      changed_when: false

    - name: Write a fragment, with the strategy ansible-playbook was given
      ansible.builtin.copy:
        content: '{"answer": 42, "strategy": "{{ lookup("ansible.builtin.env", "ANSIBLE_STRATEGY") }}"}'
        dest: "{{ inferlab_run_dir }}/fragments/demo/local.json"
        mode: "0644"
      changed_when: false

    - name: Fail before changing anything
      ansible.builtin.fail:
        msg: a precondition failed
      when: fail_early | default(false) | bool

    - name: Change something
      ansible.builtin.file:
        path: "{{ inferlab_run_dir }}/changed"
        state: touch
        mode: "0644"

    - name: Wait
      ansible.builtin.command: sleep {{ sleep_s | default(0) }}
      changed_when: false
"""


def tiny_project(tmp_path):
    """The tiny playbook and an inventory of the controller alone, in ``tmp_path``."""
    playbook = tmp_path / "tiny.yml"
    playbook.write_text(PLAYBOOK)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    return playbook, inventory


@pytest.fixture
def project(tmp_path):
    return tiny_project(tmp_path)


def test_success_returns_status_rc_run_dir_and_record(project, tmp_path):
    playbook, inventory = project
    result = api.run(playbook, inventory, run_dir=tmp_path / "run")
    assert (result.status, result.rc, result.ansible_rc) == ("successful", exit_codes.SUCCESS, 0)
    assert result.succeeded and not result.canceled
    assert result.run_dir == (tmp_path / "run").resolve()
    assert result.record_error is None
    assert result.record["stages"]["demo"]["local"] == {"answer": 42, "strategy": "inferlab_mitogen_linear"}
    assert json.loads((result.run_dir / "run.json").read_text())["strategy"] == "mitogen"
    assert result.record["run"]["exit_code"] == 0
    assert result.record["run"]["stats"]["changed"] == {"local": 1}
    assert json.loads((result.run_dir / "record.json").read_text()) == result.record
    assert (result.run_dir / "report.md").is_file()
    # ansible-runner's own artifact layout, for schedulers that already read it
    assert (result.run_dir / "artifacts" / "ansible" / "status").read_text() == "successful"
    assert (result.run_dir / "artifacts" / "ansible" / "rc").read_text() == "0"


def test_a_failed_precondition_is_10(project, tmp_path):
    playbook, inventory = project
    result = api.run(playbook, inventory, {"fail_early": "true"}, tmp_path / "run")
    assert (result.status, result.rc) == ("failed", exit_codes.PRECONDITION_FAILED)
    assert result.meaning == "a precondition failed and nothing was changed"
    assert result.record["run"]["exit_code"] == exit_codes.PRECONDITION_FAILED
    assert result.record["run"]["extravars"] == {"fail_early": "true"}


def test_cancel_callback_cancels_and_the_outcome_says_so(project, tmp_path):
    playbook, inventory = project
    run_dir = tmp_path / "run"
    calls = []

    def cancel() -> bool:  # cancel once the play has changed something and sits in the long task
        calls.append(1)
        return (run_dir / "changed").exists()

    result = api.run(playbook, inventory, {"sleep_s": "120"}, run_dir, cancel_callback=cancel, restore_playbook=None)
    assert calls
    assert result.status == "canceled" and result.canceled
    assert result.ansible_rc == 254
    # ansible-playbook was stopped before its stats: something may have changed and no restore ran
    assert result.rc == exit_codes.RESTORE_UNVERIFIED and result.restore is None
    assert result.record["run"]["status"] == "canceled"
    assert (run_dir / "artifacts" / "ansible" / "status").read_text() == "canceled"


RESTORE = """\
- name: A tiny restore, verified
  hosts: local
  gather_facts: false
  tasks:
    - name: Make the restore fragment directory
      ansible.builtin.file:
        path: "{{ inferlab_run_dir }}/fragments/restore"
        state: directory
        mode: "0755"

    - name: Undo the change and say the restore verified against the run's known-good snapshots
      ansible.builtin.copy:
        content: >-
          {{ {'host': 'local', 'time': '2026-11-30T00:00:00Z', 'verified': true, 'undo': {},
              'differences': [], 'known_good': restore_known_good_dir,
              'strategy': lookup('ansible.builtin.env', 'ANSIBLE_STRATEGY')} | to_json }}
        dest: "{{ inferlab_run_dir }}/fragments/restore/local.json"
        mode: "0644"
"""


def test_a_canceled_run_is_restored_before_run_returns(project, tmp_path):
    playbook, inventory = project
    restore = tmp_path / "restore.yml"
    restore.write_text(RESTORE)
    run_dir = tmp_path / "run"
    canary = "sk-canary-" + "51d0e2"
    result = api.run(playbook, inventory, {"sleep_s": "120", "site_token": canary}, run_dir,
                     cancel_callback=(run_dir / "changed").exists, restore_playbook=restore)
    assert result.status == "canceled"
    assert result.restore == {"status": "successful", "ansible_rc": 0, "verified": True}
    # the restore gets the run's extra vars from the run directory's 0600 file too, never on its command line
    for ident in ("ansible", "restore"):
        assert canary not in (run_dir / "artifacts" / ident / "command").read_text(), ident
    assert result.rc == exit_codes.EXPERIMENT_FAILED_RESTORED
    assert (run_dir / "artifacts" / "restore" / "status").read_text() == "successful"
    assert result.record["restore"]["local"]["known_good"] == str(run_dir / "known_good")
    # the run was on Mitogen, the restore after it on ansible-core's own strategy
    assert result.record["stages"]["demo"]["local"]["strategy"] == "inferlab_mitogen_linear"
    assert result.record["restore"]["local"]["strategy"] == "linear"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "canceled"
    # the restore ran as the run itself (its extra vars rewritten with the run's id), so the run's locks are its own
    assert json.loads((run_dir / "env" / "extravars").read_text())["inferlab_run_id"] == result.record["run"]["id"]


def test_signal_handlers_are_put_back(project, tmp_path):
    playbook, inventory = project

    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        api.run(playbook, inventory, run_dir=tmp_path / "run")  # no callback: ansible-runner installs its own
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def outcome(tmp_path, status, stats):
    return runner.RunOutcome(
        run_dir=tmp_path, playbook=Path("p.yml"), inventory=Path("i"), status=status, rc=254, stats=stats
    )


def test_exit_code_of_a_canceled_run(tmp_path):
    assert api.exit_code(outcome(tmp_path, "canceled", {})) == exit_codes.RESTORE_UNVERIFIED
    assert api.exit_code(outcome(tmp_path, "timeout", {})) == exit_codes.RESTORE_UNVERIFIED
    # with play stats, the usual rules: nothing changed is 10
    assert api.exit_code(outcome(tmp_path, "canceled", {"changed": {}})) == exit_codes.PRECONDITION_FAILED
    (tmp_path / "fragments" / "restore").mkdir(parents=True)
    (tmp_path / "fragments" / "restore" / "lab-a.json").write_text('{"verified": true}')
    assert api.exit_code(outcome(tmp_path, "canceled", {})) == exit_codes.EXPERIMENT_FAILED_RESTORED


def test_a_record_that_fails_the_schema_is_12(project, tmp_path):
    playbook, inventory = project
    run_dir = tmp_path / "run"
    (run_dir / "fragments" / "serving").mkdir(parents=True)
    (run_dir / "fragments" / "serving" / "baseline.json").write_text("{}")  # a served mode without its fields
    result = api.run(playbook, inventory, run_dir=run_dir)
    assert result.status == "successful"
    assert result.rc == exit_codes.RESTORE_UNVERIFIED
    assert result.record is None
    assert "does not match record.schema.json" in result.record_error


def test_missing_playbook_or_inventory(project, tmp_path):
    playbook, inventory = project
    with pytest.raises(FileNotFoundError, match="playbook 'nope.yml' not found"):
        api.run("nope.yml", inventory, run_dir=tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="inventory .*missing.ini does not exist"):
        api.run(playbook, tmp_path / "missing.ini", run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_inferlab_run_is_the_cli_of_api_run(project, tmp_path, capsys):
    playbook, inventory = project
    run_dir = tmp_path / "run"
    code = cli.main(["run", str(playbook), "-i", str(inventory), "-e", "fail_early=true", "--run-dir", str(run_dir)])
    assert code == exit_codes.PRECONDITION_FAILED
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[-1] == str(run_dir.resolve())
    assert "inferlab: failed, exit 10 (a precondition failed and nothing was changed)" in captured.err
    assert json.loads((run_dir / "record.json").read_text())["run"]["exit_code"] == 10


def test_extra_vars_reach_the_play_through_a_private_file_never_argv(project, tmp_path):
    """ansible-runner puts a dict of extra vars on ansible-playbook's command line (and in artifacts/<ident>/command),
    where `ps` shows them: they go in env/extravars (0600, in a 0700 run directory) instead, and record.json keeps
    a secret's name but not its value."""
    playbook, inventory = project
    canary = "sk-canary-" + "7f3a9c"
    result = api.run(playbook, inventory, {"fail_early": "true", "gateway_api_token": canary,
                                           "nested": {"password": canary, "api_key_file": "/etc/key"}},
                     tmp_path / "run")
    assert result.rc == exit_codes.PRECONDITION_FAILED  # fail_early reached the play
    command = (result.run_dir / "artifacts" / "ansible" / "command").read_text()
    assert canary not in command and "@" + str(result.run_dir / "env" / "extravars") in command
    extravars = result.run_dir / "env" / "extravars"
    assert json.loads(extravars.read_text())["gateway_api_token"] == canary
    assert extravars.stat().st_mode & 0o777 == 0o600
    assert result.run_dir.stat().st_mode & 0o777 == 0o700
    recorded = result.record["run"]["extravars"]
    assert recorded == {"fail_early": "true", "gateway_api_token": "<redacted>",
                        "nested": {"password": "<redacted>", "api_key_file": "/etc/key"}}
    assert canary not in (result.run_dir / "record.json").read_text()


def test_inferlab_run_refuses_a_run_directory_that_holds_a_run(project, tmp_path, capsys):
    playbook, inventory = project
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "record.json").write_text("{}\n")
    code = cli.main(["run", str(playbook), "-i", str(inventory), "--run-dir", str(run_dir)])
    assert code == exit_codes.USAGE
    assert f"the run directory {run_dir.resolve()} exists and is not empty" in capsys.readouterr().err
    assert sorted(p.name for p in run_dir.iterdir()) == ["record.json"]


def test_two_runs_in_directories_of_one_name_get_two_ids(project, tmp_path):
    """A run id was the run directory's name, a time to the second: two controllers starting a run in the same second
    shared it, and each took the other's ledger lock as its own. The directory's name and 8 random hex digits now."""
    playbook, inventory = project
    ids = []
    for controller in ("a", "b"):
        result = api.run(playbook, inventory, {"fail_early": "true"}, tmp_path / controller / "20261203T101500Z-tiny")
        extravars = json.loads((result.run_dir / "env" / "extravars").read_text())
        assert extravars["inferlab_run_id"] == result.record["run"]["id"]  # what the play and its ledgers got
        ids.append(result.record["run"]["id"])
    assert ids[0] != ids[1]
    assert all(re.fullmatch(r"20261203T101500Z-tiny-[0-9a-f]{8}", run_id) for run_id in ids), ids

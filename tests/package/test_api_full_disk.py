"""A full disk under the run directory: the bookkeeping's writes fail (ENOSPC, injected at the one function that
writes each file), and still the restore after a cancel runs, the record is never left cut short, and `api.run`
returns an exit code of the contract with the reason, never a traceback."""

import errno
import json

import pytest
from test_api import RESTORE, tiny_project

from inferlab import api, exit_codes
from inferlab.record import record
from inferlab.report import report
from inferlab.run import runner


@pytest.fixture(name="project")
def fixture_project(tmp_path):
    return tiny_project(tmp_path)


def full_disk_for(monkeypatch, module, name: str, function: str = "write_private"):
    """Make ``module.function`` raise ENOSPC for a file called ``name`` (and work for every other file)."""
    real = getattr(module, function)

    def write(path, *args, **kwargs):
        if path.name == name or str(path).endswith(name):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(module, function, write)


def test_a_canceled_run_whose_run_json_cannot_be_written_is_still_restored(project, tmp_path, monkeypatch):
    playbook, inventory = project
    restore = tmp_path / "restore.yml"
    restore.write_text(RESTORE)
    run_dir = tmp_path / "run"
    full_disk_for(monkeypatch, runner, "run.json")
    result = api.run(playbook, inventory, {"sleep_s": "120"}, run_dir, cancel_callback=(run_dir / "changed").exists,
                     restore_playbook=restore)
    assert result.status == "canceled" and result.canceled_by == "callback"
    assert result.restore == {"status": "successful", "ansible_rc": 0, "verified": True}
    assert result.rc == exit_codes.EXPERIMENT_FAILED_RESTORED
    assert any("run.json could not be written: No space left on device" in p for p in result.problems)
    assert not (run_dir / "run.json").exists() and not (run_dir / ".run.json.tmp").exists()


def test_a_record_that_cannot_be_written_is_12_with_the_reason_and_no_part_of_it_left(project, tmp_path, monkeypatch):
    playbook, inventory = project
    run_dir = tmp_path / "run"
    full_disk_for(monkeypatch, record, "record.json")
    result = api.run(playbook, inventory, {}, run_dir)
    assert result.status == "successful"
    assert result.rc == exit_codes.RESTORE_UNVERIFIED and result.record is None
    assert result.record_error == "record.json could not be written: No space left on device"
    assert not (run_dir / "record.json").exists()


def test_a_report_that_cannot_be_rendered_keeps_the_runs_code_and_says_so(project, tmp_path, monkeypatch):
    playbook, inventory = project

    def crash(*_args):
        raise KeyError("a rendering bug")

    monkeypatch.setattr(report, "render", crash)
    result = api.run(playbook, inventory, {}, tmp_path / "run")
    assert result.rc == exit_codes.SUCCESS and result.record is not None
    assert "the report could not be rendered: KeyError" in result.record_error
    assert json.loads((tmp_path / "run" / "record.json").read_text())["run"]["exit_code"] == 0


def test_ansible_runner_failing_itself_is_an_aborted_run_that_is_restored(project, tmp_path, monkeypatch):
    """ansible-runner raising for the run (a full disk under its artifacts): what the run changed is unknown, so the
    restore runs, and the exit code and the problems say what happened."""
    playbook, inventory = project
    restore = tmp_path / "restore.yml"
    restore.write_text(RESTORE)
    real = runner.ansible_runner.run

    def run(**kwargs):
        if kwargs["ident"] == "ansible":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(**kwargs)

    monkeypatch.setattr(runner.ansible_runner, "run", run)
    result = api.run(playbook, inventory, {}, tmp_path / "run", restore_playbook=restore)
    assert result.status == "failed" and result.restore["verified"] is True
    assert result.rc == exit_codes.EXPERIMENT_FAILED_RESTORED
    assert result.problems[0] == "OSError: [Errno 28] No space left on device"

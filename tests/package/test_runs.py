"""inferlab runs list / prune: what a run directory is, what each says about itself, and that prune removes only old
run directories it recognises."""

import json
import os
import subprocess

import pytest

from inferlab import cli, exit_codes, paths, runs


def make_run(root, name, record=None, run_json=None, artifacts=None, pid=None, payload=b""):
    """A run directory as runner.run_playbook leaves it: env/extravars (its controller's pid, by default one that
    ended), then artifacts/ansible/{status,rc} and run.json when ansible-runner returned, then record.json."""
    path = root / name
    (path / "env").mkdir(parents=True)
    (path / "env" / "extravars").write_text(
        json.dumps({"inferlab_run_dir": str(path), "inferlab_controller_pid": pid or DEAD_PID})
    )
    if artifacts:
        (path / "artifacts" / "ansible").mkdir(parents=True)
        (path / "artifacts" / "ansible" / "status").write_text(artifacts[0])
        (path / "artifacts" / "ansible" / "rc").write_text(str(artifacts[1]))
    if run_json:
        (path / "run.json").write_text(json.dumps(run_json))
    if record:
        (path / "record.json").write_text(json.dumps({"schema_version": 1, "run": record}))
    (path / "payload.bin").write_bytes(payload)
    return path


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


DEAD_PID = dead_pid()  # the controller of a run that ended


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    make_run(
        root,
        "20261130T100000Z-verify",
        record={
            "playbook": "playbooks/verify.yml",
            "started": "2026-11-30T10:00:00Z",
            "status": "successful",
            "ansible_rc": 0,
            "exit_code": 0,
        },
        artifacts=("successful", 0),
        payload=b"x" * 2048,
    )
    make_run(
        root,
        "20261130T100000Z-verify.2",
        artifacts=("failed", 2),
        run_json={
            "playbook": "/repo/playbooks/verify.yml",
            "status": "failed",
            "ansible_rc": 2,
            "started": "2026-11-30T10:00:00Z",
        },
    )
    make_run(root, "20261130T110000Z-serve", artifacts=("canceled", 254))
    make_run(root, "20261130T120000Z-lab_up", pid=dead_pid())
    make_run(root, "20261130T130000Z-link_test", pid=os.getpid())  # this process: still running
    # Not run directories: a foreign folder, a bad time, a file and a symlink with run-like names.
    (root / "notes").mkdir()
    (root / "notes" / "keep.txt").write_text("mine")
    (root / "20261399T999999Z-verify").mkdir()
    (root / "20261130T090000Z-file").write_text("not a directory")
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "precious.txt").write_text("do not delete")
    (root / "20261130T080000Z-linked").symlink_to(outside)
    return root


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("20261130T100000Z-verify", ("2026-11-30T10:00:00", 1)),
        ("20261130T100000Z-verify.3", ("2026-11-30T10:00:00", 3)),
        ("20261130T100000Z-lab_up", ("2026-11-30T10:00:00", 1)),
        ("20261130T100000Z-my.play", ("2026-11-30T10:00:00", 1)),
        ("20261399T999999Z-verify", None),
        ("20261130T100000Z-", None),
        ("20261130T100000-verify", None),
        ("notes", None),
        ("20261130T100000Z-a/b", None),
    ],
)
def test_parse_name(name, parsed):
    result = runs.parse_name(name)
    assert (None if result is None else (result[0].strftime("%Y-%m-%dT%H:%M:%S"), result[1])) == parsed


def test_list_describes_each_run_from_what_it_left(root):
    found = {r.name: r for r in runs.list_runs(root)}
    assert list(found) == [
        "20261130T100000Z-verify",
        "20261130T100000Z-verify.2",
        "20261130T110000Z-serve",
        "20261130T120000Z-lab_up",
        "20261130T130000Z-link_test",
    ]
    verify = found["20261130T100000Z-verify"]
    assert (verify.playbook, verify.status, verify.exit_code, verify.ansible_rc) == (
        "playbooks/verify.yml",
        "successful",
        0,
        0,
    )
    assert verify.size_bytes > 2048
    assert (found["20261130T100000Z-verify.2"].status, found["20261130T100000Z-verify.2"].ansible_rc) == ("failed", 2)
    serve = found["20261130T110000Z-serve"]
    assert (serve.playbook, serve.status, serve.ansible_rc, serve.exit_code) == ("serve", "canceled", 254, None)
    assert serve.started == "2026-11-30T11:00:00Z"  # from the name
    assert found["20261130T120000Z-lab_up"].status == "interrupted"
    assert found["20261130T130000Z-link_test"].status == "running"


def test_list_of_a_missing_root_is_empty(tmp_path):
    assert runs.list_runs(tmp_path / "none") == []


def test_select_prunable_keeps_the_newest_and_running_ones(root):
    found = runs.list_runs(root)
    doomed, running = runs.select_prunable(found, keep=1)
    assert [r.name for r in doomed] == [
        "20261130T100000Z-verify",
        "20261130T100000Z-verify.2",
        "20261130T110000Z-serve",
        "20261130T120000Z-lab_up",
    ]
    assert running == []  # the running one is the newest
    doomed, _kept = runs.select_prunable(found, keep=4)
    assert [r.name for r in doomed] == ["20261130T100000Z-verify"]
    assert runs.select_prunable(found, keep=10) == ([], [])
    with pytest.raises(ValueError, match="at least 1"):
        runs.select_prunable(found, keep=0)


def test_a_running_run_is_never_pruned(root):
    make_run(root, "20261130T140000Z-verify")  # newer than the running link_test
    doomed, running = runs.select_prunable(runs.list_runs(root), keep=1)
    assert [r.name for r in running] == ["20261130T130000Z-link_test"]
    assert "20261130T130000Z-link_test" not in [r.name for r in doomed]


def test_cli_prune_dry_run_removes_nothing(root, capsys):
    before = sorted(p.name for p in root.iterdir())
    assert cli.main(["runs", "prune", "--keep", "2", "--root", str(root), "--dry-run"]) == exit_codes.SUCCESS
    out = capsys.readouterr().out
    assert f"would remove {root / '20261130T100000Z-verify'} (" in out
    assert "would remove 3 of 5 run directories" in out
    assert sorted(p.name for p in root.iterdir()) == before


def test_cli_prune_removes_old_runs_only(root, capsys):
    assert cli.main(["runs", "prune", "--keep", "2", "--root", str(root)]) == exit_codes.SUCCESS
    out = capsys.readouterr().out
    assert out.count("removed ") == 4  # three lines and the total
    assert sorted(p.name for p in root.iterdir()) == [
        "20261130T080000Z-linked",
        "20261130T090000Z-file",
        "20261130T120000Z-lab_up",
        "20261130T130000Z-link_test",
        "20261399T999999Z-verify",
        "notes",
    ]
    assert (root / "notes" / "keep.txt").read_text() == "mine"
    assert (root.parent / "elsewhere" / "precious.txt").read_text() == "do not delete"


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "prune"],
        ["runs", "prune", "--keep", "0"],
        ["runs", "prune", "--keep", "-3"],
        ["runs", "prune", "--keep", "x"],
    ],
)
def test_cli_prune_refuses_a_keep_below_1(root, argv, capsys):
    before = sorted(p.name for p in root.iterdir())
    assert cli.main([*argv, "--root", str(root)]) == exit_codes.USAGE
    assert sorted(p.name for p in root.iterdir()) == before


def test_remove_rechecks_the_directory(root):
    run = runs.list_runs(root)[0]
    run.path.rename(root / "renamed")
    with pytest.raises(ValueError, match="not a run directory"):
        runs.remove(run)


def test_cli_list_json_and_table(root, capsys, monkeypatch):
    monkeypatch.setattr(paths, "RUNS", root)
    assert cli.main(["runs", "list", "--json"]) == exit_codes.SUCCESS
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed][0] == "20261130T100000Z-verify"
    assert set(listed[0]) == {
        "name",
        "path",
        "playbook",
        "started",
        "status",
        "exit_code",
        "ansible_rc",
        "size_bytes",
        "controller_pid",
    }
    assert cli.main(["runs", "list"]) == exit_codes.SUCCESS
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "STARTED", "PLAYBOOK", "STATUS", "EXIT", "SIZE"]
    assert lines[1].split()[:5] == [
        "20261130T100000Z-verify",
        "2026-11-30T10:00:00Z",
        "playbooks/verify.yml",
        "successful",
        "0",
    ]
    assert len(lines) == 6


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (1023, "1023 B"), (2048, "2.0 KiB"), (5 * 2**20, "5.0 MiB"), (3 * 2**40, "3072.0 GiB")],
)
def test_human_size(size, text):
    assert runs.human_size(size) == text


def test_a_canceled_run_still_restoring_is_never_pruned(root):
    # ansible-runner returned (run.json: canceled), and the same `inferlab run` process runs restore.yml in the run
    # directory before it writes record.json
    path = make_run(root, "20261130T093000Z-experiment", artifacts=("canceled", 254), pid=os.getpid(),
                    run_json={"playbook": "experiment", "status": "canceled", "ansible_rc": 254})
    (path / "artifacts" / "restore").mkdir()
    [restoring] = [r for r in runs.list_runs(root) if r.name == path.name]
    assert restoring.status == "restoring"
    doomed, kept = runs.select_prunable(runs.list_runs(root), keep=1)
    assert path.name in [r.name for r in kept] and path.name not in [r.name for r in doomed]
    (path / "record.json").write_text(json.dumps({"schema_version": 1, "run": {"status": "canceled"}}))
    assert [r.status for r in runs.list_runs(root) if r.name == path.name] == ["canceled"]  # its record: done

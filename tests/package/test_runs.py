"""inferlab runs list / prune: what a run directory is, what each says about itself, and that prune removes only old
run directories it recognises."""

import json
import os
import subprocess

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab import cli, exit_codes
from inferlab.record import runs
from inferlab.system import liveness

LAB_UP = FIXTURE_ROOT / "report" / "lab_up.json"  # a whole record, as record.write made it


def whole_record(run: dict) -> dict:
    """A record that record.read accepts, its `run` updated with `run`."""
    data = json.loads(LAB_UP.read_text())
    data["run"].update(run)
    return data


def make_run(root, name, record=None, run_json=None, artifacts=None, pid=None, payload=b""):
    """A run directory as runner.run_playbook leaves it: env/extravars (its controller's pid and start time, by
    default of one that ended), then artifacts/ansible/{status,rc} and run.json when ansible-runner returned, then
    record.json (`record`: its run's fields)."""
    path = root / name
    (path / "env").mkdir(parents=True)
    (path / "env" / "extravars").write_text(
        json.dumps({"inferlab_run_dir": str(path), **liveness.controller_vars(pid or DEAD_PID)})
    )
    if artifacts:
        (path / "artifacts" / "ansible").mkdir(parents=True)
        (path / "artifacts" / "ansible" / "status").write_text(artifacts[0])
        (path / "artifacts" / "ansible" / "rc").write_text(str(artifacts[1]))
    if run_json:
        (path / "run.json").write_text(json.dumps(run_json))
    if record:
        (path / "record.json").write_text(json.dumps(whole_record(record)))
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
    monkeypatch.setenv("INFERLAB_RUNS", str(root))
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
        "record_problem",
        "awaits_restore",
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
    (path / "record.json").write_text(json.dumps(whole_record({"status": "canceled", "exit_code": 11})))
    assert [r.status for r in runs.list_runs(root) if r.name == path.name] == ["canceled"]  # its record: done


def test_a_live_pid_of_another_process_is_not_the_runs_controller(root):
    """pid plus start time, as the ledger judges a process: this test's own pid with another start time is a reused
    pid, so the run it names is interrupted, not running."""
    path = make_run(root, "20261130T133000Z-serve")
    extravars = json.loads((path / "env" / "extravars").read_text())
    extravars.update(inferlab_controller_pid=os.getpid(),
                     inferlab_controller_start_time=liveness.start_time(os.getpid()) - 1)
    (path / "env" / "extravars").write_text(json.dumps(extravars))
    [run] = [r for r in runs.list_runs(root) if r.name == path.name]
    assert run.status == "interrupted"


@pytest.mark.parametrize("pid", [1, os.getpid()], ids=["pid 1", "this test"])
def test_a_pid_alone_that_started_after_the_run_is_not_its_controller(root, pid):
    """A run directory from before the start time was recorded: a live pid counts only when its process started
    before the run (pid 1 and this test started long after 2020)."""
    path = make_run(root, "20200101T000000Z-serve")
    (path / "env" / "extravars").write_text(json.dumps({"inferlab_controller_pid": pid}))
    [run] = [r for r in runs.list_runs(root) if r.name == path.name]
    assert run.status == "interrupted"


@pytest.mark.parametrize("pid", [2**70, -1, 0, True, "1", 1.5], ids=["2**70", "-1", "0", "true", "'1'", "1.5"])
def test_a_pid_that_cannot_be_one_is_not_alive(root, pid):
    path = make_run(root, "20261130T133000Z-serve")
    (path / "env" / "extravars").write_text(json.dumps({"inferlab_controller_pid": pid}))
    [run] = [r for r in runs.list_runs(root) if r.name == path.name]
    assert (run.status, run.controller_pid) == ("unknown", None)


def test_a_run_of_another_machine_is_neither_running_nor_pruned_unless_named(root):
    path = make_run(root, "20261130T093000Z-serve", pid=os.getpid())
    extravars = json.loads((path / "env" / "extravars").read_text())
    (path / "env" / "extravars").write_text(json.dumps(dict(extravars, inferlab_controller_machine_id="f" * 32)))
    found = runs.list_runs(root)
    [run] = [r for r in found if r.name == path.name]
    assert run.status == runs.OTHER_CONTROLLER
    doomed, kept = runs.select_prunable(found, keep=1)
    assert path.name in [r.name for r in kept] and "another machine" in runs.kept_reason(run)
    doomed, kept = runs.select_prunable(found, keep=1, named={path.name})
    assert path.name in [r.name for r in doomed]


def interrupted_with_snapshots(root, name="20261130T093000Z-experiment"):
    """A run killed after its verify stage: known-good snapshots, no status, no record, its controller gone."""
    path = make_run(root, name)
    (path / "known_good").mkdir()
    (path / "known_good" / "lab-a.json").write_text("{}")
    return path


def test_an_interrupted_never_restored_run_is_kept_with_its_snapshots_unless_named(root, capsys):
    path = interrupted_with_snapshots(root)
    [run] = [r for r in runs.list_runs(root) if r.name == path.name]
    assert (run.status, run.awaits_restore) == ("interrupted", True)
    doomed, kept = runs.select_prunable(runs.list_runs(root), keep=1)
    assert path.name in [r.name for r in kept] and "never restored" in runs.kept_reason(run)
    assert cli.main(["runs", "prune", "--keep", "1", "--root", str(root)]) == exit_codes.SUCCESS
    assert (path / "known_good" / "lab-a.json").is_file()
    assert f"kept {path}: " in capsys.readouterr().out
    doomed, kept = runs.select_prunable(runs.list_runs(root), keep=1, named={path.name})
    assert path.name in [r.name for r in doomed]
    # named on the command line, it goes
    assert cli.main(["runs", "prune", "--keep", "1", "--root", str(root), "--unrestored", path.name]) == 0
    assert not path.exists()


def verified_restore(root, name, known_good_dir):
    """A standalone restore run pointed at another run's snapshots, verified on its host."""
    path = make_run(root, name, record={"playbook": "playbooks/restore.yml", "exit_code": 0})
    extravars = json.loads((path / "env" / "extravars").read_text())
    (path / "env" / "extravars").write_text(json.dumps(dict(extravars, restore_known_good_dir=known_good_dir)))
    (path / "fragments" / "restore").mkdir(parents=True)
    (path / "fragments" / "restore" / "lab-a.json").write_text(json.dumps({"host": "lab-a", "verified": True}))
    return path


def test_a_run_restored_later_against_its_snapshots_may_be_pruned(root):
    path = interrupted_with_snapshots(root)
    verified_restore(root, "20261130T094000Z-restore", f"runs/{path.name}/known_good")
    [run] = [r for r in runs.list_runs(root) if r.name == path.name]
    assert run.awaits_restore is False
    doomed, _kept = runs.select_prunable(runs.list_runs(root), keep=1)
    assert path.name in [r.name for r in doomed]


def test_a_run_that_restored_itself_or_changed_nothing_does_not_await_a_restore(root):
    restored = interrupted_with_snapshots(root, "20261130T093000Z-experiment")
    (restored / "fragments" / "restore").mkdir(parents=True)
    (restored / "fragments" / "restore" / "lab-a.json").write_text(json.dumps({"verified": True}))
    refused = interrupted_with_snapshots(root, "20261130T093100Z-experiment")
    (refused / "record.json").write_text(json.dumps(whole_record({"status": "failed", "exit_code": 10})))
    unverified = interrupted_with_snapshots(root, "20261130T093200Z-experiment")
    (unverified / "record.json").write_text(json.dumps(whole_record({"status": "failed", "exit_code": 12})))
    awaiting = {r.name: r.awaits_restore for r in runs.list_runs(root)}
    assert [awaiting[p.name] for p in (restored, refused, unverified)] == [False, False, True]


BAD_RECORDS = [
    pytest.param(b"\xff\xfe{}", "not UTF-8 text", id="bad-utf8"),
    pytest.param(b"[" * 100000 + b"]" * 100000, "nested deeper than", id="deep-nesting"),
    pytest.param(json.dumps(dict(whole_record({}), run=[])).encode(), "run: [] is not of type 'object'",
                 id="run-not-an-object"),
    pytest.param(json.dumps(whole_record({"ansible_rc": 2**70})).encode(), "beyond 64 bits", id="huge-integer"),
    pytest.param(json.dumps(whole_record({"status": 7})).encode(), "run/status", id="wrong-type"),
    pytest.param(b'{"schema_version": NaN}', "NaN is not a JSON number", id="nan"),
    pytest.param(json.dumps(whole_record({"playbook": "\ud800"})).encode(), "not valid Unicode", id="lone-surrogate"),
]


@pytest.mark.parametrize(("content", "problem"), BAD_RECORDS)
def test_a_bad_record_is_listed_apart_with_why_and_prune_goes_on(root, capsys, content, problem):
    bad = make_run(root, "20261130T093000Z-experiment", artifacts=("failed", 2))
    (bad / "record.json").write_bytes(content)
    found = {r.name: r for r in runs.list_runs(root)}
    assert problem in found[bad.name].record_problem and found[bad.name].status == "failed"
    assert cli.main(["runs", "list", "--root", str(root)]) == exit_codes.SUCCESS
    out = capsys.readouterr().out
    assert "record.json cannot be read" in out and f"- {bad.name}: " in out
    assert cli.main(["runs", "list", "--root", str(root), "--where", "run"]) == exit_codes.SUCCESS
    assert "1 whose record.json cannot be read" in capsys.readouterr().err
    assert cli.main(["runs", "prune", "--keep", "1", "--root", str(root)]) == exit_codes.SUCCESS
    assert not bad.exists()  # no snapshots: nothing awaits a restore, and the old run went

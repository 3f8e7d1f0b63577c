"""inferlab.analysis.reverify and `inferlab reverify`: how a run of B is run again (its playbook, inventory and private
extra vars, the wrapper's own left out), which claims held against the new runs, and the CLI's flow with the playbook
runs replaced by records written from the compare fixtures (the runner itself is tested in test_api.py)."""

import copy
import itertools
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab import cli, exit_codes, paths
from inferlab.analysis import compare, record_input, reverify, verdict_policy
from inferlab.report import report
from inferlab.run import runner

FIXTURES = FIXTURE_ROOT / "compare"
# what the compare fixtures' records name, resolved in the collection
SETTINGS = paths.Settings.resolve()
LINK_TEST = (SETTINGS.playbooks / "link_test.yml").resolve()
LAB_INVENTORY = (SETTINGS.repo_root / "inventory" / "lab" / "hosts.yml").resolve()
NOW = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def group(name: str, runs: int, stem: str, **run) -> list[dict]:
    records = []
    for i in range(1, runs + 1):
        data = load(name)
        data["run"].update(id=f"{stem}-{i}", **run)
        records.append(data)
    return records


def run_dirs(tmp_path: Path, records: list[dict], extravars: dict) -> list[str]:
    """Run directories holding each record and the private extra vars file `inferlab run` writes."""
    dirs = []
    for data in records:
        run_dir = tmp_path / data["run"]["id"]
        (run_dir / "env").mkdir(parents=True)
        (run_dir / "record.json").write_text(json.dumps(data))
        (run_dir / "env" / "extravars").write_text(json.dumps(
            {"inferlab_run_dir": str(run_dir), "inferlab_run_id": f"{run_dir.name}-0a1b2c3d",
             "inferlab_controller_pid": 4242, **extravars}))
        dirs.append(str(run_dir))
    return dirs


def test_a_run_is_run_again_with_its_own_extra_vars_secrets_included_and_the_wrappers_left_out(tmp_path):
    [run_dir] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"),
                         {"inferlab_layer_link_profile": "clean", "site_token": "tok-5e1f"})
    rerun = reverify.rerun_of(Path(run_dir), "nextn", settings=SETTINGS)
    assert (rerun.run_id, rerun.mode, rerun.playbook, rerun.inventory) == (
        "clean-1", "nextn", LINK_TEST, LAB_INVENTORY)
    assert rerun.extravars == {"inferlab_layer_link_profile": "clean", "site_token": "tok-5e1f"}
    assert reverify.rerun_vars(rerun) == {**rerun.extravars, "inferlab_reverifies": "clean-1"}


def test_a_run_without_its_extra_vars_file_cannot_be_run_again(tmp_path):
    [run_dir] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    (Path(run_dir) / "env" / "extravars").unlink()
    with pytest.raises(reverify.ReverifyError, match="cannot read the run's extra vars .* cannot be run again as it"):
        reverify.rerun_of(Path(run_dir), settings=SETTINGS)
    (Path(run_dir) / "env" / "extravars").write_text("[1]")
    with pytest.raises(reverify.ReverifyError, match="expected a JSON object of extra vars"):
        reverify.rerun_of(Path(run_dir), settings=SETTINGS)


def test_held_only_when_supported_again_by_later_runs_from_a_fresh_start():
    lossy, clean = group("link_lossy.json", 5, "lossy"), group("link_clean_fresh.json", 5, "clean")
    original = compare.compare(lossy, clean)
    assert [v.verdict for v in original.verdicts] == [verdict_policy.SUPPORTED, verdict_policy.SUPPORTED]

    later = group("link_clean_fresh.json", 5, "again", started=NOW, finished=NOW)
    outcomes = reverify.judge(original, compare.compare(lossy, later, require_fresh=True))
    assert [o.held for o in outcomes] == [reverify.HELD, reverify.HELD]
    assert "supported again by later runs from a fresh start: every one of its 5 runs" in outcomes[0].reason

    stale = copy.deepcopy(later)
    stale[2]["stages"]["fresh_start"]["lab-a"]["from"] = "untouched"
    outcomes = reverify.judge(original, compare.compare(lossy, stale, require_fresh=True))
    assert [o.held for o in outcomes] == [reverify.NOT_HELD, reverify.NOT_HELD]
    assert outcomes[0].reason.startswith("supported again, but B again-3 stages.fresh_start does not show")

    gone = group("link_lossy.json", 5, "again", started=NOW, finished=NOW)  # the effect did not come back
    for data in gone:
        data["run"]["extravars"] = {"inferlab_layer_link_profile": "clean"}
        data["stages"]["fresh_start"] = copy.deepcopy(later[0]["stages"]["fresh_start"])
    outcomes = reverify.judge(original, compare.compare(lossy, gone, require_fresh=True))
    assert [(o.held, o.again) for o in outcomes] == [(reverify.NOT_HELD, verdict_policy.INCONCLUSIVE)] * 2
    assert outcomes[0].reason.startswith("inconclusive this time: ")


def test_a_verdict_that_was_not_supported_has_nothing_to_re_verify():
    original = compare.compare(load("link_lossy.json"), load("link_clean_fresh.json"))  # one run a side
    again = compare.compare(load("link_lossy.json"), load("link_clean_fresh.json"), require_fresh=True)
    outcomes = reverify.judge(original, again)
    assert [o.held for o in outcomes] == [reverify.NOTHING, reverify.NOTHING]
    assert outcomes[0].reason == "the original verdict was inconclusive, not supported"


@pytest.fixture
def reruns(tmp_path, monkeypatch):
    """`api.run` of the CLI replaced: each re-run writes a record as a fresh, later run, A's (the lossy link layer)
    from link_lossy.json and B's from `fixture`; what it was given is kept in `calls`."""
    made = SimpleNamespace(calls=[], fixture="link_clean_fresh.json", rc=exit_codes.SUCCESS)
    numbers = itertools.count(1)
    monkeypatch.setattr(runner, "new_run_dir", lambda playbook, runs_root: tmp_path / "new" / f"again-{next(numbers)}")

    def run(playbook, inventory, extravars, run_dir, **options):
        made.calls.append({"playbook": playbook, "inventory": inventory, "extravars": extravars, "run_dir": run_dir,
                           "event_handler": options.get("event_handler")})
        lossy = extravars.get("inferlab_layer_link_profile") == "lossy"
        data = load("link_lossy.json" if lossy else made.fixture)
        data["run"].update(id=run_dir.name, started=NOW, finished=NOW, extravars=extravars)
        run_dir.mkdir(parents=True)
        (run_dir / "record.json").write_text(json.dumps(data))
        return SimpleNamespace(rc=made.rc, status="successful" if made.rc == 0 else "failed",
                               meaning=exit_codes.MEANING[made.rc])

    monkeypatch.setattr(cli.api, "run", run)
    return made


def test_inferlab_reverify_runs_each_b_again_and_says_the_verdicts_held(tmp_path, reruns, capsys):
    a = run_dirs(tmp_path, group("link_lossy.json", 5, "lossy"), {"inferlab_layer_link_profile": "lossy"})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 5, "clean"),
                 {"inferlab_layer_link_profile": "clean", "site_token": "tok-5e1f"})
    code = cli.main(["reverify", ",".join(a), ",".join(b), "--json"])
    assert code == exit_codes.SUCCESS
    # A's runs again too, interleaved with B's: a drift in time reaches both sides alike
    assert [c["extravars"] for c in reruns.calls] == [
        run for i in range(1, 6) for run in (
            {"inferlab_layer_link_profile": "lossy", "inferlab_reverifies": f"lossy-{i}"},
            {"inferlab_layer_link_profile": "clean", "site_token": "tok-5e1f", "inferlab_reverifies": f"clean-{i}"})]
    assert {(c["playbook"], c["inventory"]) for c in reruns.calls} == {(LINK_TEST, LAB_INVENTORY)}
    assert all(c["event_handler"] is not None for c in reruns.calls)
    out = json.loads(capsys.readouterr().out)
    assert (out["a"], out["b"]) == (a, b)
    assert out["a_again"] == [str(tmp_path / "new" / f"again-{i}") for i in range(1, 10, 2)]
    assert out["b_again"] == [str(tmp_path / "new" / f"again-{i}") for i in range(2, 11, 2)]
    assert [o["held"] for o in out["outcomes"]] == [reverify.HELD, reverify.HELD]
    # A again is the same link as A: no drift, every metric's median where it was
    assert out["a_drift"] and all(d["change_pct"] in (0, None) for d in out["a_drift"])


def test_a_verdict_that_does_not_come_back_did_not_re_verify_and_a_failed_rerun_says_so(tmp_path, reruns, capsys):
    a = run_dirs(tmp_path, group("link_lossy.json", 5, "lossy"), {"inferlab_layer_link_profile": "lossy"})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 5, "clean"), {"inferlab_layer_link_profile": "clean"})
    reruns.fixture = "link_lossy.json"  # the same link as A: the "clean" layer is declared, the effect is gone
    assert cli.main(["reverify", ",".join(a), ",".join(b)]) == exit_codes.SUCCESS
    text = capsys.readouterr().out
    assert "| B is faster | supported | inconclusive | **did not re-verify** |" in text

    reruns.fixture, reruns.rc, reruns.calls = "link_clean_fresh.json", exit_codes.EXPERIMENT_FAILED_RESTORED, []
    assert cli.main(["reverify", ",".join(a), ",".join(b)]) == exit_codes.EXPERIMENT_FAILED_RESTORED
    text = capsys.readouterr().out
    assert len(reruns.calls) == 1  # the first failure ends it
    assert "B, run again from a fresh start: none (a re-run failed)" in text
    assert f"did not re-verify: the re-run {tmp_path / 'new' / 'again-11'} failed: exit 11" in text


def test_each_original_run_keeps_every_outcome_and_its_report_shows_them(tmp_path, reruns, capsys):
    """The held verdict, then one that did not hold: both kept in each original run of B, the latest last, and
    its report.md re-rendered with them; A's runs are left alone."""
    a = run_dirs(tmp_path, group("link_lossy.json", 5, "lossy"), {"inferlab_layer_link_profile": "lossy"})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 5, "clean"), {"inferlab_layer_link_profile": "clean"})
    assert cli.main(["reverify", ",".join(a), ",".join(b)]) == exit_codes.SUCCESS
    reruns.fixture = "link_lossy.json"
    assert cli.main(["reverify", ",".join(a), ",".join(b)]) == exit_codes.SUCCESS
    capsys.readouterr()
    for run in b:
        kept = reverify.read_kept(Path(run))
        assert [[o["held"] for o in k["outcomes"]][0] for k in kept] == [reverify.HELD, reverify.NOT_HELD]
        assert all(k["time"].endswith("Z") and k["b"] == b for k in kept)
        text = (Path(run) / "report.md").read_text()
        section = text[text.index("## Re-verification"):text.index("## Plots")]
        assert section.count("| B is faster | supported | supported | **re-verified** |") == 1
        assert section.count("| B is faster | supported | inconclusive | **did not re-verify** |") == 1
        assert section.index("**re-verified**") < section.index("**did not re-verify**")
    assert not any((Path(run) / reverify.KEPT_FILE).exists() for run in a)


def test_kept_outcomes_that_cannot_be_read_are_said_in_the_report(tmp_path):
    [run] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    (Path(run) / reverify.KEPT_FILE).write_text('{"not": "a list"}')
    with pytest.raises(reverify.ReverifyError, match="expected a JSON list of re-verifications"):
        reverify.read_kept(Path(run))
    text = report.write(Path(run), record_input.load_record(Path(run))).read_text()
    assert "The kept re-verifications cannot be read:" in text


def test_inferlab_reverify_refuses_a_b_it_cannot_run_again(tmp_path, reruns, capsys):
    a = run_dirs(tmp_path, group("link_lossy.json", 5, "lossy"), {"inferlab_layer_link_profile": "lossy"})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 5, "clean"), {"inferlab_layer_link_profile": "clean"})
    (Path(b[0]) / "env" / "extravars").unlink()
    assert cli.main(["reverify", ",".join(a), ",".join(b)]) == exit_codes.USAGE
    assert "cannot be run again as it was" in capsys.readouterr().err
    assert reruns.calls == []


def recorded_as(run_dir: str, **run) -> Path:
    """The run directory with its record's run fields replaced (what a copied or hostile record may name)."""
    path = Path(run_dir) / "record.json"
    data = json.loads(path.read_text())
    data["run"].update(run)
    path.write_text(json.dumps(data))
    return Path(run_dir)


@pytest.mark.parametrize("playbook", ["/tmp/evil.yml", "playbooks/../../evil.yml", "../playbooks/link_test.yml",
                                      "playbooks/no_such.yml", "playbooks", "galaxy.yml", "link_test"])
def test_only_the_collections_own_playbooks_are_run_again(tmp_path, playbook):
    (tmp_path / "evil.yml").write_text("- hosts: all\n")
    [run_dir] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    with pytest.raises(reverify.ReverifyError, match=f"names the playbook '{re.escape(playbook)}', which is not one "
                                                     "of the collection's playbooks"):
        reverify.rerun_of(recorded_as(run_dir, playbook=playbook), settings=SETTINGS)


def test_a_playbook_linked_out_of_the_collection_is_refused(tmp_path):
    playbooks = tmp_path / "collection" / "playbooks"
    playbooks.mkdir(parents=True)
    (tmp_path / "evil.yml").write_text("- hosts: all\n")
    (playbooks / "verify.yml").symlink_to(tmp_path / "evil.yml")
    with pytest.raises(reverify.ReverifyError, match="not one of the collection's playbooks"):
        reverify.collection_playbook("playbooks/verify.yml", "r-1", playbooks)


def test_relative_paths_are_the_collections_never_the_current_directorys(tmp_path, monkeypatch):
    """A playbooks/ and an inventory/ in the current directory, named like the record's, are not what runs."""
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "link_test.yml").write_text("- hosts: all\n")
    (tmp_path / "inventory" / "lab").mkdir(parents=True)
    (tmp_path / "inventory" / "lab" / "hosts.yml").write_text("all: {}\n")
    [run_dir] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    monkeypatch.chdir(tmp_path)
    rerun = reverify.rerun_of(Path(run_dir), settings=SETTINGS)
    assert (rerun.playbook, rerun.inventory) == (LINK_TEST, LAB_INVENTORY)


def test_an_inventory_the_collection_does_not_ship_needs_the_users_inventory(tmp_path):
    script = tmp_path / "inventory.sh"
    script.write_text("#!/bin/sh\ntouch /tmp/owned\n")
    script.chmod(0o755)
    [run_dir] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    recorded_as(run_dir, inventory=str(script))
    with pytest.raises(reverify.ReverifyError, match=f"names the inventory '{script}', and it is not an inventory "
                                                     "the collection ships .*: name the inventory of the new runs "
                                                     "with -i"):
        reverify.rerun_of(Path(run_dir), settings=SETTINGS)
    mine = tmp_path / "site.yml"
    assert reverify.rerun_of(Path(run_dir), inventory=mine, settings=SETTINGS).inventory == mine


def test_an_executable_inventory_in_the_collection_is_refused_too(tmp_path):
    shipped = tmp_path / "collection" / "inventory"
    shipped.mkdir(parents=True)
    (shipped / "dynamic.py").write_text("#!/usr/bin/env python3\n")
    (shipped / "dynamic.py").chmod(0o755)
    with pytest.raises(reverify.ReverifyError, match="an executable, which Ansible would run as an inventory script"):
        reverify.collection_inventory("inventory/dynamic.py", "r-1", tmp_path / "collection")


def test_no_supported_verdict_is_not_run_again(tmp_path):
    original = compare.compare(load("link_lossy.json"), load("link_clean_fresh.json"))  # one run a side
    [run_dir] = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    with pytest.raises(reverify.ReverifyError, match="nothing to re-verify: no verdict of A against B was supported "
                                                     r"\(B is faster: inconclusive"):
        reverify.plan(original, [], [Path(run_dir)], settings=SETTINGS)
    lossy, clean = group("link_lossy.json", 5, "lossy"), group("link_clean_fresh.json", 5, "clean")
    [rerun] = reverify.plan(compare.compare(lossy, clean), [], [Path(run_dir)], settings=SETTINGS)
    assert rerun.run_id == "clean-1"


def test_the_runs_are_run_again_interleaved_and_two_modes_of_one_run_once(tmp_path):
    lossy, clean = group("link_lossy.json", 5, "lossy"), group("link_clean_fresh.json", 5, "clean")
    original = compare.compare(lossy, clean)
    a = [Path(d) for d in run_dirs(tmp_path / "a", lossy[:3], {})]
    b = [Path(d) for d in run_dirs(tmp_path / "b", clean[:2], {})]
    assert [r.run_id for r in reverify.plan(original, a, b, settings=SETTINGS)] == [
        "lossy-1", "clean-1", "lossy-2", "clean-2", "lossy-3"]
    # RUN1:baseline,RUN2:baseline against RUN1:nextn,RUN2:nextn: each run serves both modes, so it runs once
    assert [r.run_id for r in reverify.plan(original, a[:2], a[:2], settings=SETTINGS)] == ["lossy-1", "lossy-2"]
    new_dirs = {a[0]: tmp_path / "again-1"}
    assert reverify.respec(f"{a[0]}:nextn", new_dirs, Path) == f"{tmp_path / 'again-1'}:nextn"


def test_a_drift_is_each_metrics_medians_and_their_change():
    lossy = group("link_lossy.json", 5, "lossy")
    drifted = copy.deepcopy(lossy)
    for data in drifted:
        data["run"]["id"] = "later-" + data["run"]["id"]
    drift = reverify.drift(compare.compare(lossy, drifted))
    assert drift and all(d["original"] == d["again"] and d["change_pct"] in (0, None) for d in drift)
    text = "\n".join(reverify.render_lines({"a": ["x"], "b": ["y"], "a_again": [], "b_again": [], "outcomes": [],
                                            "a_drift": drift}))
    assert "A's drift between its original runs and the new ones" in text and "| +0.0 % |" in text


def test_inferlab_reverify_refuses_when_no_verdict_was_supported(tmp_path, reruns, capsys):
    a = run_dirs(tmp_path, group("link_lossy.json", 1, "lossy"), {})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 1, "clean"), {})
    assert cli.main(["reverify", a[0], b[0]]) == exit_codes.USAGE
    assert "nothing to re-verify" in capsys.readouterr().err
    assert reruns.calls == []


def test_inferlab_reverify_runs_the_inventory_the_user_names(tmp_path, reruns, capsys):
    a = run_dirs(tmp_path, group("link_lossy.json", 5, "lossy"), {"inferlab_layer_link_profile": "lossy"})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 5, "clean"), {"inferlab_layer_link_profile": "clean"})
    for run in b:
        recorded_as(run, inventory="/elsewhere/inventory.sh")
    site = tmp_path / "site.yml"
    site.write_text("all: {}\n")
    assert cli.main(["reverify", ",".join(a), ",".join(b), "-i", str(site)]) == exit_codes.SUCCESS
    assert {str(c["inventory"]) for c in reruns.calls} == {str(site)}


def test_a_report_that_cannot_be_rendered_after_the_reruns_keeps_the_printed_outcome(
        tmp_path, reruns, capsys, monkeypatch):
    a = run_dirs(tmp_path, group("link_lossy.json", 5, "lossy"), {"inferlab_layer_link_profile": "lossy"})
    b = run_dirs(tmp_path, group("link_clean_fresh.json", 5, "clean"), {"inferlab_layer_link_profile": "clean"})

    def crash(*_args):
        raise KeyError("a report crash")

    monkeypatch.setattr(report, "write", crash)
    assert cli.main(["reverify", ",".join(a), ",".join(b), "--json"]) == exit_codes.SUCCESS
    captured = capsys.readouterr()
    assert [o["held"] for o in json.loads(captured.out)["outcomes"]] == [reverify.HELD, reverify.HELD]
    assert "a report crash" in captured.err

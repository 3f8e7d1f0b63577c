"""paths.find_collection: the checkout first, else an installed collection (INFERLAB_COLLECTION, then
ANSIBLE_COLLECTIONS_PATH and Ansible's defaults), on real directory trees. tests/install/run.sh installs the package
and the collection for real; these pin down the search order and the error."""

import json
import sys
from pathlib import Path

import pytest

from inferlab import paths
from inferlab.run import runner

SUBDIR = Path("ansible_collections") / "inferlab" / "distributed"
CHECKOUT = Path(__file__).resolve().parents[2]


def installed_collection(base: Path) -> Path:
    """A collection as ansible-galaxy installs it: MANIFEST.json and playbooks/ under ansible_collections/NS/NAME."""
    root = base / SUBDIR
    (root / "playbooks").mkdir(parents=True)
    (root / "playbooks" / "verify.yml").write_text("---\n")
    (root / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": "9.9.9"}}))
    return root


@pytest.fixture
def not_a_checkout(monkeypatch):
    """As an installed package: no source tree around the package, and no collection on sys.path (the unit tests'
    PYTHONPATH holds this checkout's .collections, where ansible-core would find it too)."""
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    monkeypatch.setattr(sys, "path", [])


def test_the_checkout_is_the_collection_when_the_package_runs_from_it(tmp_path):
    root, looked = paths.find_collection({})
    settings = paths.Settings.resolve({}, tmp_path)
    assert root == settings.checkout == settings.collection == settings.repo_root == CHECKOUT
    assert looked == [root]
    assert settings.collection_looked == (root,)
    assert settings.playbooks == root / "playbooks"
    assert settings.ansible_cfg == root / "ansible.cfg"
    # a checkout's own inventory and runs/, wherever the command runs from
    assert settings.default_inventory == root / "inventory" / "lab" / "hosts.yml"
    assert settings.runs == root / "runs"
    assert settings.installed_collections_path() is None


def test_inferlab_runs_wins_over_the_checkouts_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.Settings.resolve({"INFERLAB_RUNS": "~/elsewhere"}, tmp_path).runs == tmp_path / "home" / "elsewhere"
    assert paths.Settings.resolve({"INFERLAB_RUNS": ""}, tmp_path).runs == CHECKOUT / "runs"


def test_settings_are_read_when_resolved_not_at_import(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERLAB_RUNS", str(tmp_path / "first"))
    first = paths.Settings.resolve()
    monkeypatch.setenv("INFERLAB_RUNS", str(tmp_path / "second"))
    assert (first.runs, paths.Settings.resolve().runs) == (tmp_path / "first", tmp_path / "second")
    assert not hasattr(paths, "RUNS")


def test_the_packaged_ansible_cfg_is_the_checkouts():
    assert paths.PACKAGED_ANSIBLE_CFG.read_text() == (CHECKOUT / "ansible.cfg").read_text()


def test_installed_the_settings_are_the_collections_the_packaged_cfg_and_the_cwds(tmp_path, not_a_checkout):
    root = installed_collection(tmp_path / "site")
    settings = paths.Settings.resolve({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "site")}, tmp_path / "work")
    assert (settings.checkout, settings.collection, settings.repo_root) == (None, root.resolve(), root.resolve())
    assert settings.playbooks == root.resolve() / "playbooks"
    assert settings.ansible_cfg == paths.PACKAGED_ANSIBLE_CFG
    assert settings.default_inventory == tmp_path / "work" / "inventory" / "lab" / "hosts.yml"
    assert settings.runs == tmp_path / "work" / "runs"
    assert settings.installed_collections_path() == (tmp_path / "site").resolve()


def test_no_collection_installed_the_settings_name_the_package(tmp_path, not_a_checkout):
    settings = paths.Settings.resolve({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)}, tmp_path)
    assert (settings.collection, settings.repo_root) == (None, paths.PACKAGE_DIR)
    assert settings.collection_looked[0] == tmp_path / SUBDIR
    assert settings.installed_collections_path() is None


def test_an_installed_collection_is_found_in_ansible_collections_path(tmp_path, not_a_checkout):
    first, second = tmp_path / "empty", tmp_path / "site"
    first.mkdir()
    root = installed_collection(second)
    found, looked = paths.find_collection({"ANSIBLE_COLLECTIONS_PATH": f"{first}:{second}"})
    assert found == root.resolve()
    assert looked[:2] == [first / SUBDIR, second / SUBDIR]
    assert paths.collections_path(found) == second.resolve()


def test_ansible_s_default_paths_are_searched_without_the_variable(tmp_path, not_a_checkout, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    root = installed_collection(tmp_path / ".ansible" / "collections")
    found, _looked = paths.find_collection({})
    assert found == root.resolve()


def test_inferlab_collection_wins_and_must_be_an_installed_collections_directory(tmp_path, not_a_checkout):
    other = installed_collection(tmp_path / "other")
    chosen = installed_collection(tmp_path / "chosen")
    env = {"INFERLAB_COLLECTION": str(chosen), "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "other")}
    assert paths.find_collection(env) == (chosen.resolve(), [chosen.resolve()])
    # a directory that is not ansible_collections/inferlab/distributed is refused, never searched around
    plain = tmp_path / "plain"
    (plain / "playbooks").mkdir(parents=True)
    (plain / "MANIFEST.json").write_text("{}")
    assert paths.find_collection({"INFERLAB_COLLECTION": str(plain)}) == (None, [plain.resolve()])
    assert other.is_dir()


def test_a_directory_without_playbooks_is_not_the_collection(tmp_path, not_a_checkout):
    root = installed_collection(tmp_path)
    (root / "playbooks" / "verify.yml").unlink()
    (root / "playbooks").rmdir()
    found, looked = paths.find_collection({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)})
    assert found is None
    assert looked[0] == tmp_path / SUBDIR


def test_no_collection_the_run_says_where_it_looked_and_what_to_set(tmp_path, not_a_checkout):
    settings = paths.Settings.resolve({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)}, tmp_path)
    with pytest.raises(FileNotFoundError) as err:
        runner.resolve_playbook("verify", settings)
    message = str(err.value)
    assert message.startswith("the inferlab.distributed collection was not found (looked for playbooks/ and "
                              f"MANIFEST.json in: {tmp_path / SUBDIR}); install it (ansible-galaxy collection install")
    assert "set INFERLAB_COLLECTION to the directory it was installed to" in message

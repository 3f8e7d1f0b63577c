"""The release's version is one number in three places (galaxy.yml, pyproject.toml, inferlab.__version__), and a
change lands with its version: a changelog fragment not yet released needs galaxy.yml newer than the last release in
changelogs/changelog.yaml, so that `antsibull-changelog release` has a version to fold it into."""

import tomllib

import yaml

from inferlab import __version__, paths

ROOT = paths.Settings.resolve().repo_root


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_collection_and_the_package_have_one_version():
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert galaxy == pyproject == __version__


def test_unreleased_fragments_need_a_version_newer_than_the_last_release():
    galaxy = version(yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"])
    released = max(version(v) for v in yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())["releases"])
    fragments = sorted(p.name for p in (ROOT / "changelogs" / "fragments").glob("*.yml"))
    if fragments:
        assert galaxy > released, (
            f"changelogs/fragments/ holds {len(fragments)} unreleased change(s) ({fragments[0]}, ...) but galaxy.yml "
            f"says {galaxy}, already released: raise the version in galaxy.yml, pyproject.toml and "
            "src/inferlab/__init__.py")
    else:
        assert galaxy >= released

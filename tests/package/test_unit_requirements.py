"""tests/unit/requirements.txt (what `ansible-test units` installs for the collection's tests) pins each package as
constraints.txt does, the one place for the project's pins."""

from inferlab import paths


def pinned(path):
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return dict(line.split("==", 1) for line in lines if line)


def test_every_unit_test_requirement_is_pinned_as_in_constraints():
    constraints = pinned(paths.Settings.resolve().repo_root / "constraints.txt")
    requirements = pinned(paths.Settings.resolve().repo_root / "tests" / "unit" / "requirements.txt")
    assert requirements, "tests/unit/requirements.txt names no package"
    for name, version in requirements.items():
        assert constraints.get(name) == version, f"{name}=={version}: constraints.txt pins {constraints.get(name)}"

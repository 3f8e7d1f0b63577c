"""execution-environment.yml is a valid ansible-builder 3 definition (no container build here), its pins agree with
pyproject.toml and its collection tarball with galaxy.yml; the collection's meta/execution-environment.yml names its
own requirements, pinned as the package's."""

import re
import tomllib

import jsonschema
import pytest
import yaml

from inferlab import paths

REPO_ROOT = paths.Settings.resolve().repo_root
EE_FILE = REPO_ROOT / "execution-environment.yml"

STRINGS = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
PIP_PACKAGE = {
    "type": "object",
    "required": ["package_pip"],
    "additionalProperties": False,
    "properties": {"package_pip": {"type": "string"}},
}
# The version 3 keys of ansible-builder's definition schema that this file may use; anything else is refused, as
# ansible-builder refuses unknown keys. EE_BASE_IMAGE is not a build_arg_defaults key in version 3:
# images.base_image.name is its default.
EE_V3 = {
    "type": "object",
    "required": ["version", "images", "dependencies"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": 3},
        "images": {
            "type": "object",
            "required": ["base_image"],
            "additionalProperties": False,
            "properties": {
                "base_image": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string", "minLength": 1}},
                }
            },
        },
        "build_arg_defaults": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                key: {"type": "string"}
                for key in (
                    "ANSIBLE_GALAXY_CLI_COLLECTION_OPTS",
                    "ANSIBLE_GALAXY_CLI_ROLE_OPTS",
                    "PKGMGR_PRESERVE_CACHE",
                )
            },
        },
        "dependencies": {
            "type": "object",
            "required": ["ansible_core", "ansible_runner", "galaxy"],
            "additionalProperties": False,
            "properties": {
                "python_interpreter": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"package_system": {"type": "string"}, "python_path": {"type": "string"}},
                },
                "ansible_core": PIP_PACKAGE,
                "ansible_runner": PIP_PACKAGE,
                "python": STRINGS,
                "system": STRINGS,
                "galaxy": {"anyOf": [{"type": "object"}, {"type": "string"}]},
            },
        },
        "additional_build_files": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["src", "dest"],
                "additionalProperties": False,
                "properties": {"src": {"type": "string"}, "dest": {"type": "string"}},
            },
        },
        "additional_build_steps": {"type": "object"},
        "options": {"type": "object"},
    },
}


@pytest.fixture(scope="module")
def ee() -> dict:
    return yaml.safe_load(EE_FILE.read_text())


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    dependencies = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(dependency.split("==") for dependency in dependencies)


def test_it_is_an_ansible_builder_v3_definition(ee):
    jsonschema.validate(ee, EE_V3)
    assert ee["version"] == 3


def test_ansible_core_and_runner_match_pyproject(ee, pins):
    assert ee["dependencies"]["ansible_core"]["package_pip"] == f"ansible-core=={pins['ansible-core']}"
    assert ee["dependencies"]["ansible_runner"]["package_pip"] == f"ansible-runner=={pins['ansible-runner']}"


def test_the_collections_own_requirements_are_in_its_meta_and_pinned_as_in_pyproject(pins):
    meta = yaml.safe_load((REPO_ROOT / "meta" / "execution-environment.yml").read_text())
    assert meta["version"] == 1 and set(meta["dependencies"]) == {"python", "system"}
    python = (REPO_ROOT / "meta" / meta["dependencies"]["python"]).read_text().splitlines()
    requirements = [line for line in python if line and not line.startswith("#")]
    assert requirements, "the collection imports nvidia-ml-py: expected it in its EE requirements"
    for requirement in requirements:
        name, sep, version = requirement.partition("==")
        assert sep, f"{requirement} is not pinned"
        assert pins.get(name) == version, f"{requirement} differs from pyproject.toml ({pins.get(name)})"
    system = (REPO_ROOT / "meta" / meta["dependencies"]["system"]).read_text()
    assert "openssh-clients [platform:rpm]" in system and "openssh-client [platform:dpkg]" in system


def test_the_collection_tarball_is_this_collection_under_a_name_without_its_version(ee):
    galaxy = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
    tarball = f"{galaxy['namespace']}-{galaxy['name']}.tar.gz"
    collections = ee["dependencies"]["galaxy"]["collections"]
    assert collections == [{"name": f"collections/{tarball}", "type": "file"}]
    # make ee-context puts it there; it is copied into the build context's collections/, which ansible-galaxy reads
    assert {"src": f"build/ee/{tarball}", "dest": "collections"} in ee["additional_build_files"]
    assert galaxy["version"] not in EE_FILE.read_text()
    # galaxy.yml declares no other collections, so the EE needs none
    assert not galaxy.get("dependencies")


def test_base_image_is_a_build_arg_default(ee):
    assert re.fullmatch(r"[\w.-]+(/[\w.-]+)+:[\w.-]+", ee["images"]["base_image"]["name"])
    assert "EE_BASE_IMAGE" not in ee.get("build_arg_defaults", {})
    assert "--build-arg EE_BASE_IMAGE=" in EE_FILE.read_text()  # the documented override

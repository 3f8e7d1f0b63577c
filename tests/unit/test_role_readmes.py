"""Every role has a README (purpose, entry points, variables, what it changes, an example), as linux-system-roles'
have, and the README keeps up with the role: it lists exactly the role's entry points, and every role variable its
example sets is one the role's argument specs declare."""

import re
from pathlib import Path

import pytest
import yaml

ROLES = sorted(p.parent.parent for p in (Path(__file__).parents[2] / "roles").glob("*/meta/argument_specs.yml"))


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_the_readme_lists_the_entry_points_and_only_declared_variables(role):
    readme = (role / "README.md").read_text()
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    for heading in ("## Entry points", "## Variables", "## What it changes, and the way back", "## Example"):
        assert heading in readme, f"{role.name}/README.md has no {heading!r}"
    listed = re.findall(r"^- `([a-z_]+)`:", readme.split("## Entry points")[1].split("##")[0], re.MULTILINE)
    assert listed == list(specs), f"{role.name}/README.md lists {listed}, the argument specs declare {list(specs)}"
    declared = {name for spec in specs.values() for name in (spec.get("options") or {})}
    example = readme.split("## Example")[1]
    used = set(re.findall(rf"\b({role.name}_[a-z0-9_]+):", example))
    assert used <= declared, f"{role.name}/README.md's example sets {sorted(used - declared)}, not in its specs"
    assert f"ansible-doc -t role inferlab.distributed.{role.name}" in readme


def test_the_collections_readme_lists_every_role_and_module_and_nothing_else():
    """The README's section on the collection (its included content, as a collection's README has it) names exactly
    the roles and modules the collection ships."""
    root = Path(__file__).parents[2]
    section = (root / "README.md").read_text().split("## The collection: `inferlab.distributed`")[1].split("\n## ")[0]
    roles_table, modules_table = section.split("**Roles**")[1].split("**Modules**")
    listed_roles = re.findall(r"^\| `([a-z0-9_]+)` \|", roles_table, re.MULTILINE)
    listed_modules = re.findall(r"^\| `([a-z0-9_]+)` \|", modules_table, re.MULTILINE)
    assert listed_roles == [role.name for role in ROLES]
    assert listed_modules == sorted(p.stem for p in (root / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    runtime = yaml.safe_load((root / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == ">=2.19.0" and "2.19" in section

"""meta/runtime.yml's action group `ledger` holds exactly the modules that take the ledger doc fragment's options,
so `module_defaults` for the group never passes an option that one of them does not take."""

import importlib
from pathlib import Path

import yaml

COLLECTION = Path(__file__).resolve().parents[3]


def test_the_ledger_group_is_the_modules_that_extend_the_ledger_fragment():
    group = yaml.safe_load((COLLECTION / "meta" / "runtime.yml").read_text())["action_groups"]["ledger"]
    extending = []
    for path in sorted((COLLECTION / "plugins" / "modules").glob("*.py")):
        module = importlib.import_module(f"ansible_collections.inferlab.distributed.plugins.modules.{path.stem}")
        doc = yaml.safe_load(getattr(module, "DOCUMENTATION", "") or "{}") or {}
        if "inferlab.distributed.ledger" in doc.get("extends_documentation_fragment", []):
            extending.append(path.stem)
    assert group == extending
    assert len(group) >= 6

"""A module's documented options as ansible-doc shows them: its own DOCUMENTATION's options over those of the
collection's doc fragments it extends (plugins/doc_fragments; the module's own option wins, as in ansible-core)."""

import importlib

import yaml

PREFIX = "inferlab.distributed."


def documented_options(module) -> dict:
    doc = yaml.safe_load(module.DOCUMENTATION)
    options = {}
    for name in doc.get("extends_documentation_fragment", []):
        if name.startswith(PREFIX):
            fragment = importlib.import_module(
                f"ansible_collections.inferlab.distributed.plugins.doc_fragments.{name[len(PREFIX):]}")
            options.update(yaml.safe_load(fragment.ModuleDocFragment.DOCUMENTATION)["options"])
    options.update(doc.get("options", {}))
    return options

"""A module's documented options as ansible-doc shows them: the options of the collection's doc fragments it extends
(plugins/doc_fragments), each merged with the module's own option of that name key by key, the module's keys winning,
as ansible-core merges them."""

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
    for name, option in doc.get("options", {}).items():
        options[name] = {**options.get(name, {}), **option}
    return options
